//! A stored response belongs to the tenant and user who made it, with a native Responses
//! upstream (which keeps every tenant's responses under memproxy's one key) and without: another
//! tenant's key and another user's restricted key get 404 in the Responses shape on `GET` and
//! `DELETE /v1/responses/{id}` and on `previous_response_id`, and nothing of it reaches the
//! upstream.

use memproxy::config::Secret;
use memproxy::upstream::{ApiUpstream, AuthHeader};
use serde_json::{json, Value};

use crate::common::{assert_openai_error, harness_with, Harness};

const BOB: &str = "sk-acme-bob-only";
const ACME: &str = "sk-acme-all";
const OTHER: &str = "sk-globex-all";

fn keys(c: &mut memproxy::config::Config) {
    c.auth.api_keys = vec![
        Secret::new(format!("acme/bob:{BOB}")),
        Secret::new(format!("acme:{ACME}")),
        Secret::new(format!("globex:{OTHER}")),
    ];
}

fn native(c: &mut memproxy::config::Config) {
    keys(c);
    c.upstream.responses = Some(ApiUpstream {
        url: c.upstream.url.clone(),
        api_key: Some(Secret::new("sk-resp-upstream")),
        auth_header: Some(AuthHeader::Authorization),
    });
}

async fn call(
    h: &Harness,
    method: reqwest::Method,
    path: &str,
    key: &str,
    user: Option<&str>,
    body: Option<Value>,
) -> (u16, Value) {
    let mut request = h
        .client
        .request(method, h.url(path))
        .header("authorization", format!("Bearer {key}"));
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

/// How many requests the upstream saw on its Responses routes.
fn upstream_responses(h: &Harness) -> usize {
    h.mock
        .requests()
        .iter()
        .filter(|r| r.path_and_query.starts_with("/v1/responses"))
        .count()
}

async fn others_cannot_reach_bobs_response(h: &Harness) {
    let told = json!({"model": "gpt-x", "input": "My PIN is 4711."});
    let (status, made) = call(
        h,
        reqwest::Method::POST,
        "/v1/responses",
        BOB,
        None,
        Some(told),
    )
    .await;
    assert_eq!(status, 200, "{made}");
    let id = made["id"].as_str().expect("id").to_owned();
    let path = format!("/v1/responses/{id}");
    let seen_before = upstream_responses(h);
    let strangers = [(OTHER, Some("bob")), (ACME, Some("alice")), (ACME, None)];
    for (key, user) in strangers {
        for method in [reqwest::Method::GET, reqwest::Method::DELETE] {
            let (status, body) = call(h, method.clone(), &path, key, user, None).await;
            assert_eq!(status, 404, "{method} as {user:?}: {body}");
            assert_openai_error(&body, "not_found");
        }
        let continued = json!({"model": "gpt-x", "previous_response_id": id,
            "input": "What is my PIN?"});
        let (status, body) = call(
            h,
            reqwest::Method::POST,
            "/v1/responses",
            key,
            user,
            Some(continued),
        )
        .await;
        assert_eq!(status, 400, "{body}");
        assert_openai_error(&body, "previous_response_not_found");
    }
    assert_eq!(upstream_responses(h), seen_before, "nothing went upstream");
    // Bob reads and deletes his own.
    let (status, body) = call(h, reqwest::Method::GET, &path, BOB, None, None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["id"], id.as_str());
    let (status, _) = call(h, reqwest::Method::DELETE, &path, BOB, None, None).await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn with_a_native_upstream_a_stored_response_is_its_owners_only() {
    let h = harness_with(native).await;
    others_cannot_reach_bobs_response(&h).await;
}

#[tokio::test]
async fn translated_a_stored_response_is_its_owners_only() {
    let h = harness_with(keys).await;
    others_cannot_reach_bobs_response(&h).await;
}
