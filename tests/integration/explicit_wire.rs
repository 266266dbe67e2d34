//! Explicit mode on the wire: streamed and whole answers, long streamed turns (a turn that outlasts
//! `explicit.stream_keepalive` starts its SSE answer at once and keeps it alive with comments),
//! upstream failures mid-turn and bad input.

use std::time::Duration;

use memproxy::mock::Reply;
use serde_json::{json, Value};

use crate::common::{get_json, harness_with, sse_data, streamed_content};
use crate::explicit::{
    ask, call, model_requests, reply_of, say, send, statuses, steps, system_of, user_payloads,
};

const COMMENT: &str = ": memproxy agent working";

async fn stream_turn(h: &crate::common::Harness, user: &str, text: &str) -> reqwest::Response {
    h.client
        .post(h.url("/explicit/v1/chat/completions"))
        .header("x-memproxy-user", user)
        .json(&json!({"model": "mock-model", "stream": true,
                      "messages": [{"role": "user", "content": text}]}))
        .send()
        .await
        .expect("answer")
}

/// The raw SSE body split into events (comments included).
async fn events(response: reqwest::Response) -> Vec<String> {
    let text = response.text().await.expect("body");
    text.split("\n\n")
        .filter(|event| !event.is_empty())
        .map(str::to_owned)
        .collect()
}

#[tokio::test]
async fn a_long_streamed_turn_starts_at_once_and_stays_alive_until_the_reply() {
    let h = harness_with(|c| c.explicit.stream_keepalive = Duration::from_millis(100)).await;
    // The first step takes 1.5 s: far past the 0.1 s keep-alive.
    h.mock.push(Reply::Stall(
        Duration::from_millis(1500),
        Box::new(call(
            "archival_memory_insert",
            json!({"content": "Flies kites on Sundays.", "request_heartbeat": true}),
        )),
    ));
    h.mock.push(send("Noted: kites on Sundays."));
    let response = stream_turn(&h, "kite", "I fly kites every Sunday.").await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["x-memproxy-mode"], "explicit");
    assert!(
        response.headers().get("x-memproxy-steps").is_none(),
        "known only at the end of the turn"
    );
    let events = events(response).await;
    let first_data = events
        .iter()
        .position(|e| e.starts_with("data: "))
        .expect("data events");
    assert!(
        first_data >= 2 && events[..first_data].iter().all(|e| e == COMMENT),
        "keep-alive comments (at start and while waiting) precede the reply: {events:?}"
    );
    let data: Vec<String> = events
        .iter()
        .filter_map(|e| e.strip_prefix("data: "))
        .map(str::to_owned)
        .collect();
    assert_eq!(streamed_content(&data), "Noted: kites on Sundays.");
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"));
    let first: Value = serde_json::from_str(&data[0]).expect("chunk");
    assert_eq!(first["choices"][0]["delta"]["role"], "assistant");

    let passages = get_json(&h, "/memproxy/v1/users/kite/agents/default/archival").await;
    assert!(
        passages.to_string().contains("Flies kites on Sundays."),
        "{passages}"
    );
}

#[tokio::test]
async fn a_long_streamed_turn_that_fails_ends_with_an_error_event_and_stores_no_half_turn() {
    let h = harness_with(|c| c.explicit.stream_keepalive = Duration::from_millis(100)).await;
    h.mock.push(Reply::Stall(
        Duration::from_millis(600),
        Box::new(Reply::Error {
            status: 503,
            message: "The model is overloaded.".to_owned(),
            headers: vec![],
        }),
    ));
    let response = stream_turn(&h, "busy", "Hello?").await;
    assert_eq!(response.status(), 200, "the stream had started");
    let events = events(response).await;
    assert_eq!(events[0], COMMENT);
    let last: Value = serde_json::from_str(
        events
            .last()
            .and_then(|e| e.strip_prefix("data: "))
            .expect("an error event"),
    )
    .expect("json");
    assert_eq!(
        last["error"]["message"], "The model is overloaded.",
        "{last}"
    );
    let log = get_json(&h, "/memproxy/v1/users/busy/agents/default/messages").await;
    assert_eq!(log["data"].as_array().map(Vec::len), Some(0), "{log}");
}

#[tokio::test]
async fn a_quick_streamed_turn_is_answered_whole_with_its_headers() {
    let h = harness_with(|c| c.explicit.stream_keepalive = Duration::from_secs(30)).await;
    h.mock.push(send("Hi!"));
    let response = stream_turn(&h, "quick", "Hello").await;
    assert_eq!(response.headers()["x-memproxy-steps"], "1");
    let events = events(response).await;
    assert!(events.iter().all(|e| e.starts_with("data: ")), "{events:?}");
}

