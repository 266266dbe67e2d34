//! One memory under every mode (issue 46): what the explicit agent keeps about the user is one
//! of their facts (listed, injected by implicit mode, over a restart), a change made in one mode
//! wins in the other, the agent searches the user's implicit chats, and nothing of it reaches
//! another user.

use std::time::Duration;

use serde_json::{json, Value};

use crate::common::{
    eventually, facts, get_json, harness_with, implicit_chat, memories, restart, Harness,
};
use crate::explicit::{call, model_requests, say, send, system_of, tool_results};

/// The chat model's newest request (memory LLM calls aside), as text.
fn newest_request(h: &Harness) -> String {
    model_requests(h)
        .last()
        .map(Value::to_string)
        .unwrap_or_default()
}

/// Asks in implicit mode; what the chat model was sent.
async fn implicit_sees(h: &Harness, user: &str, question: &str) -> String {
    let response = implicit_chat(h, user, json!([{"role": "user", "content": question}])).await;
    assert_eq!(response.status(), 200);
    newest_request(h)
}

/// The id of `user`'s live memory that says `text`.
async fn memory_id(h: &Harness, user: &str, text: &str) -> i64 {
    let list = get_json(h, &format!("/memproxy/v1/users/{user}/memories")).await;
    list["data"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|m| m["text"] == text)
        .and_then(|m| m["id"].as_i64())
        .unwrap_or_else(|| panic!("no memory {text:?} in {list}"))
}

/// The agent's core memory as its next request shows it.
async fn agent_sees(h: &Harness, user: &str) -> String {
    h.mock.push(send("Hello."));
    say(h, user, "Hello again, how are you today?").await;
    let requests = model_requests(h);
    system_of(requests.last().expect("a request"))
}

#[tokio::test]
async fn what_the_explicit_agent_saves_is_one_of_the_users_memories() {
    let h = harness_with(|_| {}).await;
    let line = "The user's brother Otto moved to Oslo.";
    h.mock.push(call(
        "core_memory_append",
        json!({"label": "human", "content": line, "request_heartbeat": true}),
    ));
    h.mock.push(send("Noted."));
    say(
        &h,
        "bo",
        "Please remember that my brother Otto moved to Oslo.",
    )
    .await;
    // An archival passage about the user is one of their facts too; a note of the agent's own
    // stays a passage.
    h.mock.push(call(
        "archival_memory_insert",
        json!({"content": "The user's brother Otto works as a ferry pilot.", "request_heartbeat": true}),
    ));
    h.mock.push(call(
        "archival_memory_insert",
        json!({"content": "Ferry timetables change in May.", "request_heartbeat": true}),
    ));
    h.mock.push(send("Noted."));
    say(
        &h,
        "bo",
        "Otto works as a ferry pilot there, remember that too.",
    )
    .await;
    let stored = memories(&h, "bo").await;
    assert!(stored.contains(&line.to_owned()), "{stored:?}");
    assert!(
        stored.contains(&"The user's brother Otto works as a ferry pilot.".to_owned()),
        "{stored:?}"
    );
    assert!(
        !stored.iter().any(|m| m.contains("timetables")),
        "{stored:?}"
    );
    assert!(memories(&h, "bx").await.is_empty());
    // Over a restart, implicit mode injects it, for that user only.
    let h = restart(h).await;
    for user in ["bo", "bx"] {
        let sent = implicit_sees(&h, user, "Where did my brother Otto move to?").await;
        assert_eq!(sent.contains("Oslo"), user == "bo", "{user}: {sent}");
    }
}

#[tokio::test]
async fn a_correction_the_agent_makes_wins_in_implicit_mode() {
    let h = harness_with(|_| {}).await;
    h.mock.push(call(
        "core_memory_append",
        json!({"label": "human", "content": "The user lives in Lisbon.", "request_heartbeat": true}),
    ));
    h.mock.push(send("Noted."));
    say(&h, "co", "I live in Lisbon, by the way.").await;
    h.mock.push(call(
        "core_memory_replace",
        json!({"label": "human", "old_content": "The user lives in Lisbon.",
            "new_content": "The user lives in Porto.", "request_heartbeat": true}),
    ));
    h.mock.push(send("Noted."));
    say(&h, "co", "I moved, I live in Porto now.").await;
    let stored = memories(&h, "co").await;
    assert!(
        stored.contains(&"The user lives in Porto.".to_owned()),
        "{stored:?}"
    );
    assert!(!stored.iter().any(|m| m.contains("Lisbon")), "{stored:?}");
    let sent = implicit_sees(&h, "co", "Which city do I live in?").await;
    assert!(sent.contains("The user lives in Porto."), "{sent}");
    assert!(!sent.contains("The user lives in Lisbon."), "{sent}");
    // A rewrite into a fact the user already has (told elsewhere first) retires the old line's
    // fact all the same.
    let added = crate::common::post_json(
        &h,
        "/memproxy/v1/users/co/memories",
        &json!({"text": "The user works as a nurse."}),
    )
    .await;
    assert!(added["id"].is_i64(), "{added}");
    h.mock.push(call(
        "core_memory_replace",
        json!({"label": "human", "old_content": "The user lives in Porto.",
            "new_content": "The user works as a nurse.", "request_heartbeat": true}),
    ));
    h.mock.push(send("Noted."));
    say(
        &h,
        "co",
        "Actually I work as a nurse, that is what matters.",
    )
    .await;
    let stored = memories(&h, "co").await;
    assert!(!stored.iter().any(|m| m.contains("Porto")), "{stored:?}");
    let nurse = stored.iter().filter(|m| *m == "The user works as a nurse.");
    assert_eq!(nurse.count(), 1, "{stored:?}");
}

