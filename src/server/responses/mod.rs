//! The OpenAI Responses API surface (`POST /v1/responses`): its request read, checked and
//! translated to the Chat Completions form memproxy's strategies, recall log and hooks work on
//! ([`crate::openai::ChatRequest`], the neutral form), with the history of
//! `previous_response_id` put back in front ([`crate::store::responses`]); the answer and its
//! stream translated back ([`reply`], [`events`]). Errors keep the OpenAI shape this API shares
//! with Chat Completions.
//!
//! File inputs, item references, background mode and a `tool_choice` naming a built-in tool have
//! no Chat Completions counterpart and are refused precisely. Offered built-in tools (web search,
//! file search, computer use, MCP, ...) and tool namespaces are left out and named in
//! `x-memproxy-dropped-tools` (an offer the model cannot take does not change what is asked);
//! `reasoning`, `include`, `truncation` and cache hints are dropped.

pub mod events;
pub(super) mod handler;
pub(super) mod log;
pub mod native;
pub(super) mod pending;
pub mod reply;

use serde_json::{json, Map, Value};

use crate::error::ProxyError;
use crate::openai::ChatRequest;

/// A Responses request as Chat Completions: the request (instructions, then `history`, then the
/// new input items) and the new items alone (what this response adds to the chain).
pub struct Translated {
    pub chat: ChatRequest,
    pub new_messages: Vec<Value>,
    /// For each message of `chat`, the index of the `input` item it came from (`None`:
    /// `instructions`, the history of `previous_response_id`, or a string `input`).
    pub origin: Vec<Option<usize>>,
    /// Offered tools the upstream cannot run (built-in tools, tool namespaces): left out, and
    /// named to the client in `x-memproxy-dropped-tools`.
    pub dropped_tools: Vec<String>,
}

/// Parses the body into a JSON object (the fields are read by [`to_chat`]).
pub fn parse(body: &[u8]) -> Result<Map<String, Value>, ProxyError> {
    crate::openai::translate::json_object(body)
}

pub fn to_chat(
    request: &Map<String, Value>,
    history: Vec<Value>,
) -> Result<Translated, ProxyError> {
    let model = match request.get("model") {
        Some(Value::String(model)) if !model.is_empty() => model.clone(),
        _ => {
            return Err(ProxyError::invalid(
                "'model' is required (a non-empty string).",
                Some("model"),
            ))
        }
    };
    if request.get("background") == Some(&Value::Bool(true)) {
        return Err(untranslatable(
            "Background mode ('background': true)",
            "background",
        ));
    }
    let (new_messages, item_origin) = match request.get("input") {
        Some(Value::String(text)) => (vec![json!({"role": "user", "content": text})], vec![None]),
        Some(Value::Array(items)) => convert_items(items)?,
        _ => {
            return Err(ProxyError::invalid(
                "'input' is required: a string or a list of input items.",
                Some("input"),
            ))
        }
    };
    let mut messages = Vec::new();
    match request.get("instructions") {
        None | Some(Value::Null) => {}
        Some(Value::String(text)) => messages.push(json!({"role": "system", "content": text})),
        Some(_) => {
            return Err(ProxyError::invalid(
                "'instructions' must be a string.",
                Some("instructions"),
            ))
        }
    }
    messages.extend(history);
    let mut origin = vec![None; messages.len()];
    origin.extend(item_origin);
    messages.extend(new_messages.iter().cloned());
    let mut out = Map::new();
    out.insert("model".into(), json!(model));
    out.insert("messages".into(), Value::Array(messages));
    crate::openai::translate::carry_settings(
        request,
        &mut out,
        &[
            ("temperature", "temperature"),
            ("top_p", "top_p"),
            ("max_output_tokens", "max_tokens"),
            ("parallel_tool_calls", "parallel_tool_calls"),
            ("user", "user"),
        ],
    );
    let mut dropped_tools = Vec::new();
    if let Some(tools) = request.get("tools").filter(|t| !t.is_null()) {
        let (tools, dropped) = convert_tools(tools)?;
        dropped_tools = dropped;
        if !tools.is_empty() {
            out.insert("tools".into(), Value::Array(tools));
        }
    }
    if let Some(choice) = request.get("tool_choice").filter(|c| !c.is_null()) {
        out.insert("tool_choice".into(), convert_tool_choice(choice)?);
    }
    if let Some(format) = request.get("text").and_then(|t| t.get("format")) {
        if let Some(format) = convert_format(format)? {
            out.insert("response_format".into(), format);
        }
    }
    let chat = serde_json::from_value(Value::Object(out))
        .map_err(|error| ProxyError::Internal(format!("translated request: {error}")))?;
    Ok(Translated {
        chat,
        new_messages,
        origin,
        dropped_tools,
    })
}

