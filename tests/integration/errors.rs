//! Errors: bad input refused before the upstream, upstream failures relayed or mapped.

use std::time::{Duration, Instant};

use memproxy::hooks::Outcome;
use memproxy::mock::Reply;
use serde_json::{json, Value};

use crate::common::{assert_openai_error, chat, closed_port_url, harness, harness_with};

#[tokio::test]
async fn malformed_requests_get_400_without_calling_upstream() {
    let h = harness().await;
    let chat = "/v1/chat/completions";
    let cases: [(&str, &str, Option<&str>); 7] = [
        (chat, "{\"model\": \"m\", \"messages\": [", None),
        (chat, "{\"model\": \"m\"}", Some("messages")),
        (
            chat,
            "{\"model\": \"m\", \"messages\": []}",
            Some("messages"),
        ),
        (
            chat,
            "{\"messages\": [{\"role\": 7, \"content\": \"x\"}]}",
            Some("messages[0].role"),
        ),
        (
            chat,
            "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"stream\": \"yes\"}",
            Some("stream"),
        ),
        // Found by the fuzz target (tests/fuzz): a Responses body whose `user` is not a string
        // was a 500.
        ("/v1/responses", r#"{"user":false}"#, Some("user")),
        (
            "/v1/responses",
            r#"{"model":"m","input":"hi","user":7}"#,
            Some("user"),
        ),
    ];
    for (path, body, param) in cases {
        let response = h
            .client
            .post(h.url(path))
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .expect("answer");
        assert_eq!(response.status(), 400, "{body}");
        assert!(response.headers().contains_key("x-request-id"));
        let error: Value = response.json().await.expect("json");
        assert_openai_error(&error, "invalid_request");
        assert_eq!(error["error"]["param"].as_str(), param, "{body}");
    }
    assert!(
        h.mock.requests().is_empty(),
        "no bad request reached the upstream"
    );
}

#[tokio::test]
async fn oversized_body_gets_413() {
    let h = harness_with(|c| c.server.max_body_bytes = 4096).await;
    let response = h.post_chat(&chat(&"x".repeat(10_000))).await;
    assert_eq!(response.status(), 413);
    assert_openai_error(&response.json().await.expect("json"), "payload_too_large");
    assert!(h.mock.requests().is_empty());
    assert_eq!(h.post_chat(&chat("small")).await.status(), 200);
}

#[tokio::test]
async fn upstream_errors_are_relayed_with_status_body_and_retry_after() {
    let h = harness().await;
    let mut body = chat("hi");
    body["model"] = json!("mock-error-429");
    let response = h.post_chat(&body).await;
    assert_eq!(response.status(), 429);
    assert_eq!(response.headers()["retry-after"], "7");
    let error: Value = response.json().await.expect("json");
    assert_eq!(
        error["error"]["message"],
        "Rate limit reached for mock-model."
    );
    let exchange = h.next_exchange().await;
    assert!(matches!(
        exchange.outcome,
        Outcome::UpstreamFailed {
            status: Some(429),
            ..
        }
    ));

    h.mock.push(Reply::Raw {
        status: 503,
        content_type: "text/html".into(),
        body: "<html>overloaded</html>".into(),
    });
    let response = h.post_chat(&chat("hi")).await;
    assert_eq!(response.status(), 503);
    assert_eq!(response.headers()["content-type"], "text/html");
    assert_eq!(
        response.text().await.expect("body"),
        "<html>overloaded</html>"
    );
}

#[tokio::test]
async fn unreachable_upstream_is_502() {
    let url = closed_port_url().await;
    let h = harness_with(|c| c.upstream.url = url).await;
    let response = h.post_chat(&chat("hi")).await;
    assert_eq!(response.status(), 502);
    assert_openai_error(
        &response.json().await.expect("json"),
        "upstream_unreachable",
    );
    let exchange = h.next_exchange().await;
    assert!(matches!(
        exchange.outcome,
        Outcome::UpstreamFailed { status: None, .. }
    ));

    let ready = h.client.get(h.url("/readyz")).send().await.expect("answer");
    assert_eq!(ready.status(), 503);
    let health = h
        .client
        .get(h.url("/healthz"))
        .send()
        .await
        .expect("answer");
    assert_eq!(health.status(), 200);
}

#[tokio::test]
async fn slow_upstream_is_504_at_the_configured_timeout() {
    let h = harness_with(|c| c.upstream.first_byte_timeout = Duration::from_millis(300)).await;
    h.mock.push(Reply::Stall(
        Duration::from_secs(20),
        Box::new(Reply::Text("late".into())),
    ));
    let started = Instant::now();
    let response = h.post_chat(&chat("hi")).await;
    let waited = started.elapsed();
    assert_eq!(response.status(), 504);
    assert_openai_error(&response.json().await.expect("json"), "upstream_timeout");
    // Functional bound, not a speed target: the stall is 20 s, the timeout 0.3 s.
    assert!(waited < Duration::from_secs(10), "gave up after {waited:?}");
}

#[tokio::test]
async fn unknown_routes_are_openai_shaped_404s() {
    let h = harness().await;
    let response = h.client.get(h.url("/nope")).send().await.expect("answer");
    assert_eq!(response.status(), 404);
    assert!(response.headers().contains_key("x-request-id"));
    assert_openai_error(&response.json().await.expect("json"), "unknown_route");
}
