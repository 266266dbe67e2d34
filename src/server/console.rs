//! The web console (`/ui`): a small single-page app over the management API, embedded in the
//! binary (no build step, no CDN, works offline), and the API's OpenAPI description.

use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Map, Value};

const INDEX: &str = include_str!("../../ui/index.html");
const APP: &str = include_str!("../../ui/app.js");
const STYLE: &str = include_str!("../../ui/style.css");

fn asset(body: &'static str, content_type: &'static str) -> Response {
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    // Only our own script runs; style attributes are set by the script for the bars.
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'"),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

pub async fn index() -> Response {
    asset(INDEX, "text/html; charset=utf-8")
}

pub async fn app() -> Response {
    asset(APP, "text/javascript; charset=utf-8")
}

pub async fn style() -> Response {
    asset(STYLE, "text/css; charset=utf-8")
}

/// `(method, path, summary)` of every management route (the OpenAPI document is built from it;
/// a test checks that each one answers, so the document cannot drift from the router).
pub const ROUTES: &[(&str, &str, &str)] = &[
    ("get", "/memproxy/v1/users", "Users of the tenant"),
    (
        "delete",
        "/memproxy/v1/users/{user}",
        "Forget a user: every row and vector file",
    ),
    (
        "get",
        "/memproxy/v1/users/{user}/memories",
        "List memories (?include_invalid, limit, offset)",
    ),
    (
        "post",
        "/memproxy/v1/users/{user}/memories",
        "Add a memory {text, kind}",
    ),
    (
        "post",
        "/memproxy/v1/users/{user}/memories/search",
        "Hybrid search {query, top_k, corpora, token_budget}",
    ),
    (
        "patch",
        "/memproxy/v1/users/{user}/memories/{id}",
        "Edit a memory {text}",
    ),
    (
        "delete",
        "/memproxy/v1/users/{user}/memories/{id}",
        "Delete a memory (?invalidate=true keeps it as history)",
    ),
    (
        "get",
        "/memproxy/v1/users/{user}/events",
        "Audit log of memory changes",
    ),
    (
        "get",
        "/memproxy/v1/users/{user}/conversations",
        "Conversations",
    ),
    (
        "get",
        "/memproxy/v1/users/{user}/conversations/{conversation}/messages",
        "Recall log of a conversation",
    ),
    ("get", "/memproxy/v1/users/{user}/export", "Export as JSONL"),
    (
        "post",
        "/memproxy/v1/users/{user}/import",
        "Import JSONL (all or nothing)",
    ),
    (
        "get",
        "/memproxy/v1/users/{user}/agents",
        "Explicit-mode agents with counts",
    ),
    (
        "get",
        "/memproxy/v1/users/{user}/agents/{agent}",
        "An agent: blocks, summary, counts, compiled system message",
    ),
    (
        "delete",
        "/memproxy/v1/users/{user}/agents/{agent}",
        "Reset an agent",
    ),
    (
        "get",
        "/memproxy/v1/users/{user}/agents/{agent}/blocks",
        "Core memory blocks",
    ),
    (
        "put",
        "/memproxy/v1/users/{user}/agents/{agent}/blocks/{label}",
        "Set a block {value, char_limit, read_only}",
    ),
    (
        "delete",
        "/memproxy/v1/users/{user}/agents/{agent}/blocks/{label}",
        "Remove a block",
    ),
    (
        "get",
        "/memproxy/v1/users/{user}/agents/{agent}/messages",
        "The agent's log (?in_context=true: its queue)",
    ),
    (
        "get",
        "/memproxy/v1/users/{user}/agents/{agent}/archival",
        "Archival passages (?query= searches)",
    ),
    (
        "post",
        "/memproxy/v1/users/{user}/agents/{agent}/archival",
        "Add a passage {text}",
    ),
    (
        "delete",
        "/memproxy/v1/users/{user}/agents/{agent}/archival/{id}",
        "Delete a passage",
    ),
    (
        "get",
        "/memproxy/v1/users/{user}/agents/{agent}/summary",
        "Summary of evicted messages",
    ),
    (
        "put",
        "/memproxy/v1/users/{user}/agents/{agent}/summary",
        "Rewrite the summary {text}",
    ),
    (
        "get",
        "/memproxy/v1/users/{user}/agents/{agent}/steps",
        "Step trace (?turns=N)",
    ),
    (
        "get",
        "/memproxy/v1/agents/{agent}/steps",
        "Step trace (?user=, turns=N)",
    ),
    (
        "post",
        "/memproxy/v1/simulate",
        "Context simulator {request | user + conversation, strategy, agent}",
    ),
    ("get", "/memproxy/v1/jobs", "Post-processing jobs (?state=)"),
];

/// OpenAPI 3.1 description of the management API.
pub async fn openapi() -> Json<Value> {
    let mut paths = Map::new();
    for (method, path, summary) in ROUTES {
        let parameters: Vec<Value> = path
            .split('/')
            .filter_map(|part| part.strip_prefix('{')?.strip_suffix('}'))
            .map(|name| json!({"name": name, "in": "path", "required": true, "schema": {"type": if name == "id" { "integer" } else { "string" }}}))
            .collect();
        let mut operation = json!({
            "summary": summary,
            "parameters": parameters,
            "responses": {
                "200": {"description": "OK", "content": {"application/json": {}}},
                "400": {"$ref": "#/components/responses/Error"},
                "401": {"$ref": "#/components/responses/Error"},
                "404": {"$ref": "#/components/responses/Error"},
            },
        });
        if matches!(*method, "post" | "put" | "patch") {
            operation["requestBody"] =
                json!({"content": {"application/json": {"schema": {"type": "object"}}}});
        }
        let entry = paths.entry(path.to_string()).or_insert_with(|| json!({}));
        entry[*method] = operation;
    }
    Json(json!({
        "openapi": "3.1.0",
        "info": {"title": "memproxy management API", "version": env!("CARGO_PKG_VERSION")},
        "security": [{"bearer": []}],
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer", "description": "The admin key (any tenant, X-Memproxy-Tenant picks it) or a proxy key (its own tenant)."}},
            "responses": {"Error": {"description": "OpenAI-shaped error", "content": {"application/json": {"schema": {
                "type": "object", "properties": {"error": {"type": "object", "properties": {
                    "message": {"type": "string"}, "type": {"type": "string"}, "param": {"type": ["string", "null"]}, "code": {"type": ["string", "null"]}}}}}}}}},
        },
        "paths": paths,
    }))
}
