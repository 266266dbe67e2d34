//! The chat model an agent steps through, behind a small trait so the loop does not care whether
//! it talks to the configured upstream or to anything else OpenAI-shaped.

use std::sync::Arc;

use async_trait::async_trait;
use axum::body::Bytes;
use axum::http::{header, HeaderMap, HeaderValue, Method};
use serde_json::Value;

use crate::error::ProxyError;
use crate::openai::{ToolCall, Usage};
use crate::upstream::Upstream;

/// One non-streamed completion, as the loop reads it.
#[derive(Clone, Debug, Default)]
pub struct ModelAnswer {
    /// Text outside tool calls (inner thoughts, or a plain answer).
    pub content: String,
    pub tool_calls: Vec<ToolCall>,
    pub usage: Usage,
    /// Prompt tokens served from the upstream's prompt cache, where it reports them.
    pub cached_tokens: Option<u64>,
}

#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// The upstream said the prompt does not fit its context window.
    #[error("the upstream's context window is exceeded: {0}")]
    ContextLength(String),
    /// Any other error status: relayed to the client as the upstream sent it.
    #[error("the upstream answered {status}")]
    Rejected {
        status: u16,
        headers: Box<HeaderMap>,
        body: Bytes,
    },
    #[error(transparent)]
    Proxy(#[from] ProxyError),
}

#[async_trait]
pub trait ChatModel: Send + Sync {
    async fn complete(&self, body: Value) -> Result<ModelAnswer, ModelError>;
}

/// The configured upstream, with the headers of the client request (keys already decided).
pub struct UpstreamModel {
    pub upstream: Arc<Upstream>,
    pub headers: HeaderMap,
}

#[async_trait]
impl ChatModel for UpstreamModel {
    async fn complete(&self, body: Value) -> Result<ModelAnswer, ModelError> {
        let bytes = serde_json::to_vec(&body).map_err(|e| ProxyError::Internal(e.to_string()))?;
        let mut headers = self.headers.clone();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        let response = self
            .upstream
            .send(Method::POST, "/chat/completions", headers, bytes.into())
            .await?;
        let status = response.status();
        let response_headers = crate::upstream::response_headers(response.headers());
        let deadline = tokio::time::Instant::now() + self.upstream.config.total_timeout;
        let body = self.upstream.whole_body(response, deadline).await?;
        if !status.is_success() {
            let text = String::from_utf8_lossy(&body);
            if is_context_length_error(status.as_u16(), &text) {
                return Err(ModelError::ContextLength(text.chars().take(300).collect()));
            }
            return Err(ModelError::Rejected {
                status: status.as_u16(),
                headers: Box::new(response_headers),
                body,
            });
        }
        parse_answer(&body)
    }
}

/// Reads a chat completion; a body without a message is a broken upstream.
pub fn parse_answer(body: &[u8]) -> Result<ModelAnswer, ModelError> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| ProxyError::UpstreamBroken(format!("the completion is not JSON: {e}")))?;
    let message = &value["choices"][0]["message"];
    if !message.is_object() {
        return Err(ProxyError::UpstreamBroken("the completion has no message".to_owned()).into());
    }
    let tool_calls = match &message["tool_calls"] {
        Value::Array(_) => serde_json::from_value(message["tool_calls"].clone())
            .map_err(|e| ProxyError::UpstreamBroken(format!("unreadable tool calls: {e}")))?,
        _ => Vec::new(),
    };
    Ok(ModelAnswer {
        content: message["content"].as_str().unwrap_or_default().to_owned(),
        tool_calls,
        usage: serde_json::from_value(value["usage"].clone()).unwrap_or_default(),
        cached_tokens: crate::openai::cached_prompt_tokens(&value),
    })
}

/// OpenAI says `context_length_exceeded`; llama.cpp, vLLM and Ollama say it in words.
pub fn is_context_length_error(status: u16, body: &str) -> bool {
    if !matches!(status, 400 | 413 | 422 | 500) {
        return false;
    }
    let lower = body.to_lowercase();
    [
        "context_length_exceeded",
        "context length",
        "context window",
        "context size",
        "maximum context",
        "too many tokens",
        "prompt is too long",
    ]
    .iter()
    .any(|needle| lower.contains(needle))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_context_errors_of_several_servers() {
        assert!(is_context_length_error(
            400,
            r#"{"error":{"code":"context_length_exceeded","message":"This model's maximum context length is 8192 tokens."}}"#
        ));
        assert!(is_context_length_error(
            400,
            "the request exceeds the available context size, try increasing it"
        ));
        assert!(!is_context_length_error(
            400,
            "Invalid value for 'temperature'"
        ));
        assert!(!is_context_length_error(429, "context length"));
    }

    #[test]
    fn reads_answers() {
        let body = br#"{"choices":[{"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"send_message","arguments":"{}"}}]}}],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}"#;
        let answer = parse_answer(body).expect("answer");
        assert_eq!(answer.tool_calls[0].function.name, "send_message");
        assert_eq!(answer.usage.total_tokens, 7);
        assert_eq!(answer.cached_tokens, None);
        let cached = br#"{"choices":[{"message":{"role":"assistant","content":"hi"}}],"usage":{"prompt_tokens":50,"completion_tokens":2,"total_tokens":52,"prompt_tokens_details":{"cached_tokens":48}}}"#;
        assert_eq!(
            parse_answer(cached).expect("answer").cached_tokens,
            Some(48)
        );
        let llama = br#"{"choices":[{"message":{"role":"assistant","content":"hi"}}],"timings":{"cache_n":31,"prompt_n":4}}"#;
        assert_eq!(parse_answer(llama).expect("answer").cached_tokens, Some(31));
        assert!(parse_answer(b"{}").is_err());
    }
}
