//! `POST /v1/responses` (and `/{mode}/v1/responses`), the OpenAI Responses API: the request is
//! translated to Chat Completions ([`crate::server::responses`]), with the history of its
//! `previous_response_id` rebuilt from this user's response log, and goes through the same
//! exchange as `/v1/chat/completions` (identity, strategy, recall log, agent loop), so one user
//! keeps one memory across APIs. The answer comes back as a `response` object or its event
//! stream, and is logged (unless `store: false`) for the next `previous_response_id` and for
//! `GET` / `DELETE /v1/responses/{id}`.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::Response;
use axum::Extension;
use serde_json::{json, Value};

use super::events::{self, Translator};
use super::native::ResponsesWatch;
use super::{self as wire, reply};
use crate::error::ProxyError;
use crate::identity::{resolve_mode, Scope};
use crate::mode::Mode;
use crate::store::UserScope;

use super::log::Logger;
use crate::server::auth::RequestContext;
use crate::server::core::forward::Reading;
use crate::server::core::native::{Call, Native};
use crate::server::core::route_mode;
use crate::server::core::surface;
use crate::server::core::{Answer, Said};
use crate::server::extract::{ApiPath, LimitedBody};
use crate::server::SharedState;

const ROUTE: &str = "/v1/responses";

pub async fn default_route(
    State(state): State<SharedState>,
    Extension(context): Extension<RequestContext>,
    headers: HeaderMap,
    LimitedBody(body): LimitedBody,
) -> Result<Response, ProxyError> {
    handle(state, context, None, headers, body).await
}

pub async fn mode_route(
    State(state): State<SharedState>,
    ApiPath(mode): ApiPath<String>,
    Extension(context): Extension<RequestContext>,
    headers: HeaderMap,
    LimitedBody(body): LimitedBody,
) -> Result<Response, ProxyError> {
    let mode = route_mode(&mode, ROUTE)?;
    handle(state, context, Some(mode), headers, body).await
}

/// Whose response log: the same user headers (or `user` field) as every other API.
fn user_scope(
    context: &RequestContext,
    headers: &HeaderMap,
    user: Option<&Value>,
) -> Result<UserScope, ProxyError> {
    let user = match user {
        None | Some(Value::Null) => Value::Null,
        Some(Value::String(user)) => Value::String(user.clone()),
        Some(_) => {
            return Err(ProxyError::invalid(
                "'user' must be a string.",
                Some("user"),
            ))
        }
    };
    let probe = crate::conversation::request::Request {
        user: user.as_str().map(str::to_owned),
        ..Default::default()
    };
    Ok(UserScope::from(&Scope::identify(
        &context.grant,
        headers,
        &probe,
    )?))
}

async fn handle(
    state: SharedState,
    context: RequestContext,
    mode: Option<Mode>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ProxyError> {
    let request = wire::parse(&body)?;
    let scope = user_scope(&context, &headers, request.get("user"))?;
    if let Some(upstream) = state.responses_upstream.clone() {
        let mode = resolve_mode(&headers, mode, state.config.mode)?;
        if mode != Mode::Explicit {
            let call = Call {
                state,
                context,
                mode,
                headers,
                body,
                upstream,
            };
            return native(call, request, scope).await;
        }
    }
    let history = match request.get("previous_response_id") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(previous)) => {
            let found = super::log::chain(&state, &scope, previous).await?;
            found.ok_or_else(|| previous_not_found(previous))?
        }
        Some(_) => {
            return Err(ProxyError::invalid(
                "'previous_response_id' must be a string.",
                Some("previous_response_id"),
            ))
        }
    };
    let translated = wire::translate(&request, history)?;
    let skeleton = reply::skeleton(&request, &reply::new_id(), reply::now_seconds());
    let log = Logger {
        state: Arc::clone(&state),
        scope,
        store: request.get("store") != Some(&Value::Bool(false)),
        previous: request
            .get("previous_response_id")
            .and_then(Value::as_str)
            .map(str::to_owned),
        new_messages: translated.new_messages,
        keep_body: true,
    };
    let exchange = crate::server::core::Exchange {
        route_mode: mode,
        request: translated.request,
        client: None,
        route: ROUTE,
    };
    let answer = crate::server::core::handle_request(state, context, headers, exchange).await?;
    let mut response = translate(answer, skeleton, log)?;
    surface::name_dropped_tools(response.headers_mut(), &translated.dropped_tools);
    Ok(response)
}

