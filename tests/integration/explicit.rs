//! Explicit mode, the loop: the scripted upstream plays the agent's model (tool calls, wrong ones
//! included) and records every request, so the tests read exactly what the model was shown.

use memproxy::mock::Reply;
use serde_json::{json, Value};

use crate::common::{get_json, harness_with, restart, Harness};

pub fn call(name: &str, arguments: Value) -> Reply {
    Reply::ToolCalls(vec![(name.to_owned(), arguments.to_string())])
}

pub fn send(message: &str) -> Reply {
    call("send_message", json!({"message": message}))
}

/// One client request in explicit mode for `user`/`agent`.
pub async fn ask(h: &Harness, user: &str, agent: &str, messages: Value) -> reqwest::Response {
    h.client
        .post(h.url("/explicit/v1/chat/completions"))
        .header("x-memproxy-user", user)
        .header("x-memproxy-agent", agent)
        .json(&json!({"model": "mock-model", "messages": messages}))
        .send()
        .await
        .expect("answer")
}

pub async fn say(h: &Harness, user: &str, text: &str) -> Value {
    let response = ask(
        h,
        user,
        "default",
        json!([{"role": "user", "content": text}]),
    )
    .await;
    assert_eq!(response.status(), 200, "{:?}", response.text().await);
    response.json().await.expect("json")
}

pub fn reply_of(body: &Value) -> &str {
    body["choices"][0]["message"]["content"]
        .as_str()
        .unwrap_or_default()
}

/// The chat model's requests (memory LLM calls excluded).
pub fn model_requests(h: &Harness) -> Vec<Value> {
    h.mock.chat_requests(None)
}

/// The agent's instructions and its core memory as the request shows them (the system message,
/// and the message that shows core memory before the newest user message).
pub fn system_of(request: &Value) -> String {
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let mut text = messages
        .first()
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_owned();
    let memory = messages.iter().rev().find_map(|m| {
        m["content"]
            .as_str()
            .filter(|c| c.starts_with(memproxy::agent::context::MEMORY_HEADING))
    });
    if let Some(memory) = memory {
        text.push_str("\n\n");
        text.push_str(memory);
    }
    text
}

/// Whether a step may only call send_message: tool_choice names it, with the same tool list as
/// the step before (the list stays, so the prompt's start stays for the upstream's cache).
pub fn only_send_message(step: &Value, before: &Value) -> bool {
    step["tool_choice"]["function"]["name"] == "send_message" && step["tools"] == before["tools"]
}

/// Tool results of a request, in order.
pub fn tool_results(request: &Value) -> Vec<Value> {
    request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "tool")
        .filter_map(|m| serde_json::from_str(m["content"].as_str()?).ok())
        .collect()
}

/// `{"type": ...}` payloads of user-role messages in a request.
/// The `[Core memory, as it is now]` message of a request to the chat model; empty when none.
pub fn memory_message(request: &Value) -> String {
    request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["content"].as_str())
        .find(|c| c.starts_with("[Core memory, as it is now]"))
        .unwrap_or_default()
        .to_owned()
}

pub fn user_payloads(request: &Value) -> Vec<Value> {
    request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "user")
        .filter_map(|m| serde_json::from_str(m["content"].as_str()?).ok())
        .collect()
}

pub async fn steps(h: &Harness, user: &str, agent: &str) -> Vec<Value> {
    let body = get_json(
        h,
        &format!("/memproxy/v1/agents/{agent}/steps?user={user}&turns=1"),
    )
    .await;
    body["data"].as_array().cloned().unwrap_or_default()
}

pub fn statuses(steps: &[Value]) -> Vec<String> {
    steps
        .iter()
        .map(|s| {
            format!(
                "{}:{}",
                s["tool"].as_str().unwrap_or(""),
                s["status"].as_str().unwrap_or("")
            )
        })
        .collect()
}

