//! Streaming: event-by-event faithful relay, the tee, usage handling, and every way a stream ends.

use std::time::Duration;

use futures_util::StreamExt;
use memproxy::hooks::Outcome;
use memproxy::mock::Reply;
use serde_json::{json, Value};

use crate::common::{harness, harness_with, sse_data, stream_chat, streamed_content};

#[tokio::test]
async fn relays_events_byte_for_byte() {
    let h = harness().await;
    // CRLF endings, a comment, a multi-line data event, odd spacing: all must arrive unchanged.
    let events = vec![
        ": keep-alive\n\n".to_owned(),
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\r\n\r\n".to_owned(),
        "data:{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"}}]}\n\n".to_owned(),
        "data: {\"choices\":[{\"index\":0,\n".to_owned(),
        "data: \"delta\":{\"content\":\"lo \\u00e9\"}}]}\n\n".to_owned(),
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],  \"usage\":{\"prompt_tokens\":1,\"completion_tokens\":2,\"total_tokens\":3}}\n\n".to_owned(),
        "data: [DONE]\n\n".to_owned(),
    ];
    h.mock.push(Reply::RawStream(events.clone()));
    // The client asks for usage itself, so memproxy changes nothing.
    let mut body = stream_chat("hi");
    body["stream_options"] = json!({"include_usage": true});
    let response = h.post_chat(&body).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    assert_eq!(response.headers()["x-accel-buffering"], "no");
    assert_eq!(response.text().await.expect("body"), events.concat());
    assert_eq!(
        h.mock.requests()[0].json(),
        body,
        "request forwarded unchanged"
    );

    let exchange = h.next_exchange().await;
    assert_eq!(exchange.outcome, Outcome::Completed);
    assert_eq!(exchange.replies[0].text, "Hello é");
    assert_eq!(exchange.usage.map(|u| u.total()), Some(3));
}

#[tokio::test]
async fn events_arrive_as_they_are_generated() {
    let h = harness().await;
    let pieces: Vec<String> = (0..5).map(|i| format!("p{i} ")).collect();
    h.mock.push(Reply::SlowStream {
        pieces,
        delay: Duration::from_millis(800),
    });
    let response = h.post_chat(&stream_chat("hi")).await;
    let mut body = response.bytes_stream();
    // The first content must be readable long before the ~4 s the whole stream takes: a
    // buffering proxy would deliver nothing until the end.
    let mut seen = String::new();
    let first = tokio::time::timeout(Duration::from_millis(3000), async {
        while !seen.contains("p0") {
            let chunk = body.next().await.expect("more").expect("chunk");
            seen.push_str(&String::from_utf8_lossy(&chunk));
        }
    })
    .await;
    assert!(
        first.is_ok(),
        "first piece not relayed before the stream ended: {seen}"
    );
    assert!(!seen.contains("[DONE]"));
}

#[tokio::test]
async fn usage_is_observed_but_hidden_unless_the_client_asked() {
    let h = harness().await;
    for include in [None, Some(false), Some(true)] {
        let mut body = stream_chat("count my tokens");
        if let Some(include) = include {
            body["stream_options"] = json!({"include_usage": include});
        }
        let data = sse_data(h.post_chat(&body).await).await;
        assert_eq!(streamed_content(&data), "echo: count my tokens");
        let chunks: Vec<Value> = data
            .iter()
            .filter_map(|d| serde_json::from_str(d).ok())
            .collect();
        let with_usage_key = chunks.iter().filter(|c| c.get("usage").is_some()).count();
        if include == Some(true) {
            assert_eq!(
                with_usage_key,
                chunks.len(),
                "include_usage=true: every chunk has usage"
            );
            assert!(chunks
                .last()
                .is_some_and(|c| c["usage"]["total_tokens"].as_u64() > Some(0)));
        } else {
            assert_eq!(
                with_usage_key, 0,
                "include_usage={include:?}: no usage reaches the client"
            );
        }
        assert_eq!(data.last().map(String::as_str), Some("[DONE]"));

        let upstream_body = h.mock.requests().last().expect("request").json();
        assert_eq!(
            upstream_body["stream_options"]["include_usage"], true,
            "memproxy asks for usage"
        );
        let exchange = h.next_exchange().await;
        assert!(
            exchange.usage.is_some_and(|u| u.completion_tokens > 0),
            "{include:?}"
        );
    }
}

