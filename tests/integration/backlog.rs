//! A long existing chat pointed at memproxy for the first time: its backlog is stored at once and
//! embedded in the background, the first request is already compacted and finds old turns by
//! keyword, and nothing on the request path embeds more than the question.

use serde_json::{json, Value};

use crate::common::{eventually, harness_with};

#[tokio::test]
async fn a_cold_long_chat_is_compacted_at_once_and_its_backlog_embedded_later() {
    let h = harness_with(|_| {}).await;
    let mut messages = vec![json!({"role": "system", "content": "You are a helpful assistant."})];
    for n in 0..100 {
        let said = if n == 3 {
            "My favourite mountain is Kilimanjaro.".to_owned()
        } else {
            format!(
                "Here is small talk number {n} about the weather, the news, the traffic on the \
                 way to work this morning and what we might cook for dinner tonight."
            )
        };
        messages.push(json!({"role": "user", "content": said}));
        messages.push(json!({"role": "assistant", "content": format!("Noted, item {n}.")}));
    }
    messages.push(json!({"role": "user", "content": "Which mountain is my favourite?"}));
    let response = h
        .client
        .post(h.url("/implicit/v1/chat/completions"))
        .header("x-memproxy-user", "sam")
        .json(&json!({"model": "mock-model", "messages": messages}))
        .send()
        .await
        .expect("answer");
    assert_eq!(response.status(), 200);
    assert!(
        response.headers().get("x-memproxy-degraded").is_none(),
        "the pre-processor finished in time"
    );
    let number = |name: &str| -> u64 {
        response.headers()[name]
            .to_str()
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    let (before, after) = (
        number("x-memproxy-prompt-tokens-before"),
        number("x-memproxy-prompt-tokens-after"),
    );
    assert!(after < before / 2, "compacted at once: {before} -> {after}");
    // The old turn is out of the window and found by keyword, before any backlog is embedded.
    let sent = h.mock.chat_requests(None);
    let prompt = sent.last().expect("the chat request").to_string();
    assert!(prompt.contains("Kilimanjaro"), "{prompt}");
    // Nothing embedded more than a small batch at once: the request path embedded only the
    // question; the 201 stored turns went through the background embedder.
    let largest = h
        .mock
        .requests()
        .iter()
        .filter(|r| r.path_and_query.ends_with("/embeddings"))
        .map(|r| match &r.json()["input"] {
            Value::Array(items) => items.len(),
            _ => 1,
        })
        .max()
        .unwrap_or(0);
    assert!(largest <= 4, "an embedding call of {largest} texts");
    eventually("the backlog is embedded and found by vector", || async {
        let found: Value = h
            .client
            .post(h.url("/memproxy/v1/users/sam/memories/search"))
            .json(
                &json!({"query": "My favourite mountain is Kilimanjaro.", "corpora": ["message"],
                          "keyword": false, "top_k": 3, "min_similarity": 0.9}),
            )
            .send()
            .await
            .expect("search")
            .json()
            .await
            .expect("json");
        found.to_string().contains("Kilimanjaro")
    })
    .await;
}
