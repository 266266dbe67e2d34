//! The OpenAI Responses API over real HTTP, translated to the scripted Chat Completions upstream:
//! `previous_response_id` rebuilds the history from the user's own response log (never another
//! user's), `store: false` keeps nothing, memory crosses APIs, explicit mode answers, and the
//! stream is logged before it ends. (The official `openai` SDK runs in `sdk.rs`.)

use std::time::Duration;

use serde_json::{json, Value};

use crate::common::{eventually, get_json, harness_with, memories, Harness};
use crate::explicit::send;

async fn respond(h: &Harness, path: &str, user: &str, body: Value) -> reqwest::Response {
    h.client
        .post(h.url(path))
        .header("x-memproxy-user", user)
        .json(&body)
        .send()
        .await
        .expect("answer")
}

async fn ok(h: &Harness, user: &str, body: Value) -> Value {
    let response = respond(h, "/v1/responses", user, body).await;
    assert_eq!(response.status(), 200);
    response.json().await.expect("json")
}

fn last_seen(h: &Harness) -> Value {
    h.mock.chat_requests(None).last().cloned().expect("request")
}

fn roles_and_texts(request: &Value) -> Vec<(String, String)> {
    request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| {
            let content = match &m["content"] {
                Value::String(text) => text.clone(),
                Value::Null => String::new(),
                other => other.to_string(),
            };
            (m["role"].as_str().unwrap_or_default().to_owned(), content)
        })
        .collect()
}

#[tokio::test]
async fn previous_response_id_rebuilds_the_history_of_that_user_only() {
    let h = harness_with(|_| {}).await;
    let first = ok(
        &h,
        "ada",
        json!({"model": "mock-model", "instructions": "Be brief.", "input": "My name is Ada."}),
    )
    .await;
    assert_eq!(
        first["output"][0]["content"][0]["text"],
        "echo: My name is Ada."
    );
    let id = first["id"].as_str().expect("id").to_owned();
    let second = ok(
        &h,
        "ada",
        json!({"model": "mock-model", "previous_response_id": id, "input": "What is my name?"}),
    )
    .await;
    assert_eq!(second["previous_response_id"], id.as_str());
    // The upstream saw the whole conversation (instructions do not carry over, as specified).
    assert_eq!(
        roles_and_texts(&last_seen(&h)),
        [
            ("user".into(), "My name is Ada.".into()),
            ("assistant".into(), "echo: My name is Ada.".into()),
            ("user".into(), "What is my name?".into()),
        ]
    );
    // A chain of three.
    let second_id = second["id"].as_str().expect("id").to_owned();
    let third = ok(
        &h,
        "ada",
        json!({"model": "mock-model", "previous_response_id": second_id, "input": "And again?"}),
    )
    .await;
    assert_eq!(roles_and_texts(&last_seen(&h)).len(), 5);
    // With its middle link deleted the chain cannot be rebuilt: refused, not continued with a gap.
    let deleted = h
        .client
        .delete(h.url(&format!("/v1/responses/{second_id}")))
        .header("x-memproxy-user", "ada")
        .send()
        .await
        .expect("answer");
    assert_eq!(deleted.status(), 200);
    let gapped = respond(
        &h,
        "/v1/responses",
        "ada",
        json!({"model": "mock-model", "previous_response_id": third["id"], "input": "Still?"}),
    )
    .await;
    assert_eq!(gapped.status(), 400);

    // Another user can neither continue nor read Ada's responses.
    let stolen = respond(
        &h,
        "/v1/responses",
        "eve",
        json!({"model": "mock-model", "previous_response_id": id, "input": "Go on."}),
    )
    .await;
    assert_eq!(stolen.status(), 400);
    let body: Value = stolen.json().await.expect("json");
    assert_eq!(body["error"]["code"], "previous_response_not_found");
    assert_eq!(body["error"]["param"], "previous_response_id");
    let read = h
        .client
        .get(h.url(&format!("/v1/responses/{id}")))
        .header("x-memproxy-user", "eve")
        .send()
        .await
        .expect("answer");
    assert_eq!(read.status(), 404);
    let read = h
        .client
        .get(h.url(&format!("/v1/responses/{id}")))
        .header("x-memproxy-user", "ada")
        .send()
        .await
        .expect("answer");
    assert_eq!(read.status(), 200);
}

