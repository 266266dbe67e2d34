//! The memory LLM: a plain OpenAI-compatible chat call for extraction, reconciliation and
//! summaries. JSON answers are asked for with `response_format` `json_schema` (bounded lists and
//! strings: llama.cpp, vLLM, Ollama and OpenAI enforce it, small models then cannot ramble or
//! break the shape); an upstream that refuses the schema is asked for `json_object` instead, from
//! then on. Parsing stays tolerant of the JSON small models wrap in fences or prose.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::{json, Value};

use crate::config::Secret;

pub struct MemoryLlm {
    client: reqwest::Client,
    url: String,
    model: Option<String>,
    api_key: Option<Secret>,
    max_tokens: Option<u32>,
    /// The upstream refused `json_schema` once: ask for `json_object` from then on.
    schemas_refused: AtomicBool,
}

/// The shape of answer asked for.
#[derive(Clone, Copy, Debug)]
pub enum Answer<'a> {
    Text,
    /// A JSON object following this JSON Schema (named for `response_format`).
    Json(&'a str, &'a Value),
}

#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    #[error("memory LLM request failed: {0}")]
    Request(String),
    #[error("memory LLM answered {status}: {body}")]
    Status { status: u16, body: String },
    #[error("memory LLM answer is not what was asked for: {0}")]
    Malformed(String),
}

impl MemoryLlm {
    pub fn new(
        url: &str,
        model: Option<String>,
        api_key: Option<Secret>,
        max_tokens: Option<u32>,
        timeout: Duration,
    ) -> Result<Self, LlmError> {
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .build()
            .map_err(|e| LlmError::Request(e.to_string()))?;
        Ok(MemoryLlm {
            client,
            url: format!("{}/chat/completions", url.trim_end_matches('/')),
            model,
            api_key,
            max_tokens,
            schemas_refused: AtomicBool::new(false),
        })
    }

    /// The endpoint asked (`…/chat/completions`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The model it asks, when configured (else the chat request's).
    pub fn model(&self) -> Option<&str> {
        self.model.as_deref()
    }

    /// The cap on each answer, when configured.
    pub fn max_tokens(&self) -> Option<u32> {
        self.max_tokens
    }

    /// One completion: `system` instructions, `user` material; returns the answer text.
    pub async fn complete(
        &self,
        request_model: &str,
        system: &str,
        user: &str,
        answer: Answer<'_>,
    ) -> Result<String, LlmError> {
        let model = self.model.as_deref().unwrap_or(request_model);
        let mut body = json!({
            "model": model,
            "temperature": 0,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
        });
        let Answer::Json(name, schema) = answer else {
            return self.send(body).await;
        };
        if !self.schemas_refused.load(Ordering::Relaxed) {
            body["response_format"] = json!({"type": "json_schema",
                "json_schema": {"name": name, "strict": true, "schema": schema}});
            match self.send(body.clone()).await {
                Err(LlmError::Status { status, body: text })
                    if (400..500).contains(&status)
                        && ["response_format", "json_schema", "schema", "grammar"]
                            .iter()
                            .any(|word| text.contains(word)) =>
                {
                    tracing::warn!(status, answer = %text, "the memory LLM refuses response_format json_schema; asking for json_object from now on");
                    self.schemas_refused.store(true, Ordering::Relaxed);
                }
                answer => return answer,
            }
        }
        body["response_format"] = json!({"type": "json_object"});
        self.send(body).await
    }

    async fn send(&self, mut body: Value) -> Result<String, LlmError> {
        if let Some(limit) = self.max_tokens {
            body["max_tokens"] = json!(limit);
        }
        let mut request = self.client.post(&self.url).json(&body);
        if let Some(key) = &self.api_key {
            request = request.bearer_auth(key.expose());
        }
        // Errors name no URL: a query string may carry a key (the job's error is shown).
        let response = request
            .send()
            .await
            .map_err(|e| LlmError::Request(e.without_url().to_string()))?;
        let status = response.status();
        let text = response
            .text()
            .await
            .map_err(|e| LlmError::Request(e.to_string()))?;
        if !status.is_success() {
            return Err(LlmError::Status {
                status: status.as_u16(),
                body: text.chars().take(300).collect(),
            });
        }
        let answer: Value =
            serde_json::from_str(&text).map_err(|e| LlmError::Malformed(e.to_string()))?;
        answer["choices"][0]["message"]["content"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| LlmError::Malformed("no message content".to_owned()))
    }
}

