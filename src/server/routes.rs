//! The route table, and only that: which path goes to which handler behind which layers.

use axum::extract::DefaultBodyLimit;
use axum::http::{HeaderName, Request};
use axum::middleware::{from_fn, from_fn_with_state};
use axum::routing::{any, get, post, put};
use axum::Router;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::TraceLayer;

use super::{
    admin, agents_api, auth, blocks_api, check_api, console, guard, openapi, ops, relay, simulate,
    SharedState,
};

/// Every API surface memproxy serves (a new one is its folder and a line here).
pub const SURFACES: &[super::surfaces::ApiSurface] = &[
    super::chat::SURFACE,
    super::messages::SURFACE,
    super::ollama::SURFACE,
    super::responses::SURFACE,
];

const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

pub fn router(state: SharedState) -> Router {
    let body_limit = state.config.server.max_body_bytes;
    let proxied = SURFACES
        .iter()
        .fold(Router::new(), |router, surface| {
            router.merge((surface.routes)())
        })
        .route_layer(from_fn_with_state(state.clone(), guard::json_body))
        // Any other `/v1` route goes to the upstream as it is, in whatever content type it takes.
        .route("/v1/{*rest}", any(relay::default_route))
        .route("/{mode}/v1/{*rest}", any(relay::mode_route))
        .route_layer(from_fn_with_state(state.clone(), auth::authenticate))
        .layer(DefaultBodyLimit::max(body_limit));
    let user = "/memproxy/v1/users/{user}";
    let management = Router::new()
        .route("/memproxy/v1/users", get(admin::list_users))
        .route(user, axum::routing::delete(admin::delete_user))
        .route(
            &format!("{user}/memories"),
            get(admin::list_memories).post(admin::add_memory),
        )
        .route(&format!("{user}/memories/search"), post(admin::search))
        .route(
            &format!("{user}/memories/{{id}}"),
            axum::routing::patch(admin::update_memory).delete(admin::delete_memory),
        )
        .route(
            &format!("{user}/memories/{{id}}/restore"),
            post(admin::restore_memory),
        )
        .route(&format!("{user}/events"), get(admin::events))
        .route(
            &format!("{user}/agents/{{agent}}/blocks"),
            get(admin::blocks),
        )
        .route(
            &format!("{user}/agents/{{agent}}/blocks/{{label}}"),
            put(admin::put_block).delete(agents_api::delete_block),
        )
        .route(&format!("{user}/blocks"), get(blocks_api::list_shared))
        .route(
            &format!("{user}/blocks/{{name}}"),
            put(blocks_api::put_shared).delete(blocks_api::delete_shared),
        )
        .route(
            &format!("{user}/agents/{{agent}}/shared/{{name}}"),
            put(blocks_api::attach).delete(blocks_api::detach),
        )
        .route(&format!("{user}/agents"), get(agents_api::list_agents))
        .route(
            &format!("{user}/agents/{{agent}}/tags"),
            put(agents_api::put_tags),
        )
        .route(
            &format!("{user}/agents/{{agent}}"),
            get(agents_api::show_agent).delete(agents_api::reset_agent),
        )
        .route(
            &format!("{user}/agents/{{agent}}/messages"),
            get(agents_api::agent_messages),
        )
        .route(
            &format!("{user}/agents/{{agent}}/messages/{{position}}"),
            axum::routing::delete(agents_api::delete_message),
        )
        .route(
            &format!("{user}/agents/{{agent}}/archival"),
            get(agents_api::archival).post(agents_api::add_passage),
        )
        .route(
            &format!("{user}/agents/{{agent}}/archival/{{id}}"),
            axum::routing::delete(agents_api::delete_passage),
        )
        .route(
            &format!("{user}/agents/{{agent}}/summary"),
            get(agents_api::summary).put(agents_api::put_summary),
        )
        .route(
            &format!("{user}/agents/{{agent}}/steps"),
            get(agents_api::user_steps),
        )
        .route("/memproxy/v1/agents/{agent}/steps", get(agents_api::steps))
        .route(&format!("{user}/conversations"), get(admin::conversations))
        .route(
            &format!("{user}/conversations/{{conversation}}/messages"),
            get(admin::messages),
        )
        .route(&format!("{user}/export"), get(admin::export))
        .route(&format!("{user}/import"), post(admin::import))
        .route("/memproxy/v1/jobs", get(admin::jobs))
        .route("/memproxy/v1/check", get(check_api::check))
        .route("/memproxy/v1/check/repair", post(check_api::repair))
        .route("/memproxy/v1/simulate", post(simulate::simulate))
        .route_layer(from_fn_with_state(state.clone(), guard::json_body))
        .route_layer(from_fn_with_state(state.clone(), admin::authorize))
        .layer(DefaultBodyLimit::max(body_limit));
    // Memory over MCP (Streamable HTTP), with the management API's authorization; `guard`
    // checks its Host and Origin as every route's.
    let mcp = Router::new()
        .route_service(
            "/mcp",
            crate::mcp::http_service(
                std::sync::Arc::clone(&state.memory),
                std::sync::Arc::clone(&state.post),
                body_limit,
            ),
        )
        .route_layer(from_fn_with_state(state.clone(), guard::json_body))
        .route_layer(from_fn(crate::mcp::errors_as_json_rpc))
        .route_layer(from_fn_with_state(state.clone(), admin::authorize))
        .layer(DefaultBodyLimit::max(body_limit));
    Router::new()
        .merge(proxied)
        .merge(management)
        .merge(mcp)
        .route("/ui", get(console::index))
        .route("/ui/", get(console::index))
        .route("/ui/app.js", get(console::app))
        .route("/ui/style.css", get(console::style))
        .route("/memproxy/v1/openapi.json", get(openapi::openapi))
        .route("/healthz", get(ops::healthz))
        .route("/readyz", get(ops::readyz))
        .route("/metrics", get(ops::metrics))
        .fallback(ops::not_found)
        .layer(from_fn_with_state(state.clone(), guard::guard))
        .layer(from_fn_with_state(state.clone(), ops::count_requests))
        .layer(PropagateRequestIdLayer::new(REQUEST_ID))
        .layer(TraceLayer::new_for_http().make_span_with(|request: &Request<_>| {
            let id = request
                .headers()
                .get(REQUEST_ID)
                .and_then(|value| value.to_str().ok())
                .unwrap_or("-");
            // The path only: query strings can carry keys.
            tracing::info_span!("request", id, method = %request.method(), path = request.uri().path())
        }))
        .layer(SetRequestIdLayer::new(REQUEST_ID, MakeRequestUuid))
        .with_state(state)
}
