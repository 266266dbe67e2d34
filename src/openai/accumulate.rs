//! Rebuilds the final assistant message from streamed chunks (the "tee" side of the relay).
//!
//! Memory work needs the whole reply and the token usage, but the client must get each chunk as it
//! arrives; so chunks are relayed untouched and folded in here: content deltas appended, tool-call
//! deltas merged by their `index` (id and name arrive first, arguments in fragments).

use std::collections::BTreeMap;

use serde::Deserialize;

use super::{ToolCall, Usage};
use crate::conversation::reply::{Call, Reply};

#[derive(Debug, Default, Deserialize)]
pub struct ChunkView {
    #[serde(default)]
    pub choices: Vec<ChunkChoice>,
    #[serde(default)]
    pub usage: Option<Usage>,
    #[serde(default)]
    pub error: Option<serde_json::Value>,
}

#[derive(Debug, Default, Deserialize)]
pub struct ChunkChoice {
    #[serde(default)]
    pub index: u32,
    #[serde(default)]
    pub delta: Option<Delta>,
    #[serde(default)]
    pub finish_reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
pub struct Delta {
    #[serde(default)]
    pub content: Option<String>,
    #[serde(default)]
    pub tool_calls: Option<Vec<ToolCallDelta>>,
}

#[derive(Debug, Default, Deserialize)]
pub struct ToolCallDelta {
    #[serde(default)]
    pub index: u32,
    #[serde(default)]
    pub id: Option<String>,
    #[serde(rename = "type", default)]
    pub kind: Option<String>,
    #[serde(default)]
    pub function: Option<FunctionDelta>,
}

#[derive(Debug, Default, Deserialize)]
pub struct FunctionDelta {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub arguments: Option<String>,
}

#[derive(Debug, Default)]
pub struct StreamAccumulator {
    choices: BTreeMap<u32, ChoiceState>,
    pub usage: Option<Usage>,
    /// The upstream sent `data: [DONE]`.
    pub done: bool,
    /// The upstream sent an in-stream error object.
    pub error: Option<serde_json::Value>,
}

#[derive(Debug, Default)]
struct ChoiceState {
    content: String,
    tool_calls: BTreeMap<u32, ToolCall>,
    finish_reason: Option<String>,
}

impl StreamAccumulator {
    /// Folds in one event's `data:` payload. Payloads that are not JSON chunks are ignored
    /// here (the relay still forwards them).
    pub fn observe_data(&mut self, data: &str) {
        if data.trim() == "[DONE]" {
            self.done = true;
        } else if let Ok(chunk) = serde_json::from_str::<ChunkView>(data) {
            self.apply(chunk);
        }
    }

    pub fn apply(&mut self, chunk: ChunkView) {
        if chunk.usage.is_some() {
            self.usage = chunk.usage;
        }
        if chunk.error.is_some() {
            self.error = chunk.error;
        }
        for choice in chunk.choices {
            let state = self.choices.entry(choice.index).or_default();
            if choice.finish_reason.is_some() {
                state.finish_reason = choice.finish_reason;
            }
            let Some(delta) = choice.delta else { continue };
            if let Some(content) = delta.content {
                state.content.push_str(&content);
            }
            for call in delta.tool_calls.into_iter().flatten() {
                let merged = state
                    .tool_calls
                    .entry(call.index)
                    .or_insert_with(|| ToolCall {
                        kind: "function".to_owned(),
                        ..ToolCall::default()
                    });
                if let Some(id) = call.id {
                    merged.id = id;
                }
                if let Some(kind) = call.kind {
                    merged.kind = kind;
                }
                if let Some(function) = call.function {
                    if let Some(name) = function.name {
                        merged.function.name.push_str(&name);
                    }
                    if let Some(arguments) = function.arguments {
                        merged.function.arguments.push_str(&arguments);
                    }
                }
            }
        }
    }

    /// Whether the stream reached a natural end (a finish reason or `[DONE]`).
    pub fn finished(&self) -> bool {
        self.done || self.choices.values().any(|c| c.finish_reason.is_some())
    }

    /// The replies, one per choice, in index order.
    pub fn replies(&self) -> Vec<Reply> {
        self.choices
            .values()
            .map(|state| Reply {
                text: state.content.clone(),
                calls: state.tool_calls.values().map(Call::from).collect(),
                finish: state.finish_reason.as_deref().map(super::reply::finish_of),
                ..Reply::default()
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merges_content_and_tool_call_fragments_by_index() {
        let mut acc = StreamAccumulator::default();
        let events = [
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"Hel"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"lo"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"b","type":"function","function":{"name":"two","arguments":""}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"one","arguments":"{\"x\""}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":":1}"}},{"index":1,"function":{"arguments":"{}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}}"#,
            "[DONE]",
        ];
        for event in events {
            acc.observe_data(event);
        }
        let replies = acc.replies();
        assert_eq!(replies.len(), 1);
        assert_eq!(replies[0].text, "Hello");
        assert_eq!(
            replies[0].finish,
            Some(crate::conversation::reply::Finish::ToolCalls)
        );
        let calls: Vec<_> = replies[0]
            .calls
            .iter()
            .map(|c| (c.id.as_str(), c.name.as_str(), c.arguments.as_str()))
            .collect();
        assert_eq!(calls, [("a", "one", "{\"x\":1}"), ("b", "two", "{}")]);
        assert_eq!(acc.usage.map(|u| u.total_tokens), Some(12));
        assert!(acc.done && acc.finished());
    }
}
