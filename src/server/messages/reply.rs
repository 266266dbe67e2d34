//! A whole answer (neutral) as an Anthropic message, and an OpenAI model list as Anthropic's.

use serde_json::{json, Value};

use crate::conversation::reply::{arguments_object, Finish, Reply, Usage};

/// The message id for an answer's id (`abc` → `msg_abc`; a fresh one when it has none).
pub fn message_id(id: &str) -> String {
    let tail: String = id
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    if tail.is_empty() {
        format!("msg_{}", uuid::Uuid::new_v4().simple())
    } else {
        format!("msg_{tail}")
    }
}

/// Why the answer ended → Anthropic `stop_reason`.
pub fn stop_reason(finish: Option<Finish>) -> &'static str {
    match finish {
        Some(Finish::Length) => "max_tokens",
        Some(Finish::ToolCalls) => "tool_use",
        Some(Finish::ContentFilter) => "refusal",
        Some(Finish::Stop) | None => "end_turn",
    }
}

/// Usage → Anthropic usage (cached prompt tokens as `cache_read_input_tokens`).
pub fn usage(usage: &Usage) -> Value {
    let mut out = json!({
        "input_tokens": usage.prompt_tokens,
        "output_tokens": usage.completion_tokens,
    });
    if let Some(cached) = usage.cached_tokens {
        out["cache_read_input_tokens"] = json!(cached);
    }
    out
}

/// A whole answer as an Anthropic `message`, named `model` as the client asked.
pub fn message(reply: &Reply, model: &str) -> Value {
    let mut content = Vec::new();
    if !reply.text.is_empty() {
        content.push(json!({"type": "text", "text": reply.text}));
    }
    for call in &reply.calls {
        content.push(json!({
            "type": "tool_use",
            "id": call.id,
            "name": call.name,
            "input": arguments_object(&call.arguments),
        }));
    }
    json!({
        "id": message_id(&reply.id),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason(reply.finish),
        "stop_sequence": null,
        "usage": usage(&reply.usage.unwrap_or_default()),
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
