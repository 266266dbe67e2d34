//! `POST /v1/messages` (and `/{mode}/v1/messages`), Anthropic's Messages API: the request is
//! translated to Chat Completions ([`crate::server::messages`]) and goes through the same exchange as
//! `/v1/chat/completions` (identity, strategy, recall log, agent loop), so one user keeps one
//! memory across APIs; the answer, its stream and every error come back in Anthropic's shape.
//! `POST /v1/messages/count_tokens` counts locally (cl100k, an estimate for other tokenizers).

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, Method};
use axum::response::Response;
use axum::Extension;
use serde_json::{json, Value};

use super::{events, reply};
use crate::conversation::request::Message;
use crate::error::ProxyError;
use crate::identity::resolve_mode;
use crate::mode::Mode;

use crate::server::auth::RequestContext;
use crate::server::core::forward::Reading;
use crate::server::core::native::{Call, Native};
use crate::server::core::route_mode;
use crate::server::core::surface;
use crate::server::core::{Answer, AnswerBody, Said};
use crate::server::extract::{ApiPath, LimitedBody};
use crate::server::SharedState;

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
        Err(error) => super::error_response(&error),
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
        Err(error) => return super::error_response(&error),
    };
    match body {
        Ok(LimitedBody(body)) => handle(state, context, Some(mode), headers, body).await,
        Err(error) => super::error_response(&error),
    }
}

async fn handle(
    state: SharedState,
    context: RequestContext,
    mode: Option<Mode>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(upstream) = state.messages_upstream.clone() {
        match resolve_mode(&headers, mode, state.config.mode) {
            Ok(Mode::Explicit) => {}
            Ok(mode) => {
                let call = Call {
                    state,
                    context,
                    mode,
                    headers,
                    body,
                    upstream,
                };
                return native(call).await;
            }
            Err(error) => return super::error_response(&error),
        }
    }
    translated(state, context, mode, headers, body).await
}

/// To an upstream that speaks Messages: memory applied in Anthropic's shape, the answer relayed.
async fn native(call: Call) -> Response {
    let Call {
        state,
        context,
        mode,
        headers,
        body,
        upstream,
    } = call;
    let read = crate::openai::translate::json_object(&body)
        .and_then(|wire| Ok((super::from_request(&wire)?, wire)));
    let answered = match read {
        Ok((translated, wire)) => {
            let request = Native {
                route: ROUTE,
                path: "/messages",
                upstream,
                body,
                wire,
                neutral: translated.request,
                origin: translated.origin,
                apply: super::native::apply,
                reading: Reading {
                    watch: Box::<super::native::MessagesWatch>::default(),
                    whole: Box::new(|bytes: &[u8]| Ok(super::native::whole(bytes))),
                    strip_usage: false,
                    framing: Default::default(),
                },
            };
            crate::server::core::native::handle(state, context, mode, headers, request)
                .await
                .map(crate::server::core::Answer::into_response)
        }
        // Anthropic is the judge of its own API: what memproxy cannot read goes as it is.
        Err(why) => {
            let request = (Method::POST, "/messages", body);
            crate::server::core::native::relay_raw(
                &state,
                &context,
                &headers,
                &upstream,
                request,
                Some(&why),
            )
            .await
        }
    };
    answered.unwrap_or_else(|error| super::error_response(&error))
}

/// To the Chat Completions upstream, translated both ways.
async fn translated(
    state: SharedState,
    context: RequestContext,
    mode: Option<Mode>,
    mut headers: HeaderMap,
    body: Bytes,
) -> Response {
    let super::Translated {
        request,
        dropped_tools,
        ..
    } = match super::translate(&body) {
        Ok(translated) => translated,
        Err(error) => return super::error_response(&error),
    };
    let model = request.model.clone().unwrap_or_default();
    // Kept for a stream's `message_start`, counted there only if the strategy reported no count
    // (passthrough).
    let sent = if request.stream {
        request.messages.clone()
    } else {
        Vec::new()
    };
    for name in ANTHROPIC_HEADERS {
        headers.remove(name);
    }
    let exchange = crate::server::core::Exchange {
        route_mode: mode,
        request,
        client: None,
        route: ROUTE,
    };
    let mut response =
        match crate::server::core::handle_request(state, context, headers, exchange).await {
            Ok(answer) => translate(answer, &model, &sent),
            Err(error) => super::error_response(&error),
        };
    surface::name_dropped_tools(response.headers_mut(), &dropped_tools);
    response
}

