//! A change supersedes: the extraction is shown the live memories the user's new words are
//! closest to, and a fact that makes one of them no longer true names it (copied). The memory it
//! names is retired, kept as history; a fact that names nothing shown, or only adds to the
//! memory it names, retires nothing. Over real HTTP with a scripted memory LLM.

use std::time::Duration;

use memproxy::mock::Reply;
use serde_json::{json, Value};

use crate::common::{
    eventually, get_json, harness_with, implicit_chat, memories, retired, Harness,
};

const INFECTION: &str = "The user's dog Biscuit has a yeast infection.";
const BEAGLE: &str = "The user's dog Biscuit is a beagle.";
const HEALTHY: &str = "The user's dog Biscuit is healthy again.";
const OLDER: &str = "The user's dog Biscuit is a beagle of six years.";

fn fact(text: &str, quote: &str, replaces: &str) -> Value {
    json!({"text": text, "kind": "fact", "quote": quote, "said_as": "statement",
           "about": "user", "replaces": replaces})
}

async fn extractions_done(h: &Harness, count: usize) {
    eventually("the extractions are done", || async {
        let jobs = get_json(h, "/memproxy/v1/jobs?state=done").await;
        jobs["data"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|j| j["kind"] == "extract")
            .count()
            >= count
    })
    .await;
}

#[tokio::test]
async fn a_fact_that_names_a_shown_memory_it_changes_retires_it() {
    let h = harness_with(|c| {
        c.memory.extraction_debounce = Duration::ZERO;
        c.memory.consolidation_delay = None;
    })
    .await;
    h.mock.push_marked(
        "MEMPROXY-EXTRACT",
        Reply::Text(
            json!({"facts": [
                fact(BEAGLE, "Biscuit, our beagle", ""),
                fact(INFECTION, "the vet says Biscuit has a yeast infection", "")
            ]})
            .to_string(),
        ),
    );
    let first =
        "Biscuit, our beagle, keeps scratching: the vet says Biscuit has a yeast infection.";
    let response = implicit_chat(&h, "ada", json!([{"role": "user", "content": first}])).await;
    assert_eq!(response.status(), 200);
    extractions_done(&h, 1).await;

    // Weeks later, in another conversation. The healthy dog names the infection (copied with
    // other spacing and case); the beagle's age names the beagle, to which it only adds (it
    // retires nothing); a third names a memory that was never shown (nothing either).
    h.mock.push_marked(
        "MEMPROXY-EXTRACT",
        Reply::Text(
            json!({"facts": [
                fact(HEALTHY, "Biscuit is healthy again", "the user's dog biscuit has a  yeast infection"),
                fact(OLDER, "Biscuit is a beagle of six years", BEAGLE),
                fact("The user's dog Biscuit sleeps a lot.", "Biscuit sleeps a lot",
                     "The user lives in Lisbon.")
            ]})
            .to_string(),
        ),
    );
    h.mock.push_marked(
        "MEMPROXY-RECONCILE",
        Reply::Text(json!({"decisions": []}).to_string()),
    );
    let later = "Good news: Biscuit is healthy again. Biscuit is a beagle of six years, and Biscuit sleeps a lot.";
    let response = implicit_chat(&h, "ada", json!([{"role": "user", "content": later}])).await;
    assert_eq!(response.status(), 200);
    extractions_done(&h, 2).await;

    // The second extraction was shown the stored memories with the user's new words.
    let asked = h.mock.chat_requests(Some("MEMPROXY-EXTRACT"));
    let material = asked
        .last()
        .and_then(|body| body["messages"][1]["content"].as_str())
        .unwrap_or_default()
        .to_owned();
    let shown = material
        .split("Stored memories:")
        .nth(1)
        .and_then(|rest| rest.split("Earlier context").next())
        .unwrap_or_default();
    assert!(
        shown.contains(INFECTION) && shown.contains(BEAGLE),
        "{material}"
    );

    let mut live = memories(&h, "ada").await;
    live.sort();
    let mut expected = [
        BEAGLE,
        OLDER,
        HEALTHY,
        "The user's dog Biscuit sleeps a lot.",
    ];
    expected.sort();
    assert_eq!(live, expected);
    // The infection is kept as history, not deleted.
    assert_eq!(retired(&h, "ada").await, [INFECTION]);
}
