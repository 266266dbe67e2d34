//! The turn's outcome as the neutral reply ([`crate::conversation::reply`]), which each API
//! surface writes in its own shape: the answer's text, or the client's tool calls with the finish
//! that asks for them, whole or as it streams (the text in word-sized pieces, each call's id and
//! name before its arguments); a turn that outlasts the keep-alive starts its stream early with
//! comment lines.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use futures_util::StreamExt;
use serde_json::Value;

use crate::agent::{Ending, ModelError, TurnError, TurnOutcome};
use crate::conversation::reply::{Call, CallPart, Event, Finish, Reply, Usage};
use crate::error::ProxyError;
use crate::identity::Scope;

use crate::server::core::Answer;
use crate::server::SharedState;

/// What the answer needs besides the turn's outcome.
#[derive(Clone)]
pub(in crate::server) struct Shape {
    pub route: &'static str,
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
            .count_exchange("explicit", "completed", Some(outcome.usage.into()));
        overhead
    }

    /// The reply as it streams: started, the text in pieces (or each call's id and name, then
    /// its arguments), the finish, the usage, the end.
    pub fn events(&self, outcome: &TurnOutcome) -> Vec<Event> {
        let reply = reply(outcome);
        let mut events = vec![Event::Started { id: reply.id }];
        for piece in reply.text.split_inclusive(' ') {
            events.push(Event::Text(piece.to_owned()));
        }
        for (index, call) in reply.calls.into_iter().enumerate() {
            let index = index as u64;
            events.push(Event::Call(CallPart {
                index,
                id: Some(call.id),
                name: Some(call.name),
                arguments: String::new(),
            }));
            events.push(Event::Call(CallPart {
                index,
                arguments: call.arguments,
                ..CallPart::default()
            }));
        }
        events.extend(reply.finish.map(Event::Finished));
        events.extend(reply.usage.map(Event::Usage));
        events.push(Event::Done);
        events
    }
}

pub(super) type TurnHandle = tokio::task::JoinHandle<Result<TurnOutcome, TurnError>>;

enum Early {
    Waiting(TurnHandle),
    Sending(std::collections::VecDeque<Event>),
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
                    return Some((keeping_alive(), Early::Waiting(turn)));
                }
            };
            let mut events: std::collections::VecDeque<Event> = match joined {
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
                Err(error) => [failed(&ProxyError::Internal(format!(
                    "agent turn: {error}"
                )))]
                .into(),
            };
            let first = events.pop_front()?;
            Some((first, Early::Sending(events)))
        }
    });
    let body = futures_util::stream::once(async { keeping_alive() })
        .chain(body)
        .map(Ok::<_, std::io::Error>);
    let mut answer = Answer::replying(HeaderMap::new(), body.boxed());
    answer.put("x-memproxy-mode", "explicit");
    answer.put("x-memproxy-agent", &scope.agent);
    answer
}

/// The comment line a stream carries while the agent works.
fn keeping_alive() -> Event {
    Event::KeepAlive(Bytes::from_static(b": memproxy agent working\n\n"))
}

/// A proxy error as the in-stream failure.
fn failed(error: &ProxyError) -> Event {
    Event::Failed {
        message: error.to_string(),
        error: error.body()["error"].clone(),
    }
}

/// A failed turn as the in-stream failure: the upstream's own error object when it sent one,
/// otherwise the proxy's error.
fn failure_event(error: TurnError) -> Event {
    if let TurnError::Model(ModelError::Rejected { status, body, .. }) = &error {
        let upstream: Option<Value> = serde_json::from_slice(body).ok();
        if let Some(error) = upstream.as_ref().and_then(|value| value.get("error")) {
            return crate::openai::reply::failed(error);
        }
        let text = String::from_utf8_lossy(body);
        return failed(&ProxyError::UpstreamBroken(format!(
            "status {status}: {text}"
        )));
    }
    match failure(error) {
        Err(error) => failed(&error),
        Ok(_) => failed(&ProxyError::Internal("agent turn failed".to_owned())),
    }
}

/// The turn's outcome as a whole reply.
fn reply(outcome: &TurnOutcome) -> Reply {
    let (text, calls, finish) = match &outcome.ending {
        Ending::Reply { text, .. } => (text.clone(), Vec::new(), Finish::Stop),
        Ending::ToolCalls(calls) => {
            let calls = calls
                .iter()
                .map(|call| Call {
                    id: call.id.clone(),
                    name: call.name.clone(),
                    arguments: call.arguments.clone(),
                })
                .collect();
            (String::new(), calls, Finish::ToolCalls)
        }
    };
    Reply {
        id: outcome.turn.replace('-', ""),
        text,
        calls,
        finish: Some(finish),
        usage: Some(Usage {
            prompt_tokens: outcome.usage.prompt_tokens,
            completion_tokens: outcome.usage.completion_tokens,
            cached_tokens: None,
        }),
    }
}

pub(super) fn whole(outcome: &TurnOutcome) -> Answer {
    Answer::reply(HeaderMap::new(), reply(outcome))
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
