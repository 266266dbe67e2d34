//! Secure by default: memproxy never serves a network address without proxy keys unless told to,
//! shows no secret on `/readyz`, and a proxy key never reaches another tenant's memories through
//! any management route, the export, the simulator or the chat routes.

use std::sync::Arc;

use memproxy::config::Secret;
use memproxy::mock::MockUpstream;
use serde_json::{json, Value};
use tokio::net::TcpListener;

use crate::common::{get_json, harness_with, test_config, Harness, NoHook};

#[tokio::test]
async fn a_network_address_without_proxy_keys_is_refused_with_the_ways_out() {
    let mock = MockUpstream::start().await.expect("mock");
    for admin_key in [None, Some(Secret::new("adm-only"))] {
        let data = tempfile::tempdir().expect("data");
        let mut config = test_config(&mock, data.path());
        config.auth.admin_key = admin_key.clone();
        let listener = TcpListener::bind("0.0.0.0:0").await.expect("bind");
        let refused = memproxy::server::start_on(listener, config, Arc::new(NoHook)).await;
        let message = match refused {
            Ok(_) => panic!("memproxy served 0.0.0.0 with no proxy keys ({admin_key:?})"),
            Err(error) => error.to_string(),
        };
        for way_out in [
            "MEMPROXY_API_KEYS",
            "MEMPROXY_ADMIN_KEY",
            "MEMPROXY_ALLOW_UNAUTHENTICATED=true",
            "127.0.0.1",
        ] {
            assert!(message.contains(way_out), "{way_out} in: {message}");
        }
        assert!(!message.contains("adm-only"), "{message}");
    }
    // The same rule when the config is loaded (`serve`, `check-config`).
    let env = |name: &str| (name == "MEMPROXY_LISTEN").then(|| "0.0.0.0:8080".to_owned());
    let loaded = memproxy::config::Config::load(None, &env, &Default::default());
    assert!(loaded.is_err(), "{loaded:?}");
    let env = |name: &str| match name {
        "MEMPROXY_LISTEN" => Some("[::]:8080".to_owned()),
        "MEMPROXY_API_KEYS" => Some("acme:k1".to_owned()),
        _ => None,
    };
    memproxy::config::Config::load(None, &env, &Default::default()).expect("keys set: fine");
}