/// A feature of the Responses API that a Chat Completions upstream cannot serve.
pub fn untranslatable(what: &str, param: &str) -> ProxyError {
    ProxyError::invalid(
        format!("{what} cannot be translated to the Chat Completions API the configured upstream speaks; leave it out."),
        Some(param),
    )
}

fn bad(param: &str, problem: &str) -> ProxyError {
    ProxyError::invalid(format!("{param}: {problem}"), Some(param))
}

/// The items as Chat Completions messages, and for each message the item it starts at.
fn convert_items(items: &[Value]) -> Result<(Vec<Value>, Vec<Option<usize>>), ProxyError> {
    let mut chat: Vec<Value> = Vec::new();
    let mut origin = Vec::new();
    for (index, item) in items.iter().enumerate() {
        // The messages the previous item started.
        origin.resize(chat.len(), index.checked_sub(1));
        let at = format!("input[{index}]");
        let kind = item["type"]
            .as_str()
            .unwrap_or(if item.get("role").is_some() {
                "message"
            } else {
                ""
            });
        match kind {
            "message" => chat.push(convert_message(item, &at)?),
            "function_call" => {
                let (Some(call_id), Some(name)) = (item["call_id"].as_str(), item["name"].as_str())
                else {
                    return Err(bad(&at, "a function_call needs 'call_id' and 'name'."));
                };
                let call = json!({"id": call_id, "type": "function", "function": {
                    "name": name, "arguments": item["arguments"].as_str().unwrap_or("{}")}});
                // Calls right after an assistant message (or after other calls) belong to it.
                match chat.last_mut() {
                    Some(last) if last["role"] == "assistant" => {
                        match last["tool_calls"].as_array_mut() {
                            Some(calls) => calls.push(call),
                            None => last["tool_calls"] = json!([call]),
                        }
                        if last["content"] == "" {
                            last["content"] = Value::Null;
                        }
                    }
                    _ => chat
                        .push(json!({"role": "assistant", "content": null, "tool_calls": [call]})),
                }
            }
            "function_call_output" => {
                let Some(call_id) = item["call_id"].as_str() else {
                    return Err(bad(&at, "a function_call_output needs 'call_id'."));
                };
                let output = match &item["output"] {
                    Value::String(text) => text.clone(),
                    Value::Array(parts) => text_of(parts, &at)?,
                    _ => return Err(bad(&at, "'output' must be a string or text parts.")),
                };
                chat.push(json!({"role": "tool", "tool_call_id": call_id, "content": output}));
            }
            // The model's own reasoning from an earlier turn: no place for it upstream.
            "reasoning" => {}
            "" => return Err(bad(&at, "each input item needs a 'type' or a 'role'.")),
            other => {
                return Err(untranslatable(
                    &format!("The input item type '{other}' ({at})"),
                    "input",
                ))
            }
        }
    }
    origin.resize(chat.len(), items.len().checked_sub(1));
    Ok((chat, origin))
}

fn convert_message(item: &Value, at: &str) -> Result<Value, ProxyError> {
    let role = match item["role"].as_str() {
        Some(role @ ("user" | "assistant" | "system")) => role,
        // Local servers rarely know the `developer` role; it means the same as `system`.
        Some("developer") => "system",
        _ => {
            return Err(bad(
                &format!("{at}.role"),
                "must be user, assistant, system or developer.",
            ))
        }
    };
    let content = match &item["content"] {
        Value::String(text) => json!(text),
        Value::Array(parts) if parts.iter().all(is_text_part) => json!(text_of(parts, at)?),
        Value::Array(parts) => {
            let mut converted = Vec::new();
            for part in parts {
                converted.push(match part["type"].as_str() {
                    Some("input_text" | "output_text" | "text") => {
                        json!({"type": "text", "text": part["text"].as_str().unwrap_or_default()})
                    }
                    Some("input_image") => match part["image_url"].as_str() {
                        Some(url) => {
                            let mut image = json!({"url": url});
                            if let Some(detail) = part["detail"].as_str() {
                                image["detail"] = json!(detail);
                            }
                            json!({"type": "image_url", "image_url": image})
                        }
                        None => return Err(untranslatable("An input_image by file_id", "input")),
                    },
                    other => {
                        return Err(untranslatable(
                            &format!("The content part type '{}' ({at})", other.unwrap_or("?")),
                            "input",
                        ))
                    }
                });
            }
            Value::Array(converted)
        }
        _ => {
            return Err(bad(
                &format!("{at}.content"),
                "must be a string or content parts.",
            ))
        }
    };
    Ok(json!({"role": role, "content": content}))
}

