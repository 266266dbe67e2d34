//! `POST /v1/chat/completions` (and `/{mode}/v1/chat/completions`): validate, identify, pick the
//! strategy, forward, and relay the answer (streamed or whole) while recording the exchange.

use std::sync::Arc;
use std::time::Instant;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use axum::response::Response;
use axum::Extension;
use futures_util::StreamExt;

use crate::error::ProxyError;
use crate::hooks::Outcome;
use crate::identity::{resolve_mode, Scope};
use crate::mode::Mode;
use crate::openai::accumulate::{AssistantReply, StreamAccumulator, Watch};
use crate::openai::{ChatRequest, CompletionView, StreamOptions, Usage};
use crate::upstream::{request_headers, response_headers};

use super::auth::RequestContext;
use super::exchange::ExchangeRecorder;
use super::extract::{ApiPath, LimitedBody as ChatBody};
use super::stream::{TeeSettings, TeeStream};
use super::SharedState;

const ROUTE: &str = "/v1/chat/completions";
const MODE_RESPONSE_HEADER: HeaderName = HeaderName::from_static("x-memproxy-mode");

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

/// The mode named by a route prefix; an unknown prefix is an unknown route.
pub fn route_mode(prefix: &str, rest: &str) -> Result<Mode, ProxyError> {
    prefix.parse().map_err(|_| ProxyError::NotFound {
        method: "POST".to_owned(),
        path: format!("/{prefix}{rest}"),
    })
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
    let exchange = Exchange {
        route_mode,
        request,
        client_body: Some(body),
        route,
    };
    handle_request(state, context, headers, exchange).await
}

/// A Chat Completions request on its way through memproxy: read from a client, or translated
/// from another API by its surface (which hands over the request itself, not bytes to read again).
pub struct Exchange {
    /// The mode its route names, if any.
    pub route_mode: Option<Mode>,
    pub request: ChatRequest,
    /// The client's own bytes, which go upstream untouched when nothing changes them; `None` for
    /// a translated request.
    pub client_body: Option<Bytes>,
    /// The API surface it came in on, for metrics (`/v1/messages`).
    pub route: &'static str,
}

/// One Chat Completions exchange, whichever API surface it came in on; the answer is in the Chat
/// Completions shape, for the surface to convert.
pub async fn handle_request(
    state: SharedState,
    context: RequestContext,
    headers: HeaderMap,
    exchange: Exchange,
) -> Result<Response, ProxyError> {
    let started = Instant::now();
    let deadline = tokio::time::Instant::now() + state.upstream.config.total_timeout;
    let Exchange {
        route_mode,
        request,
        client_body,
        route,
    } = exchange;
    if client_body.is_none() {
        request.check_built()?;
    }
    state
        .config
        .limits
        .messages(request.messages.len())
        .map_err(ProxyError::LimitExceeded)?;
    let mode = match resolve_mode(&headers, route_mode, state.config.mode)? {
        // A client's task over the conversation (a title, tags) is not a turn of it.
        mode if crate::strategy::is_client_task(&request) => {
            tracing::debug!(%mode, "a client's task over a quoted conversation: served as passthrough");
            Mode::Passthrough
        }
        mode => mode,
    };
    let scope = Scope::identify(&context.grant, &headers, &request)?;
    if mode == Mode::Explicit {
        return super::explicit::handle(state, context, headers, request, scope, started, route)
            .await;
    }
    let rewrite =
        crate::strategy::prepare(&state.memory, &state.config.memory, mode, &scope, &request).await;

    // Memproxy asks for usage on streams for its own accounting, and hides it again if the
    // client did not ask; otherwise the client's bytes go upstream untouched.
    let strip_usage = request.is_stream()
        && state.upstream.config.observe_stream_usage
        && !request.client_wants_usage();
    let upstream_body = match (rewrite.request.as_ref(), strip_usage, client_body) {
        (None, false, Some(body)) => body,
        (rewritten, _, _) => {
            let mut upstream_request = rewritten.unwrap_or(&request).clone();
            if strip_usage {
                upstream_request
                    .stream_options
                    .get_or_insert_with(StreamOptions::default)
                    .include_usage = Some(true);
            }
            Bytes::from(
                serde_json::to_vec(&upstream_request)
                    .map_err(|e| ProxyError::Internal(e.to_string()))?,
            )
        }
    };

    let request_id = headers
        .get("x-request-id")
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let wants_stream = request.is_stream();
    let recorder = ExchangeRecorder::new(
        Arc::clone(&state),
        route,
        request_id,
        scope,
        mode,
        Arc::new(request),
        started,
    );

    let authorization = state.upstream.authorization(
        context.client_authorization.as_ref(),
        !state.tenant_keys.is_empty(),
    );
    let mut upstream_headers = request_headers(&headers, authorization, false);
    upstream_headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    let reading = Reading {
        watch: Box::<StreamAccumulator>::default(),
        whole: Box::new(completion_replies),
        strip_usage,
    };
    let outgoing = Outgoing {
        upstream: &state.upstream,
        path: "/chat/completions",
        headers: upstream_headers,
        body: upstream_body,
    };
    let answer = Answer {
        mode,
        rewrite: &rewrite,
        wants_stream,
        reading,
        deadline,
    };
    forward(&state, outgoing, recorder, answer).await
}