#[tokio::test]
async fn remembers_with_core_memory_append_then_heartbeat_then_send_message() {
    let h = harness_with(|_| {}).await;
    h.mock.push(call(
        "core_memory_append",
        json!({"label": "human", "content": "Name: Ada. Loves sailing.", "request_heartbeat": true}),
    ));
    h.mock.push(send("Nice to meet you, Ada!"));
    let response = ask(
        &h,
        "ada",
        "default",
        json!([
            {"role": "system", "content": "You are Sailor Bot."},
            {"role": "user", "content": "Remember this: my name is Ada and I love sailing."}
        ]),
    )
    .await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["x-memproxy-mode"], "explicit");
    assert_eq!(response.headers()["x-memproxy-steps"], "2");
    assert_eq!(response.headers()["x-memproxy-stop"], "send_message");
    assert!(response.headers().contains_key("x-memproxy-overhead-ms"));
    let body: Value = response.json().await.expect("json");
    assert_eq!(body["object"], "chat.completion");
    assert_eq!(reply_of(&body), "Nice to meet you, Ada!");

    let requests = model_requests(&h);
    assert_eq!(requests.len(), 2);
    let first = &requests[0];
    assert_eq!(first["tool_choice"], "required");
    let tools: Vec<&str> = first["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    for name in [
        "send_message",
        "core_memory_append",
        "core_memory_replace",
        "archival_memory_insert",
        "archival_memory_search",
        "conversation_search",
        "conversation_search_date",
    ] {
        assert!(tools.contains(&name), "{name} offered");
    }
    // The client's system prompt is a read-only block; the user message is wrapped.
    assert!(system_of(first)
        .contains("<instructions characters=\"19/2000\" read_only=\"true\">\nYou are Sailor Bot."));
    let wrapped = user_payloads(first);
    assert_eq!(wrapped[0]["type"], "user_message");
    assert_eq!(
        wrapped[0]["message"],
        "Remember this: my name is Ada and I love sailing."
    );
    // Step 2 sees the edit in its system message, the tool result and the heartbeat.
    let second = &requests[1];
    assert!(
        system_of(second).contains("Name: Ada. Loves sailing."),
        "{}",
        system_of(second)
    );
    assert_eq!(tool_results(second)[0]["status"], "OK");
    assert!(user_payloads(second)
        .iter()
        .any(|p| p["type"] == "heartbeat"));
    // Pairing: the tool result names the call before it.
    let messages = second["messages"].as_array().expect("messages");
    let call_id = messages
        .iter()
        .find_map(|m| m["tool_calls"][0]["id"].as_str())
        .expect("call id");
    assert!(messages
        .iter()
        .any(|m| m["role"] == "tool" && m["tool_call_id"] == call_id));

    // Next turn: the client resends its whole history; the agent only gets the new message,
    // and its system message still holds the fact.
    h.mock.push(send("You are Ada."));
    let response = ask(
        &h,
        "ada",
        "default",
        json!([
            {"role": "system", "content": "You are Sailor Bot."},
            {"role": "user", "content": "Remember this: my name is Ada and I love sailing."},
            {"role": "assistant", "content": "Nice to meet you, Ada!"},
            {"role": "user", "content": "What is my name?"}
        ]),
    )
    .await;
    assert_eq!(
        reply_of(&response.json().await.expect("json")),
        "You are Ada."
    );
    let third = model_requests(&h).pop().expect("request");
    assert!(system_of(&third).contains("Name: Ada. Loves sailing."));
    let texts: Vec<Value> = user_payloads(&third)
        .into_iter()
        .filter(|p| p["type"] == "user_message")
        .collect();
    assert_eq!(texts.len(), 2, "each client message once: {texts:?}");
    assert_eq!(texts[1]["message"], "What is my name?");

    // And after a restart.
    let h = restart(h).await;
    h.mock.push(send("Still Ada."));
    say(&h, "ada", "And now?").await;
    let after = model_requests(&h).pop().expect("request");
    assert!(system_of(&after).contains("Name: Ada. Loves sailing."));
    assert!(
        after.to_string().contains("What is my name?"),
        "the queue survived too"
    );
}

