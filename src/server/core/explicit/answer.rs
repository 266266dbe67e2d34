//! The turn's outcome as a Chat Completions answer: a reply as an ordinary completion (whole, or
//! SSE content deltas), client tool calls as `finish_reason: "tool_calls"` exactly as an upstream
//! sends them (whole, or SSE tool-call deltas); a turn that outlasts the keep-alive starts its
//! stream early with comment lines.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use futures_util::StreamExt;
use serde_json::{json, Value};

use crate::agent::{Ending, ModelError, TurnError, TurnOutcome};
use crate::error::ProxyError;
use crate::identity::Scope;

use crate::server::core::Answer;
use crate::server::SharedState;

/// What the answer needs besides the turn's outcome.
#[derive(Clone)]
pub(super) struct Shape {
    pub route: &'static str,
    pub model: String,
    pub include_usage: bool,
    pub started: std::time::Instant,
}

impl Shape {
    /// Books a finished turn in the metrics; returns memproxy's own time (total − LLM time).
    pub fn record(&self, state: &SharedState, outcome: &TurnOutcome) -> Duration {
        let llm = Duration::from_secs_f64(outcome.llm_ms / 1e3);
        let overhead = self.started.elapsed().saturating_sub(llm);
        state
            .metrics
            .observe_timing(self.route, "explicit", llm, overhead);
        state
            .metrics
            .count_exchange("explicit", "completed", Some(outcome.usage));
        overhead
    }

