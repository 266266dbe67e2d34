//! How the mock writes a completion: whole or as OpenAI's SSE chunks, with usage billed the way a
//! real upstream bills it (cl100k over messages and tools) and, on request, the prompt-cache report
//! of a prefix cache.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::state::MockState;

/// Splits text into pieces that concatenate back to it exactly.
pub(super) fn words(text: &str) -> Vec<String> {
    text.split_inclusive(' ').map(str::to_owned).collect()
}

pub(super) struct Completion {
    id: String,
    model: String,
    include_usage: bool,
    prompt_tokens: usize,
    pub(super) cached_tokens: Option<usize>,
}

/// The tokens of the leading messages `body` shares with the previous request (nothing if the
/// tools differ: templates render them first), then remembers `body` as the previous request.
pub(super) fn cached_prefix(previous: &mut (Value, Vec<Value>), body: &Value) -> usize {
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let cached = if previous.0 == body["tools"] {
        messages
            .iter()
            .zip(&previous.1)
            .take_while(|(now, before)| now == before)
            .map(|(message, _)| message_tokens(message))
            .sum()
    } else {
        0
    };
    *previous = (body["tools"].clone(), messages);
    cached
}

/// A message as the mock bills it (see [`Completion::new`]).
fn message_tokens(message: &Value) -> usize {
    let text_tokens = |value: &Value| match value {
        Value::Null => 0,
        Value::String(text) => crate::tokens::count(text),
        other => crate::tokens::count(&other.to_string()),
    };
    text_tokens(&message["content"]) + text_tokens(&message["tool_calls"]) + 4
}

impl Completion {
    pub(super) fn new(body: &Value, n: usize) -> Completion {
        // Counted as a real upstream would bill it: every message's text and tool calls, plus
        // the tool schemas (cl100k, so memproxy's own estimates line up in tests).
        let prompt_tokens = body["messages"]
            .as_array()
            .map(|messages| messages.iter().map(message_tokens).sum::<usize>())
            .unwrap_or(0)
            + match &body["tools"] {
                Value::Null => 0,
                tools => crate::tokens::count(&tools.to_string()),
            };
        Completion {
            id: format!("chatcmpl-mock-{n}"),
            model: body["model"].as_str().unwrap_or("mock-model").to_owned(),
            include_usage: body["stream_options"]["include_usage"] == true,
            prompt_tokens,
            cached_tokens: None,
        }
    }

    fn usage(&self, completion_tokens: usize) -> Value {
        let mut usage = json!({
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": self.prompt_tokens + completion_tokens,
        });
        if let Some(cached) = self.cached_tokens {
            usage["prompt_tokens_details"] = json!({"cached_tokens": cached});
        }
        usage
    }

    pub(super) fn whole(&self, text: &str, calls: &[(String, String)]) -> Response {
        let mut message = json!({"role": "assistant", "content": text});
        let finish = if calls.is_empty() {
            "stop"
        } else {
            message["content"] = Value::Null;
            message["tool_calls"] = calls
                .iter()
                .enumerate()
                .map(|(i, (name, arguments))| {
                    json!({"id": format!("call_{i}"), "type": "function",
                           "function": {"name": name, "arguments": arguments}})
                })
                .collect();
            "tool_calls"
        };
        let body = json!({
            "id": self.id, "object": "chat.completion", "created": 1_700_000_000, "model": self.model,
            "choices": [{"index": 0, "message": message, "logprobs": null, "finish_reason": finish}],
            "usage": self.usage(text.split_whitespace().count() + calls.len() * 8),
        });
        ([("x-request-id", self.id.as_str())], Json(body)).into_response()
    }

    fn chunk(&self, choices: Value) -> String {
        let mut chunk = json!({
            "id": self.id, "object": "chat.completion.chunk", "created": 1_700_000_000,
            "model": self.model, "choices": choices,
        });
        if self.include_usage {
            chunk["usage"] = Value::Null;
        }
        format!("data: {chunk}\n\n")
    }

    pub(super) fn content_events(&self, pieces: &[String]) -> Vec<String> {
        let mut events = vec![self.chunk(json!([{"index": 0,
            "delta": {"role": "assistant", "content": ""}, "finish_reason": null}]))];
        for piece in pieces {
            events.push(
                self.chunk(
                    json!([{"index": 0, "delta": {"content": piece}, "finish_reason": null}]),
                ),
            );
        }
        events
    }

    pub(super) fn stream_events(
        &self,
        pieces: &[String],
        calls: &[(String, String)],
    ) -> Vec<String> {
        let mut events = self.content_events(pieces);
        for (i, (name, arguments)) in calls.iter().enumerate() {
            events.push(
                self.chunk(json!([{"index": 0, "delta": {"tool_calls": [{"index": i,
                "id": format!("call_{i}"), "type": "function",
                "function": {"name": name, "arguments": ""}}]}, "finish_reason": null}])),
            );
            let cut = arguments
                .char_indices()
                .map(|(at, _)| at)
                .nth(arguments.chars().count() / 2);
            let (head, tail) = arguments.split_at(cut.unwrap_or(arguments.len()));
            for fragment in [head, tail].into_iter().filter(|f| !f.is_empty()) {
                events.push(
                    self.chunk(json!([{"index": 0, "delta": {"tool_calls": [{"index": i,
                    "function": {"arguments": fragment}}]}, "finish_reason": null}])),
                );
            }
        }
        let finish = if calls.is_empty() {
            "stop"
        } else {
            "tool_calls"
        };
        events.push(self.chunk(json!([{"index": 0, "delta": {}, "finish_reason": finish}])));
        if self.include_usage {
            let tokens = pieces.len() + calls.len() * 8;
            let usage = json!({"id": self.id, "object": "chat.completion.chunk",
                "created": 1_700_000_000, "model": self.model, "choices": [], "usage": self.usage(tokens)});
            events.push(format!("data: {usage}\n\n"));
        }
        events.push("data: [DONE]\n\n".to_owned());
        events
    }
}

pub(super) enum StreamEnd {
    Finish,
    /// Cut the connection (the body ends with an error).
    Break,
    /// Keep the connection open and send nothing more.
    Hang,
}

pub(super) fn sse_response(
    state: &Arc<MockState>,
    events: Vec<String>,
    delay: Duration,
    end: StreamEnd,
) -> Response {
    let (sender, receiver) = mpsc::channel::<Result<Bytes, std::io::Error>>(1);
    let state = Arc::clone(state);
    tokio::spawn(async move {
        for event in events {
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            if sender.send(Ok(Bytes::from(event))).await.is_err() {
                state.abandoned_streams.fetch_add(1, Ordering::SeqCst);
                state.abandoned.notify_waiters();
                return;
            }
        }
        match end {
            StreamEnd::Finish => {}
            StreamEnd::Break => {
                let _ = sender
                    .send(Err(std::io::Error::other("mock: connection cut")))
                    .await;
            }
            StreamEnd::Hang => {
                sender.closed().await;
            }
        }
    });
    let body = futures_util::stream::unfold(receiver, |mut receiver| async move {
        receiver.recv().await.map(|item| (item, receiver))
    });
    Response::builder()
        .header("content-type", "text/event-stream")
        .header("x-request-id", "mock-stream")
        .body(Body::from_stream(body))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}
