//! Proxy-key authentication and the per-request context it establishes.
//!
//! With proxy keys configured, every `/v1` request must present one (`Authorization: Bearer`, or
//! `x-api-key` as Anthropic clients send it); the key selects the tenant that scopes all memory,
//! and is never passed upstream. Keys are compared by SHA-256 digest and never
//! logged. With auth off the tenant is `default` and the client's own `Authorization` may be
//! forwarded upstream (see [`crate::upstream::Upstream::authorization`]).

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::ProxyError;
use crate::identity::DEFAULT_ID;
use crate::keys::key_digest;
use crate::keys::KeyGrant;

use super::SharedState;

/// What authentication learned about a request, for the handlers.
#[derive(Clone, Debug)]
pub struct RequestContext {
    /// The tenant, and the one user when the key is restricted to one.
    pub grant: KeyGrant,
    /// The client's `Authorization` header, kept only to forward it when auth is off.
    pub client_authorization: Option<HeaderValue>,
}

pub async fn authenticate(
    State(state): State<SharedState>,
    mut request: Request,
    next: Next,
) -> Result<Response, Response> {
    let client_authorization = request.headers().get(header::AUTHORIZATION).cloned();
    let context = if state.tenant_keys.is_empty() {
        RequestContext {
            grant: KeyGrant::tenant(DEFAULT_ID),
            client_authorization,
        }
    } else {
        let bearer = client_authorization
            .as_ref()
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.strip_prefix("Bearer "));
        let api_key = request
            .headers()
            .get(API_KEY)
            .and_then(|value| value.to_str().ok());
        let grant = bearer
            .or(api_key)
            .map(str::trim)
            .and_then(|key| state.tenant_keys.get(&key_digest(key)));
        let Some(grant) = grant else {
            return Err(refusal(request.uri().path()));
        };
        let grant = grant.clone();
        // The memproxy key was for memproxy.
        request.headers_mut().remove(API_KEY);
        RequestContext {
            grant,
            client_authorization: None,
        }
    };
    request.extensions_mut().insert(context);
    Ok(next.run(request).await)
}

const API_KEY: &str = "x-api-key";

/// The 401, in the shape of the API the request came in on.
fn refusal(path: &str) -> Response {
    if is_messages_path(path) {
        crate::anthropic::error_response(&ProxyError::Unauthorized)
    } else {
        ProxyError::Unauthorized.into_response()
    }
}

/// Routes of the Anthropic Messages API (answered in Anthropic's error shape).
pub fn is_messages_path(path: &str) -> bool {
    path.ends_with("/v1/messages") || path.ends_with("/v1/messages/count_tokens")
}
