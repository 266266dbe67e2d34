//! Ollama's routes, with and without a strategy prefix (`/api/chat`, `/implicit/api/chat`):
//! `chat` and `generate` are translated to Chat Completions and go through the same exchange as
//! `/v1/chat/completions` (identity, strategy, recall log, agent loop), so one user keeps one
//! memory across APIs; their answers, streams and errors come back in Ollama's shape. With an
//! Ollama upstream (`[upstream.ollama]`) they go there natively ([`super::native`]) and every
//! other `/api/…` route is relayed byte for byte; without one, the model routes Ollama's clients
//! call around a chat (`tags`, `show`, `version`, `embed`) are answered from the Chat Completions
//! upstream, and the model-management routes (`pull`, `create`, `ps`, …) are unknown.

use std::time::Instant;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::Response;
use axum::routing::{any, get, post};
use axum::{Extension, Router};
use serde_json::{json, Value};

use super::reply::{self, Route};
use super::{error_body, error_response};
use crate::error::ProxyError;
use crate::identity::resolve_mode;
use crate::mode::Mode;

use crate::server::auth::RequestContext;
use crate::server::core::route_mode;
use crate::server::core::surface;
use crate::server::core::{Answer, AnswerBody, Said};
use crate::server::extract::LimitedBody;
use crate::server::SharedState;

/// The surface's routes.
pub fn routes() -> Router<SharedState> {
    let mut router = Router::new();
    for prefix in ["", "/{mode}"] {
        router = router
            .route(&format!("{prefix}/api/chat"), post(chat))
            .route(&format!("{prefix}/api/generate"), post(generate))
            .route(&format!("{prefix}/api/tags"), get(tags))
            .route(&format!("{prefix}/api/show"), post(show))
            .route(&format!("{prefix}/api/version"), get(version))
            .route(&format!("{prefix}/api/embed"), post(embed))
            .route(&format!("{prefix}/api/embeddings"), post(embed))
            .route(&format!("{prefix}/api/{{*rest}}"), any(other));
    }
    router
}

/// The mode a path's prefix names (`/explicit/api/chat`), `None` without one; an unknown prefix
/// is an unknown route.
fn mode_of(uri: &Uri) -> Result<Option<Mode>, ProxyError> {
    let path = uri.path();
    if path.starts_with("/api/") {
        return Ok(None);
    }
    let trimmed = path.trim_start_matches('/');
    let (prefix, rest) = trimmed.split_once('/').unwrap_or((trimmed, ""));
    route_mode(prefix, &format!("/{rest}")).map(Some)
}

/// The path after the mode prefix (`/api/chat`).
fn api_path(uri: &Uri) -> &str {
    let path = uri.path();
    path.find("/api/").map_or(path, |at| &path[at..])
}

async fn chat(
    State(state): State<SharedState>,
    Extension(context): Extension<RequestContext>,
    uri: Uri,
    headers: HeaderMap,
    body: Result<LimitedBody, ProxyError>,
) -> Response {
    conversation(state, context, (uri, headers), body, Route::Chat).await
}

async fn generate(
    State(state): State<SharedState>,
    Extension(context): Extension<RequestContext>,
    uri: Uri,
    headers: HeaderMap,
    body: Result<LimitedBody, ProxyError>,
) -> Response {
    conversation(state, context, (uri, headers), body, Route::Generate).await
}