#[tokio::test]
async fn a_fact_corrected_or_deleted_elsewhere_leaves_the_agents_core_memory() {
    let h = harness_with(|c| c.memory.extraction_debounce = Duration::ZERO).await;
    h.mock.push(call(
        "core_memory_append",
        json!({"label": "human", "content": "The user lives in Lisbon.", "request_heartbeat": true}),
    ));
    h.mock.push(send("Noted."));
    say(&h, "do", "I live in Lisbon, by the way.").await;
    assert!(agent_sees(&h, "do")
        .await
        .contains("The user lives in Lisbon."));
    // Shown once: recall before the turn does not repeat what core memory shows.
    h.mock.push(send("In Lisbon."));
    say(&h, "do", "Which city do I live in these days?").await;
    let requests = model_requests(&h);
    let shown = crate::explicit::memory_message(requests.last().expect("a request"));
    assert_eq!(
        shown.matches("The user lives in Lisbon.").count(),
        1,
        "{shown}"
    );
    // Implicit mode hears of the move: its memory LLM's fact retires the old one (newest wins),
    // and the agent's core memory no longer says it.
    h.mock
        .push_marked("MEMPROXY-EXTRACT", facts(&["The user lives in Porto."]));
    let response = implicit_chat(
        &h,
        "do",
        json!([{"role": "user", "content": "I moved, I live in Porto now."}]),
    )
    .await;
    assert_eq!(response.status(), 200);
    eventually("the move is stored", || async {
        memories(&h, "do").await == ["The user lives in Porto."]
    })
    .await;
    let seen = agent_sees(&h, "do").await;
    assert!(!seen.contains("The user lives in Lisbon."), "{seen}");
    // The user corrects the fact through the management API: the agent's core memory follows,
    // another agent's too; deleted, it is gone from its view.
    let id = memory_id(&h, "do", "The user lives in Porto.").await;
    h.mock.push(call(
        "core_memory_append",
        json!({"label": "human", "content": "The user lives in Porto.", "request_heartbeat": true}),
    ));
    h.mock.push(send("Noted."));
    say(&h, "do", "Remember that I live in Porto.").await;
    assert!(agent_sees(&h, "do")
        .await
        .contains("The user lives in Porto."));
    let patched = h
        .client
        .patch(h.url(&format!("/memproxy/v1/users/do/memories/{id}")))
        .json(&json!({"text": "The user lives in Braga."}))
        .send()
        .await
        .expect("patch");
    assert_eq!(patched.status(), 200);
    let seen = agent_sees(&h, "do").await;
    assert!(seen.contains("The user lives in Braga."), "{seen}");
    assert!(!seen.contains("Porto."), "{seen}");
    let deleted = h
        .client
        .delete(h.url(&format!("/memproxy/v1/users/do/memories/{id}")))
        .send()
        .await
        .expect("delete");
    assert_eq!(deleted.status(), 200);
    let seen = agent_sees(&h, "do").await;
    assert!(!seen.contains("Braga"), "{seen}");
}

#[tokio::test]
async fn conversation_search_finds_what_the_user_said_in_implicit_mode() {
    let h = harness_with(|_| {}).await;
    for user in ["so", "sx"] {
        let told = if user == "so" {
            "My locker code at the gym is 4711."
        } else {
            "I like gyms with a pool."
        };
        let response = implicit_chat(&h, user, json!([{"role": "user", "content": told}])).await;
        assert_eq!(response.status(), 200);
    }
    for user in ["so", "sx"] {
        h.mock.push(call(
            "conversation_search",
            json!({"query": "locker code gym", "request_heartbeat": true}),
        ));
        h.mock.push(send("Found it."));
        say(&h, user, "What was my locker code at the gym?").await;
        let requests = model_requests(&h);
        let found = Value::Array(tool_results(requests.last().expect("a request"))).to_string();
        assert_eq!(found.contains("4711"), user == "so", "{user}: {found}");
    }
}

/// A database from before (an agent whose `human` block holds lines that are no facts) needs no
/// manual step: at start-up the lines become the user's facts, found by implicit mode.
#[tokio::test]
async fn core_memory_written_before_one_memory_is_adopted_at_start_up() {
    let h = harness_with(|_| {}).await;
    h.mock.push(send("Hi."));
    say(&h, "ao", "Hello there, nice to meet you.").await;
    let store = h.config.store.clone();
    let h = crate::common::restart_after(h, move |data| {
        let data = data.to_owned();
        std::thread::spawn(move || {
            let store = store.open(&data).expect("the store opens");
            let block = memproxy::store::CoreBlock {
                label: "human".to_owned(),
                value: "The user keeps bees.\nThe user's sister Zelda lives in Lisbon.".to_owned(),
                char_limit: 2000,
                read_only: false,
                updated_at_ms: 0,
                shared: None,
            };
            let scope = memproxy::store::UserScope::new("default", "ao");
            store
                .put_core_block(&scope, "default", &block)
                .expect("the block is written as an older version did");
        })
        .join()
        .expect("written");
    })
    .await;
    eventually("the lines are adopted", || async {
        memories(&h, "ao").await.len() == 2
    })
    .await;
    let sent = implicit_sees(&h, "ao", "Where does my sister Zelda live?").await;
    assert!(sent.contains("Lisbon"), "{sent}");
    assert!(memories(&h, "ax").await.is_empty());
}