#[tokio::test]
async fn streamed_and_whole_answers_carry_the_same_reply_and_usage() {
    let h = harness_with(|_| {}).await;
    h.mock.push(call(
        "archival_memory_insert",
        json!({"content": "Likes kites.", "request_heartbeat": true}),
    ));
    h.mock
        .push(send("Kites are great, and now I know you like them."));
    let whole = say(&h, "ha", "I like kites.").await;

    h.mock.push(call(
        "archival_memory_insert",
        json!({"content": "Likes kites.", "request_heartbeat": true}),
    ));
    h.mock
        .push(send("Kites are great, and now I know you like them."));
    let response = h.client.post(h.url("/explicit/v1/chat/completions"))
        .header("x-memproxy-user", "hb")
        .json(&json!({"model": "mock-model", "stream": true, "stream_options": {"include_usage": true},
                      "messages": [{"role": "user", "content": "I like kites."}]}))
        .send().await.expect("answer");
    assert_eq!(response.status(), 200);
    assert!(response.headers()["content-type"]
        .to_str()
        .expect("ct")
        .starts_with("text/event-stream"));
    let data = sse_data(response).await;
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"));
    let chunks: Vec<Value> = data
        .iter()
        .filter_map(|d| serde_json::from_str(d).ok())
        .collect();
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    let finish = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["finish_reason"].as_str())
        .collect::<Vec<_>>();
    assert_eq!(finish, ["stop"]);
    assert_eq!(streamed_content(&data), reply_of(&whole));
    // Usage is summed over the turn's steps, streamed or not.
    let usage = chunks.last().expect("usage chunk")["usage"].clone();
    for (user, usage) in [("hb", usage), ("ha", whole["usage"].clone())] {
        let trace = steps(&h, user, "default").await;
        let prompt: i64 = trace
            .iter()
            .filter_map(|s| s["prompt_tokens"].as_i64())
            .sum();
        assert!(prompt > 0);
        assert_eq!(usage["prompt_tokens"], prompt, "{user}");
        // The mock bills 8 completion tokens per tool call: two steps.
        assert_eq!(usage["completion_tokens"], 16, "{user}");
    }

    // Without include_usage: no usage chunk.
    h.mock.push(send("Short."));
    let response = h.client.post(h.url("/explicit/v1/chat/completions"))
        .header("x-memproxy-user", "hc")
        .json(&json!({"model": "mock-model", "stream": true, "messages": [{"role": "user", "content": "hi"}]}))
        .send().await.expect("answer");
    let data = sse_data(response).await;
    assert!(data.iter().all(|d| !d.contains("\"usage\"")), "{data:?}");
    assert_eq!(streamed_content(&data), "Short.");
}

#[tokio::test]
async fn an_upstream_failure_mid_turn_is_relayed_and_the_retry_is_clean() {
    let h = harness_with(|_| {}).await;
    h.mock.push(call(
        "core_memory_append",
        json!({"label": "human", "content": "Has a cat.", "request_heartbeat": true}),
    ));
    h.mock.push(Reply::Error {
        status: 503,
        message: "The model is overloaded.".to_owned(),
        headers: vec![],
    });
    let response = ask(
        &h,
        "io",
        "default",
        json!([{"role": "user", "content": "I have a cat."}]),
    )
    .await;
    assert_eq!(response.status(), 503);
    let body: Value = response.json().await.expect("json");
    assert_eq!(body["error"]["message"], "The model is overloaded.");
    let log = get_json(&h, "/memproxy/v1/users/io/agents/default/messages").await;
    assert_eq!(
        log["data"].as_array().expect("log").len(),
        0,
        "a failed turn leaves no half turn"
    );
    assert!(statuses(&steps(&h, "io", "default").await)
        .contains(&"(upstream):upstream_error".to_owned()));

    h.mock.push(send("A cat, lovely."));
    say(&h, "io", "I have a cat.").await;
    let last = model_requests(&h).pop().expect("request");
    let said: Vec<Value> = user_payloads(&last)
        .into_iter()
        .filter(|p| p["type"] == "user_message")
        .collect();
    assert_eq!(said.len(), 1, "the retried message is in the queue once");
    assert!(
        system_of(&last).contains("Has a cat."),
        "the completed edit stayed"
    );
}

#[tokio::test]
async fn bad_input_gets_openai_errors() {
    let h = harness_with(|_| {}).await;
    let response = ask(
        &h,
        "ju",
        "default",
        json!([
            {"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}
        ]),
    )
    .await;
    assert_eq!(response.status(), 400);
    crate::common::assert_openai_error(&response.json().await.expect("json"), "invalid_request");

    let response = h
        .client
        .post(h.url("/v1/chat/completions"))
        .header("x-memproxy-mode", "explicit")
        .header("x-memproxy-conversation", "agent:default")
        .json(&json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .expect("answer");
    assert_eq!(response.status(), 400);

    let tiny = harness_with(|c| c.explicit.context_window_tokens = 600).await;
    let response = ask(
        &tiny,
        "ju",
        "default",
        json!([{"role": "user", "content": "hi"}]),
    )
    .await;
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.expect("json");
    crate::common::assert_openai_error(&body, "context_length_exceeded");
    assert!(body["error"]["message"]
        .as_str()
        .expect("m")
        .contains("600-token context window"));
}
