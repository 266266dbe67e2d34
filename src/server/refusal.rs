//! A memproxy error in the shape of the API whose route the request came in on: the API surface's
//! own ([`super::surfaces`]), JSON-RPC's for MCP, OpenAI's for the rest. Used where a request is refused before its handler runs (keys, rate limits, the
//! browser guard, the body deadline), so that every client reads the refusal its SDK expects.

use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::error::ProxyError;

use super::surfaces::ApiSurface;

/// `error` in the shape of the API surface among `surfaces` whose route `path` is.
pub fn refusal(surfaces: &[ApiSurface], path: &str, error: ProxyError) -> Response {
    if let Some(surface) = surfaces.iter().find(|s| (s.owns)(path)) {
        (surface.error)(error)
    } else if is_mcp_path(path) {
        json_rpc(&error)
    } else {
        error.into_response()
    }
}

pub fn is_mcp_path(path: &str) -> bool {
    path == "/mcp" || path.starts_with("/mcp/")
}

/// JSON-RPC's invalid-request code: a refusal before any method ran has no request id.
const INVALID_REQUEST: i64 = -32600;

/// An error object of JSON-RPC 2.0 (the MCP transport's shape), with memproxy's status and code.
fn json_rpc(error: &ProxyError) -> Response {
    let (status, _, code) = error.catalogue();
    let body = json!({"jsonrpc": "2.0", "id": null, "error": {
        "code": INVALID_REQUEST, "message": error.to_string(), "data": {"code": code}}});
    let mut response = (status, axum::Json(body)).into_response();
    if let Some(wait) = error.retry_after() {
        response.headers_mut().insert(header::RETRY_AFTER, wait);
    }
    if matches!(error, ProxyError::Unauthorized) {
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"memproxy\""),
        );
    }
    response
}
