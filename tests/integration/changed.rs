//! A change supersedes: a new fact retires an older memory of its subject in words no rule knows
//! only when both questions of the change check agree (the older note rewritten after the user's
//! message loses its own words, and the two notes cannot both be true). Over real HTTP with the
//! real local embedding model (the check reads the memories alike to the fact) and a scripted
//! memory LLM.

use memproxy::mock::Reply;
use serde_json::{json, Value};

use crate::common::{harness_local_facts, memories, retired, tell_facts, Harness};

const COOK: &str = "The user works as a line cook at a hotel in Porto.";
const ANA: &str = "Ana is a line cook at a hotel in Porto.";
const SOUS: &str = "The user took the job as sous-chef at the bistro.";
const REWRITTEN: &str = "The user works as a sous-chef at the bistro.";

fn fact(text: &str, quote: &str, about: &str) -> Value {
    json!({"text": text, "kind": "fact", "quote": quote, "said_as": "statement", "about": about})
}

async fn proxy() -> Harness {
    harness_local_facts(|_| {}).await
}

/// Tells `said` in a new conversation, the memory LLM answering `facts`; returns the report of
/// the `done`-th extraction.
async fn tell(h: &Harness, said: &str, facts: Vec<Value>, done: usize) -> String {
    let mut reports = tell_facts(h, "rui", said, facts, done).await;
    reports.pop().unwrap_or_default()
}

/// The change check's answers: the older note rewritten as `now`, and whether both hold.
fn script(h: &Harness, now: &str, both_true: bool) {
    h.mock.push_marked(
        "MEMPROXY-CHANGED",
        Reply::Text(json!({ "now": now }).to_string()),
    );
    h.mock.push_marked(
        "MEMPROXY-BOTH-TRUE",
        Reply::Text(json!({ "both_true": both_true }).to_string()),
    );
}

/// Ana's job, the user's own (the same words, another subject: never checked against Ana's),
/// then the user's new job.
async fn cook_then_sous_chef(h: &Harness) -> String {
    let said = "My friend Ana is a line cook at a hotel in Porto.";
    tell(h, said, vec![fact(ANA, said, "Ana")], 1).await;
    let said = "I work as a line cook at a hotel in Porto too.";
    let report = tell(h, said, vec![fact(COOK, said, "user")], 2).await;
    let mut stored = memories(h, "rui").await;
    stored.sort();
    assert_eq!(stored, [ANA, COOK], "{report}");
    let said = "I took the job! I'm now sous-chef at the bistro.";
    let facts = vec![fact(
        SOUS,
        "I took the job! I'm now sous-chef at the bistro",
        "user",
    )];
    tell(h, said, facts, 3).await
}

/// The notes each change check asked about.
fn asked(h: &Harness, marker: &str) -> Vec<String> {
    h.mock
        .chat_requests(Some(marker))
        .iter()
        .map(|r| {
            r["messages"][1]["content"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect()
}

#[tokio::test]
async fn both_questions_agreeing_retire_the_older_memory_of_that_subject_only() {
    let h = proxy().await;
    script(&h, REWRITTEN, false);
    let report = cook_then_sous_chef(&h).await;
    assert!(report.contains("1 changed"), "{report}");
    let mut stored = memories(&h, "rui").await;
    stored.sort();
    assert_eq!(stored, [ANA, SOUS], "{report}");
    assert_eq!(retired(&h, "rui").await, [COOK]);
    // The check read the user's own message and asked about the user's memory, never Ana's.
    let changed = asked(&h, "MEMPROXY-CHANGED");
    assert_eq!(changed.len(), 1, "{changed:?}");
    assert!(
        changed[0].contains(COOK) && changed[0].contains("I'm now sous-chef"),
        "{}",
        changed[0]
    );
    let both = asked(&h, "MEMPROXY-BOTH-TRUE");
    assert_eq!(both.len(), 1, "{both:?}");
    assert!(
        both[0].contains(COOK) && both[0].contains(SOUS),
        "{}",
        both[0]
    );
}

#[tokio::test]
async fn one_question_saying_it_still_holds_keeps_the_older_memory() {
    // The rewrite drops the old job, but the two notes may both be true: kept.
    let h = proxy().await;
    script(&h, REWRITTEN, true);
    let report = cook_then_sous_chef(&h).await;
    assert!(!report.contains("changed"), "{report}");
    let mut stored = memories(&h, "rui").await;
    stored.sort();
    assert_eq!(stored, [ANA, SOUS, COOK], "{report}");

    // The rewrite copies the note (the mock's default) : the second question is not asked.
    let h = proxy().await;
    let report = cook_then_sous_chef(&h).await;
    assert!(!report.contains("changed"), "{report}");
    assert_eq!(asked(&h, "MEMPROXY-CHANGED").len(), 1);
    assert!(asked(&h, "MEMPROXY-BOTH-TRUE").is_empty());
    assert!(retired(&h, "rui").await.is_empty());
}

const OFFER: &str = "The user got an offer to be sous-chef at a small bistro.";
const NOW_SOUS: &str = "The user is a sous-chef at the bistro.";

/// Seen from the 1.5B (the audit's tuning half): the memory LLM wrote the new job as an UPDATE
/// of the offer ("got an offer to be sous-chef" → "is a sous-chef"), right, and the old job, a
/// memory it did not name, stayed live beside it. An update states the new fact too: the other
/// older memories of its subject still go to the change check.
#[tokio::test]
async fn a_change_written_as_an_update_of_another_memory_still_retires_the_old_one() {
    let h = proxy().await;
    let said = "I work as a line cook at a hotel in Porto. I got an offer to be sous-chef at a small bistro.";
    let facts = vec![
        fact(COOK, "I work as a line cook at a hotel in Porto", "user"),
        fact(
            OFFER,
            "I got an offer to be sous-chef at a small bistro",
            "user",
        ),
    ];
    tell(&h, said, facts, 1).await;
    // The reconcile call sees the stored memories most like the new fact first: the offer is M0.
    h.mock.push_marked(
        "MEMPROXY-RECONCILE",
        Reply::Text(
            json!({"decisions": [{"fact": 0, "action": "UPDATE", "memory": 0, "text": NOW_SOUS}]})
                .to_string(),
        ),
    );
    script(&h, REWRITTEN, false);
    let said = "I took the job! I'm now sous-chef at the bistro.";
    let report = tell(&h, said, vec![fact(NOW_SOUS, said, "user")], 2).await;
    let reconcile = asked(&h, "MEMPROXY-RECONCILE");
    assert!(
        reconcile
            .last()
            .is_some_and(|r| r.lines().any(|l| l.starts_with("M0 ") && l.contains(OFFER))),
        "{reconcile:?}"
    );
    assert!(report.contains("1 updated"), "{report}");
    let mut stored = memories(&h, "rui").await;
    stored.sort();
    assert_eq!(stored, [NOW_SOUS], "{report}");
    assert_eq!(retired(&h, "rui").await, [COOK], "{report}");
}
