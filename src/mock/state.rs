//! The mock's shared state and the vocabulary of its script: what a test scripts ([`Reply`]),
//! what the mock keeps of the requests it received, and the counters tests read.

use std::collections::VecDeque;
use std::sync::atomic::AtomicUsize;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::Notify;

use axum::body::Bytes;
use axum::http::HeaderMap;

/// One scripted answer to a chat completion request.
#[derive(Clone, Debug)]
pub enum Reply {
    /// Answer with this text (streamed word by word when the request streams).
    Text(String),
    /// Answer with tool calls `(name, arguments)`, streamed as OpenAI streams them.
    ToolCalls(Vec<(String, String)>),
    /// An error status with an OpenAI-shaped body and extra headers.
    Error {
        status: u16,
        message: String,
        headers: Vec<(String, String)>,
    },
    /// Wait this long before answering with the inner reply.
    Stall(Duration, Box<Reply>),
    /// Stream these pieces with a pause before each, then finish normally.
    SlowStream {
        pieces: Vec<String>,
        delay: Duration,
    },
    /// Stream these pieces, then cut the connection without finishing.
    BrokenStream(Vec<String>),
    /// Stream these pieces, then stay silent without closing.
    StallingStream(Vec<String>),
    /// Exactly these bytes as the body, with this status and content type.
    Raw {
        status: u16,
        content_type: String,
        body: String,
    },
    /// Exactly these SSE events (each written as one chunk), as `text/event-stream`.
    RawStream(Vec<String>),
}

/// A request as the mock received it.
#[derive(Clone, Debug)]
pub struct Received {
    pub method: String,
    pub path_and_query: String,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Received {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
}

#[derive(Default)]
pub(super) struct MockState {
    pub(super) script: Mutex<VecDeque<Reply>>,
    /// Replies for requests whose system prompt contains a marker (memory LLM calls).
    pub(super) marked: Mutex<Vec<(String, VecDeque<Reply>)>>,
    pub(super) received: Mutex<Vec<Received>>,
    /// Set: requests are answered but neither they nor the Responses API's answers are kept
    /// (long benchmarks; see [`MockUpstream::forget`]).
    pub(super) forgetful: std::sync::atomic::AtomicBool,
    pub(super) abandoned_streams: AtomicUsize,
    /// Stalled replies whose client went away before the answer.
    pub(super) abandoned_stalls: AtomicUsize,
    pub(super) abandoned: Notify,
    pub(super) counter: AtomicUsize,
    /// `Some`: answers report `prompt_tokens_details.cached_tokens` as a prefix cache would
    /// (whole leading messages identical to the previous request's, with the same tools); holds
    /// the previous request's tools and messages.
    pub(super) prompt_cache: Mutex<Option<(Value, Vec<Value>)>>,
    /// Responses API answers kept for `previous_response_id` and `GET /v1/responses/{id}`.
    pub(super) responses: Mutex<std::collections::HashMap<String, Value>>,
    /// `Some`: `GET /props` answers this, as llama.cpp's server describes itself (its
    /// `total_slots`); `None`: no such route (404).
    pub(super) props: Mutex<Option<Value>>,
    /// The `owned_by` of the model list (`memproxy-mock` unless set; vLLM says `vllm`).
    pub(super) models_owner: Mutex<Option<String>>,
}

pub(super) fn locked<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic elsewhere must not turn every later request into a panic too.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
