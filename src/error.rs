//! The one error type of memproxy and its mapping to OpenAI-shaped HTTP responses.
//!
//! Every error memproxy itself produces goes through [`ProxyError`]; the catalogue in
//! [`ProxyError::catalogue`] is the single place that decides status, `type` and `code`, so chat
//! apps and SDKs see the same shapes they get from OpenAI (`{"error":{"message","type","param","code"}}`).
//! Errors *relayed* from the upstream are not wrapped here: their status and body pass through.

use std::time::Duration;

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    #[error("{message}")]
    InvalidRequest {
        message: String,
        param: Option<String>,
        code: &'static str,
    },
    #[error("The request body is larger than the limit of {limit} bytes.")]
    PayloadTooLarge { limit: usize },
    /// A configured limit (`[limits]`) the request would go over.
    #[error("{0}")]
    LimitExceeded(String),
    /// The key's request budget (`limits.requests_per_minute`) is spent for now.
    #[error("Too many requests for this key (limits.requests_per_minute); retry in {} s.", .0.as_secs_f64().ceil())]
    RateLimited(Duration),
    #[error("Missing or incorrect API key. Send a memproxy key as 'Authorization: Bearer <key>' (or as 'x-api-key: <key>').")]
    Unauthorized,
    /// A valid key asking for something it does not grant (another user, for a key restricted to
    /// one).
    #[error("{0}")]
    Forbidden(String),
    /// A `Host` memproxy does not answer under (`server.allowed_hosts`): the guard against DNS
    /// rebinding, where a web page reaches a local server under its own domain name.
    #[error("memproxy does not answer under the host name '{0}': add it to server.allowed_hosts (MEMPROXY_ALLOWED_HOSTS) if it is yours.")]
    HostNotAllowed(String),
    /// A state-changing request sent by a web page of another origin (`server.allowed_origins`).
    #[error("Requests from the web origin '{0}' may not change anything here: add it to server.allowed_origins (MEMPROXY_ALLOWED_ORIGINS) if it is yours.")]
    OriginNotAllowed(String),
    /// A body in a content type this route does not read (it takes JSON).
    #[error("This route takes a JSON body ('content-type: application/json'), not '{0}'.")]
    UnsupportedMediaType(String),
    /// The client did not send its whole request body in time (`server.body_timeout`).
    #[error("The request body did not arrive within {}.", humantime::format_duration(*.0))]
    BodyTimeout(Duration),
    #[error("Unknown route: {method} {path}")]
    NotFound { method: String, path: String },
    #[error("{0}")]
    ContextLengthExceeded(String),
    #[error("The upstream LLM at {url} is unreachable: {reason}")]
    UpstreamUnreachable { url: String, reason: String },
    #[error("The upstream LLM did not answer within {}.", humantime::format_duration(*.0))]
    UpstreamTimeout(Duration),
    #[error("The upstream LLM failed mid-request: {0}")]
    UpstreamBroken(String),
    #[error("{0} not found.")]
    ResourceNotFound(String),
    #[error("The memory layer is unavailable: {0}")]
    MemoryUnavailable(String),
    #[error("memproxy is shutting down; retry against another instance.")]
    ShuttingDown,
    #[error("Internal error: {0}")]
    Internal(String),
}

impl ProxyError {
    /// A 400 for a request that memproxy refuses before calling upstream.
    pub fn invalid(message: impl Into<String>, param: Option<&str>) -> Self {
        ProxyError::InvalidRequest {
            message: message.into(),
            param: param.map(str::to_owned),
            code: "invalid_request",
        }
    }

    /// Status, OpenAI error `type` and stable `code` of each error: the catalogue.
    pub fn catalogue(&self) -> (StatusCode, &'static str, &'static str) {
        use ProxyError::*;
        match self {
            InvalidRequest { code, .. } => (StatusCode::BAD_REQUEST, "invalid_request_error", code),
            PayloadTooLarge { .. } => (
                StatusCode::PAYLOAD_TOO_LARGE,
                "invalid_request_error",
                "payload_too_large",
            ),
            LimitExceeded(_) => (
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                "limit_exceeded",
            ),
            RateLimited(_) => (
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limit_error",
                "rate_limit_exceeded",
            ),
            Unauthorized => (
                StatusCode::UNAUTHORIZED,
                "authentication_error",
                "invalid_api_key",
            ),
            Forbidden(_) => (StatusCode::FORBIDDEN, "permission_error", "forbidden"),
            HostNotAllowed(_) => (
                StatusCode::FORBIDDEN,
                "permission_error",
                "host_not_allowed",
            ),
            OriginNotAllowed(_) => (
                StatusCode::FORBIDDEN,
                "permission_error",
                "origin_not_allowed",
            ),
            UnsupportedMediaType(_) => (
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "invalid_request_error",
                "unsupported_media_type",
            ),
            BodyTimeout(_) => (
                StatusCode::REQUEST_TIMEOUT,
                "invalid_request_error",
                "request_timeout",
            ),
            NotFound { .. } => (
                StatusCode::NOT_FOUND,
                "invalid_request_error",
                "unknown_route",
            ),
            ContextLengthExceeded(_) => (
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                "context_length_exceeded",
            ),
            UpstreamUnreachable { .. } => (
                StatusCode::BAD_GATEWAY,
                "upstream_error",
                "upstream_unreachable",
            ),
            UpstreamTimeout(_) => (
                StatusCode::GATEWAY_TIMEOUT,
                "upstream_error",
                "upstream_timeout",
            ),
            UpstreamBroken(_) => (StatusCode::BAD_GATEWAY, "upstream_error", "upstream_broken"),
            ResourceNotFound(_) => (StatusCode::NOT_FOUND, "invalid_request_error", "not_found"),
            MemoryUnavailable(_) => (
                StatusCode::SERVICE_UNAVAILABLE,
                "server_error",
                "memory_unavailable",
            ),
            ShuttingDown => (
                StatusCode::SERVICE_UNAVAILABLE,
                "server_error",
                "shutting_down",
            ),
            Internal(_) => (
                StatusCode::INTERNAL_SERVER_ERROR,
                "server_error",
                "internal_error",
            ),
        }
    }