#[tokio::test]
async fn core_memory_replace_exact_succeeds_and_inexact_fails_precisely() {
    let h = harness_with(|_| {}).await;
    h.mock.push(call(
        "core_memory_replace",
        json!({
        "label": "human", "old_content": "Nothing is known about the user yet.",
        "new_content": "Name: Bo. Lives in Oslo.", "request_heartbeat": true}),
    ));
    h.mock.push(call(
        "core_memory_replace",
        json!({
        "label": "human", "old_content": "lives in oslo", "new_content": "Lives in Bergen.",
        "request_heartbeat": true}),
    ));
    h.mock.push(call(
        "core_memory_replace",
        json!({
        "label": "human", "old_content": "  Lives in Oslo. ", "new_content": "Lives in Bergen.",
        "request_heartbeat": true}),
    ));
    h.mock.push(send("Updated."));
    say(&h, "bo", "I moved from Oslo to Bergen.").await;
    let requests = model_requests(&h);
    let failed = &tool_results(&requests[2])[1];
    assert_eq!(failed["status"], "Failed");
    let message = failed["message"].as_str().expect("message");
    assert!(
        message.contains("'lives in oslo' is not in block 'human'"),
        "{message}"
    );
    assert!(
        message.contains("Name: Bo. Lives in Oslo."),
        "shows the block: {message}"
    );
    // Surrounding whitespace is forgiven (one reading); the block ends as intended.
    let blocks = get_json(&h, "/memproxy/v1/users/bo/agents/default/blocks").await;
    let human = blocks["data"]
        .as_array()
        .expect("blocks")
        .iter()
        .find(|b| b["label"] == "human")
        .expect("human")
        .clone();
    assert_eq!(human["value"], "Name: Bo. Lives in Bergen.");
    assert_eq!(
        statuses(&steps(&h, "bo", "default").await),
        [
            "core_memory_replace:ok",
            "core_memory_replace:failed",
            "core_memory_replace:ok",
            "send_message:reply"
        ]
    );
}

#[tokio::test]
async fn a_block_over_its_limit_fails_cleanly_and_stays_unchanged() {
    let h = harness_with(|c| c.explicit.block_char_limit = 60).await;
    h.mock.push(call(
        "core_memory_append",
        json!({
        "label": "human", "content": "x".repeat(80), "request_heartbeat": true}),
    ));
    h.mock
        .push(send("That is too long to keep in core memory."));
    say(&h, "cy", "Remember my 80-character password hint.").await;
    let result = &tool_results(&model_requests(&h)[1])[0];
    assert_eq!(result["status"], "Failed");
    let message = result["message"].as_str().expect("message");
    assert!(message.contains("over its limit of 60"), "{message}");
    assert!(
        message.contains("archival_memory_insert"),
        "suggests archival memory: {message}"
    );
    let blocks = get_json(&h, "/memproxy/v1/users/cy/agents/default/blocks").await;
    assert!(!blocks.to_string().contains("xxxx"));
}

#[tokio::test]
async fn wrong_calls_plain_text_and_missing_heartbeats_are_handled() {
    let h = harness_with(|_| {}).await;
    h.mock
        .push(call("fly_to_moon", json!({"request_heartbeat": true})));
    h.mock.push(Reply::ToolCalls(vec![(
        "core_memory_append".to_owned(),
        "label = human".to_owned(),
    )]));
    // Lenient: a trailing comma and a string "true".
    h.mock.push(Reply::ToolCalls(vec![(
        "core_memory_append".to_owned(),
        r#"{"label": "human", "content": "Likes green tea.", "request_heartbeat": "true",}"#
            .to_owned(),
    )]));
    // Saved without a heartbeat: the agent yielded, and one plain request (no tools, the memory
    // just written) writes the reply.
    h.mock.push(call(
        "core_memory_append",
        json!({"label": "human", "content": "Dislikes coffee."}),
    ));
    h.mock
        .push(Reply::Text("Green tea it is, no coffee.".to_owned()));
    let response = ask(
        &h,
        "di",
        "default",
        json!([{"role": "user", "content": "I like green tea, not coffee."}]),
    )
    .await;
    assert_eq!(response.headers()["x-memproxy-stop"], "plain_reply");
    assert_eq!(response.headers()["x-memproxy-steps"], "5");
    assert_eq!(
        reply_of(&response.json().await.expect("json")),
        "Green tea it is, no coffee."
    );

    let requests = model_requests(&h);
    let unknown = &tool_results(&requests[1])[0];
    assert_eq!(unknown["status"], "Failed");
    assert!(unknown["message"]
        .as_str()
        .expect("m")
        .contains("there is no function 'fly_to_moon'"));
    let heartbeat = user_payloads(&requests[1])
        .into_iter()
        .find(|p| p["type"] == "heartbeat")
        .expect("heartbeat");
    assert!(heartbeat["reason"]
        .as_str()
        .expect("reason")
        .contains("failed"));
    let bad_json = &tool_results(&requests[2])[1];
    assert_eq!(bad_json["status"], "Failed");
    assert!(bad_json["message"]
        .as_str()
        .expect("m")
        .contains("not valid JSON"));
    assert_eq!(tool_results(&requests[3])[2]["status"], "OK");
    let plain = &requests[4];
    assert!(plain.get("tools").is_none(), "{plain}");
    // The stored log keeps the notice between the function result and the reply (a result
    // followed directly by the reply taught the 1.5B model to answer with copies of results).
    let log = get_json(&h, "/memproxy/v1/users/di/agents/default/messages").await;
    let log = log["data"].as_array().cloned().unwrap_or_default();
    let at = log
        .iter()
        .position(|m| m["search_text"] == "Green tea it is, no coffee.")
        .expect("the reply is stored");
    assert!(
        log[at - 1]["content"]
            .as_str()
            .is_some_and(|c| c.contains("\"heartbeat\"")),
        "{:?}",
        &log[at - 1]
    );
    let system = plain["messages"][0]["content"].as_str().unwrap_or_default();
    assert!(system.contains("Dislikes coffee."), "{system}");
    assert_eq!(
        plain["messages"]
            .as_array()
            .and_then(|m| m.last())
            .map(|m| m["content"].clone()),
        Some(json!("I like green tea, not coffee."))
    );
    let blocks = get_json(&h, "/memproxy/v1/users/di/agents/default/blocks")
        .await
        .to_string();
    assert!(blocks.contains("Likes green tea.") && blocks.contains("Dislikes coffee."));
    assert_eq!(
        statuses(&steps(&h, "di", "default").await),
        [
            "fly_to_moon:failed",
            "core_memory_append:failed",
            "core_memory_append:ok",
            "core_memory_append:ok",
            "(plain_reply):reply"
        ]
    );
}

