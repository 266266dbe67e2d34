//! Non-streaming chat completions: faithful relay, pass-through of the request, the hook, modes.

use memproxy::hooks::Outcome;
use memproxy::mock::Reply;
use serde_json::{json, Value};

use crate::common::{assert_openai_error, chat, harness};

#[tokio::test]
async fn relays_the_upstream_body_byte_for_byte() {
    let h = harness().await;
    // Odd spacing, escapes and key order: a re-serialising proxy would change these bytes.
    let upstream_body = "{ \"id\":\"x\",\n  \"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"caf\\u00e9 \u{1F600}\"},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2,\"total_tokens\":5}, \"zz\":1.50 }";
    h.mock.push(Reply::Raw {
        status: 200,
        content_type: "application/json".into(),
        body: upstream_body.into(),
    });
    let response = h.post_chat(&chat("hi")).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["x-memproxy-mode"], "passthrough");
    assert_eq!(response.text().await.expect("body"), upstream_body);

    let exchange = h.next_exchange().await;
    assert_eq!(exchange.outcome, Outcome::Completed);
    assert_eq!(exchange.replies[0].text, "café 😀");
    assert_eq!(exchange.usage.map(|u| u.total()), Some(5));
}

#[tokio::test]
async fn passes_unknown_fields_and_tools_through_unchanged() {
    let h = harness().await;
    let body = json!({
        "model": "mock-tool",
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": [{"type": "text", "text": "weather?"}], "x_part": true},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "c0", "type": "function",
                "function": {"name": "get_weather", "arguments": "{\"city\":\"Rome\"}"}}]},
            {"role": "tool", "tool_call_id": "c0", "content": "sunny"},
        ],
        "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}],
        "tool_choice": "auto",
        "response_format": {"type": "text"},
        "n": 1,
        "temperature": 0.25,
        "vendor_extension": {"nested": [1, 2, 3]},
        "seed": 12345678901234_i64,
    });
    let response = h.post_chat(&body).await;
    assert_eq!(response.status(), 200);
    let answer: Value = response.json().await.expect("json");
    assert_eq!(
        answer["choices"][0]["message"]["tool_calls"][0]["function"]["name"],
        "get_weather"
    );

    let received = h.mock.requests();
    assert_eq!(received.len(), 1);
    assert_eq!(
        received[0].json(),
        body,
        "the upstream got exactly the client's request"
    );
    assert_eq!(received[0].path_and_query, "/v1/chat/completions");

    let exchange = h.next_exchange().await;
    let call = &exchange.replies[0].calls[0];
    assert_eq!(
        (call.name.as_str(), call.arguments.as_str()),
        ("get_weather", r#"{"city":"Paris"}"#)
    );
    assert_eq!(
        exchange.replies[0].finish,
        Some(memproxy::conversation::reply::Finish::ToolCalls)
    );
}

#[tokio::test]
async fn identifies_user_and_conversation_for_the_hook() {
    let h = harness().await;
    let mut body = chat("remember me");
    body["user"] = json!("body-user");
    h.post_chat(&body).await;
    let first = h.next_exchange().await;
    assert_eq!(
        (first.scope.tenant.as_str(), first.scope.user.as_str()),
        ("default", "body-user")
    );

    let response = h
        .client
        .post(h.url("/v1/chat/completions"))
        .header("x-memproxy-user", "alice")
        .header("x-memproxy-conversation", "chat-42")
        .json(&body)
        .send()
        .await
        .expect("answer");
    assert_eq!(response.status(), 200);
    let second = h.next_exchange().await;
    assert_eq!(second.scope.user, "alice");
    assert_eq!(second.scope.conversation, "chat-42");
    let forwarded = &h.mock.requests()[1];
    assert!(
        forwarded
            .headers
            .keys()
            .all(|k| !k.as_str().starts_with("x-memproxy-")),
        "memproxy's own headers stay at the proxy"
    );
}

#[tokio::test]
async fn picks_the_mode_from_header_route_or_config() {
    let h = harness().await;
    let response = h
        .client
        .post(h.url("/passthrough/v1/chat/completions"))
        .json(&chat("hi"))
        .send()
        .await
        .expect("answer");
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["x-memproxy-mode"], "passthrough");

    let response = h
        .client
        .post(h.url("/explicit/v1/chat/completions"))
        .json(&chat("hi"))
        .send()
        .await
        .expect("answer");
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["x-memproxy-mode"], "explicit");
    let reached = h.mock.requests().len();

    let response = h
        .client
        .post(h.url("/v1/chat/completions"))
        .header("x-memproxy-mode", "telepathy")
        .json(&chat("hi"))
        .send()
        .await
        .expect("answer");
    assert_eq!(response.status(), 400);
    assert_openai_error(&response.json().await.expect("json"), "invalid_request");

    let response = h
        .client
        .post(h.url("/telepathy/v1/chat/completions"))
        .json(&chat("hi"))
        .send()
        .await
        .expect("answer");
    assert_eq!(response.status(), 404);
    assert_openai_error(&response.json().await.expect("json"), "unknown_route");
    assert_eq!(
        h.mock.requests().len(),
        reached,
        "refused requests never reach the upstream"
    );
}