/// The JSON object in an answer: bare, in a code fence, or surrounded by prose.
pub fn json_object(answer: &str) -> Result<Value, LlmError> {
    let start = answer.find('{');
    let end = answer.rfind('}');
    let (Some(start), Some(end)) = (start, end) else {
        return Err(LlmError::Malformed(format!(
            "no JSON object in {:?}",
            truncate(answer)
        )));
    };
    if end < start {
        return Err(LlmError::Malformed(format!(
            "no JSON object in {:?}",
            truncate(answer)
        )));
    }
    match serde_json::from_str(&answer[start..=end]) {
        Ok(value) => Ok(value),
        // Small models repeat themselves until `max_tokens` cuts the answer mid-list: keep the
        // items that were complete rather than lose the whole answer.
        Err(error) => salvage_cut_list(&answer[start..])
            .ok_or_else(|| LlmError::Malformed(format!("{error} in {:?}", truncate(answer)))),
    }
}

/// `{"key": [item, item, item-cut-off…` → `{"key": [item, item]}`. Only for an answer that
/// breaks off inside a list of the top-level object; anything else is not guessed at.
fn salvage_cut_list(text: &str) -> Option<Value> {
    let mut open: Vec<char> = Vec::new();
    let (mut in_string, mut escaped) = (false, false);
    // Where the last complete item of a top-level list ended, and the brackets then open.
    let mut last_cut: Option<(usize, Vec<char>)> = None;
    for (at, c) in text.char_indices() {
        if in_string {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '{' | '[' => open.push(c),
            '}' | ']' => {
                open.pop();
                if open.is_empty() {
                    return None; // The object closed: a real syntax error, not a cut.
                }
                if open == ['{', '['] {
                    last_cut = Some((at + c.len_utf8(), open.clone()));
                }
            }
            _ => {}
        }
    }
    let (cut, still_open) = last_cut?;
    let mut repaired = text[..cut].to_owned();
    for bracket in still_open.iter().rev() {
        repaired.push(if *bracket == '{' { '}' } else { ']' });
    }
    let value: Value = serde_json::from_str(&repaired).ok()?;
    tracing::warn!(kept = %truncate(&repaired), "memory LLM answer was cut off; its complete items are kept");
    Some(value)
}

fn truncate(text: &str) -> String {
    text.chars().take(200).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_json_in_fences_and_prose() {
        assert_eq!(
            json_object("{\"facts\": []}").expect("bare")["facts"],
            json!([])
        );
        let fenced = "Here you go:\n```json\n{\"facts\": [{\"text\": \"a\"}]}\n```\nHope it helps!";
        assert_eq!(
            json_object(fenced).expect("fenced")["facts"][0]["text"],
            "a"
        );
        assert!(json_object("no json here").is_err());
        assert!(json_object("{\"facts\": [").is_err());
    }

    #[test]
    fn an_answer_cut_inside_its_list_keeps_the_complete_items() {
        let cut = r#"{"facts": [{"text": "Ana lives in Porto."}, {"text": "She has a dog \"Pixel\" [a beagle]."}, {"text": "Ana li"#;
        assert_eq!(
            json_object(cut).expect("salvaged")["facts"],
            json!([{"text": "Ana lives in Porto."}, {"text": "She has a dog \"Pixel\" [a beagle]."}])
        );
        let decisions = r#"```json
{"decisions": [{"fact": 0, "action": "ADD"}, {"fact": 1, "action": "UPD"#;
        assert_eq!(
            json_object(decisions).expect("salvaged")["decisions"],
            json!([{"fact": 0, "action": "ADD"}])
        );
        // Not a cut: a closed object with an error in it, or nothing complete to keep.
        assert!(json_object(r#"{"facts": [{"text": "a"},, ]}"#).is_err());
        assert!(json_object(r#"{"facts": [{"text": "a"#).is_err());
    }
}
