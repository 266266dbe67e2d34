//! `GET /memproxy/v1/check` and `POST /memproxy/v1/check/repair`: the consistency check of
//! `memproxy check` on a running server. It looks at every tenant's rows, so only the admin key
//! (or an API open for local use) may run it.

use axum::extract::State;
use axum::{Extension, Json};

use super::admin::AllTenants;
use super::SharedState;
use crate::error::ProxyError;
use crate::memory::check::CheckReport;

async fn run(
    state: SharedState,
    all: AllTenants,
    repair: bool,
) -> Result<Json<CheckReport>, ProxyError> {
    if !all.0 {
        return Err(ProxyError::Forbidden(
            "the consistency check covers every tenant: it needs the admin key".to_owned(),
        ));
    }
    let lease = state.config.memory.job_lease;
    Ok(Json(state.memory.check(repair, lease).await?))
}

pub async fn check(
    State(state): State<SharedState>,
    Extension(all): Extension<AllTenants>,
) -> Result<Json<CheckReport>, ProxyError> {
    run(state, all, false).await
}

pub async fn repair(
    State(state): State<SharedState>,
    Extension(all): Extension<AllTenants>,
) -> Result<Json<CheckReport>, ProxyError> {
    run(state, all, true).await
}
