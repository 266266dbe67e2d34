//! `POST /v1/messages` (and `/{mode}/v1/messages`), Anthropic's Messages API: the request is
//! translated to Chat Completions ([`crate::anthropic`]) and goes through the same exchange as
//! `/v1/chat/completions` (identity, strategy, recall log, agent loop), so one user keeps one
//! memory across APIs; the answer, its stream and every error come back in Anthropic's shape.
//! `POST /v1/messages/count_tokens` counts locally (cl100k, an estimate for other tokenizers).

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;
use axum::Extension;
use futures_util::StreamExt;
use serde_json::{json, Value};

use crate::anthropic::{self, events, reply};
use crate::error::ProxyError;

use super::auth::RequestContext;
use super::chat::route_mode;
use super::extract::{ApiPath, LimitedBody};
use super::SharedState;

const ROUTE: &str = "/v1/messages";

/// Headers that belong to the Anthropic API and not to a Chat Completions upstream.
const ANTHROPIC_HEADERS: [&str; 3] = ["x-api-key", "anthropic-version", "anthropic-beta"];

pub async fn default_route(
    State(state): State<SharedState>,
    Extension(context): Extension<RequestContext>,
    headers: HeaderMap,
    body: Result<LimitedBody, ProxyError>,
) -> Response {
    match body {
        Ok(LimitedBody(body)) => handle(state, context, None, headers, body).await,
        Err(error) => anthropic::error_response(&error),
    }
}

pub async fn mode_route(
    State(state): State<SharedState>,
    ApiPath(mode): ApiPath<String>,
    Extension(context): Extension<RequestContext>,
    headers: HeaderMap,
    body: Result<LimitedBody, ProxyError>,
) -> Response {
    let mode = match route_mode(&mode, ROUTE) {
        Ok(mode) => mode,
        Err(error) => return anthropic::error_response(&error),
    };
    match body {
        Ok(LimitedBody(body)) => handle(state, context, Some(mode), headers, body).await,
        Err(error) => anthropic::error_response(&error),
    }
}

async fn handle(
    state: SharedState,
    context: RequestContext,
    mode: Option<crate::mode::Mode>,
    mut headers: HeaderMap,
    body: Bytes,
) -> Response {
    let anthropic::Translated {
        chat,
        dropped_tools,
    } = match anthropic::to_chat(&body) {
        Ok(translated) => translated,
        Err(error) => return anthropic::error_response(&error),
    };
    let model = chat.model.clone().unwrap_or_default();
    let body = match serde_json::to_vec(&chat) {
        Ok(body) => Bytes::from(body),
        Err(error) => {
            return anthropic::error_response(&ProxyError::Internal(error.to_string()));
        }
    };
    for name in ANTHROPIC_HEADERS {
        headers.remove(name);
    }
    let mut response = match super::chat::handle(state, context, mode, headers, body, ROUTE).await {
        Ok(response) => translate(response, &model).await,
        Err(error) => anthropic::error_response(&error),
    };
    name_dropped_tools(response.headers_mut(), &dropped_tools);
    response
}

/// `x-memproxy-dropped-tools`: the offered tools a Chat Completions upstream cannot run.
pub fn name_dropped_tools(headers: &mut HeaderMap, names: &[String]) {
    if names.is_empty() {
        return;
    }
    let printable: String = names
        .join(", ")
        .chars()
        .filter(|c| c.is_ascii() && !c.is_ascii_control())
        .take(500)
        .collect();
    if let Ok(value) = HeaderValue::from_str(&printable) {
        headers.insert("x-memproxy-dropped-tools", value);
    }
}

/// A Chat Completions answer (whole, streamed or an error) in Anthropic's shape; memproxy's own
/// headers and the request id are kept.
async fn translate(response: Response, model: &str) -> Response {
    let (parts, body) = response.into_parts();
    let mut headers = HeaderMap::new();
    for (name, value) in &parts.headers {
        let name_text = name.as_str();
        if name_text.starts_with("x-memproxy-")
            || name_text == "x-request-id"
            || name_text == "x-upstream-request-id"
        {
            headers.append(name.clone(), value.clone());
        }
    }
    let streamed = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    if parts.status.is_success() && streamed {
        let input = body
            .into_data_stream()
            .map(|chunk| chunk.map_err(std::io::Error::other))
            .boxed();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/event-stream"),
        );
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        return build(
            parts.status,
            headers,
            Body::from_stream(events::translate(input, model)),
        );
    }
    let bytes = match axum::body::to_bytes(body, usize::MAX).await {
        Ok(bytes) => bytes,
        Err(error) => {
            let error = ProxyError::UpstreamBroken(error.to_string());
            return anthropic::error_response(&error);
        }
    };
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    let out = if parts.status.is_success() {
        match serde_json::from_slice::<Value>(&bytes) {
            Ok(completion) if completion["choices"][0]["message"].is_object() => {
                reply::message(&completion, model)
            }
            _ => {
                let error = ProxyError::UpstreamBroken(
                    "the upstream's answer is not a chat completion".to_owned(),
                );
                return anthropic::error_response(&error);
            }
        }
    } else {
        anthropic::error_body(parts.status.as_u16(), &reply::error_message(&bytes))
    };
    build(parts.status, headers, Body::from(out.to_string()))
}

fn build(status: StatusCode, headers: HeaderMap, body: Body) -> Response {
    let mut response = Response::new(body);
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    response
}

/// `POST /v1/messages/count_tokens`: the prompt's tokens as memproxy counts them (cl100k).
pub async fn count_tokens(body: Result<LimitedBody, ProxyError>) -> Response {
    let counted = body.and_then(|LimitedBody(body)| {
        let mut value: Value = serde_json::from_slice(&body).map_err(|error| {
            ProxyError::invalid(format!("The request body is not valid JSON: {error}"), None)
        })?;
        if let Some(object) = value.as_object_mut() {
            object.entry("max_tokens").or_insert(json!(1));
        }
        let bytes = serde_json::to_vec(&value).map_err(|e| ProxyError::Internal(e.to_string()))?;
        let chat = anthropic::to_chat(&bytes)?.chat;
        let messages: usize = chat
            .messages
            .iter()
            .map(|m| {
                let calls = m.tool_calls.as_ref().map_or(0, |calls| {
                    crate::tokens::count(&serde_json::to_string(calls).unwrap_or_default())
                });
                crate::tokens::count_message(&m.role, &m.text()) + calls
            })
            .sum();
        let tools = chat
            .extra
            .get("tools")
            .map_or(0, |tools| crate::tokens::count(&tools.to_string()));
        Ok(messages + tools)
    });
    match counted {
        Ok(tokens) => {
            let mut response =
                Response::new(Body::from(json!({"input_tokens": tokens}).to_string()));
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            response
        }
        Err(error) => anthropic::error_response(&error),
    }
}
