//! A streamed Chat Completions answer as Ollama's NDJSON stream: one object per text delta
//! (`"done": false`), the tool calls gathered and sent whole in one object (Ollama sends a call
//! with its arguments complete, and its clients read them so), then the final object with
//! `done_reason`, the counts and the time. An error inside the chat stream, or a stream cut off
//! before its answer finished, ends with an `{"error": "…"}` line, as Ollama ends a failed stream.

use std::time::Instant;

use axum::body::Bytes;
use futures_util::stream::BoxStream;
use serde_json::Value;

use super::reply::{self, Route};
use crate::openai::translate::{
    finish_reason, read_event, text_delta, translate_stream, ChatEvent, StreamTranslator, ToolCalls,
};

fn line(value: &Value) -> Bytes {
    Bytes::from(format!("{value}\n"))
}

/// The translation state of one stream.
pub struct Translator {
    route: Route,
    model: String,
    started: Instant,
    calls: ToolCalls,
    finish: Option<String>,
    usage: Value,
    ended: bool,
}

impl Translator {
    pub fn new(route: Route, model: &str, started: Instant) -> Translator {
        Translator {
            route,
            model: model.to_owned(),
            started,
            calls: ToolCalls::default(),
            finish: None,
            usage: Value::Null,
            ended: false,
        }
    }

    fn on_chunk(&mut self, chunk: &Value, out: &mut Vec<Bytes>) {
        if chunk["usage"].is_object() {
            self.usage = chunk["usage"].clone();
        }
        if let Some(text) = text_delta(chunk) {
            out.push(line(&reply::object(
                self.route,
                &self.model,
                text,
                Vec::new(),
                false,
            )));
        }
        self.calls.apply(chunk);
        if let Some(finish) = finish_reason(chunk) {
            self.finish = Some(finish.to_owned());
        }
    }

    /// The tool calls (if any) and the final object, once.
    fn finish(&mut self) -> Vec<Bytes> {
        let mut out = Vec::new();
        if self.ended {
            return out;
        }
        self.ended = true;
        let gathered = self.calls.take("call_");
        if !gathered.is_empty() && self.route == Route::Chat {
            let calls = reply::tool_calls(
                gathered
                    .iter()
                    .map(|c| (c.id.as_str(), c.name.as_str(), c.arguments.as_str())),
            );
            out.push(line(&reply::object(
                self.route,
                &self.model,
                "",
                calls,
                false,
            )));
        }
        let mut last = reply::object(self.route, &self.model, "", Vec::new(), true);
        if let Value::Object(fields) = &mut last {
            fields.insert(
                "done_reason".into(),
                reply::done_reason(self.finish.as_deref()).into(),
            );
            let total = u64::try_from(self.started.elapsed().as_nanos()).unwrap_or(u64::MAX);
            reply::metrics(&self.usage, total, fields);
        }
        out.push(line(&last));
        out
    }

    fn fail(&mut self, message: &str) -> Vec<Bytes> {
        self.ended = true;
        vec![line(&super::error_body(message))]
    }
}

impl StreamTranslator for Translator {
    fn on_event(&mut self, raw: &[u8]) -> Vec<Bytes> {
        let mut out = Vec::new();
        if self.ended {
            return out;
        }
        match read_event(raw) {
            // NDJSON has no comments: a keep-alive carries nothing to pass on.
            None | Some(ChatEvent::Comment(_)) => {}
            Some(ChatEvent::Done) => out.extend(self.finish()),
            Some(ChatEvent::Error(message, _)) => out.extend(self.fail(&message)),
            Some(ChatEvent::Chunk(chunk)) => self.on_chunk(&chunk, &mut out),
        }
        out
    }

    /// Closed if the answer had finished, otherwise an error line.
    fn end_of_input(&mut self) -> Vec<Bytes> {
        if self.ended {
            return Vec::new();
        }
        if self.finish.is_some() {
            return self.finish();
        }
        self.fail("The upstream's stream ended before the answer was complete.")
    }
}

/// Translates a chat SSE body stream into Ollama's NDJSON lines.
pub fn translate(
    input: BoxStream<'static, Result<Bytes, std::io::Error>>,
    route: Route,
    model: &str,
    started: Instant,
) -> BoxStream<'static, Result<Bytes, std::io::Error>> {
    translate_stream(input, Translator::new(route, model, started))
}
