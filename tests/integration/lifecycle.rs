//! Request ids, metrics, and graceful shutdown.

use std::time::Duration;

use futures_util::StreamExt;
use memproxy::hooks::Outcome;
use memproxy::mock::Reply;

use crate::common::{chat, harness, stream_chat};

#[tokio::test]
async fn every_response_has_a_request_id() {
    let h = harness().await;
    let ok = h.post_chat(&chat("hi")).await;
    let id = ok.headers()["x-request-id"]
        .to_str()
        .expect("ascii")
        .to_owned();
    assert_eq!(id.len(), 36, "a UUID: {id}");
    assert_eq!(
        ok.headers()["x-upstream-request-id"],
        "chatcmpl-mock-0",
        "the upstream's id is kept under its own name"
    );
    assert_eq!(h.next_exchange().await.request_id, id);
    let given = h
        .client
        .get(h.url("/healthz"))
        .header("x-request-id", "client-chosen-1")
        .send()
        .await
        .expect("answer");
    assert_eq!(given.headers()["x-request-id"], "client-chosen-1");
}

#[tokio::test]
async fn metrics_count_requests_and_overhead() {
    let h = harness().await;
    h.post_chat(&chat("hi")).await;
    h.post_chat(&serde_json::json!({"model": "m"})).await;
    h.next_exchange().await;
    let text = h
        .client
        .get(h.url("/metrics"))
        .send()
        .await
        .expect("answer")
        .text()
        .await
        .expect("text");
    let has = |needle: &str| text.lines().any(|line| line.starts_with(needle));
    assert!(
        has(r#"memproxy_requests_total{route="/v1/chat/completions",status="200"} 1"#),
        "{text}"
    );
    assert!(
        has(r#"memproxy_requests_total{route="/v1/chat/completions",status="400"} 1"#),
        "{text}"
    );
    assert!(
        has(
            r#"memproxy_overhead_seconds_count{mode="passthrough",route="/v1/chat/completions"} 1"#
        ),
        "{text}"
    );
    assert!(
        has(r#"memproxy_upstream_seconds_count{route="/v1/chat/completions"} 1"#),
        "{text}"
    );
    assert!(
        has(r#"memproxy_exchanges_total{mode="passthrough",outcome="completed"} 1"#),
        "{text}"
    );
}

#[tokio::test]
async fn shutdown_finishes_in_flight_streams_then_refuses_connections() {
    let h = harness().await;
    let pieces: Vec<String> = (0..10).map(|i| format!("s{i} ")).collect();
    h.mock.push(Reply::SlowStream {
        pieces,
        delay: Duration::from_millis(100),
    });
    let response = h.post_chat(&stream_chat("hi")).await;
    let mut body = response.bytes_stream();
    let first = body.next().await.expect("a first chunk").expect("chunk");
    assert!(!first.is_empty());

    let url = h.proxy.url();
    let crate::common::Harness {
        proxy,
        client,
        exchanges,
        mock: _mock,
        ..
    } = h;
    let stopping = tokio::spawn(proxy.shutdown());

    let mut rest = String::new();
    while let Some(chunk) = body.next().await {
        rest.push_str(&String::from_utf8_lossy(
            &chunk.expect("the stream is not cut"),
        ));
    }
    assert!(
        rest.contains("s9 ") && rest.ends_with("data: [DONE]\n\n"),
        "{rest}"
    );
    tokio::time::timeout(Duration::from_secs(10), stopping)
        .await
        .expect("shutdown completes")
        .expect("shutdown task");

    let exchange = exchanges
        .lock()
        .await
        .try_recv()
        .expect("the hook ran before shutdown returned");
    assert_eq!(exchange.outcome, Outcome::Completed);
    let refused = client.get(format!("{url}/healthz")).send().await;
    assert!(refused.is_err(), "no new connections after shutdown");
}
