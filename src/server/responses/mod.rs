//! The OpenAI Responses API surface (`POST /v1/responses`): its request read, checked and read
//! into the neutral request memproxy's core, strategies, recall log and hooks work on
//! ([`crate::conversation::request::Request`]), with the history of
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

use serde_json::{Map, Value};

use crate::conversation::content::{Content, Part};
use crate::conversation::reply::Call;
use crate::conversation::request::{Format, Message, Parameters, Request, Tool, ToolChoice};
use crate::error::ProxyError;

/// A Responses request in the neutral form: the request (instructions, then `history`, then the
/// new input items) and the new items alone (what this response adds to the chain).
pub struct Translated {
    pub request: Request,
    pub new_messages: Vec<Message>,
    /// For each message of `request`, the index of the `input` item it came from (`None`:
    /// `instructions`, the history of `previous_response_id`, or a string `input`).
    pub origin: Vec<Option<usize>>,
    /// Offered tools the upstream cannot run (built-in tools, tool namespaces): left out, and
    /// named to the client in `x-memproxy-dropped-tools`.
    pub dropped_tools: Vec<String>,
}

/// Parses the body into a JSON object (the fields are read by [`translate`]).
pub fn parse(body: &[u8]) -> Result<Map<String, Value>, ProxyError> {
    crate::openai::translate::json_object(body)
}

