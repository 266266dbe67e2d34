//! Operational endpoints (liveness, readiness, metrics), the 404 fallback and request counting.

use axum::extract::{MatchedPath, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

use crate::error::ProxyError;

use super::SharedState;

pub async fn healthz() -> Json<serde_json::Value> {
    Json(json!({"status": "ok"}))
}

/// Ready when the upstream answers (any status: it is reachable) and the store can be read.
pub async fn readyz(State(state): State<SharedState>) -> Response {
    let upstream = match state.upstream.probe().await {
        Ok(status) => {
            json!({"url": state.upstream.shown(state.upstream.base_url()), "reachable": true, "status": status})
        }
        Err(error) => {
            json!({"url": state.upstream.shown(state.upstream.base_url()), "reachable": false, "error": state.upstream.shown(&error.to_string())})
        }
    };
    let store = match state
        .memory
        .blocking(|store, _| Ok(store.list_users("")?))
        .await
    {
        Ok(_) if state.memory.store().read_only() => {
            json!({"ready": true, "read_only": true, "warning": crate::store::open::READ_ONLY})
        }
        Ok(_) => json!({"ready": true}),
        Err(error) => json!({"ready": false, "error": error.to_string()}),
    };
    let ready = upstream["reachable"] == true && store["ready"] == true;
    let mut body = json!({"status": if ready { "ready" } else { "not_ready" }, "upstream": upstream, "store": store});
    if let Some(warning) = state.exposure_warning.get() {
        body["auth"] = json!({"warning": warning});
    }
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(body)).into_response()
}

pub async fn metrics(State(state): State<SharedState>) -> Response {
    state
        .metrics
        .set_open_indexes(state.memory.vectors().open_count());
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        state.metrics.render(),
    )
        .into_response()
}

pub async fn not_found(request: Request) -> ProxyError {
    ProxyError::NotFound {
        method: request.method().to_string(),
        path: request.uri().path().to_owned(),
    }
}

/// Counts every response by route template (not raw path, which would explode label cardinality).
pub async fn count_requests(
    State(state): State<SharedState>,
    request: Request,
    next: Next,
) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map(|path| path.as_str().to_owned())
        .unwrap_or_else(|| "unmatched".to_owned());
    let response = next.run(request).await;
    state
        .metrics
        .count_request(&route, response.status().as_u16());
    response
}
