//! The conversation core every API surface hands its request to ([`handle_request`]): the mode,
//! explicit mode's agent loop, or memory and the forward through [`prepare`]. It hands its answer
//! back as a value ([`Answer`]), not an HTTP response: the upstream's Chat Completions bytes as
//! they came, or a reply memproxy made in no API's shape; each surface converts the request to
//! the core's form and the answer back to its own.

pub(in crate::server) mod answer;

pub(in crate::server) mod exchange;
pub(in crate::server) mod explicit;
pub(in crate::server) mod forward;
pub(in crate::server) mod native;
pub(in crate::server) mod prepare;
pub(in crate::server) mod stream;
pub(in crate::server) mod surface;
pub(in crate::server) mod watch;

use std::sync::Arc;
use std::time::Instant;

use axum::body::Bytes;
use axum::http::{header, HeaderMap, HeaderValue};

use crate::conversation::request::Request;
use crate::error::ProxyError;
use crate::identity::resolve_mode;
use crate::mode::Mode;
use crate::openai::accumulate::StreamAccumulator;
use crate::openai::{ChatRequest, StreamOptions};
use crate::upstream::request_headers;

use crate::server::auth::RequestContext;
use crate::server::SharedState;
pub(in crate::server) use answer::{Answer, AnswerBody, Said};
use forward::Reading;

/// The mode named by a route prefix; an unknown prefix is an unknown route.
pub fn route_mode(prefix: &str, rest: &str) -> Result<Mode, ProxyError> {
    prefix.parse().map_err(|_| ProxyError::NotFound {
        method: "POST".to_owned(),
        path: format!("/{prefix}{rest}"),
    })
}

/// A request on its way through memproxy: the neutral request every surface reads its own into
/// (which hands over the request itself, not bytes to read again), and for a Chat Completions
/// client its own request, whose fields memproxy does not read go upstream as they came.
pub struct Exchange {
    /// The mode its route names, if any.
    pub route_mode: Option<Mode>,
    pub request: Request,
    /// The Chat Completions client's own request and bytes; `None` for another API's request,
    /// which goes upstream as [`crate::openai::neutral::chat_request`] writes it.
    pub client: Option<(ChatRequest, Bytes)>,
    /// The API surface it came in on, for metrics (`/v1/messages`).
    pub route: &'static str,
}

/// One exchange, whichever API surface it came in on; the answer is the upstream's (Chat
/// Completions) or a reply memproxy made (explicit mode), for the surface to convert.
pub async fn handle_request(
    state: SharedState,
    context: RequestContext,
    headers: HeaderMap,
    exchange: Exchange,
) -> Result<Answer, ProxyError> {
    let started = Instant::now();
    let Exchange {
        route_mode,
        request: neutral,
        client,
        route,
    } = exchange;
    let (request, client_body) = match client {
        Some((request, body)) => (request, Some(body)),
        None => {
            let request = crate::openai::neutral::chat_request(&neutral);
            request.check_built()?;
            (request, None)
        }
    };
    let mode = prepare::mode_for(
        resolve_mode(&headers, route_mode, state.config.mode)?,
        &neutral,
    );
    let scope = prepare::admit(&state, &context, &headers, &neutral)?;
    if mode == Mode::Explicit {
        let (params, answer) = (request.extra, explicit::Shape { route, started });
        return explicit::handle(state, context, headers, &neutral, params, scope, answer).await;
    }

    // Memproxy asks for usage on streams for its own accounting, and hides it again if the
    // client did not ask; otherwise the client's bytes go upstream untouched.
    let strip_usage = request.is_stream()
        && state.upstream.config.observe_stream_usage
        && !request.client_wants_usage();
    let wants_stream = request.is_stream();
    // The strategy's plan applied to the client's own request (or its translation), whose
    // fields memproxy does not read go upstream as they came.
    let body: prepare::BodyOf =
        Box::new(
            move |rewrite, _| match (rewrite.plan.as_ref(), strip_usage, client_body) {
                (None, false, Some(body)) => Ok(body),
                (plan, _, _) => {
                    let mut upstream_request = request;
                    if let Some(plan) = plan {
                        upstream_request.messages = plan.apply(&upstream_request.messages);
                    }
                    if strip_usage {
                        upstream_request
                            .stream_options
                            .get_or_insert_with(StreamOptions::default)
                            .include_usage = Some(true);
                    }
                    serde_json::to_vec(&upstream_request)
                        .map(Bytes::from)
                        .map_err(|e| ProxyError::Internal(e.to_string()))
                }
            },
        );
    let authorization = state.upstream.authorization(
        context.client_authorization.as_ref(),
        !state.tenant_keys.is_empty(),
    );
    let mut upstream_headers = request_headers(&headers, authorization, false);
    upstream_headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    let surface = prepare::Surface {
        route,
        upstream: Arc::clone(&state.upstream),
        path: "/chat/completions",
        headers: upstream_headers,
        body,
        reading: Reading {
            watch: Box::<StreamAccumulator>::default(),
            whole: Box::new(watch::completion_replies),
            strip_usage,
            framing: Default::default(),
        },
        wants_stream,
    };
    prepare::with_memory(state, &headers, (mode, scope), neutral, surface, started).await
}
