//! Proxy-key authentication and the per-request context it establishes.
//!
//! With proxy keys configured, every `/v1` request must present one (`Authorization: Bearer`, or
//! `x-api-key` as Anthropic clients send it); the key selects the tenant that scopes all memory,
//! and is never passed upstream. Keys are compared by SHA-256 digest and never
//! logged. With auth off the tenant is `default` and the client's own `Authorization` may be
//! forwarded upstream (see [`crate::upstream::Upstream::authorization`]). With
//! `limits.requests_per_minute` set, each key's requests are also counted here (a `429` with
//! `retry-after` once its budget is spent; with auth off all requests share one budget).

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;

use crate::error::ProxyError;
use crate::identity::DEFAULT_ID;
use crate::keys::key_digest;
use crate::keys::KeyGrant;

use super::refusal::refusal;
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
    // The budget a request spends: its key's (by digest), or the one shared with auth off.
    let mut budget = [0u8; 32];
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
        let digest = bearer.or(api_key).map(str::trim).map(key_digest);
        let grant = digest.and_then(|digest| state.tenant_keys.get(&digest));
        let (Some(grant), Some(digest)) = (grant, digest) else {
            return Err(refusal(
                state.surfaces,
                request.uri().path(),
                ProxyError::Unauthorized,
            ));
        };
        budget = digest;
        let grant = grant.clone();
        // The memproxy key was for memproxy.
        request.headers_mut().remove(API_KEY);
        RequestContext {
            grant,
            client_authorization: None,
        }
    };
    if let Some(limiter) = &state.rate_limiter {
        if let Err(wait) = limiter.take(budget, std::time::Instant::now()) {
            state.metrics.count_rate_limited();
            return Err(refusal(
                state.surfaces,
                request.uri().path(),
                ProxyError::RateLimited(wait),
            ));
        }
    }
    request.extensions_mut().insert(context);
    Ok(next.run(request).await)
}

const API_KEY: &str = "x-api-key";
