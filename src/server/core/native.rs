//! An API relayed in its own shape to an upstream that speaks it (`[upstream.messages]`,
//! `[upstream.responses]`), with memory: the request's neutral form (its translation to Chat
//! Completions) is what identity, the strategy, the recall log and the hooks see; the strategy's
//! [`Plan`] is applied to the client's own request, which otherwise goes upstream byte for byte
//! (and untouched in `passthrough`, or when nothing changed); the answer comes back as the
//! upstream sent it while the API's [`Watch`] reads it for the recorder.
//!
//! Explicit mode does not come here: its agent loop runs on the Chat Completions upstream, and
//! the API surface translates its answer.

use std::sync::Arc;
use std::time::Instant;

use axum::body::Bytes;
use axum::http::{header, HeaderMap, HeaderValue, Method};
use axum::response::Response;
use serde_json::{Map, Value};

use crate::conversation::request::{Message, Request};
use crate::error::ProxyError;
use crate::mode::Mode;
use crate::strategy::Plan;
use crate::upstream::{request_headers, response_headers, Upstream};

use super::answer::Answer;
use super::forward::Reading;
use crate::server::auth::RequestContext;
use crate::server::SharedState;

/// Applies a strategy's plan to an API's request (see `anthropic::native::apply`).
pub type Apply = fn(&mut Map<String, Value>, &[Message], &[Option<usize>], &Plan);

/// A request for an API's own upstream, as it came in (before it is read).
pub struct Call {
    pub state: SharedState,
    pub context: RequestContext,
    pub mode: Mode,
    pub headers: HeaderMap,
    pub body: Bytes,
    pub upstream: Arc<Upstream>,
}

/// One request of an API relayed natively.
pub struct Native {
    /// The API's route, for metrics (`/v1/messages`).
    pub route: &'static str,
    /// The upstream path (`/messages`).
    pub path: &'static str,
    pub upstream: Arc<Upstream>,
    /// The client's request, as bytes and as JSON.
    pub body: Bytes,
    pub wire: Map<String, Value>,
    /// Its neutral form, and for each neutral message the request message it came from.
    pub neutral: Request,
    pub origin: Vec<Option<usize>>,
    pub apply: Apply,
    pub reading: Reading,
}

pub async fn handle(
    state: SharedState,
    context: RequestContext,
    mode: Mode,
    headers: HeaderMap,
    native: Native,
) -> Result<Answer, ProxyError> {
    let started = Instant::now();
    let mode = super::prepare::mode_for(mode, &native.neutral);
    let scope = super::prepare::admit(&state, &context, &headers, &native.neutral)?;
    let Native {
        route,
        path,
        upstream,
        body,
        wire,
        neutral,
        origin,
        apply,
        reading,
    } = native;
    // The neutral form says whether the API streams (Ollama streams unless told not to).
    let wants_stream = neutral.stream;
    let body: super::prepare::BodyOf = Box::new(move |rewrite, neutral| match &rewrite.plan {
        None => Ok(body),
        Some(plan) => {
            let mut wire = wire;
            apply(&mut wire, &neutral.messages, &origin, plan);
            serde_json::to_vec(&wire)
                .map(Bytes::from)
                .map_err(|e| ProxyError::Internal(e.to_string()))
        }
    });
    let mut upstream_headers = request_headers(&headers, None, false);
    upstream.put_credentials(
        &mut upstream_headers,
        context.client_authorization.as_ref(),
        !state.tenant_keys.is_empty(),
    );
    upstream_headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    let surface = super::prepare::Surface {
        route,
        upstream,
        path,
        headers: upstream_headers,
        body,
        reading,
        wants_stream,
    };
    super::prepare::with_memory(state, &headers, (mode, scope), neutral, surface, started).await
}

/// A request relayed as it is, without memory: one memproxy cannot read in its neutral form (a
/// feature with no Chat Completions counterpart; the answer says so in `x-memproxy-degraded`),
/// or one that is not a conversation (`count_tokens`, `models`, a stored response).
pub async fn relay_raw(
    state: &SharedState,
    context: &RequestContext,
    headers: &HeaderMap,
    upstream: &Upstream,
    request: (Method, &str, Bytes),
    unread: Option<&ProxyError>,
) -> Result<Response, ProxyError> {
    let started = tokio::time::Instant::now();
    let (method, path, body) = request;
    let mut upstream_headers = request_headers(headers, None, true);
    upstream.put_credentials(
        &mut upstream_headers,
        context.client_authorization.as_ref(),
        !state.tenant_keys.is_empty(),
    );
    let answer = upstream
        .send(method, path, upstream_headers, body.into())
        .await?;
    let status = answer.status();
    let mut headers = response_headers(answer.headers());
    if let Some(why) = unread {
        let reason: String = format!("not read for memory: {why}")
            .chars()
            .filter(|c| c.is_ascii() && !c.is_ascii_control())
            .take(200)
            .collect();
        if let Ok(value) = HeaderValue::from_str(&reason) {
            headers.insert("x-memproxy-degraded", value);
        }
    }
    let config = &upstream.config;
    let body = crate::server::relay::cut_when_stalled(
        answer.bytes_stream(),
        config.idle_timeout,
        started + config.total_timeout,
    );
    Ok(crate::server::core::surface::build(
        status,
        headers,
        axum::body::Body::from_stream(body),
    ))
}
