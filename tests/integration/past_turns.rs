//! Past turns in implicit mode: a reply found again ("Yes, last May, with my cousin.") is shown
//! with the other party's question it answers, since alone it says nothing of what it is about;
//! a turn that follows no question is shown alone.

use serde_json::{json, Value};

use crate::common::{harness_with, implicit_chat, Harness};
use crate::explicit::model_requests;

/// The memory block the chat model was last sent.
fn memory_block(h: &Harness) -> String {
    let requests = model_requests(h);
    let request = requests.last().cloned().unwrap_or(Value::Null);
    request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["content"].as_str())
        .find(|text| text.contains("<memory>"))
        .unwrap_or_default()
        .to_owned()
}

/// Asks when `user` visited the lighthouse museum; asserts that the memory block shows their
/// answer with the assistant's question it answers, and returns the block.
async fn asked_about_the_museum(h: &Harness, user: &str) -> String {
    let question = json!([{"role": "user", "content": "When did I visit the lighthouse museum?"}]);
    assert_eq!(implicit_chat(h, user, question).await.status(), 200);
    let block = memory_block(h);
    assert!(
        block.contains(
            "user, answering the assistant's \"Have you ever been to the lighthouse museum there?\": \
             \"Yes, last May, with my cousin.\""
        ),
        "{block}"
    );
    block
}

#[tokio::test]
async fn a_reply_found_again_is_shown_with_the_question_it_answers() {
    // What is shown, not the pre-processor's time bound (2 s by default, tested in
    // `implicit`): on a loaded machine running the whole suite against PostgreSQL the bound can
    // pass and the request goes on without memory, which says nothing of the rendering.
    let h =
        harness_with(|c| c.memory.preprocess_timeout = std::time::Duration::from_secs(30)).await;
    let told = json!([
        {"role": "user", "content": "I am planning a weekend in Porto."},
        {"role": "assistant", "content": "Porto is lovely. Have you ever been to the lighthouse museum there?"},
        {"role": "user", "content": "Yes, last May, with my cousin."},
        {"role": "assistant", "content": "Nice. What else do you like to do?"},
        {"role": "user", "content": "I collect old lighthouse postcards."},
        {"role": "assistant", "content": "A lovely hobby."},
        {"role": "user", "content": "My cousin collects them too."},
    ]);
    assert_eq!(implicit_chat(&h, "lu", told).await.status(), 200);
    let block = asked_about_the_museum(&h, "lu").await;
    // Only the question is repeated, not the sentence before it.
    assert!(!block.contains("Porto is lovely"), "{block}");
    // The answer to a question that is not this one ("What else …?") is shown with it too; a
    // turn after a statement ("A lovely hobby.") is shown alone.
    assert!(
        block.lines().any(|l| l.contains("postcards")
            && l.contains("answering the assistant's \"What else do you like to do?\"")),
        "{block}"
    );
    assert!(
        block
            .lines()
            .any(|l| l.contains("] user: \"My cousin collects them too.\"")),
        "{block}"
    );
}

#[tokio::test]
async fn an_edited_reply_in_a_branch_is_found_and_shown_with_the_question_before_the_fork() {
    let h =
        harness_with(|c| c.memory.preprocess_timeout = std::time::Duration::from_secs(30)).await;
    let opening = [
        json!({"role": "user", "content": "I am planning a weekend in Porto."}),
        json!({"role": "assistant", "content": "Porto is lovely. Have you ever been to the lighthouse museum there?"}),
    ];
    let with = |reply: &str| {
        let mut messages = opening.to_vec();
        messages.push(json!({"role": "user", "content": reply}));
        Value::Array(messages)
    };
    assert_eq!(
        implicit_chat(&h, "bo", with("Not yet, it is on my list."))
            .await
            .status(),
        200
    );
    h.next_exchange().await;
    // The user edits their answer: the history leaves the stored log at the answer, which goes
    // to a branch whose first turn is the answer, with the question in the parent conversation.
    assert_eq!(
        implicit_chat(&h, "bo", with("Yes, last May, with my cousin."))
            .await
            .status(),
        200
    );
    h.next_exchange().await;
    let conversations = crate::common::get_json(&h, "/memproxy/v1/users/bo/conversations").await;
    assert!(
        conversations["data"]
            .as_array()
            .is_some_and(|list| list.iter().any(|c| c["parent"].is_string())),
        "a branch: {conversations}"
    );
    asked_about_the_museum(&h, "bo").await;
}
