//! The web console's server side: assets (embedded, with a strict content policy), the OpenAPI
//! document (every route in it answers), and the context simulator.

use memproxy::config::Secret;
use serde_json::{json, Value};

use crate::common::{get_json, harness_with, Harness};

async fn admin(
    h: &Harness,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> reqwest::Response {
    let mut request = h
        .client
        .request(method, h.url(path))
        .bearer_auth("admin-secret");
    if let Some(body) = body {
        request = request.json(&body);
    }
    request.send().await.expect("answer")
}

async fn seeded() -> Harness {
    let h = harness_with(|c| c.auth.admin_key = Some(Secret::new("admin-secret"))).await;
    let added = admin(
        &h,
        reqwest::Method::POST,
        "/memproxy/v1/users/ana/memories",
        Some(json!({"text": "Ana is allergic to peanuts.", "kind": "fact"})),
    )
    .await;
    assert_eq!(added.status(), 201);
    h
}

#[tokio::test]
async fn the_console_is_served_from_the_binary_with_a_strict_policy() {
    let h = seeded().await;
    for (path, kind) in [
        ("/ui", "text/html"),
        ("/ui/app.js", "text/javascript"),
        ("/ui/style.css", "text/css"),
    ] {
        let response = h.client.get(h.url(path)).send().await.expect("answer");
        assert_eq!(response.status(), 200, "{path}");
        assert!(response.headers()["content-type"]
            .to_str()
            .expect("type")
            .starts_with(kind));
        let policy = response.headers()["content-security-policy"]
            .to_str()
            .expect("csp");
        assert!(
            policy.contains("default-src 'self'") && !policy.contains("script-src 'unsafe-inline'")
        );
        // The SVG namespace is an identifier, never fetched.
        let body = response
            .text()
            .await
            .expect("body")
            .replace("\"http://www.w3.org/2000/svg\"", "");
        assert!(
            !body.contains("http://") && !body.contains("https://"),
            "{path} loads nothing from elsewhere"
        );
    }
    let script = h
        .client
        .get(h.url("/ui/app.js"))
        .send()
        .await
        .expect("js")
        .text()
        .await
        .expect("text");
    assert!(
        !script.contains("innerHTML"),
        "data is never written as HTML"
    );
    assert!(script.contains("sessionStorage") && !script.contains("localStorage"));
}

#[tokio::test]
async fn every_route_in_the_openapi_document_answers() {
    let h = seeded().await;
    let spec = get_json(&h, "/memproxy/v1/openapi.json").await;
    assert_eq!(spec["openapi"], "3.1.0");
    let paths = spec["paths"].as_object().expect("paths");
    assert!(paths.len() >= 20);
    for (path, operations) in paths {
        for method in operations.as_object().expect("operations").keys() {
            let concrete = path
                .replace("{user}", "ana")
                .replace("{agent}", "default")
                .replace("{label}", "human")
                .replace("{conversation}", "c1")
                .replace("{id}", "999999")
                .replace("{position}", "1");
            let method =
                reqwest::Method::from_bytes(method.to_uppercase().as_bytes()).expect("method");
            let response = h
                .client
                .request(method.clone(), h.url(&concrete))
                .send()
                .await
                .expect("answer");
            // Unauthenticated: the route exists (401, not 404 unknown_route).
            assert_eq!(response.status(), 401, "{method} {concrete}");
        }
    }
}

#[tokio::test]
async fn the_simulator_shows_the_payload_and_stores_nothing() {
    let h = seeded().await;
    let request = json!({"model": "m", "messages": [
        {"role": "system", "content": "You are a cook."},
        {"role": "user", "content": "Which snacks must I avoid because of my allergy to peanuts?"}
    ]});
    let implicit: Value = admin(
        &h,
        reqwest::Method::POST,
        "/memproxy/v1/simulate",
        Some(json!({"user": "ana", "strategy": "implicit", "request": request})),
    )
    .await
    .json()
    .await
    .expect("json");
    let payload = implicit["payload"].to_string();
    assert!(payload.contains("Ana is allergic to peanuts."), "{payload}");
    let sections: Vec<(&str, u64)> = implicit["sections"]
        .as_array()
        .expect("sections")
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap_or(""),
                s["tokens"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    let named = |name: &str| {
        sections
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, t)| *t)
            .unwrap_or(0)
    };
    assert!(
        named("memory") > 0 && named("instructions") > 0 && named("new message") > 0,
        "{sections:?}"
    );
    assert_eq!(
        sections.iter().map(|(_, t)| t).sum::<u64>(),
        implicit["tokens_after"].as_u64().expect("total")
    );
    assert_eq!(
        implicit["retrieved"][0]["text"],
        "Ana is allergic to peanuts."
    );
    assert!(implicit["retrieved"][0]["score"].as_f64().expect("score") > 0.0);

    let passthrough: Value = admin(
        &h,
        reqwest::Method::POST,
        "/memproxy/v1/simulate",
        Some(json!({"user": "ana", "strategy": "passthrough", "request": request})),
    )
    .await
    .json()
    .await
    .expect("json");
    assert_eq!(passthrough["payload"]["messages"], request["messages"]);

    let explicit: Value = admin(
        &h,
        reqwest::Method::POST,
        "/memproxy/v1/simulate",
        Some(json!({"user": "ana", "strategy": "explicit", "request": request})),
    )
    .await
    .json()
    .await
    .expect("json");
    let messages = explicit["payload"]["messages"]
        .as_array()
        .expect("messages");
    // Core memory is shown just before the new message (explicit.core_memory_at = "turn").
    assert!(messages[messages.len() - 2]["content"]
        .as_str()
        .expect("core memory")
        .contains("<persona"));
    assert!(messages.last().expect("new")["content"]
        .as_str()
        .expect("wrapped")
        .contains("\"type\":\"user_message\""));

    // Nothing was stored: no conversation, no agent, and the upstream never saw a request.
    let conversations: Value = admin(
        &h,
        reqwest::Method::GET,
        "/memproxy/v1/users/ana/conversations",
        None,
    )
    .await
    .json()
    .await
    .expect("json");
    assert_eq!(conversations["data"], json!([]));
    let agents: Value = admin(
        &h,
        reqwest::Method::GET,
        "/memproxy/v1/users/ana/agents",
        None,
    )
    .await
    .json()
    .await
    .expect("json");
    assert_eq!(agents["data"], json!([]));
    assert!(h.mock.chat_requests(None).is_empty());

    // Another tenant's admin view cannot see Ana's memories through the simulator.
    let other: Value = h
        .client
        .post(h.url("/memproxy/v1/simulate"))
        .bearer_auth("admin-secret")
        .header("x-memproxy-tenant", "other")
        .json(&json!({"user": "ana", "strategy": "implicit", "request": request}))
        .send()
        .await
        .expect("answer")
        .json()
        .await
        .expect("json");
    assert!(
        !other["payload"].to_string().contains("peanuts."),
        "{other}"
    );
    assert_eq!(other["retrieved"], json!([]));
}

