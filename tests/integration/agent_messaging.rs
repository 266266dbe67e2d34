//! Agents of one user message each other: asynchronously through the job queue (the reply lands
//! in the sender's log), waiting for the reply, or every agent with some tags; an A→B→A wait is
//! refused instead of deadlocking; agents of another user cannot be reached.

use std::time::Duration;

use memproxy::mock::Reply;
use serde_json::{json, Value};

use crate::common::{eventually, get_json, harness_with, Harness};
use crate::explicit::{ask, call, model_requests, send, tool_results};

async fn tag(h: &Harness, user: &str, agent: &str, tags: Value) -> Value {
    let response = h
        .client
        .put(h.url(&format!("/memproxy/v1/users/{user}/agents/{agent}/tags")))
        .json(&json!({"tags": tags}))
        .send()
        .await
        .expect("answer");
    assert_eq!(response.status(), 200);
    response.json().await.expect("json")
}

/// The payloads of an agent's log whose `type` is `kind`.
async fn log_of(h: &Harness, user: &str, agent: &str, kind: &str) -> Vec<Value> {
    let log = get_json(
        h,
        &format!("/memproxy/v1/users/{user}/agents/{agent}/messages"),
    )
    .await;
    log["data"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| serde_json::from_str::<Value>(m["content"].as_str()?).ok())
        .filter(|payload| payload["type"] == kind)
        .collect()
}

fn both(first: Reply, second: Reply) -> Reply {
    match (first, second) {
        (Reply::ToolCalls(mut a), Reply::ToolCalls(b)) => {
            a.extend(b);
            Reply::ToolCalls(a)
        }
        _ => unreachable!("tool calls only"),
    }
}

