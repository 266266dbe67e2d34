//! What the implicit memory block shows beyond the facts that match: the assistant's own past
//! replies only for a question about what it said, and someone a found fact names followed to
//! the user's other facts about them (a second hop).

use std::time::Duration;

use memproxy::mock::Reply;
use serde_json::json;

use crate::common::{eventually, harness_with, implicit_chat, Harness};
use crate::recency::{injected, jobs_done};

async fn add(h: &Harness, user: &str, text: &str) {
    let response = h
        .client
        .post(h.url(&format!("/memproxy/v1/users/{user}/memories")))
        .json(&json!({"text": text}))
        .send()
        .await
        .expect("add");
    assert!(response.status().is_success(), "{}", response.status());
}

/// The assistant's own earlier replies are shown only for a question about what it said: seen
/// with the 1.5B model, "How do I take my coffee?" was answered with its earlier reply on grind
/// sizes, shown beside the user's fact.
#[tokio::test]
async fn the_assistants_past_replies_are_shown_only_when_asked_about() {
    let h = harness_with(|c| c.memory.extraction_debounce = Duration::ZERO).await;
    let advice = "A medium grind suits your black coffee best.";
    h.mock.push(Reply::Text(advice.to_owned()));
    let said = "I take my coffee black, no sugar. Which grind suits my coffee?";
    let response = implicit_chat(&h, "cof", json!([{"role": "user", "content": said}])).await;
    assert_eq!(response.status(), 200);
    eventually("the job", || async { jobs_done(&h).await == 1 }).await;

    let response = implicit_chat(
        &h,
        "cof",
        json!([{"role": "user", "content": "How do I take my coffee?"}]),
    )
    .await;
    assert_eq!(response.status(), 200);
    let block = injected(&h);
    assert!(block.contains("black"), "the user's own words: {block}");
    assert!(!block.contains("medium grind"), "{block}");

    let response = implicit_chat(
        &h,
        "cof",
        json!([{"role": "user", "content": "Which grind did you suggest for my coffee?"}]),
    )
    .await;
    assert_eq!(response.status(), 200);
    let block = injected(&h);
    assert!(block.contains(advice), "{block}");
}

/// Multi-hop, seen on the family scenario: "What hobby does the person I might visit in April
/// have?" found the visit and "The user's brother Tomas is turning 30.", not his hobby, which
/// shares no word with the question. The name found is followed to the user's facts about him.
#[tokio::test]
async fn someone_a_found_fact_names_is_followed_to_their_other_facts() {
    // Found by words only (the tests' embedder finds everything alike; a real one does not
    // relate "hobby" to "climbing" closely enough).
    let h = harness_with(|c| c.memory.min_similarity = 0.99).await;
    let brother = "The user's brother Tomas is turning 30 next month.";
    let climbing = "Tomas is really into climbing.";
    add(&h, "fam", brother).await;
    add(&h, "fam", climbing).await;
    add(&h, "fam", "The user plans to visit their brother in April.").await;
    add(&h, "fam", "The user's favourite season is autumn.").await;
    let question = "What hobby does my brother have, the one I visit in April?";
    let response = implicit_chat(&h, "fam", json!([{"role": "user", "content": question}])).await;
    assert_eq!(response.status(), 200);
    let block = injected(&h);
    assert!(block.contains(brother), "{block}");
    assert!(block.contains(climbing), "followed from Tomas: {block}");
    assert!(!block.contains("autumn"), "{block}");
}
