//! Every other `/v1/*` path (models, embeddings, completions, responses, files, …) relayed
//! verbatim: method, path, query, body and status, streamed in both directions.
//!
//! Memproxy does not read these bodies, so nothing is buffered and content encodings pass through.
//! Only the `Authorization` rules of [`crate::upstream`] and hop-by-hop filtering apply, and the
//! upstream's idle and total timeouts: a body that stalls is cut rather than left hanging.

use std::pin::Pin;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use axum::Extension;
use bytes::Bytes;
use futures_util::{Stream, StreamExt};

use crate::error::ProxyError;

use super::auth::RequestContext;
use super::core::route_mode;
use super::extract::ApiPath;
use super::SharedState;

const ROUTE: &str = "/v1/*";

/// Upstream resources that outlive the request and are found by id: files, batches, stores,
/// threads and the like. Relayed with the shared upstream key, one tenant's would be every
/// tenant's.
const SHARED_RESOURCES: &[&str] = &[
    "files",
    "uploads",
    "batches",
    "fine_tuning",
    "vector_stores",
    "assistants",
    "threads",
    "containers",
    "conversations",
    "evals",
    "chatkit",
];

pub async fn default_route(
    State(state): State<SharedState>,
    Extension(context): Extension<RequestContext>,
    request: Request,
) -> Result<Response, ProxyError> {
    relay(state, context, request).await
}

/// `/{mode}/v1/*`: a chat app configured with a mode-prefixed base URL also lists models there.
pub async fn mode_route(
    State(state): State<SharedState>,
    ApiPath((mode, rest)): ApiPath<(String, String)>,
    Extension(context): Extension<RequestContext>,
    request: Request,
) -> Result<Response, ProxyError> {
    route_mode(&mode, &format!("/v1/{rest}"))?;
    relay(state, context, request).await
}

async fn relay(
    state: SharedState,
    context: RequestContext,
    request: Request,
) -> Result<Response, ProxyError> {
    let started = Instant::now();
    let (parts, body) = request.into_parts();
    let path = parts.uri.path();
    // Everything after the first "/v1" is the upstream path (the base URL ends in /v1).
    let rest = path
        .find("/v1/")
        .map_or(path, |at| &path[at + "/v1".len()..]);
    let shared = rest
        .trim_start_matches('/')
        .split('/')
        .next()
        .is_some_and(|resource| SHARED_RESOURCES.contains(&resource));
    if shared && !state.tenant_keys.is_empty() && !state.config.upstream.relay_shared_resources {
        return Err(ProxyError::Forbidden(format!(
            "'{rest}' is kept by the upstream under the key every tenant shares, so memproxy does not relay it with proxy keys set (upstream.relay_shared_resources)"
        )));
    }
    let path_and_query = match parts.uri.query() {
        Some(query) => format!("{rest}?{query}"),
        None => rest.to_owned(),
    };
    let authorization = state.upstream.authorization(
        context.client_authorization.as_ref(),
        !state.tenant_keys.is_empty(),
    );
    let headers = crate::upstream::request_headers(&parts.headers, authorization, true);
    let before_upstream = started.elapsed();
    let sent_at = Instant::now();
    let upstream = state
        .upstream
        .send(
            parts.method,
            &path_and_query,
            headers,
            reqwest::Body::wrap_stream(body.into_data_stream()),
        )
        .await?;
    let waited = sent_at.elapsed();
    let status = upstream.status();
    let headers = crate::upstream::response_headers(upstream.headers());
    let config = &state.upstream.config;
    let deadline = tokio::time::Instant::from_std(started) + config.total_timeout;
    let body = cut_when_stalled(upstream.bytes_stream(), config.idle_timeout, deadline);
    let mut response = Response::new(Body::from_stream(body));
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    let overhead = before_upstream + sent_at.elapsed().saturating_sub(waited);
    state
        .metrics
        .observe_timing(ROUTE, "relay", waited, overhead);
    Ok(response)
}

/// Relays a body chunk by chunk, ending it with an error when the upstream sends nothing for
/// `idle` or is still sending at `deadline`. A verbatim relay cannot append an error event the
/// client would understand, so the error aborts the connection: the client sees an incomplete
/// body at once instead of waiting forever.
pub(super) fn cut_when_stalled(
    body: impl Stream<Item = reqwest::Result<Bytes>> + Send + 'static,
    idle: Duration,
    deadline: tokio::time::Instant,
) -> impl Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static {
    type Upstream = Pin<Box<dyn Stream<Item = reqwest::Result<Bytes>> + Send>>;
    let body: Upstream = Box::pin(body);
    futures_util::stream::unfold(Some(body), move |body| async move {
        let mut body = body?;
        let until = deadline.min(tokio::time::Instant::now() + idle);
        match tokio::time::timeout_at(until, body.next()).await {
            Ok(Some(Ok(chunk))) => Some((Ok(chunk), Some(body))),
            Ok(Some(Err(error))) => Some((Err(std::io::Error::other(error)), None)),
            Ok(None) => None,
            Err(_) => {
                let why = if until == deadline { "total" } else { "idle" };
                tracing::warn!(
                    timeout = why,
                    "relayed upstream body stalled; connection cut"
                );
                let error = std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("upstream {why} timeout"),
                );
                Some((Err(error), None))
            }
        }
    })
}
