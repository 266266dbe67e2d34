//! Answers in Ollama's shapes: a whole answer (neutral) as `/api/chat`'s or `/api/generate`'s
//! final object; the upstream's (OpenAI's) model list as `/api/tags`, embeddings as `/api/embed`'s;
//! and what Ollama says for a model it only loaded.

use serde_json::{json, Map, Value};

use crate::conversation::reply::{arguments_object, Finish, Reply, Usage};

/// Which Ollama route an answer is for: `/api/chat` answers carry a `message`, `/api/generate`
/// answers a `response` text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    Chat,
    Generate,
}

/// Now, as Ollama writes `created_at`.
pub fn created_at() -> String {
    crate::dates::rfc3339(crate::store::now_ms())
}

/// Why the answer ended → Ollama `done_reason`: Ollama ends a turn of tool calls with `stop` too.
pub fn done_reason(finish: Option<Finish>) -> &'static str {
    match finish {
        Some(Finish::Length) => "length",
        _ => "stop",
    }
}

/// Ollama's tool calls for gathered `(id, name, arguments)` calls.
pub fn tool_calls<'a>(calls: impl Iterator<Item = (&'a str, &'a str, &'a str)>) -> Vec<Value> {
    calls
        .enumerate()
        .map(|(index, (id, name, text))| {
            json!({"id": id, "function": {"index": index, "name": name,
                "arguments": arguments_object(text)}})
        })
        .collect()
}

/// The counts and time of a finished answer: `prompt_eval_count` and `eval_count` from its usage
/// where it reported one, `total_duration` (nanoseconds) as memproxy measured the whole request.
pub fn metrics(usage: Option<&Usage>, total_ns: u64, into: &mut Map<String, Value>) {
    into.insert("total_duration".into(), json!(total_ns));
    if let Some(usage) = usage {
        into.insert("prompt_eval_count".into(), json!(usage.prompt_tokens));
        into.insert("eval_count".into(), json!(usage.completion_tokens));
    }
}

/// One streamed or final object: `model`, `created_at`, the route's content, `done`.
pub fn object(route: Route, model: &str, text: &str, calls: Vec<Value>, done: bool) -> Value {
    let mut out = json!({"model": model, "created_at": created_at()});
    match route {
        Route::Chat => {
            let mut message = json!({"role": "assistant", "content": text});
            if !calls.is_empty() {
                message["tool_calls"] = Value::Array(calls);
            }
            out["message"] = message;
        }
        Route::Generate => out["response"] = json!(text),
    }
    out["done"] = json!(done);
    out
}

/// A whole answer as Ollama's final object, named `model` as the client asked.
pub fn whole(route: Route, reply: &Reply, model: &str, total_ns: u64) -> Value {
    let calls = tool_calls(reply.calls.iter().map(|call| {
        (
            call.id.as_str(),
            call.name.as_str(),
            call.arguments.as_str(),
        )
    }));
    let mut out = object(route, model, &reply.text, calls, true);
    if let Value::Object(fields) = &mut out {
        fields.insert("done_reason".into(), json!(done_reason(reply.finish)));
        metrics(reply.usage.as_ref(), total_ns, fields);
    }
    out
}

/// What Ollama answers a request with nothing to say (no messages, an empty prompt): the model
/// is loaded, and the answer says so.
pub fn loaded(route: Route, model: &str) -> Value {
    let mut out = object(route, model, "", Vec::new(), true);
    out["done_reason"] = json!("load");
    out
}

/// An OpenAI model list (`{"data": [{"id", "created"}]}`) as `/api/tags`
/// (`{"models": [{"name", "model", "modified_at", "size", "digest", "details"}]}`); what Ollama
/// knows of a model file it holds (size, digest, quantisation) a Chat Completions upstream does
/// not say, and stays empty.
pub fn tags(list: &Value) -> Value {
    let models: Vec<Value> = list["data"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|model| {
            let id = model["id"].as_str()?;
            let created = model["created"].as_i64().unwrap_or(0) * 1000;
            Some(json!({"name": id, "model": id,
                "modified_at": crate::dates::rfc3339(created), "size": 0, "digest": "",
                "details": details()}))
        })
        .collect();
    json!({ "models": models })
}

fn details() -> Value {
    json!({"parent_model": "", "format": "", "family": "", "families": null,
           "parameter_size": "", "quantization_level": ""})
}

/// `/api/show` for a model of a Chat Completions upstream: what can be said without the model
/// file (it chats, and memproxy passes tools on).
pub fn show() -> Value {
    json!({"modelfile": "", "parameters": "", "template": "", "details": details(),
           "model_info": {}, "capabilities": ["completion", "tools"],
           "modified_at": crate::dates::rfc3339(0)})
}

/// An OpenAI embeddings answer as `/api/embed`'s (`{"model", "embeddings", "prompt_eval_count"}`)
/// or, for the older `/api/embeddings`, `{"embedding"}` (the first input's).
pub fn embeddings(answer: &Value, model: &str, legacy: bool) -> Value {
    let mut data: Vec<&Value> = answer["data"].as_array().into_iter().flatten().collect();
    data.sort_by_key(|item| item["index"].as_u64().unwrap_or(0));
    let vectors: Vec<Value> = data.iter().map(|item| item["embedding"].clone()).collect();
    if legacy {
        return json!({"embedding": vectors.first().cloned().unwrap_or(json!([]))});
    }
    let mut out = json!({"model": model, "embeddings": vectors});
    if let Some(tokens) = answer["usage"]["prompt_tokens"].as_u64() {
        out["prompt_eval_count"] = json!(tokens);
    }
    out
}
