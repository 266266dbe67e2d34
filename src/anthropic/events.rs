//! A streamed Chat Completions answer as Anthropic's stream: `message_start`, `ping`, a text
//! block streamed as it comes (`content_block_start` / `text_delta`s / `content_block_stop`),
//! tool calls as `tool_use` blocks (their arguments gathered, then sent as one
//! `input_json_delta`, since Chat Completions may interleave parallel calls and Anthropic blocks
//! may not), `message_delta` with the stop reason and usage, `message_stop`. An error inside the
//! chat stream becomes an `error` event; SSE comments (keep-alives) pass through.

use std::collections::{BTreeMap, VecDeque};

use axum::body::Bytes;
use futures_util::stream::BoxStream;
use futures_util::StreamExt;
use serde_json::{json, Value};

use super::reply::{message_id, stop_reason, tool_input};
use crate::openai::sse::{event_data, SseSplitter};

/// One Anthropic SSE event.
fn event(kind: &str, data: &Value) -> Bytes {
    Bytes::from(format!("event: {kind}\ndata: {data}\n\n"))
}

#[derive(Default)]
struct Call {
    id: String,
    name: String,
    arguments: String,
}

/// The translation state of one stream.
pub struct Translator {
    model: String,
    started: bool,
    /// Index of the next content block.
    next_block: usize,
    /// The text block being streamed, if one is open.
    text_open: Option<usize>,
    calls: BTreeMap<u64, Call>,
    finish: Option<String>,
    completion_usage: Value,
    ended: bool,
}

impl Translator {
    pub fn new(model: &str) -> Translator {
        Translator {
            model: model.to_owned(),
            started: false,
            next_block: 0,
            text_open: None,
            calls: BTreeMap::new(),
            finish: None,
            completion_usage: Value::Null,
            ended: false,
        }
    }

    fn start(&mut self, id: &str, out: &mut Vec<Bytes>) {
        if self.started {
            return;
        }
        self.started = true;
        out.push(event(
            "message_start",
            &json!({"type": "message_start", "message": {
                "id": message_id(id), "type": "message", "role": "assistant", "model": self.model,
                "content": [], "stop_reason": null, "stop_sequence": null,
                "usage": {"input_tokens": 0, "output_tokens": 0}}}),
        ));
        out.push(event("ping", &json!({"type": "ping"})));
    }

    fn close_text(&mut self, out: &mut Vec<Bytes>) {
        if let Some(index) = self.text_open.take() {
            out.push(event(
                "content_block_stop",
                &json!({"type": "content_block_stop", "index": index}),
            ));
        }
    }

    /// Translates one raw chat SSE event.
    pub fn on_event(&mut self, raw: &[u8]) -> Vec<Bytes> {
        let mut out = Vec::new();
        if self.ended {
            return out;
        }
        let Some(data) = event_data(raw) else {
            // A comment (keep-alive) or an empty event: passed on as is.
            if raw.starts_with(b":") {
                out.push(Bytes::copy_from_slice(raw));
            }
            return out;
        };
        if data.trim() == "[DONE]" {
            out.extend(self.finish());
            return out;
        }
        let Ok(chunk) = serde_json::from_str::<Value>(&data) else {
            return out;
        };
        if chunk.get("error").is_some() {
            self.ended = true;
            let message = super::reply::error_message(data.as_bytes());
            out.push(event("error", &super::error_body(502, &message)));
            return out;
        }
        self.start(chunk["id"].as_str().unwrap_or_default(), &mut out);
        if chunk["usage"].is_object() {
            self.completion_usage = chunk.clone();
        }
        let choice = &chunk["choices"][0];
        let delta = &choice["delta"];
        if let Some(text) = delta["content"].as_str().filter(|t| !t.is_empty()) {
            let index = match self.text_open {
                Some(index) => index,
                None => {
                    let index = self.next_block;
                    self.next_block += 1;
                    self.text_open = Some(index);
                    out.push(event(
                        "content_block_start",
                        &json!({"type": "content_block_start", "index": index,
                            "content_block": {"type": "text", "text": ""}}),
                    ));
                    index
                }
            };
            out.push(event(
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": index,
                    "delta": {"type": "text_delta", "text": text}}),
            ));
        }
        for call in delta["tool_calls"].as_array().into_iter().flatten() {
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
        if let Some(finish) = choice["finish_reason"].as_str() {
            self.finish = Some(finish.to_owned());
        }
        out
    }

    /// The closing events (the tool calls, the stop reason and usage), once.
    pub fn finish(&mut self) -> Vec<Bytes> {
        let mut out = Vec::new();
        if self.ended {
            return out;
        }
        self.ended = true;
        self.start("", &mut out);
        self.close_text(&mut out);
        for (position, call) in std::mem::take(&mut self.calls).into_values().enumerate() {
            let index = self.next_block;
            self.next_block += 1;
            let id = if call.id.is_empty() {
                format!("toolu_{position}_{}", uuid::Uuid::new_v4().simple())
            } else {
                call.id
            };
            out.push(event(
                "content_block_start",
                &json!({"type": "content_block_start", "index": index,
                    "content_block": {"type": "tool_use", "id": id, "name": call.name, "input": {}}}),
            ));
            out.push(event(
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": index, "delta": {
                    "type": "input_json_delta",
                    "partial_json": tool_input(&call.arguments).to_string()}}),
            ));
            out.push(event(
                "content_block_stop",
                &json!({"type": "content_block_stop", "index": index}),
            ));
        }
        let mut usage = super::reply::usage(&self.completion_usage);
        if self.completion_usage.is_null() {
            usage = json!({"output_tokens": 0});
        }
        out.push(event(
            "message_delta",
            &json!({"type": "message_delta", "delta": {
                "stop_reason": stop_reason(self.finish.as_deref()), "stop_sequence": null},
                "usage": usage}),
        ));
        out.push(event("message_stop", &json!({"type": "message_stop"})));
        out
    }

    /// The stream ended without `[DONE]`: closed if the answer had finished, otherwise an error.
    fn end_of_input(&mut self) -> Vec<Bytes> {
        if self.ended {
            return Vec::new();
        }
        if self.finish.is_some() {
            return self.finish();
        }
        self.ended = true;
        vec![event(
            "error",
            &super::error_body(
                502,
                "The upstream's stream ended before the answer was complete.",
            ),
        )]
    }
}

struct State {
    input: BoxStream<'static, Result<Bytes, std::io::Error>>,
    splitter: SseSplitter,
    translator: Translator,
    pending: VecDeque<Bytes>,
    done: bool,
}

/// Translates a chat SSE body stream into Anthropic's events.
pub fn translate(
    input: BoxStream<'static, Result<Bytes, std::io::Error>>,
    model: &str,
) -> BoxStream<'static, Result<Bytes, std::io::Error>> {
    let state = State {
        input,
        splitter: SseSplitter::default(),
        translator: Translator::new(model),
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
        }
    })
    .boxed()
}
