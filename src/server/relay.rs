//! Every other `/v1/*` path (models, embeddings, completions, responses, files, …) relayed
//! verbatim: method, path, query, body and status, streamed in both directions.
//!
//! Memproxy does not read these bodies, so nothing is buffered and content encodings pass through.
//! Only the `Authorization` rules of [`crate::upstream`] and hop-by-hop filtering apply.

use std::time::Instant;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use axum::Extension;

use crate::error::ProxyError;

use super::auth::RequestContext;
use super::chat::route_mode;
use super::extract::ApiPath;
use super::SharedState;

const ROUTE: &str = "/v1/*";

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
    let mut response = Response::new(Body::from_stream(upstream.bytes_stream()));
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    let overhead = before_upstream + sent_at.elapsed().saturating_sub(waited);
    state
        .metrics
        .observe_timing(ROUTE, "relay", waited, overhead);
    Ok(response)
}
