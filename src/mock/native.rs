//! The mock's Anthropic Messages (`/v1/messages`) and OpenAI Responses (`/v1/responses`)
//! endpoints, for tests of memproxy's same-API relay: the same script queue as chat, each answer
//! written in that API's own shape, whole or as its event stream. Written here by hand from the
//! APIs' documentation, not with memproxy's translators, so that a test of the relay does not
//! check memproxy against itself.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use super::completion::{sse_response, words, StreamEnd};
use super::record;
use super::state::{locked, MockState, Reply};

#[derive(Clone, Copy, PartialEq)]
enum Api {
    Messages,
    Responses,
}

pub(super) async fn messages(State(state): State<Arc<MockState>>, request: Request) -> Response {
    serve(state, request, Api::Messages).await
}

pub(super) async fn responses(State(state): State<Arc<MockState>>, request: Request) -> Response {
    serve(state, request, Api::Responses).await
}

/// The text of the newest user message (string content, or its text blocks / parts).
fn last_user_text(body: &Value, api: Api) -> String {
    let items = match api {
        Api::Messages => &body["messages"],
        Api::Responses => match &body["input"] {
            Value::String(text) => return text.clone(),
            items => items,
        },
    };
    let Some(message) = items
        .as_array()
        .and_then(|items| items.iter().rev().find(|m| m["role"] == "user"))
    else {
        return String::new();
    };
    match &message["content"] {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// `POST /v1/messages/count_tokens`: a rough count (a quarter of the body's bytes).
pub(super) async fn count_tokens(
    State(state): State<Arc<MockState>>,
    request: Request,
) -> Response {
    let received = record(&state, request).await;
    Json(json!({"input_tokens": (received.body.len() / 4).max(1)})).into_response()
}

/// `GET /v1/responses/{id}`.
pub(super) async fn stored_response(
    State(state): State<Arc<MockState>>,
    Path(id): Path<String>,
    request: Request,
) -> Response {
    record(&state, request).await;
    match locked(&state.responses).get(&id) {
        Some(response) => Json(response.clone()).into_response(),
        None => not_found(&id),
    }
}

/// `DELETE /v1/responses/{id}`.
pub(super) async fn delete_response(
    State(state): State<Arc<MockState>>,
    Path(id): Path<String>,
    request: Request,
) -> Response {
    record(&state, request).await;
    match locked(&state.responses).remove(&id) {
        Some(_) => {
            Json(json!({"id": id, "object": "response.deleted", "deleted": true})).into_response()
        }
        None => not_found(&id),
    }
}

fn not_found(id: &str) -> Response {
    let error = json!({"error": {"message": format!("Response with id '{id}' not found."),
        "type": "invalid_request_error", "param": null, "code": null}});
    (StatusCode::NOT_FOUND, Json(error)).into_response()
}

/// A request the real API would refuse before answering.
fn refusal(body: &Value, api: Api, state: &MockState) -> Option<Reply> {
    let message = match api {
        Api::Messages => body["messages"]
            .as_array()
            .is_none_or(Vec::is_empty)
            .then(|| "messages: at least one message is required".to_owned()),
        Api::Responses => body["previous_response_id"]
            .as_str()
            .filter(|id| !locked(&state.responses).contains_key(*id))
            .map(|id| format!("Previous response with id '{id}' not found.")),
    }?;
    Some(Reply::Error {
        status: 400,
        message,
        headers: Vec::new(),
    })
}

async fn serve(state: Arc<MockState>, request: Request, api: Api) -> Response {
    let received = record(&state, request).await;
    let body = received.json();
    let scripted = locked(&state.script).pop_front();
    let mut reply = scripted
        .or_else(|| refusal(&body, api, &state))
        .unwrap_or_else(|| match body["model"].as_str() {
            Some("mock-tool" | "mock-error-429" | "mock-error-400") => super::default_reply(&body),
            _ => Reply::Text(format!("echo: {}", last_user_text(&body, api))),
        });
    while let Reply::Stall(pause, inner) = reply {
        tokio::time::sleep(pause).await;
        reply = *inner;
    }
    let n = state.counter.fetch_add(1, Ordering::SeqCst);
    let model = body["model"].as_str().unwrap_or("mock-model").to_owned();
    let input_tokens = received.body.len() as u64 / 4;
    let stream = body["stream"] == true;
    let (text, calls) = match reply {
        Reply::Text(text) => (text, Vec::new()),
        Reply::ToolCalls(calls) => (String::new(), calls),
        Reply::Error {
            status,
            message,
            headers,
        } => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let limited = status == StatusCode::TOO_MANY_REQUESTS;
            let body = match api {
                Api::Messages => {
                    let kind = if limited {
                        "rate_limit_error"
                    } else {
                        "invalid_request_error"
                    };
                    json!({"type": "error", "error": {"type": kind, "message": message}})
                }
                Api::Responses => {
                    let code = if message.starts_with("Previous response") {
                        json!("previous_response_not_found")
                    } else {
                        Value::Null
                    };
                    json!({"error": {"message": message, "type": "invalid_request_error", "param": null, "code": code}})
                }
            };
            return super::with_headers((status, Json(body)).into_response(), headers);
        }
        Reply::Raw {
            status,
            content_type,
            body,
        } => {
            return Response::builder()
                .status(status)
                .header("content-type", content_type)
                .body(Body::from(body))
                .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
        }
        Reply::RawStream(events) => {
            return sse_response(&state, events, Duration::ZERO, StreamEnd::Finish)
        }
        other => (format!("{other:?}"), Vec::new()),
    };
    let output_tokens = words(&text).len() as u64 + calls.len() as u64;
    let answer = Answer {
        id: n,
        model,
        text,
        calls,
        input_tokens,
        output_tokens,
        previous: body["previous_response_id"].clone(),
    };
    let keep = !state.forgetful.load(std::sync::atomic::Ordering::Relaxed);
    if api == Api::Responses && body["store"] != false && keep {
        let response = answer.response();
        locked(&state.responses).insert(format!("resp_mock_{n}"), response);
    }
    match (api, stream) {
        (Api::Messages, false) => Json(answer.message()).into_response(),
        (Api::Responses, false) => Json(answer.response()).into_response(),
        (Api::Messages, true) => sse_response(
            &state,
            answer.message_events(),
            Duration::ZERO,
            StreamEnd::Finish,
        ),
        (Api::Responses, true) => sse_response(
            &state,
            answer.response_events(),
            Duration::ZERO,
            StreamEnd::Finish,
        ),
    }
}

struct Answer {
    id: usize,
    model: String,
    text: String,
    calls: Vec<(String, String)>,
    input_tokens: u64,
    output_tokens: u64,
    previous: Value,
}

fn event(kind: &str, data: &Value) -> String {
    format!("event: {kind}\ndata: {data}\n\n")
}

impl Answer {
    fn message(&self) -> Value {
        let mut content = Vec::new();
        if !self.text.is_empty() {
            content.push(json!({"type": "text", "text": self.text}));
        }
        for (i, (name, arguments)) in self.calls.iter().enumerate() {
            let input: Value = serde_json::from_str(arguments).unwrap_or(json!({}));
            content.push(json!({"type": "tool_use", "id": format!("toolu_mock_{i}"),
                "name": name, "input": input}));
        }
        let stop = if self.calls.is_empty() {
            "end_turn"
        } else {
            "tool_use"
        };
        json!({"id": format!("msg_mock_{}", self.id), "type": "message", "role": "assistant",
            "model": self.model, "content": content, "stop_reason": stop, "stop_sequence": null,
            "usage": {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens}})
    }

    fn message_events(&self) -> Vec<String> {
        let whole = self.message();
        let mut start = whole.clone();
        start["content"] = json!([]);
        start["stop_reason"] = Value::Null;
        start["usage"]["output_tokens"] = json!(1);
        let mut events = vec![event(
            "message_start",
            &json!({"type": "message_start", "message": start}),
        )];
        for (index, block) in whole["content"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            let (empty, deltas) = if block["type"] == "text" {
                let pieces = words(block["text"].as_str().unwrap_or_default());
                let deltas: Vec<Value> = pieces
                    .iter()
                    .map(|p| json!({"type": "text_delta", "text": p}))
                    .collect();
                (json!({"type": "text", "text": ""}), deltas)
            } else {
                let input = block["input"].to_string();
                let (head, tail) = input.split_at(input.len() / 2);
                let deltas = [head, tail]
                    .iter()
                    .map(|p| json!({"type": "input_json_delta", "partial_json": p}))
                    .collect();
                let mut empty = block.clone();
                empty["input"] = json!({});
                (empty, deltas)
            };
            events.push(event(
                "content_block_start",
                &json!({"type": "content_block_start",
                "index": index, "content_block": empty}),
            ));
            events.push(event("ping", &json!({"type": "ping"})));
            for delta in deltas {
                events.push(event(
                    "content_block_delta",
                    &json!({"type": "content_block_delta",
                    "index": index, "delta": delta}),
                ));
            }
            events.push(event(
                "content_block_stop",
                &json!({"type": "content_block_stop", "index": index}),
            ));
        }
        events.push(event(
            "message_delta",
            &json!({"type": "message_delta",
            "delta": {"stop_reason": whole["stop_reason"], "stop_sequence": null},
            "usage": {"output_tokens": self.output_tokens}}),
        ));
        events.push(event("message_stop", &json!({"type": "message_stop"})));
        events
    }

    fn response(&self) -> Value {
        let mut output = Vec::new();
        if !self.text.is_empty() {
            output.push(
                json!({"type": "message", "id": format!("msg_mock_{}", self.id),
                "status": "completed", "role": "assistant",
                "content": [{"type": "output_text", "text": self.text, "annotations": []}]}),
            );
        }
        for (i, (name, arguments)) in self.calls.iter().enumerate() {
            output.push(
                json!({"type": "function_call", "id": format!("fc_mock_{i}"),
                "call_id": format!("call_mock_{i}"), "name": name, "arguments": arguments,
                "status": "completed"}),
            );
        }
        json!({"id": format!("resp_mock_{}", self.id), "object": "response",
            "created_at": 0, "status": "completed", "model": self.model, "output": output,
            "previous_response_id": self.previous,
            "usage": {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                "total_tokens": self.input_tokens + self.output_tokens}})
    }

    fn response_events(&self) -> Vec<String> {
        let whole = self.response();
        let mut started = whole.clone();
        started["status"] = json!("in_progress");
        started["output"] = json!([]);
        started["usage"] = Value::Null;
        let mut sequence = 0;
        let mut events = Vec::new();
        let mut push = |kind: &str, mut data: Value| {
            data["type"] = json!(kind);
            data["sequence_number"] = json!(sequence);
            sequence += 1;
            events.push(event(kind, &data));
        };
        push("response.created", json!({"response": started.clone()}));
        push("response.in_progress", json!({"response": started}));
        for (index, item) in whole["output"].as_array().into_iter().flatten().enumerate() {
            let mut empty = item.clone();
            empty["status"] = json!("in_progress");
            let item_id = item["id"].clone();
            if item["type"] == "message" {
                empty["content"] = json!([]);
                push(
                    "response.output_item.added",
                    json!({"output_index": index, "item": empty}),
                );
                let part = json!({"type": "output_text", "text": "", "annotations": []});
                push(
                    "response.content_part.added",
                    json!({"item_id": item_id,
                    "output_index": index, "content_index": 0, "part": part}),
                );
                for piece in words(&self.text) {
                    push(
                        "response.output_text.delta",
                        json!({"item_id": item_id,
                        "output_index": index, "content_index": 0, "delta": piece}),
                    );
                }
                push(
                    "response.output_text.done",
                    json!({"item_id": item_id,
                    "output_index": index, "content_index": 0, "text": self.text}),
                );
                push(
                    "response.content_part.done",
                    json!({"item_id": item_id,
                    "output_index": index, "content_index": 0, "part": item["content"][0]}),
                );
            } else {
                empty["arguments"] = json!("");
                push(
                    "response.output_item.added",
                    json!({"output_index": index, "item": empty}),
                );
                push(
                    "response.function_call_arguments.delta",
                    json!({"item_id": item_id,
                    "output_index": index, "delta": item["arguments"]}),
                );
                push(
                    "response.function_call_arguments.done",
                    json!({"item_id": item_id,
                    "output_index": index, "arguments": item["arguments"]}),
                );
            }
            push(
                "response.output_item.done",
                json!({"output_index": index, "item": item}),
            );
        }
        push("response.completed", json!({"response": whole}));
        events
    }
}
