//! Explicit mode on the wire: turns the client's chat request into an agent turn ([`input`]),
//! runs it in a task that outlives the client, and puts its outcome back in the Chat Completions
//! shape ([`answer`]); the other API surfaces translate from there.

mod answer;
mod input;

use std::sync::Arc;
use std::time::Instant;

use axum::body::Body;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::Response;

use crate::agent::{ModelError, TurnError, TurnTasks, UpstreamModel};
use crate::error::ProxyError;
use crate::identity::Scope;
use crate::openai::ChatRequest;
use crate::upstream::request_headers;

use answer::{early_stream, sse_response, whole, Answer};
pub(in crate::server) use input::turn_input;

use crate::server::auth::RequestContext;
use crate::server::SharedState;

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
    let tasks = TurnTasks {
        turns: &state.tasks,
        after: &state.after_exchange,
    };
    let mut turn = state.agents.start_turn(model, input, tasks);
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
    put("x-memproxy-stop", outcome.ending.stop_name().to_owned());
    put(
        "x-memproxy-overhead-ms",
        format!("{:.1}", overhead.as_secs_f64() * 1e3),
    );
    Ok(response)
}

pub(in crate::server) fn failure(error: TurnError) -> Result<Response, ProxyError> {
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
        TurnError::ToolResults(message) => Err(ProxyError::invalid(message, Some("messages"))),
    }
}