async fn conversation(
    state: SharedState,
    context: RequestContext,
    (uri, headers): (Uri, HeaderMap),
    body: Result<LimitedBody, ProxyError>,
    route: Route,
) -> Response {
    let started = Instant::now();
    let read = mode_of(&uri).and_then(|mode| Ok((mode, body?.0)));
    let (mode, body) = match read {
        Ok(read) => read,
        Err(error) => return error_response(&error),
    };
    if let Some(upstream) = state.ollama_upstream.clone() {
        match resolve_mode(&headers, mode, state.config.mode) {
            // The agent loop runs on the Chat Completions upstream: translated below.
            Ok(Mode::Explicit) => {}
            Ok(mode) => {
                let call = crate::server::core::native::Call {
                    state,
                    context,
                    mode,
                    headers,
                    body,
                    upstream,
                };
                return super::native::handle(call, route).await;
            }
            Err(error) => return error_response(&error),
        }
    }
    let wire = match crate::openai::translate::json_object(&body) {
        Ok(wire) => wire,
        Err(error) => return error_response(&error),
    };
    let converted = match route {
        Route::Chat => super::from_chat(&wire),
        Route::Generate => super::from_generate(&wire),
    };
    let request = match converted {
        Ok(Some(request)) => request,
        Ok(None) => {
            let model = wire
                .get("model")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let loaded = reply::loaded(route, model);
            return surface::json(StatusCode::OK, HeaderMap::new(), &loaded);
        }
        Err(error) => return error_response(&error),
    };
    let model = request.model.clone().unwrap_or_default();
    let exchange = crate::server::core::Exchange {
        route_mode: mode,
        request,
        client: None,
        route: match route {
            Route::Chat => "/api/chat",
            Route::Generate => "/api/generate",
        },
    };
    match crate::server::core::handle_request(state, context, headers, exchange).await {
        Ok(answer) => translate(answer, route, &model, started),
        Err(error) => error_response(&error),
    }
}

/// The core's answer (whole, streamed or an error) in Ollama's shape; memproxy's own headers and
/// the request id are kept.
fn translate(answer: Answer, route: Route, model: &str, started: Instant) -> Response {
    let mut headers = answer.kept_headers();
    if !answer.status.is_success() {
        let AnswerBody::Whole(bytes) = &answer.body else {
            return error_response(&ProxyError::Internal(
                "an error answer that is not whole".to_owned(),
            ));
        };
        return surface::json(
            answer.status,
            headers,
            &error_body(&surface::error_message(bytes)),
        );
    }
    match answer.body.said() {
        Ok(Said::Streamed(input)) => {
            let lines = super::events::translate(input, route, model, started);
            headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/x-ndjson"),
            );
            surface::build(answer.status, headers, axum::body::Body::from_stream(lines))
        }
        Ok(Said::Whole(reply)) => {
            let total = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
            surface::json(
                answer.status,
                headers,
                &reply::whole(route, &reply, model, total),
            )
        }
        Err(error) => error_response(&error),
    }
}

/// A model route's request with its prefix checked and its body read: relayed as it is to an
/// Ollama upstream (`Err`, with the answer, as for any refusal), else handed back to be answered
/// from the Chat Completions upstream.
async fn relayed_or_read(
    state: &SharedState,
    context: &RequestContext,
    (method, uri, headers): (Method, &Uri, &HeaderMap),
    body: Result<LimitedBody, ProxyError>,
) -> Result<Bytes, Response> {
    let body = match mode_of(uri).and(body) {
        Ok(LimitedBody(body)) => body,
        Err(error) => return Err(error_response(&error)),
    };
    let Some(upstream) = state.ollama_upstream.as_ref() else {
        return Ok(body);
    };
    let path = match uri.query() {
        Some(query) => format!("{}?{query}", api_path(uri)),
        None => api_path(uri).to_owned(),
    };
    let relayed = crate::server::core::native::relay_raw(
        state,
        context,
        headers,
        upstream,
        (method, path.as_str(), body),
        None,
    )
    .await;
    Err(relayed.unwrap_or_else(|error| error_response(&error)))
}

/// `GET /api/tags`: the Ollama server's list, or the Chat Completions upstream's models.
async fn tags(
    State(state): State<SharedState>,
    Extension(context): Extension<RequestContext>,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    let empty = Ok(LimitedBody(Bytes::new()));
    let request = (Method::GET, &uri, &headers);
    if let Err(answered) = relayed_or_read(&state, &context, request, empty).await {
        return answered;
    }
    let asked = (Method::GET, "/models", None);
    match surface::ask_upstream(&state, &context, &headers, asked).await {
        Ok((status, body)) if status.is_success() => {
            let list: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            surface::json(status, HeaderMap::new(), &reply::tags(&list))
        }
        Ok((status, body)) => upstream_error(status, &body),
        Err(error) => error_response(&error),
    }
}

fn upstream_error(status: StatusCode, body: &[u8]) -> Response {
    let message = surface::error_message(body);
    surface::json(status, HeaderMap::new(), &error_body(&message))
}

