//! A proxy key restricted to one user (`tenant/user:key`): it acts as that user on every API
//! without naming them, is refused (403, in each API's shape) when a request names another user,
//! and reaches only that user's routes of the management API. (MCP: `mcp.rs`.)

use memproxy::config::Secret;
use memproxy::mock::Reply;
use serde_json::{json, Value};

use crate::common::{assert_openai_error, chat, harness_with, Harness};

const TENANT_KEY: &str = "mp-acme";
const ALICE_KEY: &str = "mp-alice";

async fn send(
    h: &Harness,
    method: &str,
    path: &str,
    key: &str,
    user: Option<&str>,
    body: Option<Value>,
) -> (u16, Value) {
    let method = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
    let mut request = h.client.request(method, h.url(path)).bearer_auth(key);
    if let Some(user) = user {
        request = request.header("x-memproxy-user", user);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.expect("answer");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn a_key_for_one_user_acts_as_that_user_and_only_them() {
    let h = harness_with(|c| {
        c.auth.api_keys = vec![
            Secret::new(format!("acme:{TENANT_KEY}")),
            Secret::new(format!("acme/alice:{ALICE_KEY}")),
        ];
    })
    .await;

    // Chat Completions: no header needed; the body's `user` does not change who it is.
    let mut body = chat("I play the cello.");
    body["user"] = json!("bob");
    h.mock.push(Reply::Text("Nice.".into()));
    let (status, _) = send(
        &h,
        "POST",
        "/v1/chat/completions",
        ALICE_KEY,
        None,
        Some(body),
    )
    .await;
    assert_eq!(status, 200);
    let scope = h.next_exchange().await.scope;
    assert_eq!(
        (scope.tenant.as_str(), scope.user.as_str()),
        ("acme", "alice")
    );
    h.mock.push(Reply::Text("Hi.".into()));
    let (status, _) = send(
        &h,
        "POST",
        "/v1/chat/completions",
        ALICE_KEY,
        Some("alice"),
        Some(chat("hi")),
    )
    .await;
    assert_eq!(status, 200, "naming its own user is fine");
    assert_eq!(h.next_exchange().await.scope.user, "alice");

    // Naming another user is refused on every API, in its own shape, before the upstream.
    let upstream_calls = h.mock.requests().len();
    let (status, error) = send(
        &h,
        "POST",
        "/v1/chat/completions",
        ALICE_KEY,
        Some("bob"),
        Some(chat("hi")),
    )
    .await;
    assert_eq!(status, 403);
    assert_openai_error(&error, "forbidden");
    assert_eq!(error["error"]["type"], "permission_error");
    let (status, error) = send(
        &h,
        "POST",
        "/implicit/v1/responses",
        ALICE_KEY,
        Some("bob"),
        Some(json!({"model": "mock-model", "input": "hi"})),
    )
    .await;
    assert_eq!(status, 403, "{error}");
    assert_openai_error(&error, "forbidden");
    let (status, error) = send(
        &h,
        "POST",
        "/implicit/v1/messages",
        ALICE_KEY,
        Some("bob"),
        Some(json!({"model": "mock-model", "max_tokens": 50,
            "messages": [{"role": "user", "content": "hi"}]})),
    )
    .await;
    assert_eq!(status, 403, "{error}");
    assert_eq!(error["type"], "error", "{error}");
    assert_eq!(error["error"]["type"], "permission_error", "{error}");
    assert_eq!(h.mock.requests().len(), upstream_calls);

    // The tenant key writes a memory for Bob.
    let (status, _) = send(
        &h,
        "POST",
        "/memproxy/v1/users/bob/memories",
        TENANT_KEY,
        None,
        Some(json!({"text": "Bob owns a sailboat."})),
    )
    .await;
    assert_eq!(status, 201);

    // Management API: Alice's routes only; the user list shows her alone.
    let (status, _) = send(
        &h,
        "POST",
        "/memproxy/v1/users/alice/memories",
        ALICE_KEY,
        None,
        Some(json!({"text": "Alice plays the cello."})),
    )
    .await;
    assert_eq!(status, 201);
    let (status, listed) = send(&h, "GET", "/memproxy/v1/users", ALICE_KEY, None, None).await;
    assert_eq!(status, 200);
    assert_eq!(listed["data"], json!(["alice"]), "{listed}");
    let (status, all) = send(&h, "GET", "/memproxy/v1/users", TENANT_KEY, None, None).await;
    assert_eq!(status, 200);
    assert_eq!(all["data"].as_array().map(Vec::len), Some(2), "{all}");
    let (status, mine) = send(
        &h,
        "GET",
        "/memproxy/v1/users/alice/memories",
        ALICE_KEY,
        None,
        None,
    )
    .await;
    assert_eq!(status, 200);
    assert!(
        mine.to_string().contains("Alice plays the cello."),
        "{mine}"
    );
    for (method, path, body) in [
        ("GET", "/memproxy/v1/users/bob/memories", None),
        ("GET", "/memproxy/v1/users/bob/export", None),
        ("DELETE", "/memproxy/v1/users/bob", None),
        (
            "POST",
            "/memproxy/v1/users/bob/memories",
            Some(json!({"text": "Bob hates sailing."})),
        ),
        // An encoded name is the same name.
        ("GET", "/memproxy/v1/users/b%6Fb/memories", None),
        ("GET", "/memproxy/v1/jobs", None),
        ("GET", "/memproxy/v1/agents/helper/steps", None),
    ] {
        let (status, error) = send(&h, method, path, ALICE_KEY, None, body).await;
        assert_eq!(status, 403, "{method} {path}: {error}");
        assert_openai_error(&error, "forbidden");
    }
    // Bob's memory is as it was.
    let (_, bobs) = send(
        &h,
        "GET",
        "/memproxy/v1/users/bob/memories",
        TENANT_KEY,
        None,
        None,
    )
    .await;
    let texts: Vec<&str> = bobs["data"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["text"].as_str())
        .collect();
    assert_eq!(texts, ["Bob owns a sailboat."]);
}