#[tokio::test]
async fn store_false_keeps_nothing_to_continue_from() {
    let h = harness_with(|_| {}).await;
    let unstored = ok(
        &h,
        "sam",
        json!({"model": "mock-model", "input": "hi", "store": false}),
    )
    .await;
    assert_eq!(unstored["store"], false);
    let id = unstored["id"].as_str().expect("id");
    let next = respond(
        &h,
        "/v1/responses",
        "sam",
        json!({"model": "mock-model", "previous_response_id": id, "input": "again"}),
    )
    .await;
    assert_eq!(next.status(), 400);
}

#[tokio::test]
async fn tool_calls_and_their_outputs_translate_both_ways() {
    let h = harness_with(|_| {}).await;
    let tools = json!([{"type": "function", "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}]);
    let called = ok(
        &h,
        "tia",
        json!({"model": "mock-tool", "input": "Weather?", "tools": tools}),
    )
    .await;
    let call = &called["output"][0];
    assert_eq!(call["type"], "function_call");
    assert_eq!(call["name"], "get_weather");
    let call_id = call["call_id"].as_str().expect("call id");
    ok(
        &h,
        "tia",
        json!({"model": "mock-model", "previous_response_id": called["id"], "tools": tools,
        "input": [{"type": "function_call_output", "call_id": call_id, "output": "21C"}]}),
    )
    .await;
    let seen = last_seen(&h);
    let messages = seen["messages"].as_array().expect("messages");
    assert_eq!(messages[1]["tool_calls"][0]["id"], call_id);
    assert_eq!(
        messages[1]["tool_calls"][0]["function"]["name"],
        "get_weather"
    );
    assert_eq!(
        messages[2],
        json!({"role": "tool", "tool_call_id": call_id, "content": "21C"})
    );
    assert_eq!(seen["tools"][0]["function"]["name"], "get_weather");
}

#[tokio::test]
async fn a_fact_told_over_responses_is_recalled_over_messages_and_explicit_mode_answers() {
    let h = harness_with(|c| c.memory.extraction_debounce = Duration::ZERO).await;
    let told = respond(
        &h,
        "/implicit/v1/responses",
        "noa",
        json!({"model": "mock-model", "input": "My cat is called Miso."}),
    )
    .await;
    assert_eq!(told.status(), 200);
    assert_eq!(told.headers()["x-memproxy-mode"], "implicit");
    eventually("the fact is extracted", || async {
        memories(&h, "noa").await.iter().any(|m| m.contains("Miso"))
    })
    .await;
    let asked = h
        .client
        .post(h.url("/implicit/v1/messages"))
        .header("x-memproxy-user", "noa")
        .json(&json!({"model": "m", "max_tokens": 20,
            "messages": [{"role": "user", "content": "What is my cat called?"}]}))
        .send()
        .await
        .expect("answer");
    assert_eq!(asked.status(), 200);
    assert!(last_seen(&h).to_string().contains("Miso"));

    h.mock.push(send("Hi from the agent."));
    let agent = respond(
        &h,
        "/explicit/v1/responses",
        "noa",
        json!({"model": "mock-model", "input": "Hello agent."}),
    )
    .await;
    assert_eq!(agent.status(), 200);
    let body: Value = agent.json().await.expect("json");
    assert_eq!(
        body["output"][0]["content"][0]["text"],
        "Hi from the agent."
    );
    let agents = get_json(&h, "/memproxy/v1/users/noa/agents").await;
    assert!(agents.to_string().contains("default"), "{agents}");
}

#[tokio::test]
async fn a_streamed_response_is_logged_before_its_last_event() {
    let h = harness_with(|_| {}).await;
    let response = respond(
        &h,
        "/v1/responses",
        "sol",
        json!({"model": "mock-model", "input": "stream me", "stream": true}),
    )
    .await;
    assert_eq!(response.status(), 200);
    let text = response.text().await.expect("body");
    let completed: Value = text
        .split("\n\n")
        .filter(|e| e.starts_with("event: response.completed"))
        .find_map(|e| e.lines().find_map(|l| l.strip_prefix("data: ")))
        .and_then(|d| serde_json::from_str(d).ok())
        .expect("a response.completed event");
    let id = completed["response"]["id"].as_str().expect("id");
    assert_eq!(
        completed["response"]["output"][0]["content"][0]["text"],
        "echo: stream me"
    );
    // No waiting: the log was written before the stream ended.
    let next = respond(
        &h,
        "/v1/responses",
        "sol",
        json!({"model": "mock-model", "previous_response_id": id, "input": "next"}),
    )
    .await;
    assert_eq!(next.status(), 200);
    assert_eq!(roles_and_texts(&last_seen(&h))[1].1, "echo: stream me");
}

#[tokio::test]
async fn bad_input_gets_openai_shaped_errors() {
    let h = harness_with(|_| {}).await;
    for (body, param) in [
        (json!({"input": "x"}), "model"),
        (json!({"model": "m"}), "input"),
        (
            json!({"model": "m", "input": [{"type": "item_reference", "id": "x"}]}),
            "input",
        ),
        (
            json!({"model": "m", "input": "x", "tool_choice": {"type": "file_search"}}),
            "tool_choice",
        ),
        (
            json!({"model": "m", "input": "x", "background": true}),
            "background",
        ),
        (
            json!({"model": "m", "input": "x", "previous_response_id": 5}),
            "previous_response_id",
        ),
    ] {
        let response = respond(&h, "/v1/responses", "bad", body.clone()).await;
        assert_eq!(response.status(), 400, "{body}");
        let error: Value = response.json().await.expect("json");
        assert_eq!(error["error"]["param"], param, "{error}");
        assert_eq!(error["error"]["type"], "invalid_request_error");
    }
    let response = h
        .client
        .post(h.url("/v1/responses"))
        .body("{not json")
        .send()
        .await
        .expect("answer");
    assert_eq!(response.status(), 400);
    assert!(
        h.mock.chat_requests(None).is_empty(),
        "nothing went upstream"
    );
}

#[tokio::test]
async fn the_response_log_is_written_behind_the_answer_and_still_read_at_once() {
    let h = harness_with(|_| {}).await;
    let first = ok(&h, "vera", json!({"model": "m", "input": "First."})).await;
    let first_id = first["id"].as_str().expect("id").to_owned();
    h.proxy.state.after_exchange.close();
    h.proxy.state.after_exchange.wait().await;
    h.proxy.state.after_exchange.reopen();

    // Another writer holds the database: a log write now waits (memproxy's busy timeout is 10 s).
    let blocker = rusqlite::Connection::open(h.data.path().join("memproxy.db")).expect("open");
    blocker.execute_batch("BEGIN IMMEDIATE").expect("lock");
    let second = ok(
        &h,
        "vera",
        json!({"model": "m", "input": "Second.", "previous_response_id": first_id}),
    )
    .await;
    let second_id = second["id"].as_str().expect("id").to_owned();
    // Chained at once on the pending one, and found by GET, while its write still waits.
    ok(
        &h,
        "vera",
        json!({"model": "m", "input": "Third.", "previous_response_id": second_id}),
    )
    .await;
    let texts: Vec<String> = roles_and_texts(&last_seen(&h))
        .into_iter()
        .map(|(_, text)| text)
        .collect();
    assert_eq!(
        texts,
        [
            "First.",
            "echo: First.",
            "Second.",
            "echo: Second.",
            "Third."
        ]
    );
    let got = h
        .client
        .get(h.url(&format!("/v1/responses/{second_id}")))
        .header("x-memproxy-user", "vera")
        .send()
        .await
        .expect("answer");
    assert_eq!(got.status(), 200);
    blocker.execute_batch("COMMIT").expect("unlock");

    // A delete waits for the write it would otherwise overtake; afterwards the id is gone.
    let deleted = h
        .client
        .delete(h.url(&format!("/v1/responses/{second_id}")))
        .header("x-memproxy-user", "vera")
        .send()
        .await
        .expect("answer");
    assert_eq!(deleted.status(), 200);
    h.proxy.state.after_exchange.close();
    h.proxy.state.after_exchange.wait().await;
    let got = h
        .client
        .get(h.url(&format!("/v1/responses/{second_id}")))
        .header("x-memproxy-user", "vera")
        .send()
        .await
        .expect("answer");
    assert_eq!(got.status(), 404);
}
