//! Explicit mode on the wire: turns the client's chat request into an agent turn and the turn's
//! reply back into an ordinary chat completion (whole, or as SSE content deltas).

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::Response;
use futures_util::StreamExt;
use serde_json::{json, Value};

use crate::agent::{ModelError, TurnError, TurnInput, TurnOutcome, UpstreamModel};
use crate::error::ProxyError;
use crate::identity::Scope;
use crate::openai::ChatRequest;
use crate::store::UserScope;
use crate::upstream::request_headers;

use super::auth::RequestContext;
use super::SharedState;

pub async fn handle(
    state: SharedState,
    context: RequestContext,
    headers: HeaderMap,
    request: ChatRequest,
    scope: Scope,
    started: Instant,
    route: &'static str,
) -> Result<Response, ProxyError> {
    let input = turn_input(&request, &scope)?;
    let authorization = state.upstream.authorization(
        context.client_authorization.as_ref(),
        !state.tenant_keys.is_empty(),
    );
    let model = UpstreamModel {
        upstream: Arc::clone(&state.upstream),
        headers: request_headers(&headers, authorization, false),
    };
    let agents = Arc::clone(&state.agents);
    let tasks = state.after_exchange.clone();
    // The turn changes memory: it runs to completion even if the client goes away. A background
    // save it needs runs after it, in a task of its own (never delaying the answer).
    let mut turn = state.tasks.spawn(async move {
        let outcome = agents.run_turn(&model, input.clone()).await;
        if let Ok(done) = &outcome {
            if agents.needs_save(&input, done) {
                let (agents, done) = (Arc::clone(&agents), done.clone());
                tasks.spawn(async move { agents.save_after_turn(input, done).await });
            }
        }
        outcome
    });
    let answer = Answer {
        route,
        model: request.model.clone().unwrap_or_default(),
        include_usage: request.client_wants_usage(),
        started,
    };
    let keepalive = state.agents.config().stream_keepalive;
    let joined = if request.is_stream() && !keepalive.is_zero() {
        match tokio::time::timeout(keepalive, &mut turn).await {
            Ok(joined) => joined,
            Err(_) => return Ok(early_stream(state, scope, answer, turn, keepalive)),
        }
    } else {
        turn.await
    };
    let outcome =
        match joined.map_err(|error| ProxyError::Internal(format!("agent turn: {error}")))? {
            Ok(outcome) => outcome,
            Err(error) => {
                state
                    .metrics
                    .count_exchange("explicit", "upstream_failed", None);
                return failure(error);
            }
        };
    let overhead = answer.record(&state, &outcome);
    let mut response = if request.is_stream() {
        sse_response(Body::from_stream(futures_util::stream::iter(
            answer
                .events(&outcome)
                .into_iter()
                .map(Ok::<_, std::io::Error>),
        )))
    } else {
        whole(&outcome, &answer.model)
    };
    let answer_headers = response.headers_mut();
    let mut put = |name: &'static str, value: String| {
        if let Ok(value) = HeaderValue::from_str(&value) {
            answer_headers.insert(HeaderName::from_static(name), value);
        }
    };
    put("x-memproxy-mode", "explicit".to_owned());
    put("x-memproxy-agent", scope.agent.clone());
    put("x-memproxy-turn", outcome.turn.clone());
    put("x-memproxy-steps", outcome.model_calls.to_string());
    put("x-memproxy-stop", outcome.stop.as_str().to_owned());
    put(
        "x-memproxy-overhead-ms",
        format!("{:.1}", overhead.as_secs_f64() * 1e3),
    );
    Ok(response)
}

/// What the answer needs besides the turn's outcome.
#[derive(Clone)]
struct Answer {
    route: &'static str,
    model: String,
    include_usage: bool,
    started: Instant,
}

impl Answer {
    /// Books a finished turn in the metrics; returns memproxy's own time (total − LLM time).
    fn record(&self, state: &SharedState, outcome: &TurnOutcome) -> Duration {
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
    fn events(&self, outcome: &TurnOutcome) -> Vec<Bytes> {
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
        let mut events = vec![chunk(
            json!({"role": "assistant", "content": ""}),
            Value::Null,
        )];
        for piece in outcome.reply.split_inclusive(' ') {
            events.push(chunk(json!({"content": piece}), Value::Null));
        }
        events.push(chunk(json!({}), json!("stop")));
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

type TurnHandle = tokio::task::JoinHandle<Result<TurnOutcome, TurnError>>;

enum Early {
    Waiting(TurnHandle),
    Sending(std::collections::VecDeque<Bytes>),
}

/// A streamed turn that outlasted `keepalive`: the SSE answer starts now and carries a comment
/// line every `keepalive` until the reply is ready (comments are ignored by SSE clients but keep
/// read timeouts from firing). Headers known only at the end are left out (the step trace and
/// logs have them); a failure becomes an in-stream error event, as in the streaming relay.
fn early_stream(
    state: SharedState,
    scope: Scope,
    answer: Answer,
    turn: TurnHandle,
    keepalive: Duration,
) -> Response {
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
    let mut response = sse_response(Body::from_stream(body));
    let headers = response.headers_mut();
    headers.insert("x-memproxy-mode", HeaderValue::from_static("explicit"));
    if let Ok(agent) = HeaderValue::from_str(&scope.agent) {
        headers.insert("x-memproxy-agent", agent);
    }
    response
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

/// The agent's input: new user messages (after the last assistant message), the client's system
/// prompt, the sampling parameters.
fn turn_input(request: &ChatRequest, scope: &Scope) -> Result<TurnInput, ProxyError> {
    let start = request
        .messages
        .iter()
        .rposition(|m| m.role == "assistant")
        .map_or(0, |i| i + 1);
    let user_messages: Vec<String> = request.messages[start..]
        .iter()
        .filter(|m| m.role == "user")
        .map(|m| m.text())
        .filter(|text| !text.trim().is_empty())
        .collect();
    if user_messages.is_empty() {
        return Err(ProxyError::invalid(
            "Explicit mode needs a new user message after the last assistant message.",
            Some("messages"),
        ));
    }
    let system: Vec<String> = request
        .messages
        .iter()
        .filter(|m| m.role == "system" || m.role == "developer")
        .map(|m| m.text())
        .filter(|text| !text.trim().is_empty())
        .collect();
    Ok(TurnInput {
        scope: UserScope::from(scope),
        agent: scope.agent.clone(),
        model: request.model.clone().unwrap_or_default(),
        client_system: (!system.is_empty()).then(|| system.join("\n\n")),
        user_messages,
        params: request.extra.clone(),
        clock: scope.time_ms,
        record: scope.record,
    })
}

fn failure(error: TurnError) -> Result<Response, ProxyError> {
    match error {
        TurnError::Model(ModelError::Rejected {
            status,
            headers,
            body,
        }) => {
            // The upstream's own error, as it sent it (design: upstream failures relayed).
            let mut response = Response::new(Body::from(body));
            *response.status_mut() =
                StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY);
            *response.headers_mut() = *headers;
            response
                .headers_mut()
                .insert("x-memproxy-mode", HeaderValue::from_static("explicit"));
            Ok(response)
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

fn whole(outcome: &TurnOutcome, model: &str) -> Response {
    let body = json!({
        "id": completion_id(outcome),
        "object": "chat.completion",
        "created": created(),
        "model": model,
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": outcome.reply},
            "finish_reason": "stop",
        }],
        "usage": usage_json(outcome),
    });
    let mut response = Response::new(Body::from(body.to_string()));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

fn sse_response(body: Body) -> Response {
    let mut response = Response::new(body);
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}
