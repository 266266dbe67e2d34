//! Memory in the Responses API's own shape, for an upstream that speaks it
//! (`[upstream.responses]`): the strategy's [`Plan`] applied to the request as the client wrote
//! it (everything else stays byte for byte: built-in tools, reasoning items, `include`), and the
//! answer, whole or streamed, read back into the neutral replies the recall log and hooks get.
//!
//! With `previous_response_id` the upstream holds the earlier turns: nothing of them can be
//! dropped, so only the memory block is added.

use bytes::Bytes;
use serde_json::{json, Map, Value};

use crate::conversation::reply::{Finish, Reply, Usage};
use crate::conversation::request::{is_system_role, Message};
use crate::error::ProxyError;
use crate::server::core::watch::Watch;
use crate::strategy::{cut_keeps, Placement, Plan};

/// Applies `plan` to the request. `neutral` is the request as the strategy saw it and `origin`
/// maps each of its messages to the `input` item it came from.
pub fn apply(
    request: &mut Map<String, Value>,
    neutral: &[Message],
    origin: &[Option<usize>],
    plan: &Plan,
) {
    let chained = request
        .get("previous_response_id")
        .is_some_and(|id| !id.is_null());
    let newest_user = neutral
        .iter()
        .rposition(|m| m.role == "user")
        .map(|i| origin.get(i).copied().flatten());
    let mut dropped = 0;
    if let Some(Value::Array(items)) = request.get_mut("input") {
        if !chained && !items.is_empty() {
            // The first item kept starts a turn: a message, not a call's output.
            let mut cut = origin
                .get(plan.first_kept)
                .copied()
                .flatten()
                .unwrap_or(0)
                .min(items.len() - 1);
            while cut > 0 && !is_message(&items[cut]) {
                cut -= 1;
            }
            let before = items.len();
            let mut at = 0;
            items.retain(|item| {
                at += 1;
                cut_keeps(
                    at - 1,
                    cut,
                    item["role"].as_str().is_some_and(is_system_role),
                )
            });
            dropped = before - items.len();
        }
    }
    let Some((block, placement)) = &plan.block else {
        return;
    };
    match (placement, request.get_mut("input")) {
        (Placement::User, Some(Value::String(text))) => *text = format!("{block}\n\n{text}"),
        (Placement::User, Some(Value::Array(items))) => {
            match newest_user.flatten().and_then(|i| i.checked_sub(dropped)) {
                Some(at) if at < items.len() => prepend(&mut items[at], block),
                _ => append_instructions(request, block),
            }
        }
        (Placement::History, Some(input)) => {
            let mut items = match input.take() {
                Value::Array(items) => items,
                Value::String(text) => vec![json!({"role": "user", "content": text})],
                other => vec![other],
            };
            items.insert(0, json!({"role": "assistant", "content": "Noted."}));
            items.insert(0, json!({"role": "user", "content": block}));
            *input = Value::Array(items);
        }
        _ => append_instructions(request, block),
    }
}

fn is_message(item: &Value) -> bool {
    item["type"] == "message" || (item.get("type").is_none() && item.get("role").is_some())
}

fn prepend(item: &mut Value, block: &str) {
    match &mut item["content"] {
        Value::String(text) => *text = format!("{block}\n\n{text}"),
        Value::Array(parts) => parts.insert(0, json!({"type": "input_text", "text": block})),
        other => *other = json!(block),
    }
}

fn append_instructions(request: &mut Map<String, Value>, block: &str) {
    match request.get_mut("instructions") {
        Some(Value::String(text)) if !text.is_empty() => text.push_str(&format!("\n\n{block}")),
        _ => {
            request.insert("instructions".into(), json!(block));
        }
    }
}

/// The reply and usage of a `response` object.
pub fn reply_of(response: &Value) -> (Vec<Reply>, Option<Usage>) {
    let mut reply = super::reply::said(response);
    reply.finish = Some(match response["status"].as_str() {
        Some("incomplete") => Finish::Length,
        _ if !reply.calls.is_empty() => Finish::ToolCalls,
        _ => Finish::Stop,
    });
    let usage = &response["usage"];
    let usage = usage.is_object().then(|| Usage {
        prompt_tokens: usage["input_tokens"].as_u64().unwrap_or(0),
        completion_tokens: usage["output_tokens"].as_u64().unwrap_or(0),
        cached_tokens: usage["input_tokens_details"]["cached_tokens"].as_u64(),
    });
    (vec![reply], usage)
}

/// The reply of a whole Responses answer.
pub fn whole(bytes: &[u8]) -> (Vec<Reply>, Option<Usage>) {
    match serde_json::from_slice::<Value>(bytes) {
        Ok(response) => reply_of(&response),
        Err(_) => (Vec::new(), None),
    }
}

/// Called with the finished `response` object of a stream.
pub type OnDone = Box<dyn FnOnce(Value) + Send>;

/// Reads the Responses API's stream events into the reply: the final `response` object of
/// `response.completed` (or `.incomplete`) holds all of it; text deltas count until then.
#[derive(Default)]
pub struct ResponsesWatch {
    text: String,
    done: Option<Value>,
    error: Option<String>,
    sequence: u64,
    on_done: Option<OnDone>,
}

impl ResponsesWatch {
    pub fn new(on_done: Option<OnDone>) -> Self {
        ResponsesWatch {
            on_done,
            ..ResponsesWatch::default()
        }
    }
}

impl Watch for ResponsesWatch {
    fn observe(&mut self, data: &str) {
        let Ok(event) = serde_json::from_str::<Value>(data) else {
            return;
        };
        if let Some(sequence) = event["sequence_number"].as_u64() {
            self.sequence = sequence;
        }
        match event["type"].as_str().unwrap_or_default() {
            "response.output_text.delta" => {
                self.text
                    .push_str(event["delta"].as_str().unwrap_or_default());
            }
            "response.completed" | "response.incomplete" => {
                let response = event["response"].clone();
                if let Some(on_done) = self.on_done.take() {
                    on_done(response.clone());
                }
                self.done = Some(response);
            }
            "response.failed" => {
                let message = event["response"]["error"]["message"]
                    .as_str()
                    .unwrap_or("the response failed");
                self.error = Some(message.to_owned());
            }
            "error" => {
                let message = event["message"].as_str().unwrap_or("error event");
                self.error = Some(message.to_owned());
            }
            _ => {}
        }
    }

    fn finished(&self) -> bool {
        self.done.is_some()
    }

    fn error(&self) -> Option<String> {
        self.error.clone()
    }

    fn replies(&self) -> Vec<Reply> {
        match &self.done {
            Some(response) => reply_of(response).0,
            None => vec![Reply {
                text: self.text.clone(),
                ..Reply::default()
            }],
        }
    }

    fn usage(&self) -> Option<Usage> {
        self.done.as_ref().and_then(|r| reply_of(r).1)
    }

    fn error_event(&self, error: &ProxyError) -> Bytes {
        let (_, _, code) = error.catalogue();
        let data = json!({"type": "error", "code": code, "message": error.to_string(),
            "param": null, "sequence_number": self.sequence + 1});
        Bytes::from(format!("event: error\ndata: {data}\n\n"))
    }
}
