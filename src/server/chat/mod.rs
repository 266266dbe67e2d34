//! `POST /v1/chat/completions` (and `/{mode}/v1/chat/completions`), the Chat Completions surface:
//! the client's request read as it came (its bytes go upstream untouched when nothing changes
//! them) and handed to the conversation core ([`crate::server::core`]); the upstream's answer is
//! already in this API's shape and is relayed as it is, a reply memproxy made is written as Chat
//! Completions ([`reply`]).

mod reply;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use axum::Extension;

use crate::error::ProxyError;
use crate::mode::Mode;
use crate::openai::ChatRequest;

use crate::server::auth::RequestContext;
use crate::server::core::{handle_request, route_mode, Exchange};
use crate::server::extract::{ApiPath, LimitedBody as ChatBody};
use crate::server::surfaces::{openai_error, ApiSurface};
use crate::server::SharedState;

const ROUTE: &str = "/v1/chat/completions";

pub async fn default_route(
    State(state): State<SharedState>,
    Extension(context): Extension<RequestContext>,
    headers: HeaderMap,
    ChatBody(body): ChatBody,
) -> Result<Response, ProxyError> {
    handle(state, context, None, headers, body, ROUTE).await
}

pub async fn mode_route(
    State(state): State<SharedState>,
    ApiPath(mode): ApiPath<String>,
    Extension(context): Extension<RequestContext>,
    headers: HeaderMap,
    ChatBody(body): ChatBody,
) -> Result<Response, ProxyError> {
    let mode = route_mode(&mode, "/v1/chat/completions")?;
    handle(state, context, Some(mode), headers, body, ROUTE).await
}

/// A Chat Completions request as the client sent it: read, then [`handle_request`].
pub async fn handle(
    state: SharedState,
    context: RequestContext,
    route_mode: Option<Mode>,
    headers: HeaderMap,
    body: Bytes,
    route: &'static str,
) -> Result<Response, ProxyError> {
    let request = ChatRequest::parse(&body)?;
    let asked = reply::Asked {
        model: request.model.clone().unwrap_or_default(),
        include_usage: request.client_wants_usage(),
    };
    let exchange = Exchange {
        route_mode,
        request: request.neutral(),
        client: Some((request, body)),
        route,
    };
    let answer = handle_request(state, context, headers, exchange).await?;
    Ok(reply::respond(answer, asked))
}

/// The Chat Completions surface.
pub const SURFACE: ApiSurface = ApiSurface {
    routes: || {
        axum::Router::new()
            .route(ROUTE, axum::routing::post(default_route))
            .route(
                "/{mode}/v1/chat/completions",
                axum::routing::post(mode_route),
            )
    },
    owns: |path| path.ends_with(ROUTE),
    error: openai_error,
};
