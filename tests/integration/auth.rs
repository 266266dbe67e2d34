//! Proxy keys: required when configured, mapped to tenants, never forwarded upstream.

use memproxy::config::Secret;
use serde_json::Value;

use crate::common::{assert_openai_error, chat, harness, harness_with};

#[tokio::test]
async fn with_keys_a_valid_key_is_required_and_never_forwarded() {
    let h = harness_with(|c| {
        c.auth.api_keys = vec![Secret::new("acme:mp-acme-key"), Secret::new("mp-other")];
        c.upstream.api_key = Some(Secret::new("sk-upstream"));
    })
    .await;
    let send = |key: Option<&'static str>| {
        let mut request = h
            .client
            .post(h.url("/v1/chat/completions"))
            .json(&chat("hi"));
        if let Some(key) = key {
            request = request.bearer_auth(key);
        }
        request.send()
    };
    for key in [None, Some("wrong"), Some("acme:mp-acme-key")] {
        let response = send(key).await.expect("answer");
        assert_eq!(response.status(), 401, "{key:?}");
        assert!(response.headers().contains_key("www-authenticate"));
        assert_openai_error(
            &response.json::<Value>().await.expect("json"),
            "invalid_api_key",
        );
    }
    let models = h
        .client
        .get(h.url("/v1/models"))
        .send()
        .await
        .expect("answer");
    assert_eq!(models.status(), 401, "the generic relay is protected too");
    assert!(h.mock.requests().is_empty());

    assert_eq!(
        send(Some("mp-acme-key")).await.expect("answer").status(),
        200
    );
    assert_eq!(h.next_exchange().await.scope.tenant, "acme");
    assert_eq!(send(Some("mp-other")).await.expect("answer").status(), 200);
    assert!(h.next_exchange().await.scope.tenant.starts_with("key-"));

    for received in h.mock.requests() {
        assert_eq!(received.headers["authorization"], "Bearer sk-upstream");
    }
    // Liveness and metrics stay open for probes.
    assert_eq!(
        h.client
            .get(h.url("/healthz"))
            .send()
            .await
            .expect("answer")
            .status(),
        200
    );
}

#[tokio::test]
async fn with_auth_on_and_no_upstream_key_nothing_is_forwarded() {
    let h = harness_with(|c| c.auth.api_keys = vec![Secret::new("mp-key")]).await;
    let response = h
        .client
        .post(h.url("/v1/chat/completions"))
        .bearer_auth("mp-key")
        .json(&chat("hi"))
        .send()
        .await
        .expect("answer");
    assert_eq!(response.status(), 200);
    assert!(h.mock.requests()[0].headers.get("authorization").is_none());
}

#[tokio::test]
async fn with_auth_off_the_clients_own_key_reaches_the_upstream() {
    let h = harness().await;
    let response = h
        .client
        .post(h.url("/v1/chat/completions"))
        .bearer_auth("sk-users-own-openai-key")
        .json(&chat("hi"))
        .send()
        .await
        .expect("answer");
    assert_eq!(response.status(), 200);
    assert_eq!(
        h.mock.requests()[0].headers["authorization"],
        "Bearer sk-users-own-openai-key"
    );
    assert_eq!(h.next_exchange().await.scope.tenant, "default");
}