/// To an upstream that speaks Responses: memory applied in this API's shape, the answer relayed.
/// The upstream keeps the chain of `previous_response_id`; memproxy logs each response's
/// conversation too (under the upstream's id), so that the strategy and the recall log see the
/// whole of it. A chain begun elsewhere is seen from where memproxy joined it.
async fn native(
    call: Call,
    request: serde_json::Map<String, Value>,
    scope: UserScope,
) -> Result<Response, ProxyError> {
    let Call {
        state,
        context,
        mode,
        headers,
        body,
        upstream,
    } = call;
    let previous = request
        .get("previous_response_id")
        .and_then(Value::as_str)
        .map(str::to_owned);
    // The upstream keeps every tenant's responses under one key: continuing one is allowed only
    // from a chain this user's own requests logged here.
    let history = match &previous {
        Some(previous) => super::log::chain(&state, &scope, previous)
            .await?
            .ok_or_else(|| previous_not_found(previous))?,
        None => Vec::new(),
    };
    let translated = match wire::translate(&request, history) {
        Ok(translated) => translated,
        Err(why) => {
            let request = (Method::POST, "/responses", body);
            return crate::server::core::native::relay_raw(
                &state,
                &context,
                &headers,
                &upstream,
                request,
                Some(&why),
            )
            .await;
        }
    };
    let log = Arc::new(std::sync::Mutex::new(Some(Logger {
        state: Arc::clone(&state),
        scope,
        store: request.get("store") != Some(&Value::Bool(false)),
        previous,
        new_messages: translated.new_messages,
        // `GET /v1/responses/{id}` serves the upstream's own copy (see `get`).
        keep_body: false,
    })));
    let log_done = {
        let log = Arc::clone(&log);
        move |response: Value| {
            let logger = log.lock().ok().and_then(|mut l| l.take());
            if let Some(logger) = logger {
                logger.log(response);
            }
        }
    };
    let on_whole = log_done.clone();
    let request = Native {
        route: ROUTE,
        path: "/responses",
        upstream,
        body,
        wire: request,
        neutral: translated.request,
        origin: translated.origin,
        apply: wire::native::apply,
        reading: Reading {
            watch: Box::new(ResponsesWatch::new(Some(Box::new(log_done)))),
            whole: Box::new(move |bytes: &[u8]| {
                let response: Value = serde_json::from_slice(bytes).unwrap_or(Value::Null);
                let read = wire::native::reply_of(&response);
                on_whole(response);
                Ok(read)
            }),
            strip_usage: false,
            framing: Default::default(),
        },
    };
    crate::server::core::native::handle(state, context, mode, headers, request)
        .await
        .map(crate::server::core::Answer::into_response)
}

/// The core's answer as a Responses answer; errors keep their (shared OpenAI) shape.
fn translate(answer: Answer, skeleton: Value, log: Logger) -> Result<Response, ProxyError> {
    if !answer.status.is_success() {
        // The upstream's (or memproxy's) error, already in the OpenAI shape this API uses.
        return Ok(answer.into_response());
    }
    let kept = answer.kept_headers();
    match answer.body.said()? {
        Said::Streamed(input) => {
            let translator = Translator::new(
                skeleton,
                Some(Box::new(move |done| Box::pin(async move { log.log(done) }))),
            );
            let events = events::translate(input, translator);
            Ok(surface::event_stream(answer.status, kept, events))
        }
        Said::Whole(said) => {
            let done = reply::complete(skeleton, &said);
            log.log(done.clone());
            Ok(surface::json(answer.status, kept, &done))
        }
    }
}

/// This user's logged response `id`, or a 404.
async fn stored_response(
    state: &SharedState,
    context: &RequestContext,
    headers: &HeaderMap,
    id: &str,
    delete: bool,
) -> Result<Value, ProxyError> {
    let scope = user_scope(context, headers, None)?;
    let found = super::log::stored(state, scope, id, delete).await?;
    let stored = found.ok_or_else(|| ProxyError::ResourceNotFound(format!("Response '{id}'")))?;
    if stored.body.is_empty() && state.responses_upstream.is_none() && !delete {
        // Relayed to a Responses upstream, which kept the answer; memproxy kept its conversation.
        return Err(ProxyError::ResourceNotFound(format!(
            "Response '{id}' (its body is kept by the Responses upstream it was relayed to)"
        )));
    }
    Ok(serde_json::from_str(&stored.body).unwrap_or(Value::Null))
}

fn previous_not_found(previous: &str) -> ProxyError {
    ProxyError::InvalidRequest {
        message: format!("Previous response with id '{previous}' not found."),
        param: Some("previous_response_id".to_owned()),
        code: "previous_response_not_found",
    }
}

/// `GET /v1/responses/{id}`: this user's logged response. With a native upstream, the upstream's
/// copy, once this user's log shows the response as theirs: the upstream holds every tenant's
/// responses under one key, so an id alone proves nothing.
pub async fn get(
    State(state): State<SharedState>,
    ApiPath(id): ApiPath<String>,
    Extension(context): Extension<RequestContext>,
    headers: HeaderMap,
) -> Result<Response, ProxyError> {
    let body = stored_response(&state, &context, &headers, &id, false).await?;
    if let Some(upstream) = &state.responses_upstream {
        let path = format!("/responses/{id}");
        let request = (Method::GET, path.as_str(), Bytes::new());
        return crate::server::core::native::relay_raw(
            &state, &context, &headers, upstream, request, None,
        )
        .await;
    }
    Ok(surface::json(StatusCode::OK, HeaderMap::new(), &body))
}

/// `DELETE /v1/responses/{id}`: only this user's own (as `get`).
pub async fn delete(
    State(state): State<SharedState>,
    ApiPath(id): ApiPath<String>,
    Extension(context): Extension<RequestContext>,
    headers: HeaderMap,
) -> Result<Response, ProxyError> {
    if let Some(upstream) = &state.responses_upstream {
        // memproxy's copy of the conversation goes too; without one it is not this user's.
        stored_response(&state, &context, &headers, &id, true).await?;
        let path = format!("/responses/{id}");
        let request = (Method::DELETE, path.as_str(), Bytes::new());
        return crate::server::core::native::relay_raw(
            &state, &context, &headers, upstream, request, None,
        )
        .await;
    }
    stored_response(&state, &context, &headers, &id, true).await?;
    let deleted = json!({"id": id, "object": "response.deleted", "deleted": true});
    Ok(surface::json(StatusCode::OK, HeaderMap::new(), &deleted))
}