/// `POST /api/show`: the Ollama server's answer, or what can be said of a Chat Completions
/// upstream's model.
async fn show(
    State(state): State<SharedState>,
    Extension(context): Extension<RequestContext>,
    uri: Uri,
    headers: HeaderMap,
    body: Result<LimitedBody, ProxyError>,
) -> Response {
    let request = (Method::POST, &uri, &headers);
    let body = match relayed_or_read(&state, &context, request, body).await {
        Ok(body) => body,
        Err(answered) => return answered,
    };
    let named = crate::openai::translate::json_object(&body).and_then(|wire| {
        ["model", "name"]
            .iter()
            .find_map(|key| wire.get(*key).and_then(Value::as_str).map(str::to_owned))
            .filter(|name| !name.is_empty())
            .ok_or_else(|| ProxyError::invalid("model is required", Some("model")))
    });
    match named {
        Ok(_) => surface::json(StatusCode::OK, HeaderMap::new(), &reply::show()),
        Err(error) => error_response(&error),
    }
}

/// `GET /api/version`: the Ollama server's, or the API version this surface speaks.
async fn version(
    State(state): State<SharedState>,
    Extension(context): Extension<RequestContext>,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    let empty = Ok(LimitedBody(Bytes::new()));
    let request = (Method::GET, &uri, &headers);
    if let Err(answered) = relayed_or_read(&state, &context, request, empty).await {
        return answered;
    }
    let answer = json!({"version": super::API_VERSION});
    surface::json(StatusCode::OK, HeaderMap::new(), &answer)
}

/// `POST /api/embed` (and the older `/api/embeddings`): the Ollama server's, or the Chat
/// Completions upstream's `/embeddings` in Ollama's shape.
async fn embed(
    State(state): State<SharedState>,
    Extension(context): Extension<RequestContext>,
    uri: Uri,
    headers: HeaderMap,
    body: Result<LimitedBody, ProxyError>,
) -> Response {
    let request = (Method::POST, &uri, &headers);
    let body = match relayed_or_read(&state, &context, request, body).await {
        Ok(body) => body,
        Err(answered) => return answered,
    };
    let legacy = api_path(&uri) == "/api/embeddings";
    let asked = crate::openai::translate::json_object(&body).and_then(|wire| {
        let model = super::model(&wire)?;
        let input = match (legacy, wire.get("input"), wire.get("prompt")) {
            (false, Some(input @ (Value::String(_) | Value::Array(_))), _) => input.clone(),
            (true, _, Some(prompt @ Value::String(_))) => prompt.clone(),
            (false, ..) => return Err(ProxyError::invalid("input is required", Some("input"))),
            (true, ..) => return Err(ProxyError::invalid("prompt is required", Some("prompt"))),
        };
        let mut out = json!({"model": model, "input": input});
        if let Some(dimensions) = wire.get("dimensions").filter(|d| d.is_u64()) {
            out["dimensions"] = dimensions.clone();
        }
        Ok((model, out))
    });
    let (model, asked) = match asked {
        Ok(asked) => asked,
        Err(error) => return error_response(&error),
    };
    let request = (Method::POST, "/embeddings", Some(&asked));
    match surface::ask_upstream(&state, &context, &headers, request).await {
        Ok((status, body)) if status.is_success() => {
            let answer: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            let out = reply::embeddings(&answer, &model, legacy);
            surface::json(status, HeaderMap::new(), &out)
        }
        Ok((status, body)) => upstream_error(status, &body),
        Err(error) => error_response(&error),
    }
}

/// Any other `/api/…` route: relayed to an Ollama upstream, else unknown (managing models is
/// the Ollama server's, and a Chat Completions upstream has no such routes).
async fn other(
    State(state): State<SharedState>,
    Extension(context): Extension<RequestContext>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Result<LimitedBody, ProxyError>,
) -> Response {
    let request = (method.clone(), &uri, &headers);
    if let Err(answered) = relayed_or_read(&state, &context, request, body).await {
        return answered;
    }
    error_response(&ProxyError::NotFound {
        method: method.to_string(),
        path: uri.path().to_owned(),
    })
}
