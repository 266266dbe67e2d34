//! The generic `/v1/*` relay: method, path, query, body, status and streams pass verbatim.

use std::time::Duration;

use futures_util::StreamExt;
use serde_json::Value;

use crate::common::{harness, harness_with};

#[tokio::test]
async fn models_and_other_paths_are_relayed_verbatim() {
    let h = harness().await;
    let models: Value = h
        .client
        .get(h.url("/v1/models"))
        .send()
        .await
        .expect("answer")
        .json()
        .await
        .expect("json");
    assert_eq!(models["data"][0]["id"], "mock-model");

    // A chat app configured with a mode-prefixed base URL lists models there too.
    let prefixed = h
        .client
        .get(h.url("/passthrough/v1/models"))
        .send()
        .await
        .expect("answer");
    assert_eq!(prefixed.status(), 200);

    let response = h
        .client
        .post(h.url("/v1/completions?api-version=2024-01&x=1"))
        .header("content-type", "application/json")
        .header("openai-organization", "org-7")
        .body(r#"{"input":"hello","model":"e"}"#)
        .send()
        .await
        .expect("answer");
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["x-mock-echo"], "1");
    let echoed: Value = response.json().await.expect("json");
    assert_eq!(echoed["method"], "POST");
    assert_eq!(echoed["path"], "/v1/completions?api-version=2024-01&x=1");
    assert_eq!(echoed["body"], r#"{"input":"hello","model":"e"}"#);
    let received = h.mock.requests().into_iter().last().expect("request");
    assert_eq!(received.headers["openai-organization"], "org-7");

    let deleted = h
        .client
        .delete(h.url("/v1/files/file-1"))
        .send()
        .await
        .expect("answer");
    assert_eq!(deleted.status(), 200);
    assert_eq!(
        deleted.json::<Value>().await.expect("json")["method"],
        "DELETE"
    );

    let unknown_mode = h
        .client
        .get(h.url("/telepathy/v1/models"))
        .send()
        .await
        .expect("answer");
    assert_eq!(unknown_mode.status(), 404);
}

#[tokio::test]
async fn relayed_streams_pass_through() {
    let h = harness().await;
    let response = h
        .client
        .post(h.url("/v1/completions?stream=3"))
        .body("{}")
        .send()
        .await
        .expect("answer");
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let mut body = response.bytes_stream();
    let mut text = String::new();
    while let Some(chunk) = body.next().await {
        text.push_str(&String::from_utf8_lossy(&chunk.expect("chunk")));
    }
    assert_eq!(
        text,
        "data: {\"n\":0}\n\ndata: {\"n\":1}\n\ndata: {\"n\":2}\n\n"
    );
}

#[tokio::test]
async fn a_relayed_body_that_stalls_is_cut_after_the_idle_timeout() {
    let h = harness_with(|c| c.upstream.idle_timeout = Duration::from_millis(300)).await;
    let response = h
        .client
        .post(h.url("/v1/completions?stream=2&hang=1"))
        .body("{}")
        .send()
        .await
        .expect("answer");
    assert_eq!(response.status(), 200);
    let mut body = response.bytes_stream();
    let mut text = String::new();
    // Functional bound, not a speed target: the upstream would stall forever, the timeout is 0.3 s.
    let ended = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(chunk) = body.next().await {
            match chunk {
                Ok(bytes) => text.push_str(&String::from_utf8_lossy(&bytes)),
                Err(_) => return Err(()),
            }
        }
        Ok(())
    })
    .await
    .expect("the body ends instead of hanging");
    assert_eq!(
        text, "data: {\"n\":0}\n\ndata: {\"n\":1}\n\n",
        "what was sent arrives"
    );
    assert!(
        ended.is_err(),
        "the cut body reads as incomplete, not as a clean end"
    );
}
