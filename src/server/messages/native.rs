//! Memory in Anthropic's own shape, for an upstream that speaks the Messages API
//! (`[upstream.messages]`): the strategy's [`Plan`] applied to the request as the client wrote
//! it (everything else stays byte for byte: thinking blocks and their signatures, `cache_control`,
//! server tools, betas), and the answer, whole or streamed, read back into the neutral replies
//! the recall log and hooks get.

use bytes::Bytes;
use serde_json::{json, Map, Value};

use crate::conversation::reply::{Call, Finish, Reply, Usage};
use crate::conversation::request::Message;
use crate::error::ProxyError;
use crate::server::core::watch::Watch;
use crate::strategy::{Placement, Plan};

/// Applies `plan` to the request. `neutral` is the request as the strategy saw it and `origin`
/// maps each of its messages to the request message it came from (`None`: `system`).
pub fn apply(
    request: &mut Map<String, Value>,
    neutral: &[Message],
    origin: &[Option<usize>],
    plan: &Plan,
) {
    let Some(Value::Array(messages)) = request.get_mut("messages") else {
        return;
    };
    // Drop the oldest turns, never splitting a tool call from its result: the first message
    // kept is a user message that is not (only) tool results.
    let mut cut = origin
        .get(plan.first_kept)
        .copied()
        .flatten()
        .unwrap_or(0)
        .min(messages.len().saturating_sub(1));
    while cut > 0 && !starts_turn(&messages[cut]) {
        cut -= 1;
    }
    messages.drain(..cut);
    let Some((block, placement)) = &plan.block else {
        return;
    };
    let newest_user = neutral
        .iter()
        .rposition(|m| m.role == "user")
        .and_then(|i| origin.get(i).copied().flatten())
        .and_then(|i| i.checked_sub(cut));
    match (placement, newest_user) {
        (Placement::User, Some(at)) => prepend(&mut messages[at], block),
        (Placement::History, _) => {
            messages.insert(0, json!({"role": "assistant", "content": "Noted."}));
            messages.insert(0, json!({"role": "user", "content": block}));
        }
        _ => append_system(request, block),
    }
}

/// A user message that does not answer tool calls: where a conversation may begin.
fn starts_turn(message: &Value) -> bool {
    message["role"] == "user"
        && match &message["content"] {
            Value::Array(blocks) => blocks.first().is_none_or(|b| b["type"] != "tool_result"),
            _ => true,
        }
}

/// The block in front of what the user wrote (after any tool results, which must come first).
fn prepend(message: &mut Value, block: &str) {
    match &mut message["content"] {
        Value::String(text) => *text = format!("{block}\n\n{text}"),
        Value::Array(blocks) => {
            let at = blocks
                .iter()
                .take_while(|b| b["type"] == "tool_result")
                .count();
            blocks.insert(at, json!({"type": "text", "text": block}));
        }
        other => *other = json!(block),
    }
}

/// The block at the end of the system prompt (after any cached prefix, which stays valid).
fn append_system(request: &mut Map<String, Value>, block: &str) {
    match request.get_mut("system") {
        Some(Value::String(text)) if !text.is_empty() => text.push_str(&format!("\n\n{block}")),
        Some(Value::Array(blocks)) => blocks.push(json!({"type": "text", "text": block})),
        _ => {
            request.insert("system".into(), json!(block));
        }
    }
}

/// Anthropic's `stop_reason` as why the answer ended (`end_turn`, `stop_sequence`, `pause_turn`
/// and reasons it does not name yet are an ordinary stop).
fn finish_of(stop: &str) -> Finish {
    match stop {
        "max_tokens" => Finish::Length,
        "tool_use" => Finish::ToolCalls,
        "refusal" => Finish::ContentFilter,
        _ => Finish::Stop,
    }
}

fn usage_of(input: u64, output: u64) -> Usage {
    Usage {
        prompt_tokens: input,
        completion_tokens: output,
        cached_tokens: None,
    }
}