#[tokio::test]
async fn without_usage_observation_the_request_is_untouched() {
    let h = harness_with(|c| c.upstream.observe_stream_usage = false).await;
    let body = stream_chat("hi");
    let data = sse_data(h.post_chat(&body).await).await;
    assert_eq!(streamed_content(&data), "echo: hi");
    assert_eq!(h.mock.requests()[0].json(), body);
    assert!(h.next_exchange().await.usage.is_none());
}

#[tokio::test]
async fn streamed_tool_calls_are_reassembled() {
    let h = harness().await;
    h.mock.push(Reply::ToolCalls(vec![
        (
            "get_weather".into(),
            r#"{"city":"Paris","unit":"C"}"#.into(),
        ),
        ("get_time".into(), r#"{"tz":"Europe/Paris"}"#.into()),
    ]));
    let data = sse_data(h.post_chat(&stream_chat("weather and time?")).await).await;
    let fragments = data.iter().filter(|d| d.contains("\"arguments\"")).count();
    assert!(fragments >= 4, "arguments arrived in fragments: {data:?}");
    let exchange = h.next_exchange().await;
    let calls: Vec<(&str, &str, &str)> = exchange.replies[0]
        .calls
        .iter()
        .map(|c| (c.id.as_str(), c.name.as_str(), c.arguments.as_str()))
        .collect();
    assert_eq!(
        calls,
        [
            ("call_0", "get_weather", r#"{"city":"Paris","unit":"C"}"#),
            ("call_1", "get_time", r#"{"tz":"Europe/Paris"}"#),
        ]
    );
    assert_eq!(
        exchange.replies[0].finish,
        Some(memproxy::conversation::reply::Finish::ToolCalls)
    );
}

#[tokio::test]
async fn a_broken_upstream_stream_ends_with_an_error_event() {
    let h = harness().await;
    h.mock.push(Reply::BrokenStream(vec![
        "partial ".into(),
        "answer".into(),
    ]));
    let data = sse_data(h.post_chat(&stream_chat("hi")).await).await;
    assert_eq!(streamed_content(&data), "partial answer");
    let last: Value = serde_json::from_str(data.last().expect("events")).expect("json");
    assert_eq!(last["error"]["code"], "upstream_broken", "{last}");
    let exchange = h.next_exchange().await;
    assert!(matches!(exchange.outcome, Outcome::UpstreamFailed { .. }));
    assert_eq!(
        exchange.replies[0].text, "partial answer",
        "what was generated is kept"
    );
}

#[tokio::test]
async fn a_silent_upstream_stream_times_out_with_an_error_event() {
    let h = harness_with(|c| c.upstream.idle_timeout = Duration::from_millis(300)).await;
    h.mock.push(Reply::StallingStream(vec!["thinking".into()]));
    let data = tokio::time::timeout(
        Duration::from_secs(10),
        sse_data(h.post_chat(&stream_chat("hi")).await),
    )
    .await
    .expect("the stream ends instead of hanging");
    let last: Value = serde_json::from_str(data.last().expect("events")).expect("json");
    assert_eq!(last["error"]["code"], "upstream_timeout", "{last}");
}

#[tokio::test]
async fn client_disconnect_cancels_upstream_and_keeps_the_partial_reply() {
    let h = harness().await;
    let pieces: Vec<String> = (0..200).map(|i| format!("w{i} ")).collect();
    h.mock.push(Reply::SlowStream {
        pieces,
        delay: Duration::from_millis(30),
    });
    let response = h.post_chat(&stream_chat("tell me a long story")).await;
    let mut body = response.bytes_stream();
    let mut seen = String::new();
    while !seen.contains("w2 ") {
        let chunk = body.next().await.expect("more").expect("chunk");
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    drop(body); // the client goes away mid-stream

    assert!(
        h.mock.wait_abandoned(1, Duration::from_secs(10)).await,
        "the upstream stream was not cancelled"
    );
    let exchange = h.next_exchange().await;
    assert_eq!(exchange.outcome, Outcome::ClientDisconnected);
    let partial = &exchange.replies[0].text;
    assert!(
        partial.starts_with("w0 w1 w2 "),
        "partial reply kept: {partial:?}"
    );
    assert!(
        !partial.contains("w199"),
        "the stream did not run to its end"
    );
}
