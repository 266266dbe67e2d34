//! Proxy-key authentication and the per-request context it establishes.
//!
//! With proxy keys configured, every `/v1` request must present one (`Authorization: Bearer`); the
//! key selects the tenant that scopes all memory. Keys are compared by SHA-256 digest and never
//! logged. With auth off the tenant is `default` and the client's own `Authorization` may be
//! forwarded upstream (see [`crate::upstream::Upstream::authorization`]).

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;

use crate::config::key_digest;
use crate::error::ProxyError;
use crate::identity::DEFAULT_ID;

use super::SharedState;

/// What authentication learned about a request, for the handlers.
#[derive(Clone, Debug)]
pub struct RequestContext {
    pub tenant: String,
    /// The client's `Authorization` header, kept only to forward it when auth is off.
    pub client_authorization: Option<HeaderValue>,
}

pub async fn authenticate(
    State(state): State<SharedState>,
    mut request: Request,
    next: Next,
) -> Result<Response, ProxyError> {
    let client_authorization = request.headers().get(header::AUTHORIZATION).cloned();
    let context = if state.tenant_keys.is_empty() {
        RequestContext {
            tenant: DEFAULT_ID.to_owned(),
            client_authorization,
        }
    } else {
        let key = client_authorization
            .as_ref()
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.strip_prefix("Bearer "))
            .map(str::trim)
            .ok_or(ProxyError::Unauthorized)?;
        let tenant = state
            .tenant_keys
            .get(&key_digest(key))
            .ok_or(ProxyError::Unauthorized)?;
        RequestContext {
            tenant: tenant.clone(),
            client_authorization: None,
        }
    };
    request.extensions_mut().insert(context);
    Ok(next.run(request).await)
}
