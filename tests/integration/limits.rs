//! `[limits]`: messages per request, memory length, agents per user, blocks per agent and the
//! per-key request rate. Each refusal comes in the shape of the API the request came in on, names
//! the config key that raises it, reaches no upstream, and changes nothing stored.

use memproxy::config::Secret;
use memproxy::limits::Limits;
use serde_json::{json, Value};

use crate::common::{
    assert_openai_error, chat, get_json, get_text, harness_with, memories, Harness,
};
use crate::explicit::{ask, send};

fn small_limits() -> Limits {
    Limits {
        max_messages: 3,
        max_memory_chars: 40,
        max_agents_per_user: 2,
        max_blocks_per_agent: 3,
        max_shared_blocks_per_user: 1,
        ..Limits::default()
    }
}

async fn post(h: &Harness, path: &str, body: &Value) -> reqwest::Response {
    h.client
        .post(h.url(path))
        .header("x-memproxy-user", "ana")
        .json(body)
        .send()
        .await
        .expect("answer")
}

fn turns(count: usize) -> Vec<Value> {
    (0..count)
        .map(|i| json!({"role": if i % 2 == 0 {"user"} else {"assistant"}, "content": format!("turn {i}")}))
        .collect()
}

#[tokio::test]
async fn too_many_messages_are_refused_on_every_api_in_its_shape() {
    let h = harness_with(|c| {
        c.limits = small_limits();
        c.mode = memproxy::mode::Mode::Implicit;
    })
    .await;
    let chat_body = json!({"model": "mock-model", "messages": turns(5)});
    let response = post(&h, "/v1/chat/completions", &chat_body).await;
    assert_eq!(response.status(), 400);
    let error: Value = response.json().await.expect("json");
    assert_openai_error(&error, "limit_exceeded");
    let message = error["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("5 messages") && message.contains("limits.max_messages"),
        "{message}"
    );

    let responses = json!({"model": "mock-model", "input": turns(5)});
    let response = post(&h, "/v1/responses", &responses).await;
    assert_eq!(response.status(), 400);
    assert_openai_error(&response.json().await.expect("json"), "limit_exceeded");

    let messages = json!({"model": "mock-model", "max_tokens": 100, "messages": turns(5)});
    let response = post(&h, "/v1/messages", &messages).await;
    assert_eq!(response.status(), 400);
    let error: Value = response.json().await.expect("json");
    assert_eq!(error["type"], "error", "{error}");
    assert_eq!(error["error"]["type"], "invalid_request_error");
    assert!(error["error"]["message"]
        .as_str()
        .is_some_and(|m| m.contains("limits.max_messages")));

    assert!(h.mock.requests().is_empty(), "nothing reached the upstream");
    let users = get_json(&h, "/memproxy/v1/users").await;
    assert_eq!(users["data"], json!([]), "nothing was stored: {users}");

    // At the limit, all is well.
    let ok = json!({"model": "mock-model", "messages": turns(3)});
    assert_eq!(post(&h, "/v1/chat/completions", &ok).await.status(), 200);
}

#[tokio::test]
async fn a_memory_longer_than_the_limit_is_refused_and_an_import_stores_nothing() {
    let h = harness_with(|c| c.limits = small_limits()).await;
    let path = "/memproxy/v1/users/ana/memories";
    let fits = post(&h, path, &json!({"text": "Ana keeps bees in the garden."})).await;
    assert_eq!(fits.status(), 201, "{:?}", fits.text().await);
    let long = "Ana keeps bees, hens and a very old tortoise called Bert.";
    let response = post(&h, path, &json!({"text": long})).await;
    assert_eq!(response.status(), 400);
    let error: Value = response.json().await.expect("json");
    assert_openai_error(&error, "limit_exceeded");
    assert!(error["error"]["message"]
        .as_str()
        .is_some_and(|m| m.contains("limits.max_memory_chars")));

    let file = [
        json!({"type": "header", "format": "memproxy-export", "version": 1}),
        json!({"type": "memory", "text": "Ana likes figs.", "kind": "fact", "sources": [],
            "created_at_ms": 1000, "updated_at_ms": 1000, "valid_until_ms": null}),
        json!({"type": "memory", "text": long, "kind": "fact", "sources": [],
            "created_at_ms": 1000, "updated_at_ms": 1000, "valid_until_ms": null}),
    ]
    .iter()
    .map(|line| format!("{line}\n"))
    .collect::<String>();
    let response = h
        .client
        .post(h.url("/memproxy/v1/users/ana/import"))
        .body(file)
        .send()
        .await
        .expect("answer");
    assert_eq!(response.status(), 400);
    assert_openai_error(&response.json().await.expect("json"), "limit_exceeded");
    assert_eq!(
        memories(&h, "ana").await,
        vec!["Ana keeps bees in the garden.".to_owned()],
        "the import is all or nothing"
    );
}

