//! Explicit mode in the core: turns the request into an agent turn ([`input`]), runs it in a task
//! that outlives the client, and hands its outcome back as the neutral reply ([`answer`]), which
//! each API surface writes in its own shape.

mod answer;
mod input;

use std::sync::Arc;

use axum::http::HeaderMap;
use futures_util::StreamExt;

use crate::agent::{TurnTasks, UpstreamModel};
use crate::error::ProxyError;
use crate::identity::Scope;
use serde_json::{Map, Value};

use crate::conversation::request::Request;
use crate::upstream::request_headers;

pub(in crate::server) use answer::failure;
pub(in crate::server) use answer::Shape;
use answer::{early_stream, whole};
pub(in crate::server) use input::turn_input;

use crate::server::auth::RequestContext;
use crate::server::core::Answer;
use crate::server::SharedState;

pub async fn handle(
    state: SharedState,
    context: RequestContext,
    headers: HeaderMap,
    neutral: &Request,
    params: Map<String, Value>,
    scope: Scope,
    answer: Shape,
) -> Result<Answer, ProxyError> {
    let input = turn_input(neutral, params, &scope)?;
    let stream = neutral.stream;
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
    let keepalive = state.agents.config().stream_keepalive;
    let joined = if stream && !keepalive.is_zero() {
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
    let mut reply = if stream {
        let events = answer
            .events(&outcome)
            .into_iter()
            .map(Ok::<_, std::io::Error>);
        Answer::replying(HeaderMap::new(), futures_util::stream::iter(events).boxed())
    } else {
        whole(&outcome)
    };
    reply.put("x-memproxy-mode", "explicit");
    reply.put("x-memproxy-agent", &scope.agent);
    reply.put("x-memproxy-turn", &outcome.turn);
    reply.put("x-memproxy-steps", &outcome.model_calls.to_string());
    reply.put("x-memproxy-stop", outcome.ending.stop_name());
    reply.put(
        "x-memproxy-overhead-ms",
        &format!("{:.1}", overhead.as_secs_f64() * 1e3),
    );
    Ok(reply)
}