/// Every `$ref` in `value`.
fn references(value: &Value, found: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            if let Some(Value::String(target)) = map.get("$ref") {
                found.push(target.clone());
            }
            map.values().for_each(|v| references(v, found));
        }
        Value::Array(items) => items.iter().for_each(|v| references(v, found)),
        _ => {}
    }
}

#[tokio::test]
async fn the_openapi_document_describes_the_real_bodies_and_parameters() {
    let h = seeded().await;
    let spec = get_json(&h, "/memproxy/v1/openapi.json").await;
    let mut targets = Vec::new();
    references(&spec, &mut targets);
    assert!(targets.len() > 20);
    for target in &targets {
        let pointer = target.strip_prefix('#').expect("local reference");
        assert!(spec.pointer(pointer).is_some(), "{target} resolves");
    }
    let schemas = &spec["components"]["schemas"];
    let memories = &spec["paths"]["/memproxy/v1/users/{user}/memories"];
    assert_eq!(
        memories["post"]["requestBody"]["content"]["application/json"]["schema"]["$ref"],
        "#/components/schemas/NewMemoryBody"
    );
    assert_eq!(schemas["NewMemoryBody"]["required"], json!(["text"]));
    let query: Vec<&str> = memories["get"]["parameters"]
        .as_array()
        .expect("parameters")
        .iter()
        .filter(|p| p["in"] == "query")
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert_eq!(query, ["include_invalid", "limit", "offset"]);
    let listed = &memories["get"]["responses"]["200"]["content"]["application/json"]["schema"];
    assert_eq!(
        listed["properties"]["data"]["items"]["$ref"],
        "#/components/schemas/Memory"
    );
    let memory_fields = schemas["Memory"]["properties"].as_object().expect("fields");
    for field in ["id", "text", "kind", "sources", "valid_until_ms"] {
        assert!(memory_fields.contains_key(field), "Memory.{field}");
    }
    assert!(schemas["RetrievalRequest"]["properties"]["query"].is_object());
    // A documented enum is `oneOf` constants (each with its description).
    let values = |schema: &Value| -> Vec<String> {
        let options = schema["oneOf"].as_array().cloned().unwrap_or_default();
        options
            .iter()
            .filter_map(|o| o["const"].as_str().map(str::to_owned))
            .collect()
    };
    assert_eq!(values(&schemas["Corpus"]), ["memory", "message", "passage"]);
    assert_eq!(
        values(&schemas["Mode"]),
        ["passthrough", "window", "summary", "implicit", "explicit"]
    );
    assert_eq!(schemas["SimulateBody"]["required"], json!(["strategy"]));
}