/// A request on its way to an upstream.
pub struct Outgoing<'a> {
    pub upstream: &'a crate::upstream::Upstream,
    /// What follows the upstream's base URL (`/chat/completions`).
    pub path: &'a str,
    pub headers: HeaderMap,
    pub body: Bytes,
}

/// What the answer to it needs: the strategy's report for the headers, how to read it.
pub struct Answer<'a> {
    pub mode: Mode,
    pub rewrite: &'a crate::strategy::Rewrite,
    pub wants_stream: bool,
    pub reading: Reading,
    pub deadline: tokio::time::Instant,
}

/// Sends the request (the recorder's clock paused while the upstream works) and relays its
/// answer with memproxy's headers; a failure to send is recorded and returned.
pub async fn forward(
    state: &SharedState,
    outgoing: Outgoing<'_>,
    mut recorder: ExchangeRecorder,
    answer: Answer<'_>,
) -> Result<Response, ProxyError> {
    recorder.pause();
    let sent = outgoing
        .upstream
        .send(
            Method::POST,
            outgoing.path,
            outgoing.headers,
            outgoing.body.into(),
        )
        .await;
    recorder.resume();
    let upstream = match sent {
        Ok(response) => response,
        Err(error) => return Err(recorder.fail(None, error)),
    };
    let mut relayed = response_headers(upstream.headers());
    relayed.insert(
        MODE_RESPONSE_HEADER,
        HeaderValue::from_static(answer.mode.as_str()),
    );
    rewrite_headers(&mut relayed, answer.mode, answer.rewrite);
    relay_answer(
        state,
        upstream,
        relayed,
        recorder,
        answer.wants_stream,
        answer.reading,
        answer.deadline,
    )
    .await
}

/// Reads a whole 2xx answer's replies and usage; `Err` says why the body is no answer at all
/// (the client then gets a 502 saying so, not a body its SDK cannot read).
pub type ReadWhole =
    Box<dyn FnOnce(&[u8]) -> Result<(Vec<AssistantReply>, Option<Usage>), String> + Send>;

/// How an answer in one API's shape is read into the neutral replies for the recorder.
pub struct Reading {
    /// For a stream: reads its events.
    pub watch: Box<dyn Watch>,
    /// For a whole body: its replies and usage.
    pub whole: ReadWhole,
    /// Remove usage from a Chat Completions stream: memproxy asked for it, the client did not.
    pub strip_usage: bool,
}