#[tokio::test]
async fn the_opt_out_serves_the_network_with_a_warning_and_no_secret_on_readyz() {
    let mock = MockUpstream::start().await.expect("mock");
    let data = tempfile::tempdir().expect("data");
    let mut config = test_config(&mock, data.path());
    config.auth.allow_unauthenticated = true;
    config.upstream.api_key = Some(Secret::new("sk-upstream-SECRET"));
    config.upstream.url = mock.base_url().replace("http://", "http://bob:pw-SECRET@");
    let listener = TcpListener::bind("0.0.0.0:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let proxy = memproxy::server::start_on(listener, config, Arc::new(NoHook))
        .await
        .expect("the opt-out starts");
    let readyz = reqwest::get(format!("http://127.0.0.1:{port}/readyz"))
        .await
        .expect("readyz");
    assert_eq!(readyz.status(), 200);
    let body = readyz.text().await.expect("body");
    let parsed: Value = serde_json::from_str(&body).expect("json");
    let warning = parsed["auth"]["warning"].as_str().unwrap_or_default();
    assert!(warning.contains("without proxy keys"), "{body}");
    assert!(!body.contains("SECRET"), "{body}");
    proxy.shutdown().await;
}

const SECRET: &str = "PLUMTREE";

async fn call(
    h: &Harness,
    key: &str,
    tenant: Option<&str>,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (u16, String) {
    let mut request = h.client.request(method, h.url(path)).bearer_auth(key);
    if let Some(tenant) = tenant {
        request = request.header("x-memproxy-tenant", tenant);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.expect("answer");
    let status = response.status().as_u16();
    (status, response.text().await.expect("body"))
}

/// A call with acme's own key.
async fn acme(
    h: &Harness,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (u16, String) {
    call(h, "k-acme", None, method, path, body).await
}

/// Acme's user alice, with the secret in a memory, a past turn, a core block and a passage.
async fn acme_with_secrets() -> (Harness, i64, i64, String) {
    let h = harness_with(|c| {
        c.auth.api_keys = vec![Secret::new("acme:k-acme"), Secret::new("globex:k-globex")];
        c.auth.admin_key = Some(Secret::new("k-admin"));
    })
    .await;
    let (status, added) = acme(
        &h,
        reqwest::Method::POST,
        "/memproxy/v1/users/alice/memories",
        Some(json!({"text": format!("Alice's secret word is {SECRET}."), "kind": "fact"})),
    )
    .await;
    assert_eq!(status, 201, "{added}");
    let memory = serde_json::from_str::<Value>(&added).expect("json")["id"]
        .as_i64()
        .expect("id");
    let (status, _) = acme(
        &h,
        reqwest::Method::PUT,
        "/memproxy/v1/users/alice/agents/default/blocks/human",
        Some(json!({"value": format!("Alice whispers {SECRET}.")})),
    )
    .await;
    assert_eq!(status, 200);
    let (status, passage) = acme(
        &h,
        reqwest::Method::POST,
        "/memproxy/v1/users/alice/agents/default/archival",
        Some(json!({"text": format!("Archive: {SECRET}.")})),
    )
    .await;
    assert!(status < 300, "{status} {passage}");
    let passage = serde_json::from_str::<Value>(&passage).expect("json")["id"]
        .as_i64()
        .expect("passage id");
    let chat = h
        .client
        .post(h.url("/implicit/v1/chat/completions"))
        .bearer_auth("k-acme")
        .header("x-memproxy-user", "alice")
        .json(&json!({"model": "m", "messages": [{"role": "user", "content": format!("Remember {SECRET}.")}]}))
        .send()
        .await
        .expect("chat");
    assert_eq!(chat.status(), 200);
    let (_, conversations) = acme(
        &h,
        reqwest::Method::GET,
        "/memproxy/v1/users/alice/conversations",
        None,
    )
    .await;
    let conversations: Value = serde_json::from_str(&conversations).expect("json");
    let conversation = conversations["data"][0]["id"]
        .as_str()
        .expect("acme's chat is listed")
        .to_owned();
    (h, memory, passage, conversation)
}

#[tokio::test]
async fn a_proxy_key_never_reaches_another_tenants_memories_on_any_route() {
    let (h, memory, passage, conversation) = acme_with_secrets().await;
    let spec = get_json(&h, "/memproxy/v1/openapi.json").await;
    let paths = spec["paths"].as_object().expect("paths");
    let mut tried = 0;
    for (path, operations) in paths {
        for method in operations.as_object().expect("operations").keys() {
            let concrete = path
                .replace("{user}", "alice")
                .replace("{agent}", "default")
                .replace("{label}", "human")
                .replace("{conversation}", &conversation)
                .replace(
                    "{id}",
                    &if path.contains("archival") {
                        passage
                    } else {
                        memory
                    }
                    .to_string(),
                )
                .replace("{position}", "0");
            let concrete = if concrete.ends_with("/steps") && !concrete.contains("/users/") {
                format!("{concrete}?user=alice")
            } else {
                concrete
            };
            let method =
                reqwest::Method::from_bytes(method.to_uppercase().as_bytes()).expect("method");
            let body = match concrete.as_str() {
                p if p.ends_with("/search") => Some(json!({"query": "secret word"})),
                "/memproxy/v1/simulate" => Some(json!({"user": "alice", "strategy": "implicit",
                    "request": {"model": "m", "messages": [{"role": "user", "content": "What is my secret word?"}]}})),
                p if p.ends_with("/memories/") || method == reqwest::Method::PATCH => {
                    Some(json!({"text": "overwritten by globex"}))
                }
                _ if method == reqwest::Method::POST || method == reqwest::Method::PUT => {
                    Some(json!({"text": "written by globex", "value": "written by globex"}))
                }
                _ => None,
            };
            // Globex's key, for itself and claiming to act for acme.
            for tenant in [None, Some("acme")] {
                let (status, text) = call(
                    &h,
                    "k-globex",
                    tenant,
                    method.clone(),
                    &concrete,
                    body.clone(),
                )
                .await;
                assert!(
                    !text.contains(SECRET),
                    "{method} {concrete} (tenant {tenant:?}) answered {status} with acme's data: {text}"
                );
                if tenant.is_some() {
                    assert_eq!(
                        status, 401,
                        "{method} {concrete}: acting for acme is refused"
                    );
                }
                tried += 1;
            }
        }
    }
    assert!(tried >= 40, "{tried}");
    // Globex's chat as "alice" gets none of acme's memories injected.
    let chat = h
        .client
        .post(h.url("/implicit/v1/chat/completions"))
        .bearer_auth("k-globex")
        .header("x-memproxy-user", "alice")
        .json(&json!({"model": "m", "messages": [{"role": "user", "content": "What is my secret word? Remember?"}]}))
        .send()
        .await
        .expect("chat");
    assert_eq!(chat.status(), 200);
    let upstream = h.mock.chat_requests(None);
    let last = upstream.last().expect("a request").to_string();
    assert!(!last.contains(SECRET), "{last}");
    // Everything of acme's is still there after globex called every route, writes included.
    let (status, export) = acme(
        &h,
        reqwest::Method::GET,
        "/memproxy/v1/users/alice/export",
        None,
    )
    .await;
    assert_eq!(status, 200);
    for piece in [
        format!("Alice's secret word is {SECRET}."),
        format!("Alice whispers {SECRET}."),
        format!("Archive: {SECRET}."),
        format!("Remember {SECRET}."),
    ] {
        assert!(export.contains(&piece), "{piece} kept in: {export}");
    }
    assert!(!export.contains("globex"), "{export}");
}
