//! What an API surface is to the server: its routes and the shape of its errors. Each surface is
//! one folder (wire types converted to and from the core's Chat Completions form, its handler)
//! that gives one [`ApiSurface`]; the list of them is the route table's
//! ([`super::routes::SURFACES`]), handed to the refusals made before a handler runs (keys,
//! limits, the browser guard) through the server's state, so nothing below the handlers names
//! them.

use axum::response::{IntoResponse, Response};
use axum::Router;

use crate::error::ProxyError;

use super::SharedState;

/// An API surface.
pub struct ApiSurface {
    /// Its routes, with and without a strategy prefix.
    pub routes: fn() -> Router<SharedState>,
    /// Whether a path is one of its routes: a refusal made before its handler runs is in its
    /// shape ([`ApiSurface::error`]).
    pub owns: fn(&str) -> bool,
    /// A memproxy error in its shape.
    pub error: fn(ProxyError) -> Response,
}

/// OpenAI's error shape (Chat Completions and Responses share it).
pub fn openai_error(error: ProxyError) -> Response {
    error.into_response()
}