pub fn translate(
    request: &Map<String, Value>,
    history: Vec<Message>,
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
        Some(Value::String(text)) => (
            vec![Message::text_message("user", text.clone())],
            vec![None],
        ),
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
        Some(Value::String(text)) => messages.push(Message::text_message("system", text.clone())),
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
    let number = |name: &str| {
        crate::server::core::surface::number_setting(request, name)
            .map_err(|why| ProxyError::invalid(why, Some(name)))
    };
    let mut parameters = Parameters {
        temperature: number("temperature")?,
        top_p: number("top_p")?,
        max_tokens: number("max_output_tokens")?,
        ..Parameters::default()
    };
    parameters.parallel_tool_calls = match request.get("parallel_tool_calls") {
        None | Some(Value::Null) => None,
        Some(Value::Bool(parallel)) => Some(*parallel),
        Some(_) => return Err(bad("parallel_tool_calls", "must be a boolean.")),
    };
    let user = match request.get("user") {
        None | Some(Value::Null) => None,
        Some(Value::String(user)) => Some(user.clone()),
        Some(_) => return Err(bad("user", "must be a string.")),
    };
    let (mut tools, mut dropped_tools) = (Vec::new(), Vec::new());
    if let Some(offered) = request.get("tools").filter(|t| !t.is_null()) {
        (tools, dropped_tools) = convert_tools(offered)?;
    }
    let tool_choice = match request.get("tool_choice").filter(|c| !c.is_null()) {
        Some(choice) => Some(convert_tool_choice(choice)?),
        None => None,
    };
    if let Some(format) = request.get("text").and_then(|t| t.get("format")) {
        parameters.format = convert_format(format)?;
    }
    Ok(Translated {
        request: Request {
            model: Some(model),
            messages,
            stream: request.get("stream") == Some(&Value::Bool(true)),
            user,
            tools,
            tool_choice,
            parameters,
        },
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

/// The items as neutral messages, and for each message the item it starts at.
fn convert_items(items: &[Value]) -> Result<(Vec<Message>, Vec<Option<usize>>), ProxyError> {
    let mut out: Vec<Message> = Vec::new();
    let mut origin = Vec::new();
    for (index, item) in items.iter().enumerate() {
        // The messages the previous item started.
        origin.resize(out.len(), index.checked_sub(1));
        let at = format!("input[{index}]");
        let kind = item["type"]
            .as_str()
            .unwrap_or(if item.get("role").is_some() {
                "message"
            } else {
                ""
            });
        match kind {
            "message" => out.push(convert_message(item, &at)?),
            "function_call" => {
                let (Some(call_id), Some(name)) = (item["call_id"].as_str(), item["name"].as_str())
                else {
                    return Err(bad(&at, "a function_call needs 'call_id' and 'name'."));
                };
                let call = Call {
                    id: call_id.to_owned(),
                    name: name.to_owned(),
                    arguments: item["arguments"].as_str().unwrap_or("{}").to_owned(),
                };
                // Calls right after an assistant message (or after other calls) belong to it.
                match out.last_mut() {
                    Some(last) if last.role == "assistant" => {
                        last.calls.get_or_insert_with(Vec::new).push(call);
                        if last.content == Some(Content::Text(String::new())) {
                            last.content = None;
                        }
                    }
                    _ => out.push(Message {
                        role: "assistant".to_owned(),
                        content: None,
                        calls: Some(vec![call]),
                        ..Message::default()
                    }),
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
                out.push(Message {
                    call_id: Some(call_id.to_owned()),
                    ..Message::text_message("tool", output)
                });
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
    origin.resize(out.len(), items.len().checked_sub(1));
    Ok((out, origin))
}

fn convert_message(item: &Value, at: &str) -> Result<Message, ProxyError> {
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
        Value::String(text) => Content::Text(text.clone()),
        Value::Array(parts) if parts.iter().all(is_text_part) => Content::Text(text_of(parts, at)?),
        Value::Array(parts) => {
            let mut converted = Vec::new();
            for part in parts {
                converted.push(match part["type"].as_str() {
                    Some("input_text" | "output_text" | "text") => {
                        Part::Text(part["text"].as_str().unwrap_or_default().to_owned())
                    }
                    Some("input_image") => match part["image_url"].as_str() {
                        Some(url) => Part::Image {
                            url: url.to_owned(),
                            detail: part["detail"].as_str().map(str::to_owned),
                        },
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
            Content::Parts(converted)
        }
        _ => {
            return Err(bad(
                &format!("{at}.content"),
                "must be a string or content parts.",
            ))
        }
    };
    Ok(Message {
        role: role.to_owned(),
        content: Some(content),
        ..Message::default()
    })
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

/// The function tools, and the names of the others (built-in tools and namespaces, which a Chat
/// Completions upstream cannot run: tools are offers, so the request still has its meaning
/// without them).
fn convert_tools(tools: &Value) -> Result<(Vec<Tool>, Vec<String>), ProxyError> {
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
        let description = match tool.get("description") {
            None | Some(Value::Null) => None,
            Some(Value::String(text)) => Some(text.clone()),
            Some(_) => {
                return Err(bad(
                    &format!("tools[{index}].description"),
                    "must be a string.",
                ))
            }
        };
        let strict = match tool.get("strict") {
            None | Some(Value::Null) => None,
            Some(Value::Bool(strict)) => Some(*strict),
            Some(_) => return Err(bad(&format!("tools[{index}].strict"), "must be a boolean.")),
        };
        out.push(Tool {
            name: name.to_owned(),
            description,
            parameters: tool.get("parameters").filter(|v| !v.is_null()).cloned(),
            strict,
        });
    }
    Ok((out, dropped))
}

fn convert_tool_choice(choice: &Value) -> Result<ToolChoice, ProxyError> {
    match choice {
        Value::String(mode) if mode == "auto" => Ok(ToolChoice::Auto),
        Value::String(mode) if mode == "none" => Ok(ToolChoice::None),
        Value::String(mode) if mode == "required" => Ok(ToolChoice::Required),
        Value::Object(_) if choice["type"] == "function" => match choice["name"].as_str() {
            Some(name) => Ok(ToolChoice::Named(name.to_owned())),
            None => Err(bad("tool_choice.name", "is required.")),
        },
        _ => Err(untranslatable(
            &format!("The tool_choice {choice}"),
            "tool_choice",
        )),
    }
}

fn convert_format(format: &Value) -> Result<Option<Format>, ProxyError> {
    match format["type"].as_str() {
        None | Some("text") => Ok(None),
        Some("json_object") => Ok(Some(Format::Json)),
        Some("json_schema") => {
            let strict = match format.get("strict") {
                None | Some(Value::Null) => None,
                Some(Value::Bool(strict)) => Some(*strict),
                Some(_) => return Err(bad("text.format.strict", "must be a boolean.")),
            };
            Ok(Some(Format::Schema {
                name: format["name"].as_str().unwrap_or("response").to_owned(),
                schema: format["schema"].clone(),
                strict,
            }))
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