    fn param(&self) -> Option<&str> {
        match self {
            ProxyError::InvalidRequest { param, .. } => param.as_deref(),
            ProxyError::ContextLengthExceeded(_) => Some("messages"),
            _ => None,
        }
    }

    /// The OpenAI-shaped error object, also used for in-stream error events.
    pub fn body(&self) -> serde_json::Value {
        let (_, kind, code) = self.catalogue();
        json!({"error": {"message": self.to_string(), "type": kind, "param": self.param(), "code": code}})
    }

    /// The `retry-after` a client should honour, in whole seconds (at least 1).
    pub fn retry_after(&self) -> Option<HeaderValue> {
        match self {
            ProxyError::RateLimited(wait) => {
                let seconds = wait.as_secs_f64().ceil().max(1.0) as u64;
                Some(HeaderValue::from(seconds))
            }
            _ => None,
        }
    }

    /// The error as one SSE event, for failures after a stream has started.
    pub fn sse_event(&self) -> bytes::Bytes {
        bytes::Bytes::from(format!("data: {}\n\n", self.body()))
    }
}

impl From<crate::store::StoreError> for ProxyError {
    fn from(error: crate::store::StoreError) -> Self {
        crate::memory::MemoryError::from(error).into()
    }
}

impl From<crate::memory::MemoryError> for ProxyError {
    fn from(error: crate::memory::MemoryError) -> Self {
        use crate::memory::MemoryError;
        use crate::store::StoreError;
        match error {
            MemoryError::Store(StoreError::NotFound(what)) => ProxyError::ResourceNotFound(what),
            MemoryError::Store(error @ StoreError::DuplicateText) => {
                ProxyError::invalid(error.to_string(), Some("text"))
            }
            MemoryError::Store(StoreError::Invalid(message)) | MemoryError::Invalid(message) => {
                ProxyError::invalid(message, None)
            }
            MemoryError::Limit(message) => ProxyError::LimitExceeded(message),
            MemoryError::Embed(error) => ProxyError::MemoryUnavailable(error.to_string()),
            MemoryError::Store(error @ StoreError::CannotWrite(_)) => {
                ProxyError::MemoryUnavailable(error.to_string())
            }
            MemoryError::Store(StoreError::Io(error))
                if matches!(
                    error.kind(),
                    std::io::ErrorKind::StorageFull
                        | std::io::ErrorKind::ReadOnlyFilesystem
                        | std::io::ErrorKind::PermissionDenied
                        | std::io::ErrorKind::FileTooLarge
                ) =>
            {
                ProxyError::MemoryUnavailable(
                    crate::store::StoreError::CannotWrite(error.to_string()).to_string(),
                )
            }
            MemoryError::Store(StoreError::Unsupported(message)) => ProxyError::InvalidRequest {
                message,
                param: None,
                code: "unsupported_by_store",
            },
            other => ProxyError::Internal(other.to_string()),
        }
    }
}

impl IntoResponse for ProxyError {
    fn into_response(self) -> Response {
        let (status, _, _) = self.catalogue();
        if status.is_server_error() {
            tracing::warn!(error = %self, "request failed");
        } else {
            tracing::debug!(error = %self, "request refused");
        }
        let mut response = (status, axum::Json(self.body())).into_response();
        if let Some(wait) = self.retry_after() {
            response.headers_mut().insert(header::RETRY_AFTER, wait);
        }
        if matches!(self, ProxyError::Unauthorized) {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"memproxy\""),
            );
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn body_has_openai_shape() {
        let body = ProxyError::invalid("'messages' is required", Some("messages")).body();
        assert_eq!(body["error"]["type"], "invalid_request_error");
        assert_eq!(body["error"]["param"], "messages");
        assert_eq!(body["error"]["code"], "invalid_request");
        assert_eq!(body["error"]["message"], "'messages' is required");
        let timeout = ProxyError::UpstreamTimeout(Duration::from_millis(1500));
        assert_eq!(timeout.catalogue().0, StatusCode::GATEWAY_TIMEOUT);
        assert!(timeout.to_string().contains("1s 500ms"), "{timeout}");
    }
}
