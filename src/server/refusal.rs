//! A memproxy error in the shape of the API whose route the request came in on: Anthropic's
//! for the Messages routes, JSON-RPC's for MCP, OpenAI's (which the Responses API shares) for
//! the rest. Used where a request is refused before its handler runs (keys, rate limits, the
//! browser guard, the body deadline), so that every client reads the refusal its SDK expects.

use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::error::ProxyError;

pub fn refusal(path: &str, error: ProxyError) -> Response {
    if is_messages_path(path) {
        crate::anthropic::error_response(&error)
    } else if is_mcp_path(path) {
        json_rpc(&error)
    } else {
        error.into_response()
    }
}

/// Routes of the Anthropic Messages API (answered in Anthropic's error shape).
pub fn is_messages_path(path: &str) -> bool {
    path.ends_with("/v1/messages") || path.ends_with("/v1/messages/count_tokens")
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
