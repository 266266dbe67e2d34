//! Whose act a fact tells: a person's act stays theirs however the memory LLM writes it, when
//! the name was told in an earlier conversation, when the fact swaps who did what to whom, and when
//! one fact copies several statements; and a relative called by the word for them ("Dad").
//! End to end over HTTP in implicit mode, with the memory LLM scripted.

use std::time::Duration;

use memproxy::mock::Reply;
use serde_json::json;

use crate::common::{eventually, facts, harness_with, memories};
use crate::quality::{done_reports, extracted};

/// A name told in an earlier conversation makes a later sentence it opens that person's: the
/// extraction looks the word up in the user's stored messages, where no stored memory names
/// them.
#[tokio::test]
async fn a_name_told_in_an_earlier_conversation_keeps_that_persons_act_off_the_user() {
    let h = harness_with(|c| c.memory.extraction_debounce = Duration::ZERO).await;
    h.mock
        .push(Reply::Text("Two years is a good start.".into()));
    h.mock.push_marked(
        "MEMPROXY-EXTRACT",
        facts(&["The user has been learning the piano for two years."]),
    );
    let first = extracted(
        &h,
        "pianist",
        None,
        "My piano teacher Halina retired from the conservatory last year. I've been learning the piano for two years.",
    )
    .await;
    assert_eq!(
        first,
        ["The user has been learning the piano for two years."]
    );
    h.mock
        .push(Reply::Text("Friday mornings sound calm.".into()));
    h.mock.push_marked(
        "MEMPROXY-EXTRACT",
        facts(&[
            "The user switched their lessons to Friday mornings.",
            "The user practises scales every evening.",
        ]),
    );
    let response = h
        .client
        .post(h.url("/implicit/v1/chat/completions"))
        .header("x-memproxy-user", "pianist")
        .json(&json!({"model": "mock-model", "messages": [{"role": "user", "content":
            "Small news: Halina switched our lessons to Friday mornings. I practise scales every evening."}]}))
        .send()
        .await
        .expect("answer");
    assert_eq!(response.status(), 200);
    eventually("both jobs are done", || async {
        done_reports(&h).await.len() >= 2
    })
    .await;
    let mut stored = memories(&h, "pianist").await;
    stored.sort();
    assert_eq!(
        stored,
        [
            "The user has been learning the piano for two years.",
            "The user practises scales every evening.",
        ]
    );
    let report = done_reports(&h).await.join("; ");
    assert!(report.contains("1 rejected (not_the_user)"), "{report}");
}

/// "Kwame lent me his old glider" written as "The user lent Kwame his old glider": the fact names
/// Kwame, so only the order of who does what shows it is wrong (`gates::roles`). It is refused;
/// the same act told the right way round, and the user's own plan, are kept.
#[tokio::test]
async fn a_fact_that_swaps_who_did_what_to_whom_is_refused() {
    let h = harness_with(|c| c.memory.extraction_debounce = Duration::ZERO).await;
    h.mock.push(Reply::Text(
        "A borrowed glider is a fine way to start.".into(),
    ));
    h.mock.push_marked(
        "MEMPROXY-EXTRACT",
        facts(&[
            "The user lent Kwame his old glider.",
            "The user borrowed Kwame's old glider.",
            "The user plans to start flying lessons in May.",
        ]),
    );
    let stored = extracted(
        &h,
        "glider-pilot",
        None,
        "Good news: Kwame lent me his old glider, so I plan to start flying lessons in May.",
    )
    .await;
    assert_eq!(
        stored,
        [
            "The user borrowed Kwame's old glider.",
            "The user plans to start flying lessons in May.",
        ]
    );
    let report = done_reports(&h).await.join("; ");
    assert!(report.contains("1 rejected (not_the_user)"), "{report}");
}

