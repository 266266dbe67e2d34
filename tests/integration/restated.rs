//! One fact, one memory: a fact that says again what the store (or the same extraction) already
//! says is not stored twice. Over real HTTP with the real local embedding model (the rule reads
//! its vectors) and a scripted memory LLM that writes one plan three ways, as small models do.

use memproxy::mock::Reply;
use serde_json::{json, Value};

use crate::common::{harness_local_facts, memories, tell_facts, Harness};

const YORK: &str = "The user and Yusuf want to visit the York Railway Museum.";
const YORK_AGAIN: &str = "The user and Yusuf want to visit the railway museum in York.";
const YORK_LATER: &str = "The user and Yusuf want to go to the railway museum in York.";
const AGE: &str = "The user is 34 years old.";
const NEW_AGE: &str = "The user is 35 years old.";

fn fact(text: &str, quote: &str) -> Value {
    json!({"text": text, "kind": "fact", "quote": quote, "said_as": "statement", "about": "user"})
}

/// A proxy embedding with the local model, its restatement bar at `bar`.
async fn proxy(bar: f32) -> Harness {
    harness_local_facts(|c| c.memory.restatement_similarity = bar).await
}

async fn tell(h: &Harness, said: &str, facts: Vec<Value>, done: usize) -> String {
    tell_facts(h, "ines", said, facts, done).await.join("; ")
}

const FIRST: &str = "Yusuf and I want to visit the railway museum in York. I'm 34 years old.";

/// What the memory LLM makes of [`FIRST`]: the plan twice in other words, and the age.
fn first_facts() -> Vec<Value> {
    let said = "Yusuf and I want to visit the railway museum in York";
    vec![
        fact(YORK, said),
        fact(YORK_AGAIN, said),
        fact(AGE, "I'm 34 years old"),
    ]
}

#[tokio::test]
async fn a_restatement_is_merged_at_write_time_and_another_value_is_not() {
    let h = proxy(0.95).await;
    let report = tell(&h, FIRST, first_facts(), 1).await;
    assert!(report.contains("1 restated"), "{report}");
    let mut stored = memories(&h, "ines").await;
    stored.sort();
    assert_eq!(stored, [YORK, AGE], "{report}");

    // Later, in another conversation: the plan said a third way is the stored memory again; a
    // new age, one vector away from the old but another number, is a new fact.
    h.mock.push_marked(
        "MEMPROXY-RECONCILE",
        Reply::Text(
            json!({"decisions": [{"fact": 0, "action": "ADD", "memory": null, "text": null}]})
                .to_string(),
        ),
    );
    let later = vec![
        fact(
            YORK_LATER,
            "we still want to go to the railway museum in York",
        ),
        fact(NEW_AGE, "I'm 35 years old now"),
    ];
    let said =
        "Good news: we still want to go to the railway museum in York, and I'm 35 years old now.";
    let report = tell(&h, said, later, 2).await;
    assert!(report.contains("1 restated"), "{report}");
    let mut stored = memories(&h, "ines").await;
    stored.sort();
    assert_eq!(stored, [YORK, AGE, NEW_AGE]);
}

#[tokio::test]
async fn without_the_rule_the_restatement_is_stored_twice() {
    // The same first extraction with the bar out of reach: the check above is what merges.
    let h = proxy(1.1).await;
    let report = tell(&h, FIRST, first_facts(), 1).await;
    assert!(!report.contains("restated"), "{report}");
    let mut stored = memories(&h, "ines").await;
    stored.sort();
    assert_eq!(stored, [YORK, YORK_AGAIN, AGE]);
}
