//! The mock speaking Ollama's own API (`/api/chat`, `/api/generate`, `/api/tags`, `/api/show`,
//! `/api/version`, `/api/embed`), for tests of memproxy's `[upstream.ollama]`: answers as an
//! Ollama server shapes them (streamed as NDJSON unless `"stream": false`), echoing the newest
//! user text, with the scripted replies and the `mock-tool` / `mock-error-429` models the other
//! APIs' mocks have.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use super::completion::words;
use super::{locked, record, MockState, Reply};

/// The newest user message's text (`/api/chat`) or the prompt (`/api/generate`).
fn asked(body: &Value) -> String {
    if let Some(prompt) = body["prompt"].as_str() {
        return prompt.to_owned();
    }
    let mut messages = body["messages"].as_array().into_iter().flatten();
    messages
        .rfind(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_owned()
}

pub(super) async fn chat(State(state): State<Arc<MockState>>, request: Request) -> Response {
    serve(state, request, false).await
}

pub(super) async fn generate(State(state): State<Arc<MockState>>, request: Request) -> Response {
    serve(state, request, true).await
}

async fn serve(state: Arc<MockState>, request: Request, generate: bool) -> Response {
    let received = record(&state, request).await;
    let body = received.json();
    let model = body["model"].as_str().unwrap_or("mock-model").to_owned();
    let scripted = locked(&state.script).pop_front();
    let reply = scripted.unwrap_or_else(|| match model.as_str() {
        "mock-tool" | "mock-error-429" => super::default_reply(&body),
        _ => Reply::Text(format!("echo: {}", asked(&body))),
    });
    let (text, calls) = match reply {
        Reply::Text(text) => (text, Vec::new()),
        Reply::ToolCalls(calls) => (String::new(), calls),
        Reply::Error {
            status, message, ..
        } => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            return (status, Json(json!({"error": message}))).into_response();
        }
        other => (format!("{other:?}"), Vec::new()),
    };
    let calls: Vec<Value> = calls
        .iter()
        .map(|(name, arguments)| {
            let arguments: Value = serde_json::from_str(arguments).unwrap_or(json!({}));
            json!({"function": {"name": name, "arguments": arguments}})
        })
        .collect();
    let object = |content: &str, calls: &[Value], done: bool| {
        let mut out = json!({"model": model, "created_at": "2026-12-06T00:00:00Z", "done": done});
        if generate {
            out["response"] = json!(content);
        } else {
            out["message"] = json!({"role": "assistant", "content": content});
            if !calls.is_empty() {
                out["message"]["tool_calls"] = json!(calls);
            }
        }
        if done {
            out["done_reason"] = json!("stop");
            out["prompt_eval_count"] = json!(received.body.len() / 4);
            out["eval_count"] = json!(words(&text).len() + calls.len());
            out["total_duration"] = json!(1_000_000);
        }
        out
    };
    if body["stream"] == false {
        return Json(object(&text, &calls, true)).into_response();
    }
    let mut lines: Vec<String> = words(&text)
        .iter()
        .map(|piece| format!("{}\n", object(piece, &[], false)))
        .collect();
    if !calls.is_empty() {
        lines.push(format!("{}\n", object("", &calls, false)));
    }
    lines.push(format!("{}\n", object("", &[], true)));
    let stream = futures_util::stream::iter(
        lines
            .into_iter()
            .map(|line| Ok::<_, std::io::Error>(axum::body::Bytes::from(line))),
    );
    Response::builder()
        .header("content-type", "application/x-ndjson")
        .body(Body::from_stream(stream))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

pub(super) async fn tags(State(state): State<Arc<MockState>>, request: Request) -> Response {
    record(&state, request).await;
    Json(
        json!({"models": [{"name": "mock-ollama:1b", "model": "mock-ollama:1b",
        "modified_at": "2026-12-01T00:00:00Z", "size": 1234, "digest": "d1",
        "details": {"format": "gguf", "family": "mock", "parameter_size": "1B",
                    "quantization_level": "Q4_K_M"}}]}),
    )
    .into_response()
}

pub(super) async fn other(State(state): State<Arc<MockState>>, request: Request) -> Response {
    let received = record(&state, request).await;
    let path = received.path_and_query.clone();
    match path.as_str() {
        "/api/version" => Json(json!({"version": "0.13.1"})).into_response(),
        "/api/show" => Json(
            json!({"modelfile": "FROM mock", "details": {"family": "mock"},
            "model_info": {"general.architecture": "mock"}, "capabilities": ["completion"]}),
        )
        .into_response(),
        "/api/embed" => Json(json!({"model": received.json()["model"],
            "embeddings": [[0.25, 0.5]]}))
        .into_response(),
        _ => (
            StatusCode::NOT_FOUND,
            Json(json!({"error": format!("mock: no route {path}")})),
        )
            .into_response(),
    }
}