/// Seen from the 0.5B (explicit mode's background save): the teacher's retirement joined to the
/// user's own fact in one sentence. Each statement the fact joins is read on its own
/// (`gates::subject`): the joined fact is refused, the user's own fact is kept.
#[tokio::test]
async fn someone_elses_statement_joined_to_the_users_own_is_refused() {
    let h = harness_with(|c| c.memory.extraction_debounce = Duration::ZERO).await;
    h.mock
        .push(Reply::Text("Two years is a good start.".into()));
    h.mock.push_marked(
        "MEMPROXY-EXTRACT",
        facts(&[
            "The user retired from the conservatory last year and is now learning the piano for two years.",
            "The user practises scales every evening.",
        ]),
    );
    let stored = extracted(
        &h,
        "pianist",
        None,
        "My piano teacher Halina retired from the conservatory last year. I've been learning the piano for two years, and I practise scales every evening.",
    )
    .await;
    assert_eq!(stored, ["The user practises scales every evening."]);
    let report = done_reports(&h).await.join("; ");
    assert!(report.contains("1 rejected (not_the_user)"), "{report}");
}

/// Seen from the 0.5B: the user's message copied whole as one fact. One fact, one memory: each
/// statement that stands alone is checked and stored on its own (`gates::statements`). The
/// girlfriend's birthday is kept; "Mine is in December. She loves climbing." names no one out of
/// its conversation and is refused; the user's own statement is kept apart.
#[tokio::test]
async fn a_message_copied_whole_as_one_fact_is_stored_statement_by_statement() {
    let h = harness_with(|c| c.memory.extraction_debounce = Duration::ZERO).await;
    h.mock
        .push(Reply::Text("Climbing gear is a safe bet.".into()));
    h.mock.push_marked(
        "MEMPROXY-EXTRACT",
        facts(&[
            "The user's girlfriend Chiara's birthday is on July 19, she'll be 31. Mine is in December. She loves climbing. The user wants to plan a surprise party.",
        ]),
    );
    let mut stored = extracted(
        &h,
        "planner",
        None,
        "My girlfriend Chiara's birthday is on July 19, she'll be 31. Mine is in December. She loves climbing. I want to plan a surprise party.",
    )
    .await;
    stored.sort();
    assert_eq!(
        stored,
        [
            "The user wants to plan a surprise party.",
            "The user's girlfriend Chiara's birthday is on July 19, she'll be 31.",
        ]
    );
    let report = done_reports(&h).await.join("; ");
    assert!(report.contains("1 rejected (first_person)"), "{report}");
}

/// Seen from the 1.5B on the audit's held-out half: "Dad is walking with a frame now." stored as
/// the user's. A word for a person, used as their name, opens a clause about them: the fact is
/// refused, the user's own statement beside it is kept.
#[tokio::test]
async fn a_relative_called_by_the_word_for_them_keeps_their_act_off_the_user() {
    let h = harness_with(|c| c.memory.extraction_debounce = Duration::ZERO).await;
    h.mock.push(Reply::Text("Regular calls will help.".into()));
    h.mock.push_marked(
        "MEMPROXY-EXTRACT",
        facts(&[
            "The user is walking with a frame now.",
            "The user is back home in Manchester.",
        ]),
    );
    let stored = extracted(
        &h,
        "son",
        None,
        "Dad is walking with a frame now. I'm back home in Manchester. How can I support him from a distance?",
    )
    .await;
    assert_eq!(stored, ["The user is back home in Manchester."]);
    let report = done_reports(&h).await.join("; ");
    assert!(report.contains("1 rejected (not_the_user)"), "{report}");
}

/// Seen from the 1.5B's background save in explicit mode: the swap joined to the user's own plan,
/// the name opening the message. The user as the one it was done to ("lent me") decides.
#[tokio::test]
async fn a_swap_joined_to_the_users_own_plan_is_refused() {
    let h = harness_with(|c| c.memory.extraction_debounce = Duration::ZERO).await;
    h.mock.push(Reply::Text("Enjoy the lessons.".into()));
    h.mock.push_marked(
        "MEMPROXY-EXTRACT",
        facts(&[
            "The user lent Kwame his glider to start flying lessons in May.",
            "The user can start flying lessons in May.",
        ]),
    );
    let stored = extracted(
        &h,
        "glider-pilot",
        None,
        "Kwame lent me his glider, so I can start flying lessons in May.",
    )
    .await;
    assert_eq!(stored, ["The user can start flying lessons in May."]);
    let report = done_reports(&h).await.join("; ");
    assert!(report.contains("1 rejected (not_the_user)"), "{report}");
}