fn is_text_part(part: &Value) -> bool {
    matches!(
        part["type"].as_str(),
        Some("input_text" | "output_text" | "text" | "refusal")
    )
}

/// The text of text parts (`input_text`, `output_text`, `refusal`), joined.
fn text_of(parts: &[Value], at: &str) -> Result<String, ProxyError> {
    let mut texts = Vec::new();
    for part in parts {
        if !is_text_part(part) {
            return Err(untranslatable(
                &format!(
                    "The part type '{}' ({at})",
                    part["type"].as_str().unwrap_or("?")
                ),
                "input",
            ));
        }
        let text = part["text"].as_str().or_else(|| part["refusal"].as_str());
        texts.push(text.unwrap_or_default());
    }
    Ok(texts.join("\n\n"))
}

/// The function tools as Chat Completions tools, and the names of the others (built-in tools and
/// namespaces, which a Chat Completions upstream cannot run: tools are offers, so the request
/// still has its meaning without them).
fn convert_tools(tools: &Value) -> Result<(Vec<Value>, Vec<String>), ProxyError> {
    let Value::Array(tools) = tools else {
        return Err(bad("tools", "must be a list."));
    };
    let mut out = Vec::new();
    let mut dropped = Vec::new();
    for (index, tool) in tools.iter().enumerate() {
        match tool["type"].as_str() {
            Some("function") => {}
            Some(kind) => {
                dropped.push(tool["name"].as_str().unwrap_or(kind).to_owned());
                continue;
            }
            None => return Err(bad(&format!("tools[{index}].type"), "is required.")),
        }
        let Some(name) = tool["name"].as_str() else {
            return Err(bad(&format!("tools[{index}].name"), "is required."));
        };
        let mut function = json!({"name": name});
        for key in ["description", "parameters", "strict"] {
            if let Some(value) = tool.get(key).filter(|v| !v.is_null()) {
                function[key] = value.clone();
            }
        }
        out.push(json!({"type": "function", "function": function}));
    }
    Ok((out, dropped))
}

fn convert_tool_choice(choice: &Value) -> Result<Value, ProxyError> {
    match choice {
        Value::String(mode) if matches!(mode.as_str(), "auto" | "none" | "required") => {
            Ok(choice.clone())
        }
        Value::Object(_) if choice["type"] == "function" => match choice["name"].as_str() {
            Some(name) => Ok(json!({"type": "function", "function": {"name": name}})),
            None => Err(bad("tool_choice.name", "is required.")),
        },
        _ => Err(untranslatable(
            &format!("The tool_choice {choice}"),
            "tool_choice",
        )),
    }
}

fn convert_format(format: &Value) -> Result<Option<Value>, ProxyError> {
    match format["type"].as_str() {
        None | Some("text") => Ok(None),
        Some("json_object") => Ok(Some(json!({"type": "json_object"}))),
        Some("json_schema") => {
            let mut schema = json!({
                "name": format["name"].as_str().unwrap_or("response"),
                "schema": format["schema"].clone(),
            });
            if let Some(strict) = format.get("strict").filter(|v| !v.is_null()) {
                schema["strict"] = strict.clone();
            }
            Ok(Some(json!({"type": "json_schema", "json_schema": schema})))
        }
        Some(other) => Err(bad("text.format.type", &format!("'{other}' is not known."))),
    }
}

#[cfg(test)]
mod tests;

/// The Responses surface.
pub const SURFACE: crate::server::surfaces::ApiSurface = crate::server::surfaces::ApiSurface {
    routes: || {
        use axum::routing::{get, post};
        axum::Router::new()
            .route("/v1/responses", post(handler::default_route))
            .route("/{mode}/v1/responses", post(handler::mode_route))
            .route(
                "/v1/responses/{id}",
                get(handler::get).delete(handler::delete),
            )
    },
    owns: |path| path.contains("/v1/responses"),
    error: crate::server::surfaces::openai_error,
};
