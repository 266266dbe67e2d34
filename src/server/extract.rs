//! Request extractors whose failures come back in the OpenAI error shape (axum's own rejections
//! are plain text), so clients see one error format everywhere.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use serde::de::DeserializeOwned;

use crate::error::ProxyError;

use super::SharedState;

/// The raw body, at most `server.max_body_bytes` (413 beyond).
pub struct LimitedBody(pub Bytes);

impl FromRequest<SharedState> for LimitedBody {
    type Rejection = ProxyError;

    async fn from_request(request: Request, state: &SharedState) -> Result<Self, Self::Rejection> {
        let limit = state.config.server.max_body_bytes;
        Bytes::from_request(request, state)
            .await
            .map(LimitedBody)
            .map_err(|rejection| match rejection {
                BytesRejection::FailedToBufferBody(failed)
                    if failed.status() == StatusCode::PAYLOAD_TOO_LARGE =>
                {
                    ProxyError::PayloadTooLarge { limit }
                }
                other => ProxyError::invalid(other.body_text(), None),
            })
    }
}

/// A JSON body of type `T`; parse and type errors are 400s that say what was wrong.
pub struct JsonBody<T>(pub T);

impl<T: DeserializeOwned> FromRequest<SharedState> for JsonBody<T> {
    type Rejection = ProxyError;

    async fn from_request(request: Request, state: &SharedState) -> Result<Self, Self::Rejection> {
        let LimitedBody(bytes) = LimitedBody::from_request(request, state).await?;
        serde_json::from_slice(&bytes)
            .map(JsonBody)
            .map_err(|error| ProxyError::invalid(format!("Invalid JSON body: {error}"), None))
    }
}

/// A UTF-8 text body (JSONL imports).
pub struct TextBody(pub String);

impl FromRequest<SharedState> for TextBody {
    type Rejection = ProxyError;

    async fn from_request(request: Request, state: &SharedState) -> Result<Self, Self::Rejection> {
        let LimitedBody(bytes) = LimitedBody::from_request(request, state).await?;
        String::from_utf8(bytes.to_vec())
            .map(TextBody)
            .map_err(|error| {
                ProxyError::invalid(format!("The body is not valid UTF-8: {error}"), None)
            })
    }
}

/// Path parameters; a malformed one (e.g. a non-numeric id) is an OpenAI-shaped 400.
pub struct ApiPath<T>(pub T);

impl<T: DeserializeOwned + Send> axum::extract::FromRequestParts<SharedState> for ApiPath<T> {
    type Rejection = ProxyError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &SharedState,
    ) -> Result<Self, Self::Rejection> {
        axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map(|axum::extract::Path(value)| ApiPath(value))
            .map_err(|rejection| ProxyError::invalid(rejection.body_text(), None))
    }
}

/// Query parameters, with OpenAI-shaped 400s.
pub struct ApiQuery<T>(pub T);

impl<T: DeserializeOwned + Send> axum::extract::FromRequestParts<SharedState> for ApiQuery<T> {
    type Rejection = ProxyError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &SharedState,
    ) -> Result<Self, Self::Rejection> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|axum::extract::Query(value)| ApiQuery(value))
            .map_err(|rejection| ProxyError::invalid(rejection.body_text(), None))
    }
}
