//! The management API over real HTTP: memories, search, blocks, export/import, forgetting a user,
//! and who may call it.

use memproxy::config::Secret;
use serde_json::{json, Value};

use crate::common::{assert_openai_error, harness, harness_with, Harness};

async fn call(h: &Harness, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let method = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
    let mut request = h.client.request(method, h.url(path));
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.expect("answer");
    let status = response.status().as_u16();
    let text = response.text().await.expect("body");
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

#[tokio::test]
async fn memories_can_be_added_searched_edited_and_removed() {
    let h = harness().await;
    let base = "/memproxy/v1/users/alice/memories";
    let (status, added) = call(
        &h,
        "POST",
        base,
        Some(json!({"text": "Alice plays the oboe in an orchestra."})),
    )
    .await;
    assert_eq!(status, 201, "{added}");
    let id = added["id"].as_i64().expect("id");
    let (status, again) = call(
        &h,
        "POST",
        base,
        Some(json!({"text": "alice plays the oboe in an orchestra."})),
    )
    .await;
    assert_eq!(
        (status, again["created"].as_bool()),
        (200, Some(false)),
        "duplicate reported"
    );
    call(
        &h,
        "POST",
        base,
        Some(json!({"text": "Alice's cat is called Pixel."})),
    )
    .await;

    let (status, found) = call(
        &h,
        "POST",
        &format!("{base}/search"),
        Some(json!({"query": "which instrument does she play oboe", "top_k": 3})),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        found["data"][0]["text"], "Alice plays the oboe in an orchestra.",
        "{found}"
    );

    let (status, _) = call(
        &h,
        "PATCH",
        &format!("{base}/{id}"),
        Some(json!({"text": "Alice plays the bassoon."})),
    )
    .await;
    assert_eq!(status, 200);
    let (status, _) = call(&h, "DELETE", &format!("{base}/{id}?invalidate=true"), None).await;
    assert_eq!(status, 200);
    let (_, live) = call(&h, "GET", base, None).await;
    assert_eq!(live["data"].as_array().map(Vec::len), Some(1));
    let (_, all) = call(&h, "GET", &format!("{base}?include_invalid=true"), None).await;
    assert_eq!(all["data"].as_array().map(Vec::len), Some(2));
    let (_, events) = call(&h, "GET", "/memproxy/v1/users/alice/events", None).await;
    let actions: Vec<&str> = events["data"]
        .as_array()
        .expect("events")
        .iter()
        .filter_map(|e| e["action"].as_str())
        .collect();
    assert_eq!(actions, ["add", "add", "update", "invalidate"]);

    let (status, error) = call(&h, "DELETE", &format!("{base}/not-a-number"), None).await;
    assert_eq!(status, 400);
    assert_openai_error(&error, "invalid_request");
    let (status, error) = call(&h, "DELETE", &format!("{base}/99999"), None).await;
    assert_eq!(status, 404);
    assert_openai_error(&error, "not_found");
    let (status, error) = call(&h, "POST", base, Some(json!({"txt": "typo"}))).await;
    assert_eq!(status, 400);
    assert_openai_error(&error, "invalid_request");
}

#[tokio::test]
async fn core_blocks_respect_their_limit() {
    let h = harness().await;
    let path = "/memproxy/v1/users/alice/agents/helper/blocks/human";
    let (status, _) = call(
        &h,
        "PUT",
        path,
        Some(json!({"value": "Name: Alice", "char_limit": 100})),
    )
    .await;
    assert_eq!(status, 200);
    let (status, error) = call(
        &h,
        "PUT",
        path,
        Some(json!({"value": "x".repeat(101), "char_limit": 100})),
    )
    .await;
    assert_eq!(status, 400);
    assert!(
        error["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("limit")),
        "{error}"
    );
    let (_, blocks) = call(
        &h,
        "GET",
        "/memproxy/v1/users/alice/agents/helper/blocks",
        None,
    )
    .await;
    let label = path.rsplit('/').next().unwrap_or_default();
    let edited = blocks["data"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|b| b["label"] == label)
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        edited["value"], "Name: Alice",
        "the failed edit changed nothing: {blocks}"
    );
}

#[tokio::test]
async fn export_import_and_forgetting_a_user_over_http() {
    let h = harness().await;
    for text in ["Alice was born in Oslo.", "Alice is vegetarian."] {
        call(
            &h,
            "POST",
            "/memproxy/v1/users/alice/memories",
            Some(json!({"text": text})),
        )
        .await;
    }
    let export = h
        .client
        .get(h.url("/memproxy/v1/users/alice/export"))
        .send()
        .await
        .expect("answer");
    assert_eq!(export.headers()["content-type"], "application/x-ndjson");
    let jsonl = export.text().await.expect("body");
    assert_eq!(jsonl.lines().count(), 3, "{jsonl}");

    let import = |user: &str, body: Vec<u8>| {
        h.client
            .post(h.url(&format!("/memproxy/v1/users/{user}/import")))
            .body(body)
            .send()
    };
    let response = import("alice2", jsonl.clone().into_bytes())
        .await
        .expect("answer");
    assert_eq!(response.status(), 200);
    let copy = h
        .client
        .get(h.url("/memproxy/v1/users/alice2/export"))
        .send()
        .await
        .expect("answer");
    let copied = copy.text().await.expect("body");
    assert_eq!(
        copied.lines().skip(1).collect::<Vec<_>>(),
        jsonl.lines().skip(1).collect::<Vec<_>>()
    );

    let broken = format!("{jsonl}{{\"type\":\"memory\"}}\n");
    let response = import("carol", broken.into_bytes()).await.expect("answer");
    assert_eq!(response.status(), 400);
    let error: Value = response.json().await.expect("json");
    assert!(
        error["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("line 4")),
        "{error}"
    );
    let response = import("carol", vec![0xff, 0xfe, b'{'])
        .await
        .expect("answer");
    assert_eq!(response.status(), 400);
    let (status, _) = call(&h, "GET", "/memproxy/v1/users/carol/export", None).await;
    assert_eq!(status, 404, "failed imports wrote nothing");

    let (status, _) = call(&h, "DELETE", "/memproxy/v1/users/alice", None).await;
    assert_eq!(status, 200);
    let (status, _) = call(&h, "GET", "/memproxy/v1/users/alice/export", None).await;
    assert_eq!(status, 404);
    let (_, users) = call(&h, "GET", "/memproxy/v1/users", None).await;
    assert_eq!(users["data"], json!(["alice2"]));
    // The database itself stays (SQLite: its file in the data directory).
    assert!(crate::common::on_postgres() || h.data.path().join("memproxy.db").exists());
}

#[tokio::test]
async fn admin_key_acts_for_any_tenant_and_proxy_keys_for_their_own() {
    let h = harness_with(|c| {
        c.auth.admin_key = Some(Secret::new("adm-1"));
        c.auth.api_keys = vec![Secret::new("acme:mp-acme"), Secret::new("globex:mp-globex")];
    })
    .await;
    let send = |key: Option<&'static str>,
                tenant: Option<&'static str>,
                method: reqwest::Method,
                path: &'static str,
                body: Option<Value>| {
        let mut request = h.client.request(method, h.url(path));
        if let Some(key) = key {
            request = request.bearer_auth(key);
        }
        if let Some(tenant) = tenant {
            request = request.header("x-memproxy-tenant", tenant);
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        request.send()
    };
    use reqwest::Method;
    let memories = "/memproxy/v1/users/alice/memories";
    let body = || Some(json!({"text": "Acme's Alice likes tea."}));
    assert_eq!(
        send(None, None, Method::POST, memories, body())
            .await
            .expect("answer")
            .status(),
        401
    );
    assert_eq!(
        send(Some("mp-acme"), Some("globex"), Method::GET, memories, None)
            .await
            .expect("answer")
            .status(),
        401,
        "a proxy key cannot act for another tenant"
    );
    assert_eq!(
        send(Some("mp-acme"), None, Method::POST, memories, body())
            .await
            .expect("answer")
            .status(),
        201
    );

    let listed = |key, tenant| async move {
        let response = send(Some(key), tenant, Method::GET, memories, None)
            .await
            .expect("answer");
        response.json::<Value>().await.expect("json")["data"]
            .as_array()
            .map(Vec::len)
    };
    assert_eq!(listed("mp-acme", None).await, Some(1));
    assert_eq!(
        listed("mp-globex", None).await,
        Some(0),
        "globex's alice is another user"
    );
    assert_eq!(listed("adm-1", Some("acme")).await, Some(1));
    assert_eq!(
        listed("adm-1", None).await,
        Some(0),
        "the admin defaults to tenant 'default'"
    );
}

#[tokio::test]
async fn vector_indexes_past_the_open_limit_close_and_reopen_intact() {
    crate::sqlite_only!("usearch index files (PostgreSQL searches with pgvector)");
    let h = harness_with(|c| c.memory.open_vector_indexes = 2).await;
    let facts = [
        ("u0", "u0 plays the oboe in an orchestra."),
        ("u1", "u1 keeps bees on a rooftop."),
        ("u2", "u2 is learning Icelandic."),
        ("u3", "u3 restores old motorcycles."),
        ("u4", "u4 grows chilli peppers."),
    ];
    for (user, fact) in facts {
        let path = format!("/memproxy/v1/users/{user}/memories");
        let (status, added) = call(&h, "POST", &path, Some(json!({"text": fact}))).await;
        assert_eq!(status, 201, "{added}");
    }
    // u0's index was closed long ago; a change to it reopens it from its saved file.
    let path = "/memproxy/v1/users/u0/memories";
    let (status, _) = call(
        &h,
        "POST",
        path,
        Some(json!({"text": "u0 has a cat called Pixel."})),
    )
    .await;
    assert_eq!(status, 201);

    for (user, fact) in facts {
        let path = format!("/memproxy/v1/users/{user}/memories/search");
        let query = json!({"query": fact, "top_k": 5, "corpora": ["memory"]});
        let (status, found) = call(&h, "POST", &path, Some(query)).await;
        assert_eq!(status, 200, "{found}");
        let hits = found["data"].as_array().expect("hits");
        assert_eq!(hits[0]["text"], fact, "{user}: {found}");
        assert!(
            hits[0]["vector_rank"].is_u64(),
            "{user}: found by vector: {found}"
        );
        let own = format!("{user} ");
        assert!(
            hits.iter()
                .all(|hit| hit["text"].as_str().is_some_and(|t| t.starts_with(&own))),
            "{user} sees only its own memories: {found}"
        );
    }
    let query = json!({"query": "what pet does u0 have", "top_k": 5, "corpora": ["memory"]});
    let (_, found) = call(
        &h,
        "POST",
        "/memproxy/v1/users/u0/memories/search",
        Some(query),
    )
    .await;
    assert!(
        found["data"]
            .as_array()
            .expect("hits")
            .iter()
            .any(|hit| hit["text"] == "u0 has a cat called Pixel."),
        "{found}"
    );

    let metrics = crate::common::get_text(&h, "/metrics").await;
    let open: usize = metrics
        .lines()
        .find_map(|line| line.strip_prefix("memproxy_vector_indexes_open "))
        .and_then(|value| value.trim().parse().ok())
        .expect("the gauge is exported");
    assert!((1..=2).contains(&open), "{open} indexes open, limit 2");
}
