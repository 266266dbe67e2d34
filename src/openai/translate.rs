//! Reading a streamed Chat Completions answer for another API's stream, in one place: the chat
//! SSE events read as what they mean ([`ChatEvent`]), tool-call deltas gathered by index
//! ([`ToolCalls`]), and the stream adapter ([`translate_stream`]) that splits the bytes into events,
//! feeds a [`StreamTranslator`] and ends it when the input ends. Each API surface
//! (`anthropic::events`, `responses::events`) only says what its own events are.

use std::collections::{BTreeMap, VecDeque};

use axum::body::Bytes;
use futures_util::future::BoxFuture;
use futures_util::stream::BoxStream;
use futures_util::StreamExt;
use serde_json::{Map, Value};

use crate::error::ProxyError;

use super::sse::{event_data, SseSplitter};

/// What one chat SSE event says.
#[derive(Debug)]
pub enum ChatEvent {
    /// An SSE comment (a keep-alive): passed on as is.
    Comment(Bytes),
    /// `data: [DONE]`.
    Done,
    /// An in-stream error: its message and the `error` object.
    Error(String, Value),
    /// A chunk (text, tool-call deltas, finish reason, usage).
    Chunk(Value),
}

/// Reads one raw chat SSE event; `None` for what carries nothing (blank events, unreadable JSON).
pub fn read_event(raw: &[u8]) -> Option<ChatEvent> {
    let Some(data) = event_data(raw) else {
        return raw
            .starts_with(b":")
            .then(|| ChatEvent::Comment(Bytes::copy_from_slice(raw)));
    };
    if data.trim() == "[DONE]" {
        return Some(ChatEvent::Done);
    }
    let chunk: Value = serde_json::from_str(&data).ok()?;
    if let Some(error) = chunk.get("error") {
        let message = error["message"]
            .as_str()
            .or_else(|| error.as_str())
            .unwrap_or("the upstream failed")
            .to_owned();
        return Some(ChatEvent::Error(message, error.clone()));
    }
    Some(ChatEvent::Chunk(chunk))
}

/// The text delta of a chunk's first choice, if any.
pub fn text_delta(chunk: &Value) -> Option<&str> {
    chunk["choices"][0]["delta"]["content"]
        .as_str()
        .filter(|t| !t.is_empty())
}

/// The finish reason of a chunk's first choice, if any.
pub fn finish_reason(chunk: &Value) -> Option<&str> {
    chunk["choices"][0]["finish_reason"].as_str()
}

/// A tool call's arguments (a JSON string in Chat Completions) as the object other APIs carry:
/// `{}` when the model wrote none, text that is not a JSON object kept under `arguments`.
pub fn arguments_object(text: &str) -> Value {
    if text.trim().is_empty() {
        return serde_json::json!({});
    }
    match serde_json::from_str::<Value>(text) {
        Ok(object @ Value::Object(_)) => object,
        _ => serde_json::json!({ "arguments": text }),
    }
}

/// Copies the settings another API shares with Chat Completions into a translated request
/// (`(their name, Chat Completions name)`, nulls left out), and asks for usage on a stream (the
/// other API's stream reports it).
pub fn carry_settings(
    from: &serde_json::Map<String, Value>,
    into: &mut serde_json::Map<String, Value>,
    names: &[(&str, &str)],
) {
    for (theirs, ours) in names {
        if let Some(value) = from.get(*theirs).filter(|v| !v.is_null()) {
            into.insert((*ours).into(), value.clone());
        }
    }
    if from.get("stream") == Some(&Value::Bool(true)) {
        into.insert("stream".into(), Value::Bool(true));
        into.insert(
            "stream_options".into(),
            serde_json::json!({"include_usage": true}),
        );
    }
}

/// One tool call, gathered from its deltas.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GatheredCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

/// Tool calls gathered from chunks by their `index` (Chat Completions may interleave the deltas
/// of parallel calls).
#[derive(Default)]
pub struct ToolCalls {
    calls: BTreeMap<u64, GatheredCall>,
}

