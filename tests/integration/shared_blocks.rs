//! Shared core-memory blocks: one block attached to several agents of a user. An edit by one agent
//! is in the others' next compiled context (their stored system message is dropped, and a turn
//! that was running during the edit does not store its older one); a shared block takes the place
//! of an own block with its label until it is detached; other users cannot reach it; export and
//! import keep it.

use std::time::Duration;

use memproxy::mock::Reply;
use serde_json::{json, Value};

use crate::common::{get_json, harness_with, Harness};
use crate::explicit::{ask, call, model_requests, send, system_of};

async fn put(h: &Harness, path: &str, body: Value) -> (u16, Value) {
    let response = h
        .client
        .put(h.url(path))
        .json(&body)
        .send()
        .await
        .expect("answer");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn delete(h: &Harness, path: &str) -> (u16, Value) {
    let response = h.client.delete(h.url(path)).send().await.expect("answer");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn import(h: &Harness, user: &str, jsonl: String) -> u16 {
    let path = format!("/memproxy/v1/users/{user}/import");
    let response = h.client.post(h.url(&path)).body(jsonl).send().await;
    response.expect("answer").status().as_u16()
}

async fn share(h: &Harness, user: &str, name: &str, body: Value, agents: &[&str]) {
    let (status, saved) = put(h, &format!("/memproxy/v1/users/{user}/blocks/{name}"), body).await;
    assert_eq!(status, 200, "{saved}");
    for agent in agents {
        let path = format!("/memproxy/v1/users/{user}/agents/{agent}/shared/{name}");
        let (status, attached) = put(h, &path, json!({})).await;
        assert_eq!(status, 200, "{attached}");
    }
}

async fn turn(h: &Harness, user: &str, agent: &str, text: &str) {
    let response = ask(h, user, agent, json!([{"role": "user", "content": text}])).await;
    assert_eq!(
        response.status(),
        200,
        "{}",
        response.text().await.unwrap_or_default()
    );
}

/// The blocks of an agent as `(label, value, shared name)`.
async fn blocks_of(h: &Harness, user: &str, agent: &str) -> Vec<(String, String, Option<String>)> {
    let blocks = get_json(
        h,
        &format!("/memproxy/v1/users/{user}/agents/{agent}/blocks"),
    )
    .await;
    blocks["data"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|b| {
            (
                b["label"].as_str().unwrap_or_default().to_owned(),
                b["value"].as_str().unwrap_or_default().to_owned(),
                b["shared"].as_str().map(str::to_owned),
            )
        })
        .collect()
}

#[tokio::test]
async fn an_edit_by_one_agent_is_in_the_other_agents_next_turn() {
    let h = harness_with(|_| {}).await;
    share(
        &h,
        "ana",
        "team",
        json!({"value": "Project: Apollo."}),
        &["alice", "bob"],
    )
    .await;
    // Bob's first turn stores his compiled system message (kept for prompt caching).
    h.mock.push(send("Hello."));
    turn(&h, "ana", "bob", "Hi Bob.").await;
    let first = system_of(&model_requests(&h)[0]);
    assert!(
        first.contains("shared=\"true\">\nProject: Apollo.\n</team>"),
        "{first}"
    );

    // Alice edits the shared block with her own memory tool.
    h.mock.push(call(
        "core_memory_append",
        json!({"label": "team", "content": "Deadline: Friday.", "request_heartbeat": true}),
    ));
    h.mock.push(send("Noted."));
    turn(&h, "ana", "alice", "The deadline is Friday.").await;

    h.mock.push(send("Friday."));
    turn(&h, "ana", "bob", "When is the deadline?").await;
    let requests = model_requests(&h);
    let bob_next = system_of(&requests[requests.len() - 1]);
    assert!(
        bob_next.contains("Project: Apollo.\nDeadline: Friday."),
        "{bob_next}"
    );

    let listed = get_json(&h, "/memproxy/v1/users/ana/blocks").await;
    assert_eq!(listed["data"][0]["name"], "team");
    assert_eq!(
        listed["data"][0]["value"],
        "Project: Apollo.\nDeadline: Friday."
    );
    assert_eq!(listed["data"][0]["agents"], json!(["alice", "bob"]));
    // Neither agent got an own copy: the block is stored once.
    let alice = blocks_of(&h, "ana", "alice").await;
    assert_eq!(alice.iter().filter(|b| b.0 == "team").count(), 1);
}

#[tokio::test]
async fn an_edit_during_another_agents_turn_is_not_overwritten_by_that_turn() {
    let h = harness_with(|_| {}).await;
    share(
        &h,
        "ana",
        "team",
        json!({"value": "Project: Apollo."}),
        &["bob"],
    )
    .await;
    // Bob's turn is slow; the shared block changes while it runs.
    h.mock.push(Reply::Stall(
        Duration::from_millis(1500),
        Box::new(send("Working.")),
    ));
    let slow = {
        let client = h.client.clone();
        let url = h.url("/explicit/v1/chat/completions");
        tokio::spawn(async move {
            client
                .post(url)
                .header("x-memproxy-user", "ana")
                .header("x-memproxy-agent", "bob")
                .json(&json!({"model": "mock-model",
                    "messages": [{"role": "user", "content": "Start."}]}))
                .send()
                .await
                .map(|r| r.status().as_u16())
        })
    };
    crate::common::eventually("Bob's turn asks the model", || async {
        !model_requests(&h).is_empty()
    })
    .await;
    let (status, _) = put(
        &h,
        "/memproxy/v1/users/ana/blocks/team",
        json!({"value": "Project: Gemini."}),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(slow.await.expect("joins").expect("answer"), 200);

    h.mock.push(send("Gemini."));
    turn(&h, "ana", "bob", "Which project?").await;
    let requests = model_requests(&h);
    let next = system_of(&requests[requests.len() - 1]);
    assert!(next.contains("Project: Gemini."), "{next}");
}

#[tokio::test]
async fn a_shared_block_takes_an_own_blocks_place_until_detached_and_stays_with_its_user() {
    let h = harness_with(|_| {}).await;
    let (status, _) = put(
        &h,
        "/memproxy/v1/users/ana/agents/bob/blocks/human",
        json!({"value": "Name: Ana."}),
    )
    .await;
    assert_eq!(status, 200);
    share(
        &h,
        "ana",
        "about-ana",
        json!({"label": "human", "value": "Ana lives in Oslo."}),
        &["bob"],
    )
    .await;
    let seen = blocks_of(&h, "ana", "bob").await;
    let human: Vec<_> = seen.iter().filter(|b| b.0 == "human").collect();
    assert_eq!(human.len(), 1, "{seen:?}");
    assert_eq!(human[0].1, "Ana lives in Oslo.");
    assert_eq!(human[0].2.as_deref(), Some("about-ana"));

    // A second shared block with the same label, the client-prompt label, deleting the shared
    // block through one agent, and a label change are refused in the management API's shape.
    share(
        &h,
        "ana",
        "other",
        json!({"label": "human", "value": "x"}),
        &[],
    )
    .await;
    let (status, error) = put(
        &h,
        "/memproxy/v1/users/ana/agents/bob/shared/other",
        json!({}),
    )
    .await;
    assert_eq!(status, 400, "{error}");
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("about-ana"),
        "{error}"
    );
    let (status, _) = put(
        &h,
        "/memproxy/v1/users/ana/blocks/rules",
        json!({"label": "instructions", "value": "x"}),
    )
    .await;
    assert_eq!(status, 400);
    let (status, error) = delete(&h, "/memproxy/v1/users/ana/agents/bob/blocks/human").await;
    assert_eq!(status, 400, "{error}");
    let (status, _) = put(
        &h,
        "/memproxy/v1/users/ana/blocks/about-ana",
        json!({"label": "persona", "value": "x"}),
    )
    .await;
    assert_eq!(status, 400);

    // Another user can neither see nor attach it.
    assert_eq!(
        get_json(&h, "/memproxy/v1/users/eve/blocks").await["data"],
        json!([])
    );
    let (status, _) = put(
        &h,
        "/memproxy/v1/users/eve/agents/bob/shared/about-ana",
        json!({}),
    )
    .await;
    assert_eq!(status, 404);

    // Export and import into another user keep the block and its attachment.
    let exported = h
        .client
        .get(h.url("/memproxy/v1/users/ana/export"))
        .send()
        .await
        .expect("answer")
        .text()
        .await
        .expect("text");
    assert!(
        exported.contains(r#""type":"shared_block","name":"about-ana""#),
        "{exported}"
    );
    assert_eq!(import(&h, "ana2", exported).await, 200);
    let copied = blocks_of(&h, "ana2", "bob").await;
    assert!(
        copied
            .iter()
            .any(|b| b.1 == "Ana lives in Oslo." && b.2.as_deref() == Some("about-ana")),
        "{copied:?}"
    );

    // A file that would give one agent two shared blocks with one label is refused whole.
    let conflicting = [
        r#"{"type":"header","format":"memproxy-export","version":1}"#,
        r#"{"type":"shared_block","name":"a","label":"human","value":"A","char_limit":100,"read_only":false,"agents":["bob"]}"#,
        r#"{"type":"shared_block","name":"b","label":"human","value":"B","char_limit":100,"read_only":false,"agents":["bob"]}"#,
    ]
    .join("\n");
    assert_eq!(import(&h, "mallory", conflicting).await, 400);
    assert_eq!(
        get_json(&h, "/memproxy/v1/users/mallory/blocks").await["data"],
        json!([])
    );

    // Detaching brings Bob's own block back, unchanged.
    let (status, _) = delete(&h, "/memproxy/v1/users/ana/agents/bob/shared/about-ana").await;
    assert_eq!(status, 200);
    let seen = blocks_of(&h, "ana", "bob").await;
    assert!(
        seen.contains(&("human".into(), "Name: Ana.".into(), None)),
        "{seen:?}"
    );
    let (status, _) = delete(&h, "/memproxy/v1/users/ana/agents/bob/shared/about-ana").await;
    assert_eq!(status, 404);
    let (status, _) = delete(&h, "/memproxy/v1/users/ana/blocks/about-ana").await;
    assert_eq!(status, 200);
    assert_eq!(
        get_json(&h, "/memproxy/v1/users/ana/blocks").await["data"]
            .as_array()
            .map(Vec::len),
        Some(1)
    );
}
