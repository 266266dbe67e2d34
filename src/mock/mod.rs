//! A scripted OpenAI-compatible upstream, on a real socket.
//!
//! The tests, the benchmark and `memproxy mock-upstream` all talk to this server instead of a real
//! LLM. Replies come from a script queue ([`MockUpstream::push`]); with an empty queue the `model`
//! field picks a behaviour (`mock-tool`, `mock-error-429`, `mock-error-400`), and anything else is
//! answered with `echo: <last user message>`. Streams are real SSE written as OpenAI writes them
//! (role chunk, content pieces, finish chunk, optional usage chunk, `[DONE]`), and the server notes
//! every request it received and every stream its client abandoned.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use axum::serve::ListenerExt;
use axum::{Json, Router};
use serde_json::{json, Value};
use tokio::net::TcpListener;

use crate::server::no_delay;
use tokio_util::sync::CancellationToken;

mod completion;
mod memory_llm;
mod native;
mod ollama;
mod state;

use completion::{cached_prefix, sse_response, words, Completion, StreamEnd};
use memory_llm::{memory_default, MARKERS};
use state::{locked, MockState};
pub use state::{Received, Reply};

pub struct MockUpstream {
    pub addr: SocketAddr,
    state: Arc<MockState>,
    stop: CancellationToken,
}

impl MockUpstream {
    /// Starts on an ephemeral loopback port.
    pub async fn start() -> std::io::Result<MockUpstream> {
        Self::start_on("127.0.0.1:0".parse().map_err(std::io::Error::other)?).await
    }

    pub async fn start_on(addr: SocketAddr) -> std::io::Result<MockUpstream> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(MockState::default());
        let stop = CancellationToken::new();
        let app = Router::new()
            .route("/v1/chat/completions", post(chat))
            .route("/v1/models", get(models))
            .route("/props", get(props))
            .route("/v1/messages", post(native::messages))
            .route("/v1/messages/count_tokens", post(native::count_tokens))
            .route("/v1/responses", post(native::responses))
            .route(
                "/v1/responses/{id}",
                get(native::stored_response).delete(native::delete_response),
            )
            .route("/v1/embeddings", post(embeddings))
            .route("/api/chat", post(ollama::chat))
            .route("/api/generate", post(ollama::generate))
            .route("/api/tags", get(ollama::tags))
            .route("/api/{*rest}", any(ollama::other))
            .fallback(any(echo))
            .with_state(Arc::clone(&state));
        let shutdown = stop.clone();
        tokio::spawn(async move {
            let served = axum::serve(listener.tap_io(no_delay), app)
                .with_graceful_shutdown(shutdown.cancelled_owned())
                .await;
            if let Err(error) = served {
                tracing::warn!(%error, "mock upstream stopped");
            }
        });
        Ok(MockUpstream { addr, state, stop })
    }

    /// Base URL to configure as `upstream.url`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// `http://addr`, in front of a full path (`/v1/messages`).
    pub fn addr_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn push(&self, reply: Reply) {
        locked(&self.state.script).push_back(reply);
    }

    /// From now on, `GET /props` answers `props`, as llama.cpp's server describes itself.
    pub fn serve_props(&self, props: Value) {
        *locked(&self.state.props) = Some(props);
    }

    /// From now on, the model list names `owner` as its models' `owned_by` (vLLM: `vllm`).
    pub fn own_models_as(&self, owner: &str) {
        *locked(&self.state.models_owner) = Some(owner.to_owned());
    }

    /// From now on, answers say how many prompt tokens a prefix cache would have served
    /// (`usage.prompt_tokens_details.cached_tokens`), as OpenAI and vLLM report it.
    pub fn report_prompt_cache(&self) {
        locked(&self.state.prompt_cache).get_or_insert((Value::Null, Vec::new()));
    }

    /// Queues a reply for the next request that asks the memory question `marker`
    /// (e.g. `MEMPROXY-EXTRACT`, in its system prompt or its last message), leaving the ordinary
    /// chat script alone.
    pub fn push_marked(&self, marker: &str, reply: Reply) {
        let mut marked = locked(&self.state.marked);
        match marked.iter_mut().find(|(m, _)| m == marker) {
            Some((_, queue)) => queue.push_back(reply),
            None => marked.push((marker.to_owned(), VecDeque::from([reply]))),
        }
    }

    /// Chat requests that asked the memory question `marker` (in their system prompt, or in the
    /// last message of an agent's prompt: `agent::save_prompt`), or, with `None`, that asked none:
    /// what the chat model itself saw.
    pub fn chat_requests(&self, marker: Option<&str>) -> Vec<Value> {
        self.requests()
            .iter()
            .filter(|r| r.path_and_query == "/v1/chat/completions")
            .map(Received::json)
            .filter(|body| match (marker, memory_question(body)) {
                (Some(marker), Some((asked, _))) => asked == marker,
                (None, asked) => asked.is_none(),
                (Some(_), None) => false,
            })
            .collect()
    }

    /// Stops keeping the requests it receives and the responses it answers (a soak or a
    /// benchmark would otherwise measure the mock's own growing record instead of memproxy).
    pub fn forget(&self) {
        self.state.forgetful.store(true, Ordering::Relaxed);
    }

    pub fn requests(&self) -> Vec<Received> {
        locked(&self.state.received).clone()
    }

    /// Streams whose reader went away before the mock finished writing them.
    pub fn abandoned_streams(&self) -> usize {
        self.state.abandoned_streams.load(Ordering::SeqCst)
    }

    /// How many stalled replies ([`Reply::Stall`]) lost their client before answering.
    pub fn abandoned_stalls(&self) -> usize {
        self.state.abandoned_stalls.load(Ordering::SeqCst)
    }

    /// Waits until at least `count` streams were abandoned, or `limit` passes.
    pub async fn wait_abandoned(&self, count: usize, limit: Duration) -> bool {
        let waiting = async {
            loop {
                let notified = self.state.abandoned.notified();
                if self.abandoned_streams() >= count {
                    return;
                }
                notified.await;
            }
        };
        tokio::time::timeout(limit, waiting).await.is_ok()
    }
}

