//! A streamed answer (its neutral events) as the Responses API's event stream: `response.created`,
//! `response.in_progress`, the text as a `message` item streamed as it comes
//! (`output_item.added`, `content_part.added`, `output_text.delta`s, then the `.done` events),
//! tool calls as `function_call` items (gathered, then sent whole, since parallel calls may
//! interleave), and `response.completed` (or `response.incomplete`) with usage.
//! Every event carries its `sequence_number`. An error inside the stream becomes an `error`
//! event; SSE comments (keep-alives) pass through. When the response completes, `on_done` gets it
//! (the surface stores it for `previous_response_id`).

use axum::body::Bytes;
use futures_util::future::BoxFuture;
use futures_util::stream::BoxStream;
use serde_json::{json, Value};

use super::reply;
use crate::conversation::reply::{Event, Events, Finish, GatheredCalls, Usage};
use crate::openai::translate::{translate_stream, StreamTranslator};

/// Called with the finished response; the stream sends its last event only once the returned
/// future is done (a client that continues at once with `previous_response_id` finds it).
pub type OnDone = Box<dyn FnOnce(Value) -> BoxFuture<'static, ()> + Send>;

pub struct Translator {
    response: Value,
    sequence: u64,
    started: bool,
    text: Option<String>,
    calls: GatheredCalls,
    finish: Option<Finish>,
    usage: Option<Usage>,
    ended: bool,
    on_done: Option<OnDone>,
    /// The `on_done` work to wait for before the final events go out.
    writing: Option<BoxFuture<'static, ()>>,
}

impl Translator {
    pub fn new(skeleton: Value, on_done: Option<OnDone>) -> Translator {
        Translator {
            response: skeleton,
            sequence: 0,
            started: false,
            text: None,
            calls: GatheredCalls::default(),
            finish: None,
            usage: None,
            ended: false,
            on_done,
            writing: None,
        }
    }

    fn event(&mut self, kind: &str, mut data: Value) -> Bytes {
        data["type"] = json!(kind);
        data["sequence_number"] = json!(self.sequence);
        self.sequence += 1;
        Bytes::from(format!("event: {kind}\ndata: {data}\n\n"))
    }

    fn start(&mut self, out: &mut Vec<Bytes>) {
        if self.started {
            return;
        }
        self.started = true;
        let response = self.response.clone();
        out.push(self.event("response.created", json!({"response": response})));
        out.push(self.event("response.in_progress", json!({"response": response})));
    }

    fn on_text(&mut self, piece: &str, out: &mut Vec<Bytes>) {
        self.start(out);
        {
            let item_id = reply::message_id(&self.response);
            if self.text.is_none() {
                self.text = Some(String::new());
                let mut item = reply::message_item(&item_id, "", "in_progress");
                item["content"] = json!([]);
                out.push(self.event(
                    "response.output_item.added",
                    json!({"output_index": 0, "item": item}),
                ));
                out.push(self.event(
                    "response.content_part.added",
                    json!({"item_id": item_id,
                    "output_index": 0, "content_index": 0,
                    "part": {"type": "output_text", "text": "", "annotations": []}}),
                ));
            }
            if let Some(text) = self.text.as_mut() {
                text.push_str(piece);
            }
            out.push(self.event(
                "response.output_text.delta",
                json!({"item_id": item_id,
                "output_index": 0, "content_index": 0, "delta": piece, "logprobs": []}),
            ));
        }
    }

    /// The closing events, once: the text item's `.done` events, the calls, the final response.
    pub fn finish(&mut self) -> Vec<Bytes> {
        let mut out = Vec::new();
        if self.ended {
            return out;
        }
        self.ended = true;
        self.start(&mut out);
        let mut output = Vec::new();
        if let Some(text) = self.text.take() {
            let item_id = reply::message_id(&self.response);
            let part = json!({"type": "output_text", "text": text, "annotations": []});
            out.push(self.event(
                "response.output_text.done",
                json!({"item_id": item_id,
                "output_index": 0, "content_index": 0, "text": text, "logprobs": []}),
            ));
            out.push(self.event(
                "response.content_part.done",
                json!({"item_id": item_id,
                "output_index": 0, "content_index": 0, "part": part}),
            ));
            let item = reply::message_item(&item_id, &text, "completed");
            out.push(self.event(
                "response.output_item.done",
                json!({"output_index": 0, "item": item}),
            ));
            output.push(item);
        }
        for call in self.calls.take("call_") {
            let index = output.len();
            let done = reply::call_item(&call.id, &call.name, &call.arguments);
            let mut added = done.clone();
            added["arguments"] = json!("");
            added["status"] = json!("in_progress");
            let item_id = done["id"].clone();
            out.push(self.event(
                "response.output_item.added",
                json!({"output_index": index, "item": added}),
            ));
            out.push(self.event(
                "response.function_call_arguments.delta",
                json!({
                "item_id": item_id, "output_index": index, "delta": call.arguments}),
            ));
            out.push(self.event(
                "response.function_call_arguments.done",
                json!({
                "item_id": item_id, "output_index": index, "name": call.name,
                "arguments": call.arguments}),
            ));
            out.push(self.event(
                "response.output_item.done",
                json!({"output_index": index, "item": done}),
            ));
            output.push(done);
        }
        let mut response = self.response.clone();
        reply::finish(
            &mut response,
            output,
            self.finish,
            &self.usage.unwrap_or_default(),
        );
        let kind = if response["status"] == "incomplete" {
            "response.incomplete"
        } else {
            "response.completed"
        };
        out.push(self.event(kind, json!({"response": response})));
        if let Some(on_done) = self.on_done.take() {
            self.writing = Some(on_done(response));
        }
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
            Event::Failed { message, error } => {
                self.ended = true;
                let code = error["code"].clone();
                out.push(self.event(
                    "error",
                    json!({"code": code, "message": message, "param": null}),
                ));
            }
            Event::Started { .. } => self.start(&mut out),
            Event::Text(piece) => self.on_text(&piece, &mut out),
            Event::Call(part) => self.calls.apply(&part),
            Event::Finished(finish) => self.finish = Some(finish),
            Event::Usage(usage) => self.usage = Some(usage),
        }
        out
    }

    fn end_of_input(&mut self) -> Vec<Bytes> {
        if self.ended {
            return Vec::new();
        }
        if self.finish.is_some() {
            return self.finish();
        }
        self.ended = true;
        vec![self.event(
            "error",
            json!({"code": "upstream_broken", "param": null,
                "message": "The upstream's stream ended before the answer was complete."}),
        )]
    }

    fn pending_work(&mut self) -> Option<BoxFuture<'static, ()>> {
        self.writing.take()
    }
}

/// Translates an answer's neutral events into the Responses API's events.
pub fn translate(
    input: Events,
    translator: Translator,
) -> BoxStream<'static, Result<Bytes, std::io::Error>> {
    translate_stream(input, translator)
}
