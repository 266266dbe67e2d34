//! OpenAI chat-completions wire types: what memproxy reads from requests and responses.
//!
//! Only the fields memory work needs are typed; everything else rides along in `extra` maps
//! (`#[serde(flatten)]`) so unknown request fields reach the upstream unchanged. Responses are
//! relayed as the upstream's own bytes; the views here only *read* them.

pub mod accumulate;
pub mod neutral;
pub mod reply;
pub mod sse;
pub mod translate;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

use crate::error::ProxyError;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ChatRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    pub messages: Vec<ChatMessage>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_options: Option<StreamOptions>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct StreamOptions {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_usage: Option<bool>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChatMessage {
    pub role: String,
    /// `None`: absent; `Some(Value::Null)`: an explicit `null` (kept, some upstreams want it).
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub content: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCall>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

fn present<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(deserializer).map(Some)
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    #[serde(default)]
    pub id: String,
    #[serde(rename = "type", default = "function_type")]
    pub kind: String,
    pub function: FunctionCall,
}

impl From<&ToolCall> for crate::conversation::reply::Call {
    fn from(call: &ToolCall) -> Self {
        crate::conversation::reply::Call {
            id: call.id.clone(),
            name: call.function.name.clone(),
            arguments: call.function.arguments.clone(),
        }
    }
}

fn function_type() -> String {
    "function".to_owned()
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FunctionCall {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub arguments: String,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    #[serde(default)]
    pub prompt_tokens: u64,
    #[serde(default)]
    pub completion_tokens: u64,
    #[serde(default)]
    pub total_tokens: u64,
}

/// The tokens as the neutral reply counts them (the cached share is read from the whole answer,
/// see [`reply::usage_of`]).
impl From<Usage> for crate::conversation::reply::Usage {
    fn from(usage: Usage) -> Self {
        crate::conversation::reply::Usage {
            prompt_tokens: usage.prompt_tokens,
            completion_tokens: usage.completion_tokens,
            cached_tokens: None,
        }
    }
}

impl Usage {
    /// Adds another call's tokens (a turn of several upstream calls).
    pub fn add(&mut self, other: &Usage) {
        self.prompt_tokens += other.prompt_tokens;
        self.completion_tokens += other.completion_tokens;
        self.total_tokens += other.total_tokens;
    }
}

/// Prompt tokens a completion says its server took from its prompt cache: OpenAI and vLLM report
/// `usage.prompt_tokens_details.cached_tokens`, llama.cpp's server `timings.cache_n`. `None`:
/// the server does not say.
pub fn cached_prompt_tokens(completion: &serde_json::Value) -> Option<u64> {
    completion["usage"]["prompt_tokens_details"]["cached_tokens"]
        .as_u64()
        .or_else(|| completion["timings"]["cache_n"].as_u64())
}

impl crate::conversation::request::Editable for ChatMessage {
    fn role(&self) -> &str {
        &self.role
    }
    fn add_text(&mut self, text: &str, before: bool) {
        use crate::conversation::content::Content;
        let mut content = self.content.as_ref().and_then(Content::from_json);
        Content::add_text(&mut content, text, before);
        self.content = content.as_ref().map(Content::to_json);
    }
    fn saying(role: &str, text: String) -> Self {
        ChatMessage {
            role: role.to_owned(),
            content: Some(Value::String(text)),
            name: None,
            tool_calls: None,
            tool_call_id: None,
            extra: Map::new(),
        }
    }
}

impl ChatMessage {
    /// The text of the message: a string content, or the text parts of an array content.
    pub fn text(&self) -> String {
        use crate::conversation::content::Content;
        let content = self.content.as_ref().and_then(Content::from_json);
        content.as_ref().map(Content::text).unwrap_or_default()
    }
}

impl ChatRequest {
    /// Parses and checks a request body, reporting the offending field as OpenAI does (`param`).
    pub fn parse(body: &[u8]) -> Result<ChatRequest, ProxyError> {
        let value: Value = serde_json::from_slice(body).map_err(|error| {
            ProxyError::invalid(
                format!("We could not parse the JSON body of your request: {error}"),
                None,
            )
        })?;
        let Value::Object(fields) = &value else {
            return Err(ProxyError::invalid(
                "The request body must be a JSON object.",
                None,
            ));
        };
        match fields.get("messages") {
            None => {
                return Err(ProxyError::invalid(
                    "'messages' is required.",
                    Some("messages"),
                ))
            }
            Some(Value::Array(items)) if items.is_empty() => {
                return Err(ProxyError::invalid(
                    "'messages' must contain at least one message.",
                    Some("messages"),
                ))
            }
            Some(Value::Array(items)) => check_messages(items)?,
            Some(_) => {
                return Err(ProxyError::invalid(
                    "'messages' must be an array of messages.",
                    Some("messages"),
                ))
            }
        }
        check_typed_fields(fields)?;
        serde_json::from_value(value)
            .map_err(|error| ProxyError::invalid(format!("Invalid request: {error}"), None))
    }

    /// What [`ChatRequest::parse`] checks that a request built by a translation from another
    /// API can still fail (its typed fields hold the rest): at least one message.
    pub fn check_built(&self) -> Result<(), ProxyError> {
        if self.messages.is_empty() {
            return Err(ProxyError::invalid(
                "'messages' must contain at least one message.",
                Some("messages"),
            ));
        }
        Ok(())
    }

    pub fn is_stream(&self) -> bool {
        self.stream == Some(true)
    }

    pub fn client_wants_usage(&self) -> bool {
        self.stream_options
            .as_ref()
            .and_then(|options| options.include_usage)
            == Some(true)
    }
}

/// The top-level fields memproxy reads must have their OpenAI types (serde's own error for a
/// flattened struct does not say which field was wrong).
fn check_typed_fields(fields: &Map<String, Value>) -> Result<(), ProxyError> {
    let wrong = |param: &str, expected: &str| {
        Err(ProxyError::invalid(
            format!("'{param}' must be {expected}."),
            Some(param),
        ))
    };
    for (param, value) in fields {
        match (param.as_str(), value) {
            (_, Value::Null) => {}
            ("model" | "user", Value::String(_)) => {}
            ("model" | "user", _) => return wrong(param, "a string"),
            ("stream", Value::Bool(_)) => {}
            ("stream", _) => return wrong(param, "a boolean"),
            ("stream_options", Value::Object(options)) => match options.get("include_usage") {
                None | Some(Value::Bool(_) | Value::Null) => {}
                Some(_) => return wrong("stream_options.include_usage", "a boolean"),
            },
            ("stream_options", _) => return wrong(param, "an object"),
            _ => {}
        }
    }
    Ok(())
}

/// Per-message checks, so that errors name `messages[i].field` like OpenAI's do.
fn check_messages(items: &[Value]) -> Result<(), ProxyError> {
    for (index, item) in items.iter().enumerate() {
        let at = |field: &str| format!("messages[{index}]{field}");
        let Value::Object(message) = item else {
            return Err(ProxyError::invalid(
                format!("'{}' must be an object.", at("")),
                Some(&at("")),
            ));
        };
        match message.get("role") {
            Some(Value::String(_)) => {}
            None => {
                let param = at(".role");
                return Err(ProxyError::invalid(
                    format!("'{param}' is required."),
                    Some(&param),
                ));
            }
            Some(_) => {
                let param = at(".role");
                return Err(ProxyError::invalid(
                    format!("'{param}' must be a string."),
                    Some(&param),
                ));
            }
        }
        match message.get("content") {
            None | Some(Value::Null | Value::String(_) | Value::Array(_)) => {}
            Some(_) => {
                let param = at(".content");
                return Err(ProxyError::invalid(
                    format!("'{param}' must be a string, an array of content parts, or null."),
                    Some(&param),
                ));
            }
        }
        if let Some(calls) = message.get("tool_calls") {
            if serde_json::from_value::<Vec<ToolCall>>(calls.clone()).is_err() {
                let param = at(".tool_calls");
                return Err(ProxyError::invalid(
                    format!("'{param}' must be an array of {{id, type, function: {{name, arguments}}}}."),
                    Some(&param),
                ));
            }
        }
    }
    Ok(())
}

/// What memproxy reads from a non-streaming completion (the relayed bytes stay the upstream's).
#[derive(Debug, Default, Deserialize)]
pub struct CompletionView {
    #[serde(default)]
    pub choices: Vec<ChoiceView>,
    #[serde(default)]
    pub usage: Option<Usage>,
    /// An error object where the completion should be (some upstreams answer 200 with one).
    #[serde(default)]
    pub error: Option<serde_json::Value>,
}

#[derive(Debug, Default, Deserialize)]
pub struct ChoiceView {
    #[serde(default)]
    pub index: u32,
    #[serde(default)]
    pub message: Option<ChatMessage>,
    #[serde(default)]
    pub finish_reason: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error_param(body: &str) -> Option<String> {
        let error = ChatRequest::parse(body.as_bytes()).expect_err("invalid");
        error.body()["error"]["param"].as_str().map(str::to_owned)
    }

    #[test]
    fn keeps_unknown_fields_and_explicit_nulls() {
        let body = r#"{"model":"m","messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}],"x_vendor":1},{"role":"user","content":"hi"}],"temperature":0.2,"response_format":{"type":"json_object"},"n":2}"#;
        let request = ChatRequest::parse(body.as_bytes()).expect("valid");
        let back: Value = serde_json::to_value(&request).expect("serializes");
        let original: Value = serde_json::from_str(body).expect("json");
        assert_eq!(back, original);
    }

    #[test]
    fn names_the_bad_field() {
        assert_eq!(error_param(r#"{"model":"m"}"#).as_deref(), Some("messages"));
        assert_eq!(
            error_param(r#"{"messages":"hi"}"#).as_deref(),
            Some("messages")
        );
        assert_eq!(
            error_param(r#"{"messages":[{"content":"hi"}]}"#).as_deref(),
            Some("messages[0].role")
        );
        assert_eq!(
            error_param(
                r#"{"messages":[{"role":"user","content":"a"},{"role":"user","content":5}]}"#
            )
            .as_deref(),
            Some("messages[1].content")
        );
        assert_eq!(
            error_param(r#"{"messages":[{"role":"user","content":"a"}],"stream":"yes"}"#)
                .as_deref(),
            Some("stream")
        );
        assert!(ChatRequest::parse(b"{not json").is_err());
        assert!(ChatRequest::parse(b"[1]").is_err());
    }

    #[test]
    fn text_joins_content_parts() {
        let message: ChatMessage = serde_json::from_str(
            r#"{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"x"}},{"type":"text","text":"b"}]}"#,
        )
        .expect("valid");
        assert_eq!(message.text(), "a\nb");
    }
}