    /// The reply as OpenAI streams it: role chunk, content deltas, finish chunk, optional usage
    /// chunk, `[DONE]`.
    pub fn events(&self, outcome: &TurnOutcome) -> Vec<Bytes> {
        let id = completion_id(outcome);
        let created = created();
        let model = &self.model;
        let chunk = |delta: Value, finish: Value| {
            let mut chunk = json!({
                "id": id, "object": "chat.completion.chunk", "created": created, "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            });
            if self.include_usage {
                chunk["usage"] = Value::Null;
            }
            Bytes::from(format!("data: {chunk}\n\n"))
        };
        let mut events = Vec::new();
        match &outcome.ending {
            Ending::Reply { text, .. } => {
                events.push(chunk(
                    json!({"role": "assistant", "content": ""}),
                    Value::Null,
                ));
                for piece in text.split_inclusive(' ') {
                    events.push(chunk(json!({"content": piece}), Value::Null));
                }
                events.push(chunk(json!({}), json!("stop")));
            }
            Ending::ToolCalls(calls) => {
                events.push(chunk(
                    json!({"role": "assistant", "content": null}),
                    Value::Null,
                ));
                // As OpenAI streams them: the call's id and name first, then its arguments.
                for (index, call) in calls.iter().enumerate() {
                    events.push(chunk(
                        json!({"tool_calls": [{"index": index, "id": call.id, "type": "function",
                            "function": {"name": call.name, "arguments": ""}}]}),
                        Value::Null,
                    ));
                    events.push(chunk(
                        json!({"tool_calls": [{"index": index,
                            "function": {"arguments": call.arguments}}]}),
                        Value::Null,
                    ));
                }
                events.push(chunk(json!({}), json!("tool_calls")));
            }
        }
        if self.include_usage {
            let usage = json!({
                "id": id, "object": "chat.completion.chunk", "created": created, "model": model,
                "choices": [], "usage": usage_json(outcome),
            });
            events.push(Bytes::from(format!("data: {usage}\n\n")));
        }
        events.push(Bytes::from_static(b"data: [DONE]\n\n"));
        events
    }
}

pub(super) type TurnHandle = tokio::task::JoinHandle<Result<TurnOutcome, TurnError>>;

enum Early {
    Waiting(TurnHandle),
    Sending(std::collections::VecDeque<Bytes>),
}

/// A streamed turn that outlasted `keepalive`: the SSE answer starts now and carries a comment
/// line every `keepalive` until the reply is ready (comments are ignored by SSE clients but keep
/// read timeouts from firing). Headers known only at the end are left out (the step trace and
/// logs have them); a failure becomes an in-stream error event, as in the streaming relay.
pub(super) fn early_stream(
    state: SharedState,
    scope: Scope,
    answer: Shape,
    turn: TurnHandle,
    keepalive: Duration,
) -> Answer {
    const KEEPALIVE: &[u8] = b": memproxy agent working\n\n";
    let body = futures_util::stream::unfold(Early::Waiting(turn), move |early| {
        let (state, answer) = (Arc::clone(&state), answer.clone());
        async move {
            let mut turn = match early {
                Early::Sending(mut events) => {
                    return events
                        .pop_front()
                        .map(|event| (event, Early::Sending(events)))
                }
                Early::Waiting(turn) => turn,
            };
            let joined = tokio::select! {
                joined = &mut turn => joined,
                () = tokio::time::sleep(keepalive) => {
                    return Some((Bytes::from_static(KEEPALIVE), Early::Waiting(turn)));
                }
            };
            let mut events: std::collections::VecDeque<Bytes> = match joined {
                Ok(Ok(outcome)) => {
                    answer.record(&state, &outcome);
                    answer.events(&outcome).into()
                }
                Ok(Err(error)) => {
                    state
                        .metrics
                        .count_exchange("explicit", "upstream_failed", None);
                    tracing::warn!(%error, "explicit turn failed after its stream started");
                    [failure_event(error)].into()
                }
                Err(error) => {
                    [ProxyError::Internal(format!("agent turn: {error}")).sse_event()].into()
                }
            };
            let first = events.pop_front()?;
            Some((first, Early::Sending(events)))
        }
    });
    let body = futures_util::stream::once(async { Bytes::from_static(KEEPALIVE) })
        .chain(body)
        .map(Ok::<_, std::io::Error>);
    let mut answer = Answer::event_stream(HeaderMap::new(), body.boxed());
    answer.put("x-memproxy-mode", "explicit");
    answer.put("x-memproxy-agent", &scope.agent);
    answer
}

/// A failed turn as the in-stream error event: the upstream's own OpenAI error body when it sent
/// one, otherwise the proxy's error.
fn failure_event(error: TurnError) -> Bytes {
    if let TurnError::Model(ModelError::Rejected { status, body, .. }) = &error {
        let upstream: Option<Value> = serde_json::from_slice(body).ok();
        if let Some(upstream) = upstream.filter(|value| value.get("error").is_some()) {
            return Bytes::from(format!("data: {upstream}\n\n"));
        }
        let text = String::from_utf8_lossy(body);
        return ProxyError::UpstreamBroken(format!("status {status}: {text}")).sse_event();
    }
    match failure(error) {
        Err(error) => error.sse_event(),
        Ok(_) => ProxyError::Internal("agent turn failed".to_owned()).sse_event(),
    }
}

fn completion_id(outcome: &TurnOutcome) -> String {
    format!("chatcmpl-{}", outcome.turn.replace('-', ""))
}

fn created() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn usage_json(outcome: &TurnOutcome) -> Value {
    json!({
        "prompt_tokens": outcome.usage.prompt_tokens,
        "completion_tokens": outcome.usage.completion_tokens,
        "total_tokens": outcome.usage.prompt_tokens + outcome.usage.completion_tokens,
    })
}

pub(super) fn whole(outcome: &TurnOutcome, model: &str) -> Answer {
    let (message, finish) = match &outcome.ending {
        Ending::Reply { text, .. } => (json!({"role": "assistant", "content": text}), "stop"),
        Ending::ToolCalls(calls) => {
            let calls: Vec<Value> = calls
                .iter()
                .map(|call| {
                    json!({"id": call.id, "type": "function",
                        "function": {"name": call.name, "arguments": call.arguments}})
                })
                .collect();
            (
                json!({"role": "assistant", "content": null, "tool_calls": calls}),
                "tool_calls",
            )
        }
    };
    let body = json!({
        "id": completion_id(outcome),
        "object": "chat.completion",
        "created": created(),
        "model": model,
        "choices": [{
            "index": 0,
            "message": message,
            "finish_reason": finish,
        }],
        "usage": usage_json(outcome),
    });
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Answer::whole(StatusCode::OK, headers, Bytes::from(body.to_string()))
}

/// A failed turn as the answer: the upstream's own error as it sent it, else the proxy's error.
pub(in crate::server) fn failure(error: TurnError) -> Result<Answer, ProxyError> {
    match error {
        TurnError::Model(ModelError::Rejected {
            status,
            headers,
            body,
        }) => {
            // The upstream's own error, as it sent it (design: upstream failures relayed).
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY);
            let mut answer = Answer::whole(status, *headers, body);
            answer.put("x-memproxy-mode", "explicit");
            Ok(answer)
        }
        TurnError::Model(ModelError::Proxy(error)) => Err(error),
        TurnError::Model(ModelError::ContextLength(message)) => Err(
            ProxyError::ContextLengthExceeded(format!(
                "The upstream still reports its context window exceeded after the agent's oldest messages were evicted: {message}"
            )),
        ),
        error @ TurnError::ContextTooSmall { .. } => {
            Err(ProxyError::ContextLengthExceeded(error.to_string()))
        }
        TurnError::Memory(error) => Err(error.into()),
        TurnError::ToolResults(message) => Err(ProxyError::invalid(message, Some("messages"))),
    }
}
