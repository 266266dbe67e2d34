//! The preparation every request with memory shares, whichever API surface it came in on and
//! whichever upstream it goes to: the limits and who asks ([`admit`]), then the strategy's
//! rewrite of the request's neutral form, the recorder of the exchange and the forward
//! ([`with_memory`]). A surface brings only what is its own ([`Surface`]): how the rewrite
//! becomes its upstream body, its upstream and headers, and how its answer is read.

use std::sync::Arc;
use std::time::Instant;

use axum::body::Bytes;
use axum::http::HeaderMap;

use crate::conversation::request::Request;
use crate::error::ProxyError;
use crate::identity::Scope;
use crate::mode::Mode;
use crate::strategy::Rewrite;
use crate::upstream::Upstream;

use super::answer::Answer;
use super::exchange::ExchangeRecorder;
use super::forward::{forward, Outgoing, Reading, Relaying};
use crate::server::auth::RequestContext;
use crate::server::SharedState;

/// The upstream body for the strategy's rewrite of the neutral request.
pub type BodyOf = Box<dyn FnOnce(&Rewrite, &Request) -> Result<Bytes, ProxyError> + Send>;

/// What an API surface brings to an exchange with memory.
pub struct Surface {
    /// The surface's route, for metrics (`/v1/messages`).
    pub route: &'static str,
    pub upstream: Arc<Upstream>,
    /// The upstream path (`/chat/completions`).
    pub path: &'static str,
    /// The upstream request's headers, credentials included.
    pub headers: HeaderMap,
    pub body: BodyOf,
    pub reading: Reading,
    pub wants_stream: bool,
}

/// The mode a request is served in: a client's task over a quoted conversation (a title, tags)
/// is not a turn of it and is served as passthrough, whichever API it came in on
/// ([`crate::strategy::is_client_task`]).
pub fn mode_for(mode: Mode, neutral: &Request) -> Mode {
    if mode != Mode::Passthrough && crate::strategy::is_client_task(neutral) {
        tracing::debug!(%mode, "a client's task over a quoted conversation: served as passthrough");
        return Mode::Passthrough;
    }
    mode
}

/// The limits and who asks: what every request with memory passes first.
pub fn admit(
    state: &SharedState,
    context: &RequestContext,
    headers: &HeaderMap,
    neutral: &Request,
) -> Result<Scope, ProxyError> {
    state
        .config
        .limits
        .messages(neutral.messages.len())
        .map_err(ProxyError::LimitExceeded)?;
    Scope::identify(&context.grant, headers, neutral)
}

/// One exchange with memory, admitted ([`admit`]) at `started`: the strategy rewrites the
/// neutral request, the surface turns that into its upstream body, and the answer is relayed
/// while the recorder learns it.
pub async fn with_memory(
    state: SharedState,
    client_headers: &HeaderMap,
    (mode, scope): (Mode, Scope),
    neutral: Request,
    surface: Surface,
    started: Instant,
) -> Result<Answer, ProxyError> {
    let deadline = tokio::time::Instant::from_std(started) + state.upstream.config.total_timeout;
    let rewrite =
        crate::strategy::prepare(&state.memory, &state.config.memory, mode, &scope, &neutral).await;
    let body = (surface.body)(&rewrite, &neutral)?;
    let request_id = client_headers
        .get("x-request-id")
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let recorder = ExchangeRecorder::new(
        Arc::clone(&state),
        surface.route,
        request_id,
        scope,
        mode,
        Arc::new(neutral),
        started,
    );
    let outgoing = Outgoing {
        upstream: &surface.upstream,
        path: surface.path,
        headers: surface.headers,
        body,
    };
    let answer = Relaying {
        mode,
        rewrite: &rewrite,
        wants_stream: surface.wants_stream,
        reading: surface.reading,
        deadline,
    };
    forward(&state, outgoing, recorder, answer).await
}
