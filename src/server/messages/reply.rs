//! A whole Chat Completions answer as an Anthropic message, and an upstream's error body in
//! Anthropic's error shape.

use serde_json::{json, Value};

/// The message id for a completion id (`chatcmpl-abc` → `msg_abc`).
pub fn message_id(completion_id: &str) -> String {
    let tail: String = completion_id
        .trim_start_matches("chatcmpl-")
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    if tail.is_empty() {
        format!("msg_{}", uuid::Uuid::new_v4().simple())
    } else {
        format!("msg_{tail}")
    }
}

/// Chat `finish_reason` → Anthropic `stop_reason`.
pub fn stop_reason(finish: Option<&str>) -> &'static str {
    match finish {
        Some("length") => "max_tokens",
        Some("tool_calls" | "function_call") => "tool_use",
        Some("content_filter") => "refusal",
        _ => "end_turn",
    }
}

/// Chat usage → Anthropic usage (cached prompt tokens as `cache_read_input_tokens`).
pub fn usage(completion: &Value) -> Value {
    let usage = &completion["usage"];
    let mut out = json!({
        "input_tokens": usage["prompt_tokens"].as_u64().unwrap_or(0),
        "output_tokens": usage["completion_tokens"].as_u64().unwrap_or(0),
    });
    if let Some(cached) = crate::openai::cached_prompt_tokens(completion) {
        out["cache_read_input_tokens"] = json!(cached);
    }
    out
}

/// A `chat.completion` body as an Anthropic `message` (first choice), named `model` as the
/// client asked.
pub fn message(completion: &Value, model: &str) -> Value {
    let choice = &completion["choices"][0];
    let source = &choice["message"];
    let mut content = Vec::new();
    if let Some(text) = source["content"].as_str().filter(|t| !t.is_empty()) {
        content.push(json!({"type": "text", "text": text}));
    }
    for call in source["tool_calls"].as_array().into_iter().flatten() {
        content.push(json!({
            "type": "tool_use",
            "id": call["id"].as_str().unwrap_or_default(),
            "name": call["function"]["name"].as_str().unwrap_or_default(),
            "input": crate::openai::translate::arguments_object(call["function"]["arguments"].as_str().unwrap_or_default()),
        }));
    }
    json!({
        "id": message_id(completion["id"].as_str().unwrap_or_default()),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason(choice["finish_reason"].as_str()),
        "stop_sequence": null,
        "usage": usage(completion),
    })
}

/// An OpenAI model list (`{"data": [{"id", "created"}]}`) as Anthropic's
/// (`{"data": [{"type": "model", "id", "display_name", "created_at"}], "has_more", "first_id",
/// "last_id"}`).
pub fn models(list: &Value) -> Value {
    let data: Vec<Value> = list["data"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|model| {
            let id = model["id"].as_str()?;
            let created = model["created"].as_i64().unwrap_or(0) * 1000;
            Some(json!({"type": "model", "id": id, "display_name": id,
                "created_at": crate::dates::rfc3339(created)}))
        })
        .collect();
    json!({
        "first_id": data.first().map(|m| m["id"].clone()),
        "last_id": data.last().map(|m| m["id"].clone()),
        "has_more": false,
        "data": data,
    })
}
