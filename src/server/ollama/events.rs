//! A streamed answer (its neutral events) as Ollama's NDJSON stream: one object per text delta
//! (`"done": false`), the tool calls gathered and sent whole in one object (Ollama sends a call
//! with its arguments complete, and its clients read them so), then the final object with
//! `done_reason`, the counts and the time. An error inside the stream, or a stream cut off
//! before its answer finished, ends with an `{"error": "…"}` line, as Ollama ends a failed stream.

use std::time::Instant;

use axum::body::Bytes;
use futures_util::stream::BoxStream;
use serde_json::Value;

use super::reply::{self, Route};
use crate::conversation::reply::{Event, Events, Finish, GatheredCalls, Usage};
use crate::openai::translate::{translate_stream, StreamTranslator};

fn line(value: &Value) -> Bytes {
    Bytes::from(format!("{value}\n"))
}

/// The translation state of one stream.
pub struct Translator {
    route: Route,
    model: String,
    started: Instant,
    calls: GatheredCalls,
    finish: Option<Finish>,
    usage: Option<Usage>,
    ended: bool,
}

impl Translator {
    pub fn new(route: Route, model: &str, started: Instant) -> Translator {
        Translator {
            route,
            model: model.to_owned(),
            started,
            calls: GatheredCalls::default(),
            finish: None,
            usage: None,
            ended: false,
        }
    }

    fn on_text(&mut self, text: &str, out: &mut Vec<Bytes>) {
        out.push(line(&reply::object(
            self.route,
            &self.model,
            text,
            Vec::new(),
            false,
        )));
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
            fields.insert("done_reason".into(), reply::done_reason(self.finish).into());
            let total = u64::try_from(self.started.elapsed().as_nanos()).unwrap_or(u64::MAX);
            reply::metrics(self.usage.as_ref(), total, fields);
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
    fn on_event(&mut self, neutral: Event) -> Vec<Bytes> {
        let mut out = Vec::new();
        if self.ended {
            return out;
        }
        match neutral {
            // NDJSON has no comments: a keep-alive carries nothing to pass on.
            Event::KeepAlive(_) | Event::Started { .. } => {}
            Event::Done => out.extend(self.finish()),
            Event::Failed { message, .. } => out.extend(self.fail(&message)),
            Event::Text(text) => self.on_text(&text, &mut out),
            Event::Call(part) => self.calls.apply(&part),
            Event::Finished(finish) => self.finish = Some(finish),
            Event::Usage(usage) => self.usage = Some(usage),
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

/// Translates an answer's neutral events into Ollama's NDJSON lines.
pub fn translate(
    input: Events,
    route: Route,
    model: &str,
    started: Instant,
) -> BoxStream<'static, Result<Bytes, std::io::Error>> {
    translate_stream(input, Translator::new(route, model, started))
}