impl Drop for MockUpstream {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn record(state: &MockState, request: Request) -> Received {
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, usize::MAX)
        .await
        .unwrap_or_default();
    let received = Received {
        method: parts.method.to_string(),
        path_and_query: parts
            .uri
            .path_and_query()
            .map_or_else(String::new, |p| p.to_string()),
        headers: parts.headers,
        body,
    };
    if !state.forgetful.load(Ordering::Relaxed) {
        locked(&state.received).push(received.clone());
    }
    received
}

/// The model list, in Anthropic's shape for a client that sends `anthropic-version`.
/// llama.cpp's `GET /props`, when the test set it ([`MockUpstream::serve_props`]).
async fn props(State(state): State<Arc<MockState>>) -> Response {
    match locked(&state.props).clone() {
        Some(props) => Json(props).into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

async fn models(State(state): State<Arc<MockState>>, headers: HeaderMap) -> Json<Value> {
    if headers.contains_key("anthropic-version") {
        return Json(json!({"data": [{"type": "model", "id": "mock-model",
            "display_name": "Mock model", "created_at": "2026-01-01T00:00:00Z"}],
            "has_more": false, "first_id": "mock-model", "last_id": "mock-model"}));
    }
    let owner = locked(&state.models_owner)
        .clone()
        .unwrap_or_else(|| "memproxy-mock".to_owned());
    Json(json!({"object": "list", "data": [
        {"id": "mock-model", "object": "model", "created": 0, "owned_by": owner}
    ]}))
}

/// Deterministic embeddings: hashed bag of words (so texts sharing words are similar), 64
/// dimensions unless the request asks for `dimensions`.
async fn embeddings(State(state): State<Arc<MockState>>, request: Request) -> Response {
    let received = record(&state, request).await;
    let body = received.json();
    let inputs: Vec<String> = match &body["input"] {
        Value::String(text) => vec![text.clone()],
        Value::Array(items) => items
            .iter()
            .map(|i| i.as_str().unwrap_or_default().to_owned())
            .collect(),
        _ => {
            let error = json!({"error": {"message": "'input' is required", "type": "invalid_request_error", "param": "input", "code": null}});
            return (StatusCode::BAD_REQUEST, Json(error)).into_response();
        }
    };
    let dimensions = body["dimensions"].as_u64().unwrap_or(64) as usize;
    let data: Vec<Value> = inputs
        .iter()
        .enumerate()
        .map(|(index, text)| json!({"object": "embedding", "index": index, "embedding": hashed_words(text, dimensions)}))
        .collect();
    Json(
        json!({"object": "list", "data": data, "model": body["model"],
        "usage": {"prompt_tokens": inputs.len(), "total_tokens": inputs.len()}}),
    )
    .into_response()
}

pub fn hashed_words(text: &str, dimensions: usize) -> Vec<f32> {
    use sha2::{Digest, Sha256};
    let mut vector = vec![0.0_f32; dimensions.max(1)];
    for word in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        let digest = Sha256::digest(word.to_lowercase().as_bytes());
        let slot = u32::from_le_bytes([digest[0], digest[1], digest[2], digest[3]]) as usize
            % vector.len();
        vector[slot] += 1.0;
    }
    vector
}

/// Any other path: describes the request back; `?stream=N` answers N SSE events instead.
async fn echo(State(state): State<Arc<MockState>>, request: Request) -> Response {
    let received = record(&state, request).await;
    let stream_events = received
        .path_and_query
        .split_once("stream=")
        .and_then(|(_, n)| n.split('&').next()?.parse::<usize>().ok());
    if let Some(count) = stream_events {
        let events = (0..count)
            .map(|i| format!("data: {{\"n\":{i}}}\n\n"))
            .collect();
        // `hang=1`: the events, then silence with the connection open (a stalled upstream).
        let end = if received.path_and_query.contains("hang=1") {
            StreamEnd::Hang
        } else {
            StreamEnd::Finish
        };
        return sse_response(&state, events, Duration::ZERO, end);
    }
    let body = json!({
        "method": received.method,
        "path": received.path_and_query,
        "body": String::from_utf8_lossy(&received.body),
    });
    ([("x-mock-echo", "1")], Json(body)).into_response()
}

async fn chat(State(state): State<Arc<MockState>>, request: Request) -> Response {
    let received = record(&state, request).await;
    let body = received.json();
    let reply = match memory_question(&body) {
        Some((marker, material)) => {
            let queued = locked(&state.marked)
                .iter_mut()
                .find(|(m, _)| m == marker)
                .and_then(|(_, queue)| queue.pop_front());
            queued.unwrap_or_else(|| memory_default(marker, &material, &body))
        }
        None => {
            let scripted = locked(&state.script).pop_front();
            scripted.unwrap_or_else(|| default_reply(&body))
        }
    };
    let n = state.counter.fetch_add(1, Ordering::SeqCst);
    answer(&state, reply, &body, n).await
}

/// The memory question a chat request asks, and the material it is about: a marker in the system
/// prompt (the memory LLM's own prompt; the material is the next message), or in the last message
/// (asked inside an agent's prompt; the material is that message).
fn memory_question(body: &Value) -> Option<(&'static str, String)> {
    let text = |message: &Value| message["content"].as_str().unwrap_or_default().to_owned();
    let messages = body["messages"].as_array()?;
    let system = messages.first().map(text).unwrap_or_default();
    if let Some(marker) = MARKERS.iter().find(|m| system.contains(*m)) {
        return Some((marker, messages.get(1).map(text).unwrap_or_default()));
    }
    let last = messages.last().map(text).unwrap_or_default();
    let marker = MARKERS.iter().find(|m| last.contains(*m))?;
    Some((marker, last))
}

/// A scripted error's extra headers on its response.
pub(super) fn with_headers(mut response: Response, headers: Vec<(String, String)>) -> Response {
    for (name, value) in headers {
        if let (Ok(name), Ok(value)) = (
            name.parse::<axum::http::HeaderName>(),
            value.parse::<axum::http::HeaderValue>(),
        ) {
            response.headers_mut().insert(name, value);
        }
    }
    response
}

pub(super) fn default_reply(body: &Value) -> Reply {
    match body["model"].as_str().unwrap_or_default() {
        "mock-tool" => Reply::ToolCalls(vec![(
            "get_weather".to_owned(),
            r#"{"city":"Paris"}"#.to_owned(),
        )]),
        // An explicit-mode agent that files each user message in archival memory, then answers
        // once the tool result is back (the crash tests' agent: every turn writes).
        "mock-archivist" => {
            let messages = body["messages"].as_array().cloned().unwrap_or_default();
            let last = messages.last().cloned().unwrap_or(Value::Null);
            let envelope = last["content"]
                .as_str()
                .and_then(|c| serde_json::from_str::<Value>(c).ok())
                .unwrap_or(Value::Null);
            // After its tool result (or the heartbeat that follows one): answer.
            if last["role"] == "tool" || envelope["type"] == "heartbeat" {
                let result = messages
                    .iter()
                    .rev()
                    .find(|m| m["role"] == "tool")
                    .and_then(|m| m["content"].as_str())
                    .unwrap_or_default();
                let answer = if result.contains("Inserted into archival memory") {
                    "Filed.".to_owned()
                } else {
                    format!("Not filed: {result}")
                };
                Reply::ToolCalls(vec![(
                    "send_message".to_owned(),
                    json!({ "message": answer }).to_string(),
                )])
            } else {
                // What the user said last (not a system alert about memory pressure).
                let said = messages
                    .iter()
                    .rev()
                    .filter(|m| m["role"] == "user")
                    .filter_map(|m| serde_json::from_str::<Value>(m["content"].as_str()?).ok())
                    .find(|e| e["type"] == "user_message")
                    .and_then(|e| e["message"].as_str().map(str::to_owned))
                    .unwrap_or_default();
                Reply::ToolCalls(vec![(
                    "archival_memory_insert".to_owned(),
                    json!({"content": said, "request_heartbeat": true}).to_string(),
                )])
            }
        }
        "mock-error-429" => Reply::Error {
            status: 429,
            message: "Rate limit reached for mock-model.".to_owned(),
            headers: vec![("retry-after".to_owned(), "7".to_owned())],
        },
        "mock-error-400" => Reply::Error {
            status: 400,
            message: "Invalid value for 'temperature'.".to_owned(),
            headers: Vec::new(),
        },
        _ => {
            let last_user = body["messages"]
                .as_array()
                .and_then(|messages| messages.iter().rev().find(|m| m["role"] == "user"))
                .map(|m| match &m["content"] {
                    Value::String(text) => text.clone(),
                    other => other.to_string(),
                })
                .unwrap_or_default();
            Reply::Text(format!("echo: {last_user}"))
        }
    }
}

/// Counts a stalled reply left before its answer, when dropped still holding the counter.
struct Waiting<'a>(Option<&'a AtomicUsize>);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if let Some(counter) = self.0 {
            counter.fetch_add(1, Ordering::SeqCst);
        }
    }
}

