//! A streamed answer (its neutral events) as Anthropic's stream: `message_start`, `ping`, a text
//! block streamed as it comes (`content_block_start` / `text_delta`s / `content_block_stop`),
//! tool calls as `tool_use` blocks (their arguments gathered, then sent as one
//! `input_json_delta`, since parallel calls may interleave and Anthropic blocks may not),
//! `message_delta` with the stop reason and usage, `message_stop`. An error inside the stream
//! becomes an `error` event; SSE comments (keep-alives) pass through.

use axum::body::Bytes;
use futures_util::stream::BoxStream;
use serde_json::{json, Value};

use super::reply::{message_id, stop_reason};
use crate::conversation::reply::{arguments_object, Event, Events, Finish, GatheredCalls, Usage};
use crate::openai::translate::{translate_stream, StreamTranslator};

/// One Anthropic SSE event.
fn event(kind: &str, data: &Value) -> Bytes {
    Bytes::from(format!("event: {kind}\ndata: {data}\n\n"))
}

/// The translation state of one stream.
pub struct Translator {
    model: String,
    started: bool,
    /// Index of the next content block.
    next_block: usize,
    /// The text block being streamed, if one is open.
    text_open: Option<usize>,
    calls: GatheredCalls,
    finish: Option<Finish>,
    usage: Option<Usage>,
    ended: bool,
    /// The prompt's tokens as known before the upstream answers, for `message_start`.
    pub input_tokens: u64,
}

impl Translator {
    pub fn new(model: &str) -> Translator {
        Translator {
            model: model.to_owned(),
            started: false,
            next_block: 0,
            text_open: None,
            calls: GatheredCalls::default(),
            finish: None,
            usage: None,
            ended: false,
            input_tokens: 0,
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
                "usage": {"input_tokens": self.input_tokens, "output_tokens": 0}}}),
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

    fn on_text(&mut self, text: &str, out: &mut Vec<Bytes>) {
        self.start("", out);
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

    /// The closing events (the tool calls, the stop reason and usage), once.
    pub fn finish(&mut self) -> Vec<Bytes> {
        let mut out = Vec::new();
        if self.ended {
            return out;
        }
        self.ended = true;
        self.start("", &mut out);
        self.close_text(&mut out);
        for call in self.calls.take("toolu_") {
            let index = self.next_block;
            self.next_block += 1;
            out.push(event(
                "content_block_start",
                &json!({"type": "content_block_start", "index": index, "content_block":
                    {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}}),
            ));
            out.push(event(
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": index, "delta": {
                    "type": "input_json_delta",
                    "partial_json": arguments_object(&call.arguments).to_string()}}),
            ));
            out.push(event(
                "content_block_stop",
                &json!({"type": "content_block_stop", "index": index}),
            ));
        }
        let usage = match &self.usage {
            None => json!({"output_tokens": 0}),
            Some(usage) => super::reply::usage(usage),
        };
        out.push(event(
            "message_delta",
            &json!({"type": "message_delta", "delta": {
                "stop_reason": stop_reason(self.finish), "stop_sequence": null},
                "usage": usage}),
        ));
        out.push(event("message_stop", &json!({"type": "message_stop"})));
        out
    }
}

impl StreamTranslator for Translator {
    fn on_event(&mut self, neutral: Event) -> Vec<Bytes> {
        let mut out = Vec::new();
        if self.ended {
            return out;
        }
        match neutral {
            Event::KeepAlive(comment) => out.push(comment),
            Event::Done => out.extend(self.finish()),
            Event::Failed { message, .. } => {
                self.ended = true;
                out.push(event("error", &super::error_body(502, &message)));
            }
            Event::Started { id } => self.start(&id, &mut out),
            Event::Text(text) => self.on_text(&text, &mut out),
            Event::Call(part) => self.calls.apply(&part),
            Event::Finished(finish) => self.finish = Some(finish),
            Event::Usage(usage) => self.usage = Some(usage),
        }
        out
    }

    /// Closed if the answer had finished, otherwise an error.
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

/// Translates an answer's neutral events into Anthropic's events.
pub fn translate(
    input: Events,
    model: &str,
    input_tokens: u64,
) -> BoxStream<'static, Result<Bytes, std::io::Error>> {
    let mut translator = Translator::new(model);
    translator.input_tokens = input_tokens;
    translate_stream(input, translator)
}
