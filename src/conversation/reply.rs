//! The assistant's answer in no API's shape: what it said (text, tool calls), why it stopped and
//! what it cost, whole ([`Reply`]) or as it streams ([`Event`]). Explicit mode makes one; an
//! upstream's answer is read into one (`openai::reply`); each API surface writes it in its own
//! shape, so no surface parses another API's JSON.

use std::collections::BTreeMap;

use bytes::Bytes;
use futures_util::stream::BoxStream;
use serde_json::Value;

/// A tool call the assistant asks the client to run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Call {
    pub id: String,
    pub name: String,
    /// Its arguments as the model wrote them (JSON text, possibly not valid).
    pub arguments: String,
}

/// Why the answer ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Finish {
    /// The model finished its answer (or a stop sequence ended it).
    Stop,
    /// The token limit cut it off.
    Length,
    /// It asks for tool calls.
    ToolCalls,
    /// A content filter withheld it.
    ContentFilter,
}

/// The tokens an answer cost.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// Prompt tokens the upstream read from its cache, where it says.
    pub cached_tokens: Option<u64>,
}

impl Usage {
    pub fn total(&self) -> u64 {
        self.prompt_tokens + self.completion_tokens
    }
}

/// A whole answer.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Reply {
    /// The answer's id, without any API's prefix (`chatcmpl-`, `msg_`).
    pub id: String,
    pub text: String,
    pub calls: Vec<Call>,
    pub finish: Option<Finish>,
    pub usage: Option<Usage>,
}

/// A piece of a tool call as it streams: the id and name first, the arguments in fragments;
/// parallel calls may interleave, told apart by `index`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CallPart {
    pub index: u64,
    pub id: Option<String>,
    pub name: Option<String>,
    pub arguments: String,
}

/// One event of a streamed answer.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// The answer began (once, before anything it says).
    Started {
        id: String,
    },
    /// A piece of text.
    Text(String),
    Call(CallPart),
    Finished(Finish),
    Usage(Usage),
    /// An SSE comment that keeps the connection alive, passed on as it is by SSE APIs.
    KeepAlive(Bytes),
    /// The stream's natural end.
    Done,
    /// The answer failed inside the stream: its message, and the error object as the upstream
    /// or memproxy described it (OpenAI's error shape: `message`, `type`, `code`).
    Failed {
        message: String,
        error: Value,
    },
}

/// A streamed answer's events.
pub type Events = BoxStream<'static, Result<Event, std::io::Error>>;

/// Tool calls gathered from their streamed parts, by index.
#[derive(Debug, Default)]
pub struct GatheredCalls {
    calls: BTreeMap<u64, Call>,
}

impl GatheredCalls {
    pub fn apply(&mut self, part: &CallPart) {
        let entry = self.calls.entry(part.index).or_default();
        if let Some(id) = part.id.as_deref().filter(|id| !id.is_empty()) {
            id.clone_into(&mut entry.id);
        }
        if let Some(name) = part.name.as_deref().filter(|name| !name.is_empty()) {
            name.clone_into(&mut entry.name);
        }
        entry.arguments.push_str(&part.arguments);
    }

    /// The calls in index order; a call that came without an id gets one
    /// (`{prefix}{position}_{uuid}`).
    pub fn take(&mut self, prefix: &str) -> Vec<Call> {
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

/// A tool call's arguments as the object the APIs that carry objects want: `{}` when the model
/// wrote none, text that is not a JSON object kept under `arguments`.
pub fn arguments_object(text: &str) -> Value {
    if text.trim().is_empty() {
        return serde_json::json!({});
    }
    match serde_json::from_str::<Value>(text) {
        Ok(object @ Value::Object(_)) => object,
        _ => serde_json::json!({ "arguments": text }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interleaved_parts_gather_into_whole_calls_in_index_order() {
        let mut calls = GatheredCalls::default();
        let part = |index, id: Option<&str>, name: Option<&str>, arguments: &str| CallPart {
            index,
            id: id.map(str::to_owned),
            name: name.map(str::to_owned),
            arguments: arguments.to_owned(),
        };
        calls.apply(&part(1, Some("b"), Some("time"), ""));
        calls.apply(&part(0, None, Some("weather"), "{\"ci"));
        calls.apply(&part(1, None, None, "{}"));
        calls.apply(&part(0, None, None, "ty\":\"Porto\"}"));
        let taken = calls.take("call_");
        assert_eq!(taken[0].name, "weather");
        assert_eq!(taken[0].arguments, "{\"city\":\"Porto\"}");
        assert!(taken[0].id.starts_with("call_0_"), "{}", taken[0].id);
        assert_eq!(
            (taken[1].id.as_str(), taken[1].name.as_str()),
            ("b", "time")
        );
        assert!(calls.take("call_").is_empty());
    }

    #[test]
    fn arguments_become_an_object_whatever_the_model_wrote() {
        assert_eq!(arguments_object(" "), serde_json::json!({}));
        assert_eq!(arguments_object("{\"a\":1}"), serde_json::json!({"a": 1}));
        assert_eq!(
            arguments_object("[1]"),
            serde_json::json!({"arguments": "[1]"})
        );
    }
}
