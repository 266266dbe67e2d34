//! One fact, one memory: a fact that says again what the store (or the same extraction) already
//! says is not stored twice. Over real HTTP with the real local embedding model (the rule reads
//! its vectors) and a scripted memory LLM that writes one plan three ways, as small models do.

use std::time::Duration;

use memproxy::mock::Reply;
use serde_json::{json, Value};

use crate::common::{
    eventually, get_json, harness_with, implicit_chat, memories, model_data_dir, Harness,
};

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
    harness_with(|c| {
        c.memory.extraction_debounce = Duration::ZERO;
        c.memory.consolidation_delay = None;
        c.memory.restatement_similarity = bar;
        c.embedding.provider = memproxy::embed::EmbeddingProvider::Local;
        c.embedding.model_dir = Some(model_data_dir().join("models/all-MiniLM-L6-v2"));
        c.embedding.onnxruntime = Some(model_data_dir().join("lib/libonnxruntime.so.1.24.4"));
    })
    .await
}

async fn tell(h: &Harness, said: &str, facts: Vec<Value>, done: usize) -> String {
    h.mock.push_marked(
        "MEMPROXY-EXTRACT",
        Reply::Text(json!({ "facts": facts }).to_string()),
    );
    let response = implicit_chat(h, "ines", json!([{"role": "user", "content": said}])).await;
    assert_eq!(response.status(), 200);
    let extractions = || async {
        let jobs = get_json(h, "/memproxy/v1/jobs?state=done").await;
        let reports: Vec<String> = jobs["data"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|j| j["kind"] == "extract")
            .map(|j| j["report"].as_str().unwrap_or_default().to_owned())
            .collect();
        reports
    };
    eventually("the extraction is done", || async {
        extractions().await.len() >= done
    })
    .await;
    extractions().await.join("; ")
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
