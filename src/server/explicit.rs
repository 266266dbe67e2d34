//! Explicit mode on the wire: turns the client's chat request into an agent turn and the turn's
//! reply back into an ordinary chat completion (whole, or as SSE content deltas).

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::Response;
use serde_json::{json, Value};

use crate::agent::{ModelError, TurnError, TurnInput, TurnOutcome, UpstreamModel};
use crate::error::ProxyError;
use crate::identity::Scope;
use crate::openai::ChatRequest;
use crate::store::UserScope;
use crate::upstream::request_headers;

use super::auth::RequestContext;
use super::SharedState;

const ROUTE: &str = "/v1/chat/completions";

pub async fn handle(
    state: SharedState,
    context: RequestContext,
    headers: HeaderMap,
    request: ChatRequest,
    scope: Scope,
    started: Instant,
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
    // The turn changes memory: it runs to completion even if the client goes away.
    let turn = state
        .tasks
        .spawn(async move { agents.run_turn(&model, input).await })
        .await
        .map_err(|error| ProxyError::Internal(format!("agent turn: {error}")))?;
    let outcome = match turn {
        Ok(outcome) => outcome,
        Err(error) => {
            state
                .metrics
                .count_exchange("explicit", "upstream_failed", None);
            return failure(error);
        }
    };
    let elapsed = started.elapsed();
    let llm = Duration::from_secs_f64(outcome.llm_ms / 1e3);
    let overhead = elapsed.saturating_sub(llm);
    state
        .metrics
        .observe_timing(ROUTE, "explicit", llm, overhead);
    state
        .metrics
        .count_exchange("explicit", "completed", Some(outcome.usage));
    let model_name = request.model.clone().unwrap_or_default();
    let mut response = if request.is_stream() {
        streamed(&outcome, &model_name, request.client_wants_usage())
    } else {
        whole(&outcome, &model_name)
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

/// The reply as OpenAI streams it: role chunk, content deltas, finish chunk, optional usage
/// chunk, `[DONE]`.
fn streamed(outcome: &TurnOutcome, model: &str, include_usage: bool) -> Response {
    let id = completion_id(outcome);
    let created = created();
    let chunk = |delta: Value, finish: Value| {
        let mut chunk = json!({
            "id": id, "object": "chat.completion.chunk", "created": created, "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        });
        if include_usage {
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
    if include_usage {
        let usage = json!({
            "id": id, "object": "chat.completion.chunk", "created": created, "model": model,
            "choices": [], "usage": usage_json(outcome),
        });
        events.push(Bytes::from(format!("data: {usage}\n\n")));
    }
    events.push(Bytes::from_static(b"data: [DONE]\n\n"));
    let stream = futures_util::stream::iter(events.into_iter().map(Ok::<_, std::io::Error>));
    let mut response = Response::new(Body::from_stream(stream));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}