/// Relays the upstream's answer (a stream event by event, or the whole body) as it came, except
/// for `relayed` headers, while the recorder learns the reply; the error of a broken or stalled
/// answer ends it, and is recorded.
async fn relay_answer(
    state: &SharedState,
    upstream: reqwest::Response,
    mut relayed: HeaderMap,
    mut recorder: ExchangeRecorder,
    wants_stream: bool,
    reading: Reading,
    deadline: tokio::time::Instant,
) -> Result<Response, ProxyError> {
    let status = upstream.status();
    let is_event_stream = upstream
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("text/event-stream"));

    if wants_stream && status.is_success() && is_event_stream {
        relayed.insert("x-accel-buffering", HeaderValue::from_static("no"));
        relayed.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        let settings = TeeSettings {
            watch: reading.watch,
            strip_usage: reading.strip_usage,
            idle_timeout: state.upstream.config.idle_timeout,
            total_timeout: state.upstream.config.total_timeout,
            deadline,
        };
        let tee = TeeStream::new(upstream.bytes_stream().boxed(), settings, recorder);
        return Ok(build_response(status, relayed, Body::from_stream(tee)));
    }

    // Whole body: read it (bounded by the total deadline), relay it as is, learn from it.
    recorder.pause();
    let read = state.upstream.whole_body(upstream, deadline).await;
    recorder.resume();
    let bytes = match read {
        Ok(bytes) => bytes,
        Err(error) => return Err(recorder.fail(Some(status.as_u16()), error)),
    };
    if status.is_success() {
        let (replies, usage) = match (reading.whole)(&bytes) {
            Ok(read) => read,
            Err(why) => {
                let error = ProxyError::UpstreamBroken(why);
                return Err(recorder.fail(Some(status.as_u16()), error));
            }
        };
        recorder.finish(replies, usage, Outcome::Completed);
    } else {
        let outcome = Outcome::UpstreamFailed {
            status: Some(status.as_u16()),
            message: String::from_utf8_lossy(&bytes).chars().take(500).collect(),
        };
        recorder.finish(Vec::new(), None, outcome);
    }
    Ok(build_response(status, relayed, Body::from(bytes)))
}

/// The replies of a whole Chat Completions answer; `Err` for a body that is no answer: not JSON
/// (cut off, or an event stream for a request that asked for none), or an error object where the
/// completion should be. One parse on the usual path.
fn completion_replies(bytes: &[u8]) -> Result<(Vec<AssistantReply>, Option<Usage>), String> {
    let shown = |text: &str| text.chars().take(200).collect::<String>();
    let view: CompletionView = match serde_json::from_slice(bytes) {
        Ok(view) => view,
        // JSON of another shape is relayed as it is (nothing to learn from it); only a body that
        // is not JSON at all is refused.
        Err(error) => match serde_json::from_slice::<serde::de::IgnoredAny>(bytes) {
            Ok(_) => CompletionView::default(),
            Err(_) => {
                let body = String::from_utf8_lossy(bytes);
                return Err(format!(
                    "its answer is not JSON ({error}): {}",
                    shown(&body)
                ));
            }
        },
    };
    if let (true, Some(error)) = (view.choices.is_empty(), &view.error) {
        let message = error["message"]
            .as_str()
            .or(error.as_str())
            .unwrap_or("no message");
        return Err(format!("it answered 200 with an error: {}", shown(message)));
    }
    let replies = view
        .choices
        .iter()
        .filter_map(|choice| {
            let message = choice.message.as_ref()?;
            Some(AssistantReply::from_message(
                choice.index,
                message,
                choice.finish_reason.clone(),
            ))
        })
        .collect();
    Ok((replies, view.usage))
}

/// What the strategy did, for clients and comparisons (architecture §2).
fn rewrite_headers(headers: &mut HeaderMap, mode: Mode, rewrite: &crate::strategy::Rewrite) {
    if mode == Mode::Passthrough {
        return;
    }
    let mut put = |name: &'static str, value: String| {
        if let Ok(value) = HeaderValue::from_str(&value) {
            headers.insert(HeaderName::from_static(name), value);
        }
    };
    put("x-memproxy-memories", rewrite.memories.to_string());
    put(
        "x-memproxy-prompt-tokens-before",
        rewrite.tokens_before.to_string(),
    );
    put(
        "x-memproxy-prompt-tokens-after",
        rewrite.tokens_after.to_string(),
    );
    put(
        "x-memproxy-overhead-ms",
        format!("{:.1}", rewrite.elapsed.as_secs_f64() * 1e3),
    );
    if let Some(reason) = &rewrite.degraded {
        let printable: String = reason
            .chars()
            .filter(|c| c.is_ascii() && !c.is_ascii_control())
            .take(200)
            .collect();
        put("x-memproxy-degraded", printable);
    }
}

pub fn build_response(status: StatusCode, headers: HeaderMap, body: Body) -> Response {
    let mut response = Response::new(body);
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    response
}