#[tokio::test]
async fn an_async_message_reaches_the_other_agent_and_its_reply_comes_back() {
    let h = harness_with(|_| {}).await;
    tag(&h, "ana", "bob", json!(["guard"])).await;
    // Alice sends and answers in one step, so Bob's turn (a job) asks the model after her.
    h.mock.push(both(
        call(
            "send_message_to_agent_async",
            json!({"agent": "bob", "message": "Bob, what is the secret key?"}),
        ),
        send("I asked Bob."),
    ));
    h.mock.push(send("Not telling you, Alice."));
    let response = ask(
        &h,
        "ana",
        "alice",
        json!([{"role": "user", "content": "Ask Bob for the key."}]),
    )
    .await;
    assert_eq!(response.status(), 200);
    // The messaging tools were offered (Ana has another agent).
    let offered = model_requests(&h)[0]["tools"].to_string();
    assert!(
        offered.contains("send_message_to_agent_and_wait_for_reply"),
        "{offered}"
    );

    eventually("Bob's reply in Alice's log", || async {
        !log_of(&h, "ana", "alice", "agent_reply").await.is_empty()
    })
    .await;
    let received = log_of(&h, "ana", "bob", "agent_message").await;
    assert_eq!(received.len(), 1);
    assert_eq!(received[0]["from"], "alice");
    assert_eq!(received[0]["message"], "Bob, what is the secret key?");
    let replies = log_of(&h, "ana", "alice", "agent_reply").await;
    assert_eq!(replies[0]["from"], "bob");
    assert_eq!(replies[0]["message"], "Not telling you, Alice.");
    // Bob's turn saw the message as one from Alice.
    let bob_request = model_requests(&h)[1].to_string();
    assert!(
        bob_request.contains(r#"\"type\":\"agent_message\",\"from\":\"alice\""#),
        "{bob_request}"
    );
}

#[tokio::test]
async fn waiting_for_a_reply_returns_it_and_a_wait_back_is_refused() {
    let h = harness_with(|_| {}).await;
    tag(&h, "ana", "bob", json!([])).await;
    h.mock.push(call(
        "send_message_to_agent_and_wait_for_reply",
        json!({"agent": "bob", "message": "Can you help me?", "request_heartbeat": true}),
    ));
    // Bob tries to wait for Alice in turn (she is waiting for him): refused, and he answers.
    h.mock.push(call(
        "send_message_to_agent_and_wait_for_reply",
        json!({"agent": "alice", "message": "Why?", "request_heartbeat": true}),
    ));
    h.mock.push(send("Fine, the key is under the mat."));
    h.mock.push(send("Bob says the key is under the mat."));
    let answered = tokio::time::timeout(
        Duration::from_secs(60),
        ask(
            &h,
            "ana",
            "alice",
            json!([{"role": "user", "content": "Get Bob to help."}]),
        ),
    )
    .await
    .expect("no deadlock");
    assert_eq!(answered.status(), 200);
    let body: Value = answered.json().await.expect("json");
    assert_eq!(
        body["choices"][0]["message"]["content"],
        "Bob says the key is under the mat."
    );
    let requests = model_requests(&h);
    assert_eq!(requests.len(), 4);
    let refused = tool_results(&requests[2]);
    assert!(
        refused.iter().any(|r| r["status"] == "Failed"
            && r["message"]
                .as_str()
                .unwrap_or_default()
                .contains("alice is waiting for your reply")),
        "{refused:?}"
    );
    let got = tool_results(&requests[3]);
    assert!(
        got.iter()
            .any(|r| r["message"] == "bob replied: Fine, the key is under the mat."),
        "{got:?}"
    );
}

#[tokio::test]
async fn tags_reach_every_matching_agent_and_no_other_user() {
    let h = harness_with(|_| {}).await;
    tag(&h, "ana", "bob", json!(["worker", "night"])).await;
    tag(&h, "ana", "carol", json!(["worker"])).await;
    tag(&h, "ana", "dave", json!(["manager"])).await;
    tag(&h, "zed", "eve", json!(["worker"])).await;
    let listed = get_json(&h, "/memproxy/v1/users/ana/agents").await;
    assert!(
        listed.to_string().contains(r#""tags":["night","worker"]"#),
        "{listed}"
    );
    h.mock.push(both(
        call(
            "send_message_to_agents_matching_tags",
            json!({"tags": ["worker"], "message": "Status report, please."}),
        ),
        send("Asked the workers."),
    ));
    h.mock.push(send("All good."));
    h.mock.push(send("All good."));
    let response = ask(
        &h,
        "ana",
        "alice",
        json!([{"role": "user", "content": "Check on the workers."}]),
    )
    .await;
    assert_eq!(response.status(), 200);
    eventually("both workers answered", || async {
        log_of(&h, "ana", "alice", "agent_reply").await.len() == 2
    })
    .await;
    for worker in ["bob", "carol"] {
        let received = log_of(&h, "ana", worker, "agent_message").await;
        assert_eq!(received.len(), 1, "{worker}");
    }
    assert!(log_of(&h, "ana", "dave", "agent_message").await.is_empty());
    assert!(log_of(&h, "zed", "eve", "agent_message").await.is_empty());

    // An agent of another user is not found, by name either.
    h.mock.push(call(
        "send_message_to_agent_async",
        json!({"agent": "eve", "message": "Hi Eve.", "request_heartbeat": true}),
    ));
    h.mock.push(send("There is no Eve here."));
    ask(
        &h,
        "ana",
        "alice",
        json!([{"role": "user", "content": "Message Eve."}]),
    )
    .await;
    let results = tool_results(model_requests(&h).last().expect("request"));
    assert!(
        results.iter().any(|r| r["message"]
            .as_str()
            .unwrap_or_default()
            .contains("there is no other agent 'eve'")),
        "{results:?}"
    );
    assert!(log_of(&h, "zed", "eve", "agent_message").await.is_empty());
}

#[tokio::test]
async fn an_agent_alone_is_not_offered_messaging_and_tags_are_checked() {
    let h = harness_with(|_| {}).await;
    h.mock.push(send("Hello."));
    ask(
        &h,
        "solo",
        "default",
        json!([{"role": "user", "content": "Hi."}]),
    )
    .await;
    assert!(!model_requests(&h)[0]["tools"]
        .to_string()
        .contains("send_message_to_agent"));
    let response = h
        .client
        .put(h.url("/memproxy/v1/users/solo/agents/default/tags"))
        .json(&json!({"tags": [""]}))
        .send()
        .await
        .expect("answer");
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.expect("json");
    assert_eq!(body["error"]["param"], "tags");
}

/// The tool results the model was shown, as text.
fn results_text(h: &Harness) -> String {
    model_requests(h)
        .iter()
        .flat_map(tool_results)
        .map(|r| r.to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test]
async fn one_turns_messages_are_bounded_in_number_and_in_depth() {
    let h = harness_with(|c| c.limits.max_agent_message_depth = 1).await;
    for worker in ["w1", "w2", "w3", "w4", "w5", "w6"] {
        tag(&h, "ana", worker, json!(["worker"])).await;
    }
    // Six matching agents, more than a turn may message (limits.max_agent_messages_per_turn, 4).
    h.mock.push(call(
        "send_message_to_agents_matching_tags",
        json!({"tags": ["worker"], "message": "Status?", "request_heartbeat": true}),
    ));
    h.mock.push(send("Too many workers."));
    let response = ask(
        &h,
        "ana",
        "alice",
        json!([{"role": "user", "content": "Ask all workers."}]),
    )
    .await;
    assert_eq!(response.status(), 200);
    assert!(
        results_text(&h).contains("max_agent_messages_per_turn"),
        "{}",
        results_text(&h)
    );
    for worker in ["w1", "w6"] {
        assert!(
            log_of(&h, "ana", worker, "agent_message").await.is_empty(),
            "{worker}"
        );
    }

    // A turn started by another agent's message (depth 1) sends none further.
    h.mock.push(both(
        call(
            "send_message_to_agent_async",
            json!({"agent": "w1", "message": "Pass it on to w2."}),
        ),
        send("Sent."),
    ));
    h.mock.push(call(
        "send_message_to_agent_async",
        json!({"agent": "w2", "message": "From alice, via me.", "request_heartbeat": true}),
    ));
    h.mock.push(send("I could not pass it on."));
    let response = ask(
        &h,
        "ana",
        "alice",
        json!([{"role": "user", "content": "Message w1."}]),
    )
    .await;
    assert_eq!(response.status(), 200);
    eventually("w1 answered alice", || async {
        !log_of(&h, "ana", "alice", "agent_reply").await.is_empty()
    })
    .await;
    assert!(
        results_text(&h).contains("max_agent_message_depth"),
        "{}",
        results_text(&h)
    );
    assert!(log_of(&h, "ana", "w2", "agent_message").await.is_empty());
}
