//! An answer (neutral) as a Responses API `response` object: the skeleton echoing the
//! request (known before the upstream answers, so a stream can start with it), the output items
//! (a `message` with `output_text`, `function_call`s), status and usage; and the answer as the
//! Chat Completions assistant message the response log keeps for the next turn.

use serde_json::{json, Map, Value};

use crate::conversation::reply::{Call, Finish, Reply, Usage};

/// A fresh response id.
pub fn new_id() -> String {
    format!("resp_{}", uuid::Uuid::new_v4().simple())
}

pub fn now_seconds() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The response object before any output: `status: in_progress`, the request's settings echoed.
pub fn skeleton(request: &Map<String, Value>, id: &str, created_at: u64) -> Value {
    let get = |key: &str| request.get(key).cloned().unwrap_or(Value::Null);
    let tools = request.get("tools").cloned().unwrap_or_else(|| json!([]));
    let text = request
        .get("text")
        .cloned()
        .unwrap_or_else(|| json!({"format": {"type": "text"}}));
    json!({
        "id": id,
        "object": "response",
        "created_at": created_at,
        "status": "in_progress",
        "error": null,
        "incomplete_details": null,
        "instructions": get("instructions"),
        "max_output_tokens": get("max_output_tokens"),
        "model": get("model"),
        "output": [],
        "parallel_tool_calls": request.get("parallel_tool_calls").cloned().unwrap_or(json!(true)),
        "previous_response_id": get("previous_response_id"),
        "reasoning": {"effort": null, "summary": null},
        "store": request.get("store").cloned().unwrap_or(json!(true)),
        "temperature": get("temperature"),
        "text": text,
        "tool_choice": request.get("tool_choice").cloned().unwrap_or(json!("auto")),
        "tools": tools,
        "top_p": get("top_p"),
        "truncation": "disabled",
        "usage": null,
        "user": get("user"),
        "metadata": request.get("metadata").cloned().unwrap_or(json!({})),
    })
}

/// The output `message` item holding `text`.
pub fn message_item(id: &str, text: &str, status: &str) -> Value {
    json!({"type": "message", "id": id, "status": status, "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": []}]})
}

/// A `function_call` output item.
pub fn call_item(call_id: &str, name: &str, arguments: &str) -> Value {
    json!({"type": "function_call", "id": format!("fc_{}", call_id.trim_start_matches("call_")),
        "call_id": call_id, "name": name, "arguments": arguments, "status": "completed"})
}

/// Usage → Responses usage.
pub fn usage(usage: &Usage) -> Value {
    let (input, output) = (usage.prompt_tokens, usage.completion_tokens);
    json!({
        "input_tokens": input,
        // A Chat Completions upstream does not report cache writes; the SDKs' types declare them.
        "input_tokens_details": {"cached_tokens": usage.cached_tokens.unwrap_or(0),
            "cache_write_tokens": 0},
        "output_tokens": output,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": input + output,
    })
}

/// Completes `response` with its output, status (`incomplete` when the token limit cut it) and
/// usage.
pub fn finish(response: &mut Value, output: Vec<Value>, finish: Option<Finish>, spent: &Usage) {
    response["output"] = Value::Array(output);
    if finish == Some(Finish::Length) {
        response["status"] = json!("incomplete");
        response["incomplete_details"] = json!({"reason": "max_output_tokens"});
    } else {
        response["status"] = json!("completed");
    }
    response["usage"] = usage(spent);
}

/// The whole response for a whole answer.
pub fn complete(mut response: Value, reply: &Reply) -> Value {
    let mut output = Vec::new();
    if !reply.text.is_empty() {
        output.push(message_item(
            &message_id(&response),
            &reply.text,
            "completed",
        ));
    }
    for call in &reply.calls {
        output.push(call_item(&call.id, &call.name, &call.arguments));
    }
    finish(
        &mut response,
        output,
        reply.finish,
        &reply.usage.unwrap_or_default(),
    );
    response
}

/// The id of a response's message item (`resp_x` → `msg_x`).
pub fn message_id(response: &Value) -> String {
    let id = response["id"].as_str().unwrap_or_default();
    format!("msg_{}", id.trim_start_matches("resp_"))
}

/// What a `response` object's output said (its text, its function calls), as the neutral reply.
pub fn said(response: &Value) -> Reply {
    let mut reply = Reply::default();
    for item in response["output"].as_array().into_iter().flatten() {
        match item["type"].as_str() {
            Some("message") => {
                for part in item["content"].as_array().into_iter().flatten() {
                    reply
                        .text
                        .push_str(part["text"].as_str().unwrap_or_default());
                }
            }
            Some("function_call") => reply.calls.push(Call {
                id: item["call_id"].as_str().unwrap_or_default().to_owned(),
                name: item["name"].as_str().unwrap_or_default().to_owned(),
                arguments: item["arguments"].as_str().unwrap_or_default().to_owned(),
            }),
            _ => {}
        }
    }
    reply
}

/// The response's output as the Chat Completions assistant message (for the next turn).
pub fn assistant_message(response: &Value) -> Value {
    crate::openai::reply::assistant_message(&said(response))
}
