//! Background consolidation end to end: after an extraction, a per-user job retires stored junk
//! and facts another one contains, merges scattered facts about one subject through the memory
//! LLM (only when the merge passes the gates), is bounded per day, and every change can be undone.

use std::time::Duration;

use memproxy::mock::Reply;
use serde_json::{json, Value};

use crate::common::{eventually, get_json, harness_with, implicit_chat, memories, Harness};

const PIXEL: [&str; 3] = [
    "The user's dog Pixel is three years old.",
    "The user's dog Pixel sleeps on the keyboard.",
    "The user's dog Pixel loves the river.",
];

async fn add(h: &Harness, text: &str) -> i64 {
    let response = h
        .client
        .post(h.url("/memproxy/v1/users/rio/memories"))
        .json(&json!({"text": text}))
        .send()
        .await
        .expect("add");
    assert!(response.status().is_success(), "{}", response.status());
    let body: Value = response.json().await.expect("json");
    body["id"].as_i64().expect("id")
}

async fn consolidation_reports(h: &Harness) -> Vec<String> {
    get_json(h, "/memproxy/v1/jobs?state=done").await["data"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|j| j["kind"] == "consolidate")
        .filter_map(|j| j["report"].as_str().map(str::to_owned))
        .collect()
}

async fn chat(h: &Harness, text: &str) {
    let response = implicit_chat(h, "rio", json!([{"role": "user", "content": text}])).await;
    assert_eq!(response.status(), 200);
}

/// A chat whose extraction finds nothing; the consolidation queued after it answers `merge`.
async fn consolidate_after_a_chat(h: &Harness, merge: Value) {
    h.mock
        .push_marked("MEMPROXY-CONSOLIDATE", Reply::Text(merge.to_string()));
    h.mock
        .push_marked("MEMPROXY-EXTRACT", Reply::Text(r#"{"facts": []}"#.into()));
    chat(h, "Good morning!").await;
    eventually("a consolidation ran", || async {
        !consolidation_reports(h).await.is_empty()
    })
    .await;
}

async fn harness(runs_per_day: u64) -> Harness {
    harness_with(|c| {
        c.memory.extraction_debounce = Duration::ZERO;
        c.memory.consolidation_delay = Some(Duration::ZERO);
        c.memory.consolidation_runs_per_day = runs_per_day;
    })
    .await
}

#[tokio::test]
async fn consolidation_retires_junk_and_contained_facts_merges_a_subject_and_can_be_undone() {
    let h = harness(4).await;
    let junk = add(&h, "What should I call my project?").await;
    // A line of the conversation stored as a fact (first person), seen on LoCoMo.
    add(&h, "The stories were so inspiring! I was so happy.").await;
    let short = add(&h, "Rio works at Contoso.").await;
    add(&h, "Rio works at Contoso as a data engineer.").await;
    for fact in PIXEL {
        add(&h, fact).await;
    }
    let merged =
        "The user's dog Pixel is three years old, sleeps on the keyboard and loves the river.";
    consolidate_after_a_chat(&h, json!({"facts": [{"text": merged}]})).await;
    let report = consolidation_reports(&h).await.join("; ");
    assert_eq!(
        report,
        "2 junk retired, 1 contained retired, 3 merged into 1 (3 retired, 1 new)"
    );
    let mut stored = memories(&h, "rio").await;
    stored.sort();
    assert_eq!(stored, ["Rio works at Contoso as a data engineer.", merged]);
    // The prompt carried the group, numbered and dated.
    let asked = h.mock.chat_requests(Some("MEMPROXY-CONSOLIDATE"));
    let material = asked[0]["messages"][1]["content"]
        .as_str()
        .unwrap_or_default();
    assert!(PIXEL.iter().all(|f| material.contains(f)), "{material}");

    // Audited, and undone by a restore.
    let events = get_json(&h, "/memproxy/v1/users/rio/events")
        .await
        .to_string();
    assert!(events.contains("consolidation job"), "{events}");
    let response = h
        .client
        .post(h.url(&format!("/memproxy/v1/users/rio/memories/{short}/restore")))
        .send()
        .await
        .expect("restore");
    assert_eq!(response.status(), 200);
    assert!(memories(&h, "rio")
        .await
        .contains(&"Rio works at Contoso.".to_owned()));
    // A live memory is not "restored" again.
    let again = h
        .client
        .post(h.url(&format!("/memproxy/v1/users/rio/memories/{short}/restore")))
        .send()
        .await
        .expect("restore again");
    assert_eq!(again.status(), 404);
    // A retired memory whose text is live again (added anew) is not restored beside it.
    add(&h, "What should I call my project?").await;
    let twin = h
        .client
        .post(h.url(&format!("/memproxy/v1/users/rio/memories/{junk}/restore")))
        .send()
        .await
        .expect("restore a twin");
    assert_eq!(twin.status(), 400);
}

#[tokio::test]
async fn a_merge_that_invents_or_loses_a_name_changes_nothing_and_runs_are_bounded() {
    let h = harness(1).await;
    for fact in PIXEL {
        add(&h, fact).await;
    }
    // The merge drops the dog's name.
    let lossy = "The user's dog is three years old and loves the river.";
    consolidate_after_a_chat(&h, json!({"facts": [{"text": lossy}]})).await;
    assert_eq!(
        consolidation_reports(&h).await,
        ["merge of 3 rejected (loses pixel)"]
    );
    let mut stored = memories(&h, "rio").await;
    stored.sort();
    let mut expected = PIXEL.to_vec();
    expected.sort();
    assert_eq!(stored, expected);

    // One run per day: the next one is skipped without asking the memory LLM.
    h.mock
        .push_marked("MEMPROXY-EXTRACT", Reply::Text(r#"{"facts": []}"#.into()));
    chat(&h, "Good evening!").await;
    eventually("a second consolidation", || async {
        consolidation_reports(&h).await.len() == 2
    })
    .await;
    assert!(consolidation_reports(&h).await[1].starts_with("skipped: 1 runs"));
    assert_eq!(h.mock.chat_requests(Some("MEMPROXY-CONSOLIDATE")).len(), 1);
}