impl ToolCalls {
    pub fn apply(&mut self, chunk: &Value) {
        let deltas = chunk["choices"][0]["delta"]["tool_calls"].as_array();
        for call in deltas.into_iter().flatten() {
            let entry = self
                .calls
                .entry(call["index"].as_u64().unwrap_or(0))
                .or_default();
            if let Some(id) = call["id"].as_str().filter(|id| !id.is_empty()) {
                entry.id = id.to_owned();
            }
            if let Some(name) = call["function"]["name"].as_str().filter(|n| !n.is_empty()) {
                entry.name = name.to_owned();
            }
            if let Some(piece) = call["function"]["arguments"].as_str() {
                entry.arguments.push_str(piece);
            }
        }
    }

    /// The calls in index order; a call the upstream sent without an id gets one
    /// (`{prefix}{position}_{uuid}`).
    pub fn take(&mut self, prefix: &str) -> Vec<GatheredCall> {
        std::mem::take(&mut self.calls)
            .into_values()
            .enumerate()
            .map(|(position, mut call)| {
                if call.id.is_empty() {
                    call.id = format!("{prefix}{position}_{}", uuid::Uuid::new_v4().simple());
                }
                call
            })
            .collect()
    }
}

/// One API's view of a chat stream.
pub trait StreamTranslator: Send + 'static {
    /// The events to send for one raw chat event.
    fn on_event(&mut self, raw: &[u8]) -> Vec<Bytes>;
    /// The input ended (with or without `[DONE]`): the closing events, if any are due.
    fn end_of_input(&mut self) -> Vec<Bytes>;
    /// Work to finish before the events produced so far go out (e.g. logging the response).
    fn pending_work(&mut self) -> Option<BoxFuture<'static, ()>> {
        None
    }
}

struct State<T> {
    input: BoxStream<'static, Result<Bytes, std::io::Error>>,
    splitter: SseSplitter,
    translator: T,
    pending: VecDeque<Bytes>,
    done: bool,
}

/// A chat SSE body stream as another API's stream.
pub fn translate_stream<T: StreamTranslator>(
    input: BoxStream<'static, Result<Bytes, std::io::Error>>,
    translator: T,
) -> BoxStream<'static, Result<Bytes, std::io::Error>> {
    let state = State {
        input,
        splitter: SseSplitter::default(),
        translator,
        pending: VecDeque::new(),
        done: false,
    };
    futures_util::stream::unfold(state, |mut state| async move {
        loop {
            if let Some(next) = state.pending.pop_front() {
                return Some((Ok(next), state));
            }
            if state.done {
                return None;
            }
            match state.input.next().await {
                Some(Ok(bytes)) => {
                    state.splitter.push(&bytes);
                    while let Some(raw) = state.splitter.next_event() {
                        let events = state.translator.on_event(&raw);
                        state.pending.extend(events);
                    }
                }
                Some(Err(error)) => {
                    state.done = true;
                    return Some((Err(error), state));
                }
                None => {
                    state.done = true;
                    if let Some(rest) = state.splitter.finish() {
                        let events = state.translator.on_event(&rest);
                        state.pending.extend(events);
                    }
                    let events = state.translator.end_of_input();
                    state.pending.extend(events);
                }
            }
            if let Some(work) = state.translator.pending_work() {
                work.await;
            }
        }
    })
    .boxed()
}

/// A request body as a JSON object, or the 400 that says why it is not one.
pub fn json_object(body: &[u8]) -> Result<Map<String, Value>, ProxyError> {
    match serde_json::from_slice(body) {
        Ok(Value::Object(request)) => Ok(request),
        Ok(_) => Err(ProxyError::invalid(
            "The request body must be a JSON object.",
            None,
        )),
        Err(error) => Err(ProxyError::invalid(
            format!("The request body is not valid JSON: {error}"),
            None,
        )),
    }
}