#[tokio::test]
async fn a_user_gets_at_most_the_agents_and_an_agent_the_blocks_of_the_limits() {
    let h = harness_with(|c| c.limits = small_limits()).await;
    let hello = json!([{"role": "user", "content": "hello"}]);
    for agent in ["first", "second"] {
        h.mock.push(send("hi"));
        let response = ask(&h, "ana", agent, hello.clone()).await;
        assert_eq!(response.status(), 200, "{:?}", response.text().await);
    }
    let calls = h.mock.requests().len();
    let response = ask(&h, "ana", "third", hello.clone()).await;
    assert_eq!(response.status(), 400);
    let error: Value = response.json().await.expect("json");
    assert_openai_error(&error, "limit_exceeded");
    assert!(error["error"]["message"]
        .as_str()
        .is_some_and(|m| m.contains("limits.max_agents_per_user")));
    assert_eq!(h.mock.requests().len(), calls, "no model call for it");
    let tags = h
        .client
        .put(h.url("/memproxy/v1/users/ana/agents/third/tags"))
        .json(&json!({"tags": ["x"]}))
        .send()
        .await
        .expect("answer");
    assert_eq!(tags.status(), 400, "the management API applies it too");
    let listed = get_json(&h, "/memproxy/v1/users/ana/agents").await;
    let names: Vec<&str> = listed["data"]
        .as_array()
        .map(|a| a.iter().filter_map(|a| a["name"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(names, ["first", "second"], "{listed}");
    // An agent that exists stays usable; another user has their own count.
    h.mock.push(send("again"));
    assert_eq!(ask(&h, "ana", "first", hello.clone()).await.status(), 200);
    h.mock.push(send("hi bob"));
    assert_eq!(ask(&h, "bob", "third", hello).await.status(), 200);

    // persona and human, then one more block; a fourth label is one too many.
    let block = |label: &str| {
        h.client
            .put(h.url(&format!(
                "/memproxy/v1/users/ana/agents/first/blocks/{label}"
            )))
            .json(&json!({"value": "some notes"}))
            .send()
    };
    assert_eq!(block("notes").await.expect("answer").status(), 200);
    let response = block("plans").await.expect("answer");
    assert_eq!(response.status(), 400);
    let error: Value = response.json().await.expect("json");
    assert!(error["error"]["message"]
        .as_str()
        .is_some_and(|m| m.contains("limits.max_blocks_per_agent")));
    assert_eq!(
        block("notes").await.expect("answer").status(),
        200,
        "a block it has can be replaced"
    );
    let shared = h
        .client
        .put(h.url("/memproxy/v1/users/ana/blocks/team"))
        .json(&json!({"label": "team", "value": "The team ships on Fridays."}))
        .send()
        .await
        .expect("answer");
    assert_eq!(shared.status(), 200, "{:?}", shared.text().await);
    let attach = h
        .client
        .put(h.url("/memproxy/v1/users/ana/agents/first/shared/team"))
        .send()
        .await
        .expect("answer");
    assert_eq!(attach.status(), 400, "attaching counts as a block");
    let shared = |name: &str| {
        h.client
            .put(h.url(&format!("/memproxy/v1/users/ana/blocks/{name}")))
            .json(&json!({"value": "Notes shared by the user's agents."}))
            .send()
    };
    let second = shared("family").await.expect("answer");
    assert_eq!(second.status(), 400, "one shared block per user here");
    let error: Value = second.json().await.expect("json");
    assert!(error["error"]["message"]
        .as_str()
        .is_some_and(|m| m.contains("limits.max_shared_blocks_per_user")));
    assert_eq!(
        shared("team").await.expect("answer").status(),
        200,
        "an update fits"
    );
    let blocks = get_json(&h, "/memproxy/v1/users/ana/agents/first/blocks").await;
    assert_eq!(blocks["data"].as_array().map(Vec::len), Some(3), "{blocks}");
}

#[tokio::test]
async fn each_key_has_its_own_request_budget_and_a_spent_one_is_a_429_with_retry_after() {
    let h = harness_with(|c| {
        c.auth.api_keys = vec![Secret::new("acme:mp-ana"), Secret::new("acme:mp-bob")];
        c.limits.requests_per_minute = 6;
        c.limits.burst = 2;
    })
    .await;
    let chat_as = |key: &'static str| {
        h.client
            .post(h.url("/v1/chat/completions"))
            .bearer_auth(key)
            .json(&chat("hi"))
            .send()
    };
    for _ in 0..2 {
        assert_eq!(chat_as("mp-ana").await.expect("answer").status(), 200);
    }
    let calls = h.mock.requests().len();
    let refused = chat_as("mp-ana").await.expect("answer");
    assert_eq!(refused.status(), 429);
    let wait: u64 = refused.headers()["retry-after"]
        .to_str()
        .ok()
        .and_then(|v| v.parse().ok())
        .expect("retry-after in seconds");
    assert!((1..=10).contains(&wait), "one request every 10 s: {wait}");
    let error: Value = refused.json().await.expect("json");
    assert_eq!(error["error"]["type"], "rate_limit_error");
    assert_eq!(error["error"]["code"], "rate_limit_exceeded");
    assert!(error["error"]["message"]
        .as_str()
        .is_some_and(|m| m.contains("limits.requests_per_minute")));

    // The Messages API answers in Anthropic's shape, with the same header.
    let refused = h
        .client
        .post(h.url("/v1/messages"))
        .header("x-api-key", "mp-ana")
        .json(&json!({"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .expect("answer");
    assert_eq!(refused.status(), 429);
    assert!(refused.headers().contains_key("retry-after"));
    let error: Value = refused.json().await.expect("json");
    assert_eq!(error["type"], "error");
    assert_eq!(error["error"]["type"], "rate_limit_error");
    assert_eq!(
        h.mock.requests().len(),
        calls,
        "refused before the upstream"
    );

    assert_eq!(
        chat_as("mp-bob").await.expect("answer").status(),
        200,
        "Bob's budget is his own"
    );
    // A wrong key is still a 401, not a 429.
    assert_eq!(chat_as("nope").await.expect("answer").status(), 401);
    let metrics = get_text(&h, "/metrics").await;
    assert!(
        metrics.contains("memproxy_rate_limited_total 2"),
        "{metrics}"
    );
}

#[tokio::test]
async fn mcp_calls_spend_the_keys_budget_and_an_import_is_bounded_in_items() {
    let h = harness_with(|c| {
        c.auth.api_keys = vec![Secret::new("acme/ana:mp-ana-mcp")];
        c.limits.requests_per_minute = 6;
        c.limits.burst = 2;
        c.limits.max_import_items = 2;
    })
    .await;
    let add = |n: usize| {
        let call = json!({"jsonrpc": "2.0", "id": n, "method": "tools/call",
            "params": {"name": "add_memory", "arguments": {"text": format!("Ana owns {n} kayaks.")}}});
        h.client
            .post(h.url("/mcp"))
            .bearer_auth("mp-ana-mcp")
            .header("accept", "application/json, text/event-stream")
            .json(&call)
            .send()
    };
    // The budget the key's chats spend: one chat, one MCP call, then a 429 in JSON-RPC's shape.
    let chat = h
        .client
        .post(h.url("/v1/chat/completions"))
        .bearer_auth("mp-ana-mcp")
        .json(&chat("hi"))
        .send()
        .await
        .expect("answer");
    assert_eq!(chat.status(), 200);
    assert_eq!(add(1).await.expect("answer").status(), 200);
    let calls = h.mock.requests().len();
    let refused = add(2).await.expect("answer");
    assert_eq!(refused.status(), 429);
    assert!(refused.headers().contains_key("retry-after"));
    let error: Value = refused.json().await.expect("json");
    assert_eq!(error["jsonrpc"], "2.0", "{error}");
    assert_eq!(
        error["error"]["data"]["code"], "rate_limit_exceeded",
        "{error}"
    );
    assert_eq!(
        h.mock.requests().len(),
        calls,
        "no memory-LLM call past the budget"
    );

    // Three items, over limits.max_import_items = 2 (with the admin-less open management API).
    let open = harness_with(|c| c.limits.max_import_items = 2).await;
    let file: String = (0..3)
        .map(|n| {
            let line = json!({"type": "memory", "text": format!("Fact {n}."), "kind": "fact",
                "sources": [], "created_at_ms": 1000, "updated_at_ms": 1000, "valid_until_ms": null});
            format!("{line}\n")
        })
        .collect();
    let response = open
        .client
        .post(open.url("/memproxy/v1/users/ana/import"))
        .body(file)
        .send()
        .await
        .expect("answer");
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.expect("json");
    assert_openai_error(&body, "limit_exceeded");
    assert!(
        body.to_string().contains("limits.max_import_items"),
        "{body}"
    );
}