async fn answer(state: &Arc<MockState>, reply: Reply, body: &Value, n: usize) -> Response {
    let mut reply = reply;
    while let Reply::Stall(pause, inner) = reply {
        // Counted unless the pause ends: the client dropped the request meanwhile.
        let mut waiting = Waiting(Some(&state.abandoned_stalls));
        tokio::time::sleep(pause).await;
        waiting.0 = None;
        reply = *inner;
    }
    let mut completion = Completion::new(body, n);
    if let Some(previous) = locked(&state.prompt_cache).as_mut() {
        completion.cached_tokens = Some(cached_prefix(previous, body));
    }
    let stream = body["stream"] == true;
    match reply {
        Reply::Error {
            status,
            message,
            headers,
        } => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let kind = if status.as_u16() == 429 {
                "rate_limit_exceeded"
            } else {
                "invalid_request_error"
            };
            let body =
                json!({"error": {"message": message, "type": kind, "param": null, "code": kind}});
            with_headers((status, Json(body)).into_response(), headers)
        }
        Reply::Text(text) if !stream => completion.whole(&text, &[]),
        Reply::ToolCalls(calls) if !stream => completion.whole("", &calls),
        Reply::Text(text) => {
            let events = completion.stream_events(&words(&text), &[]);
            sse_response(state, events, Duration::ZERO, StreamEnd::Finish)
        }
        Reply::ToolCalls(calls) => {
            let events = completion.stream_events(&[], &calls);
            sse_response(state, events, Duration::ZERO, StreamEnd::Finish)
        }
        Reply::SlowStream { pieces, delay } => {
            let events = completion.stream_events(&pieces, &[]);
            sse_response(state, events, delay, StreamEnd::Finish)
        }
        Reply::BrokenStream(pieces) => {
            let events = completion.content_events(&pieces);
            sse_response(state, events, Duration::ZERO, StreamEnd::Break)
        }
        Reply::StallingStream(pieces) => {
            let events = completion.content_events(&pieces);
            sse_response(state, events, Duration::ZERO, StreamEnd::Hang)
        }
        Reply::Raw {
            status,
            content_type,
            body,
        } => Response::builder()
            .status(status)
            .header("content-type", content_type)
            .body(Body::from(body))
            .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response()),
        Reply::RawStream(events) => sse_response(state, events, Duration::ZERO, StreamEnd::Finish),
        Reply::Stall(..) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}
