//! Grounding: a fact is the user's only when the user's own statement says it. Over real HTTP,
//! with a scripted memory LLM that names a source for each fact as the extraction prompt asks:
//! the assistant's suggestion, a request, another person's age and another person's name given
//! to the user are refused,
//! the suggestion the user took is kept as their choice, and every stored fact carries the
//! user's words that state it and whom it is about.

use std::time::Duration;

use memproxy::mock::Reply;
use serde_json::json;

use crate::common::{eventually, get_json, harness_with, implicit_chat, memories};

/// Sends `turns` as `user`'s chat in implicit mode and waits for the extraction.
async fn extracted_from(h: &crate::common::Harness, user: &str, turns: serde_json::Value) {
    let response = implicit_chat(h, user, turns).await;
    assert_eq!(response.status(), 200);
    eventually("the extraction is done", || async {
        get_json(h, "/memproxy/v1/jobs?state=done").await["data"]
            .as_array()
            .is_some_and(|jobs| !jobs.is_empty())
    })
    .await;
}

/// Each listed memory's text, the words of its source, and whom it is about.
fn sourced(listed: &serde_json::Value) -> Vec<(&str, &str, &str)> {
    listed["data"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| {
            (
                m["text"].as_str().unwrap_or_default(),
                m["sources"][0]["quote"].as_str().unwrap_or_default(),
                m["subject"].as_str().unwrap_or_default(),
            )
        })
        .collect()
}

/// The report of the first job done.
async fn first_report(h: &crate::common::Harness) -> String {
    get_json(h, "/memproxy/v1/jobs?state=done").await["data"][0]["report"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test]
async fn only_the_users_own_statements_become_their_facts() {
    let h = harness_with(|c| c.memory.extraction_debounce = Duration::ZERO).await;
    h.mock.push_marked(
        "MEMPROXY-EXTRACT",
        Reply::Text(
            json!({"facts": [
                {"quote": "Try York or Whitby", "said_as": "statement", "about": "user",
                 "text": "The user suggests a weekend in Whitby.", "kind": "preference"},
                {"quote": "Let's do York, the railway museum sounds fun", "said_as": "statement",
                 "about": "user", "text": "The user chose a weekend in York.", "kind": "event"},
                {"quote": "My teacher Dorota is 71", "said_as": "statement", "about": "Dorota",
                 "text": "The user is 71 years old.", "kind": "fact"},
                {"quote": "My teacher Dorota is 71", "said_as": "statement", "about": "Dorota",
                 "text": "The user's teacher Dorota is 71 years old.", "kind": "fact"},
                {"quote": "My teacher Dorota is 71", "said_as": "statement", "about": "user",
                 "text": "The user's name is Dorota.", "kind": "fact"},
                {"quote": "Help me prepare three questions for the museum guide",
                 "said_as": "request", "about": "user",
                 "text": "The user is preparing three questions for the museum guide.",
                 "kind": "event"},
                {"quote": "Let's do York", "said_as": "statement", "about": "user",
                 "text": "The user moved out of Porto to York.", "kind": "event"}
            ]})
            .to_string(),
        ),
    );
    extracted_from(
        &h,
        "ines",
        json!([
            {"role": "user", "content": "My teacher Dorota is 71 and says I need a break. Ideas for a free weekend?"},
            {"role": "assistant", "content": "Try York or Whitby: both are an easy train ride."},
            {"role": "user", "content": "Let's do York, the railway museum sounds fun. Help me prepare three questions for the museum guide."}
        ]),
    )
    .await;
    let mut stored = memories(&h, "ines").await;
    stored.sort();
    assert_eq!(
        stored,
        [
            "The user chose a weekend in York.",
            "The user's teacher Dorota is 71 years old.",
        ]
    );
    // A request said without a question mark passes the older gates: grounding refuses it.
    let report = first_report(&h).await;
    assert!(report.contains("rejected (from_question)"), "{report}");
    // Each fact's source is the user's turn and the words that state it, and it names whom it
    // is about.
    let listed = get_json(&h, "/memproxy/v1/users/ines/memories").await;
    let quotes = sourced(&listed);
    assert!(
        quotes.contains(&(
            "The user chose a weekend in York.",
            "Let's do York, the railway museum sounds fun",
            "user"
        )),
        "{listed}"
    );
    assert!(
        quotes.contains(&(
            "The user's teacher Dorota is 71 years old.",
            "My teacher Dorota is 71",
            "Dorota"
        )),
        "{listed}"
    );
    assert_eq!(listed["data"][0]["sources"][0]["position"], 2, "{listed}");
}

/// Seen from the 1.5B in explicit mode's background save: the memory LLM quoted the assistant's
/// reply, which repeated the user's own words. The user's statement that says as much is the
/// fact's source, shown as such; the assistant's own suggestion beside it is still refused.
#[tokio::test]
async fn a_fact_quoted_from_the_assistants_repeat_of_the_users_words_is_the_users() {
    let h = harness_with(|c| c.memory.extraction_debounce = Duration::ZERO).await;
    h.mock.push_marked(
        "MEMPROXY-EXTRACT",
        Reply::Text(
            json!({"facts": [
                {"quote": "I'll start flying lessons in May", "said_as": "statement",
                 "about": "user", "text": "The user will start flying lessons in May.",
                 "kind": "event"},
                {"quote": "a weekend at the gliding club", "said_as": "statement",
                 "about": "user", "text": "The user plans a weekend at the gliding club.",
                 "kind": "event"}
            ]})
            .to_string(),
        ),
    );
    let said = "Kwame lent me his glider, so I can start flying lessons in May.";
    extracted_from(
        &h,
        "pilot",
        json!([
            {"role": "user", "content": said},
            {"role": "assistant", "content": "\"I'll start flying lessons in May\" is a fine plan. Maybe spend a weekend at the gliding club first."},
            {"role": "user", "content": "Good, thanks."}
        ]),
    )
    .await;
    let listed = get_json(&h, "/memproxy/v1/users/pilot/memories").await;
    assert_eq!(
        sourced(&listed),
        [("The user will start flying lessons in May.", said, "user")],
        "{listed}"
    );
    let report = first_report(&h).await;
    // (The gates see its words are not the user's before grounding reads its quote.)
    assert!(report.contains("1 rejected (ungrounded)"), "{report}");
}
