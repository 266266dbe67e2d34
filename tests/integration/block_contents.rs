//! What the implicit memory block shows beyond the facts that match: the assistant's own past
//! replies only for a question about what it said, and someone a found fact names followed to
//! the user's other facts about them (a second hop), and what the question takes for granted
//! that the user never mentioned.

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

/// Abstention, seen on allergy-never-said: asked "What is my dog's name?" by a user who only ever
/// spoke of a cat, the 1.5B model gave the cat's name. The block says what nothing the user said
/// mentions; a thing said in a fact, a stored statement, or the conversation itself is mentioned,
/// and a question is no mention.
#[tokio::test]
async fn a_thing_the_user_never_mentioned_is_said_to_be_unmentioned() {
    // No extraction during the test: facts are the ones added here.
    let h = harness_with(|c| c.memory.extraction_debounce = Duration::from_secs(3600)).await;
    add(&h, "pets", "The user has a cat named Miso.").await;
    let said = "I ride my bike to work every day. Where could I walk a dog near the river?";
    let response = implicit_chat(&h, "pets", json!([{"role": "user", "content": said}])).await;
    assert_eq!(response.status(), 200);
    let never = |thing: &str| format!("never mentioned their {thing}");

    let ask = |question: &'static str| {
        let h = &h;
        async move {
            let messages = json!([{"role": "user", "content": question}]);
            let response = implicit_chat(h, "pets", messages).await;
            assert_eq!(response.status(), 200);
            injected(h)
        }
    };
    let block = ask("What is my dog's name?").await;
    assert!(block.contains(&never("dog")), "asked only: {block}");
    for question in [
        "What is my cat's name?",
        "What is my pet called?",
        "What colour is my bike?",
        "What is my name?",
    ] {
        let block = ask(question).await;
        assert!(!block.contains("never mentioned"), "{question}: {block}");
    }
    // Another user's dog is not this user's.
    add(&h, "other", "The user has a dog named Rex.").await;
    let block = ask("What is my dog's name?").await;
    assert!(block.contains(&never("dog")), "{block}");

    let told = "My dog Rex is new. What is my dog's name?";
    let block = ask(told).await;
    assert!(
        !block.contains("never mentioned"),
        "told beside the question: {block}"
    );
    // ... and stored with it, told for good.
    let block = ask("What is my dog's name?").await;
    assert!(!block.contains("never mentioned"), "{block}");

    // Off: no such line.
    let h = harness_with(|c| c.memory.never_mentioned = false).await;
    let messages = json!([{"role": "user", "content": "What is my dog's name?"}]);
    let response = implicit_chat(&h, "pets", messages).await;
    assert_eq!(response.status(), 200);
    let requests = h.mock.chat_requests(None);
    let sent = requests.last().expect("a request").to_string();
    assert!(!sent.contains("never mentioned"), "{sent}");
}
