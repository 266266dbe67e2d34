//! A change supersedes: a new fact retires an older memory of its subject in words no rule knows
//! only when both questions of the change check agree (the older note rewritten after the user's
//! message loses its own words, and the two notes cannot both be true). Over real HTTP with the
//! real local embedding model (the check reads the memories alike to the fact) and a scripted
//! memory LLM.

use std::time::Duration;

use memproxy::mock::Reply;
use serde_json::{json, Value};

use crate::common::{
    eventually, get_json, harness_with, implicit_chat, memories, model_data_dir, retired, Harness,
};

const COOK: &str = "The user works as a line cook at a hotel in Porto.";
const ANA: &str = "Ana is a line cook at a hotel in Porto.";
const SOUS: &str = "The user took the job as sous-chef at the bistro.";
const REWRITTEN: &str = "The user works as a sous-chef at the bistro.";

fn fact(text: &str, quote: &str, about: &str) -> Value {
    json!({"text": text, "kind": "fact", "quote": quote, "said_as": "statement", "about": about})
}

async fn proxy() -> Harness {
    harness_with(|c| {
        c.memory.extraction_debounce = Duration::ZERO;
        c.memory.consolidation_delay = None;
        c.embedding.provider = memproxy::embed::EmbeddingProvider::Local;
        c.embedding.model_dir = Some(model_data_dir().join("models/all-MiniLM-L6-v2"));
        c.embedding.onnxruntime = Some(model_data_dir().join("lib/libonnxruntime.so.1.24.4"));
    })
    .await
}

/// Tells `said` in a new conversation, the memory LLM answering `facts`; returns the report of
/// the `done`-th extraction.
async fn tell(h: &Harness, said: &str, facts: Vec<Value>, done: usize) -> String {
    h.mock.push_marked(
        "MEMPROXY-EXTRACT",
        Reply::Text(json!({ "facts": facts }).to_string()),
    );
    let response = implicit_chat(h, "rui", json!([{"role": "user", "content": said}])).await;
    assert_eq!(response.status(), 200);
    let reports = || async {
        let jobs = get_json(h, "/memproxy/v1/jobs?state=done").await;
        let mut reports: Vec<(i64, String)> = jobs["data"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|j| j["kind"] == "extract")
            .map(|j| {
                let report = j["report"].as_str().unwrap_or_default().to_owned();
                (j["id"].as_i64().unwrap_or_default(), report)
            })
            .collect();
        reports.sort();
        reports
    };
    eventually("the extraction is done", || async {
        reports().await.len() >= done
    })
    .await;
    reports().await.pop().map(|(_, r)| r).unwrap_or_default()
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
    h.mock.push_marked(
        "MEMPROXY-CHANGED",
        Reply::Text(json!({ "now": REWRITTEN }).to_string()),
    );
    h.mock.push_marked(
        "MEMPROXY-BOTH-TRUE",
        Reply::Text(json!({"both_true": false}).to_string()),
    );
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
    h.mock.push_marked(
        "MEMPROXY-CHANGED",
        Reply::Text(json!({ "now": REWRITTEN }).to_string()),
    );
    h.mock.push_marked(
        "MEMPROXY-BOTH-TRUE",
        Reply::Text(json!({"both_true": true}).to_string()),
    );
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