#[tokio::test]
async fn a_tool_call_written_as_text_is_executed() {
    let h = harness_with(|_| {}).await;
    h.mock.push(Reply::Text(
        r#"{"name": "send_message", "arguments": {"message": "Hello from text."}}"#.to_owned(),
    ));
    let body = say(&h, "ed", "hi").await;
    assert_eq!(reply_of(&body), "Hello from text.");
}

#[tokio::test]
async fn max_steps_ends_the_loop_the_last_step_offers_only_send_message_then_a_plain_reply() {
    let h = harness_with(|c| c.explicit.max_steps = 3).await;
    for n in 0..3 {
        h.mock.push(call(
            "core_memory_append",
            json!({
            "label": "human", "content": format!("note {n}"), "request_heartbeat": true}),
        ));
    }
    h.mock.push(Reply::Text("All noted.".to_owned()));
    let response = ask(
        &h,
        "fa",
        "default",
        json!([{"role": "user", "content": "Take notes."}]),
    )
    .await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["x-memproxy-steps"], "4");
    assert_eq!(response.headers()["x-memproxy-stop"], "plain_reply");
    assert_eq!(
        reply_of(&response.json().await.expect("json")),
        "All noted."
    );
    let requests = model_requests(&h);
    assert_eq!(requests.len(), 4, "max_steps steps, then one plain request");
    let last_step = &requests[2];
    assert!(only_send_message(last_step, &requests[1]));
    assert_eq!(requests[1]["tool_choice"], "required");
    // The plain request: no tools, no agent instructions, the conversation in plain words, and
    // core memory (with what the agent just saved) as plain text.
    let plain = &requests[3];
    assert!(plain.get("tools").is_none());
    let system = system_of(plain);
    assert!(!system.contains("send_message"), "{system}");
    assert!(system.contains("note 0"), "{system}");
    let messages = plain["messages"].as_array().expect("messages");
    assert_eq!(messages.last().expect("last")["content"], "Take notes.");
    assert!(messages.iter().all(|m| m["role"] != "tool"));
}

#[tokio::test]
async fn a_repeated_identical_call_gets_only_send_message_next() {
    let h = harness_with(|_| {}).await;
    let search = || {
        call(
            "archival_memory_search",
            json!({"query": "boats", "request_heartbeat": true}),
        )
    };
    h.mock.push(search());
    h.mock.push(search());
    h.mock.push(send("I found nothing about boats."));
    let body = say(&h, "gu", "What do you know about boats?").await;
    assert_eq!(reply_of(&body), "I found nothing about boats.");
    let requests = model_requests(&h);
    assert_eq!(requests[1]["tools"].as_array().expect("tools").len(), 7);
    assert!(only_send_message(&requests[2], &requests[1]));
    assert_eq!(
        requests[2]["tool_choice"]["function"]["name"],
        "send_message"
    );
}