/// The reply of a whole Messages answer.
pub fn whole(bytes: &[u8]) -> (Vec<Reply>, Option<Usage>) {
    let Ok(message) = serde_json::from_slice::<Value>(bytes) else {
        return (Vec::new(), None);
    };
    let mut reply = Reply::default();
    for block in message["content"].as_array().into_iter().flatten() {
        match block["type"].as_str() {
            Some("text") => reply
                .text
                .push_str(block["text"].as_str().unwrap_or_default()),
            Some("tool_use") => reply.calls.push(Call {
                id: block["id"].as_str().unwrap_or_default().to_owned(),
                name: block["name"].as_str().unwrap_or_default().to_owned(),
                arguments: block["input"].to_string(),
            }),
            _ => {}
        }
    }
    reply.finish = message["stop_reason"].as_str().map(finish_of);
    let usage = &message["usage"];
    let usage = usage.is_object().then(|| {
        usage_of(
            usage["input_tokens"].as_u64().unwrap_or(0),
            usage["output_tokens"].as_u64().unwrap_or(0),
        )
    });
    (vec![reply], usage)
}

/// Reads Anthropic's stream events into the reply.
#[derive(Default)]
pub struct MessagesWatch {
    /// Text or tool-call blocks by index: `(text, call)`.
    blocks: Vec<(usize, String, Option<Call>)>,
    input_tokens: u64,
    output_tokens: u64,
    stop: Option<String>,
    stopped: bool,
    error: Option<String>,
}

impl Watch for MessagesWatch {
    fn observe(&mut self, data: &str) {
        let Ok(event) = serde_json::from_str::<Value>(data) else {
            return;
        };
        let index = event["index"].as_u64().unwrap_or(0) as usize;
        match event["type"].as_str().unwrap_or_default() {
            "message_start" => {
                let usage = &event["message"]["usage"];
                self.input_tokens = usage["input_tokens"].as_u64().unwrap_or(0);
                self.output_tokens = usage["output_tokens"].as_u64().unwrap_or(0);
            }
            "content_block_start" => {
                let block = &event["content_block"];
                let call = (block["type"] == "tool_use").then(|| Call {
                    id: block["id"].as_str().unwrap_or_default().to_owned(),
                    name: block["name"].as_str().unwrap_or_default().to_owned(),
                    arguments: String::new(),
                });
                let text = block["text"].as_str().unwrap_or_default().to_owned();
                self.blocks.push((index, text, call));
            }
            "content_block_delta" => {
                let Some((_, text, call)) = self.blocks.iter_mut().find(|b| b.0 == index) else {
                    return;
                };
                let delta = &event["delta"];
                match (delta["type"].as_str(), call) {
                    (Some("text_delta"), _) => {
                        text.push_str(delta["text"].as_str().unwrap_or_default())
                    }
                    (Some("input_json_delta"), Some(call)) => call
                        .arguments
                        .push_str(delta["partial_json"].as_str().unwrap_or_default()),
                    _ => {}
                }
            }
            "message_delta" => {
                if let Some(stop) = event["delta"]["stop_reason"].as_str() {
                    self.stop = Some(stop.to_owned());
                }
                if let Some(output) = event["usage"]["output_tokens"].as_u64() {
                    self.output_tokens = output;
                }
                if let Some(input) = event["usage"]["input_tokens"].as_u64() {
                    self.input_tokens = input;
                }
            }
            "message_stop" => self.stopped = true,
            "error" => {
                self.error = Some(
                    event["error"]["message"]
                        .as_str()
                        .unwrap_or("error event")
                        .to_owned(),
                )
            }
            _ => {}
        }
    }

    fn finished(&self) -> bool {
        self.stopped
    }

    fn error(&self) -> Option<String> {
        self.error.clone()
    }

    fn replies(&self) -> Vec<Reply> {
        let mut reply = Reply {
            finish: self.stop.as_deref().map(finish_of),
            ..Reply::default()
        };
        for (_, text, call) in &self.blocks {
            match call {
                Some(call) => {
                    let mut call = call.clone();
                    if call.arguments.is_empty() {
                        call.arguments = "{}".to_owned();
                    }
                    reply.calls.push(call);
                }
                None => reply.text.push_str(text),
            }
        }
        vec![reply]
    }

    fn usage(&self) -> Option<Usage> {
        Some(usage_of(self.input_tokens, self.output_tokens))
    }

    fn error_event(&self, error: &ProxyError) -> Bytes {
        let body = super::error_body(error.catalogue().0.as_u16(), &error.to_string());
        Bytes::from(format!("event: error\ndata: {body}\n\n"))
    }
}