/// The core's answer (whole, streamed or an error) in Anthropic's shape; memproxy's own headers
/// and the request id are kept.
fn translate(answer: Answer, model: &str, sent: &[Message]) -> Response {
    let kept = answer.kept_headers();
    if !answer.status.is_success() {
        let AnswerBody::Whole(bytes) = &answer.body else {
            return super::error_response(&ProxyError::Internal(
                "an error answer that is not whole".to_owned(),
            ));
        };
        let out = super::error_body(answer.status.as_u16(), &surface::error_message(bytes));
        return surface::json(answer.status, kept, &out);
    }
    match answer.body.said() {
        Ok(Said::Streamed(input)) => {
            // `message_start` comes before the upstream's usage: it carries the prompt's size as
            // memproxy counted it (the upstream's own count follows in `message_delta`).
            let counted = answer
                .prompt_tokens
                .unwrap_or_else(|| crate::strategy::compact::total_tokens(sent) as u64);
            let events = events::translate(input, model, counted);
            surface::event_stream(answer.status, kept, events)
        }
        Ok(Said::Whole(reply)) => {
            surface::json(answer.status, kept, &reply::message(&reply, model))
        }
        Err(error) => super::error_response(&error),
    }
}

/// `POST /v1/messages/count_tokens`: relayed to a Messages upstream; without one, the prompt's
/// tokens as memproxy counts them (cl100k).
pub async fn count_tokens(
    State(state): State<SharedState>,
    Extension(context): Extension<RequestContext>,
    headers: HeaderMap,
    body: Result<LimitedBody, ProxyError>,
) -> Response {
    if let (Some(upstream), Ok(LimitedBody(body))) = (&state.messages_upstream, &body) {
        let request = (Method::POST, "/messages/count_tokens", body.clone());
        return crate::server::core::native::relay_raw(
            &state, &context, &headers, upstream, request, None,
        )
        .await
        .unwrap_or_else(|error| super::error_response(&error));
    }
    let counted = body.and_then(|LimitedBody(body)| {
        let mut value: Value = serde_json::from_slice(&body).map_err(|error| {
            ProxyError::invalid(format!("The request body is not valid JSON: {error}"), None)
        })?;
        if let Some(object) = value.as_object_mut() {
            object.entry("max_tokens").or_insert(json!(1));
        }
        let bytes = serde_json::to_vec(&value).map_err(|e| ProxyError::Internal(e.to_string()))?;
        let chat = crate::openai::neutral::chat_request(&super::translate(&bytes)?.request);
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
        Err(error) => super::error_response(&error),
    }
}

/// `GET /v1/models` from an Anthropic client (it sends `anthropic-version`): the upstream's list
/// in Anthropic's shape. Any other client gets the upstream's list relayed as it is.
pub async fn models(
    State(state): State<SharedState>,
    Extension(context): Extension<RequestContext>,
    request: axum::extract::Request,
) -> Response {
    list_models(state, context, request).await
}

/// `GET /{mode}/v1/models`, the same for a client whose base URL names a mode.
pub async fn mode_models(
    State(state): State<SharedState>,
    ApiPath(mode): ApiPath<String>,
    Extension(context): Extension<RequestContext>,
    request: axum::extract::Request,
) -> Response {
    if let Err(error) = route_mode(&mode, "/v1/models") {
        return if request.headers().contains_key("anthropic-version") {
            super::error_response(&error)
        } else {
            axum::response::IntoResponse::into_response(error)
        };
    }
    list_models(state, context, request).await
}

async fn list_models(
    state: SharedState,
    context: RequestContext,
    request: axum::extract::Request,
) -> Response {
    if let Some(upstream) = &state.messages_upstream {
        if request.headers().contains_key("anthropic-version") {
            let path = match request.uri().query() {
                Some(query) => format!("/models?{query}"),
                None => "/models".to_owned(),
            };
            let headers = request.headers().clone();
            let request = (Method::GET, path.as_str(), Bytes::new());
            return crate::server::core::native::relay_raw(
                &state, &context, &headers, upstream, request, None,
            )
            .await
            .unwrap_or_else(|error| super::error_response(&error));
        }
    }
    if !request.headers().contains_key("anthropic-version") {
        return match crate::server::relay::default_route(State(state), Extension(context), request)
            .await
        {
            Ok(response) => response,
            Err(error) => axum::response::IntoResponse::into_response(error),
        };
    }
    let mut headers = request.headers().clone();
    for name in ANTHROPIC_HEADERS {
        headers.remove(name);
    }
    let listed = surface::ask_upstream(&state, &context, &headers, (Method::GET, "/models", None));
    match listed.await {
        Ok((status, body)) if status.is_success() => {
            let list: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            surface::json(status, HeaderMap::new(), &reply::models(&list))
        }
        Ok((status, body)) => surface::json(
            status,
            HeaderMap::new(),
            &super::error_body(status.as_u16(), &surface::error_message(&body)),
        ),
        Err(error) => super::error_response(&error),
    }
}
