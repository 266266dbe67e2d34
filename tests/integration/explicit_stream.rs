//! Explicit mode, long streamed turns: a turn that outlasts `explicit.stream_keepalive` starts its
//! SSE answer at once and keeps it alive with comments until the reply (or an error) is ready.

use std::time::Duration;

use memproxy::mock::Reply;
use serde_json::{json, Value};

use crate::common::{get_json, harness_with, streamed_content};
use crate::explicit::{call, send};

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
