//! The Anthropic Messages API surface (`POST /v1/messages`): its request read and checked as
//! Anthropic checks it, and read into the neutral request memproxy's core, strategies, recall log
//! and hooks work on ([`crate::conversation::request::Request`]); the answer and its stream
//! translated back ([`reply`], [`events`]); errors in Anthropic's shape.
//!
//! What has no Chat Completions counterpart is refused with a precise error (MCP servers,
//! documents), except offered server tools (left out and named in `x-memproxy-dropped-tools`)
//! and hints the answer does not depend on, which are dropped:
//! `thinking`, `output_config` (effort), `cache_control`, `service_tier`, and `context_management`
//! (server-side clearing of old tool results when the context fills up; without it the model sees
//! the full history).

pub mod events;
pub(super) mod handler;
pub mod native;
pub mod reply;

use serde_json::{json, Map, Value};

use crate::conversation::content::{Content, Part};
use crate::conversation::reply::Call;
use crate::conversation::request::{Message, Parameters, Request, Tool, ToolChoice};
use crate::error::ProxyError;

/// Top-level fields that name features a Chat Completions upstream does not have.
const UNTRANSLATABLE: [&str; 2] = ["mcp_servers", "container"];

/// A Messages request in the neutral form.
pub struct Translated {
    pub request: Request,
    /// For each message of `request`, the index of the request message it came from (`None`:
    /// the top-level `system`).
    pub origin: Vec<Option<usize>>,
    /// Offered server tools the upstream cannot run: left out, named in
    /// `x-memproxy-dropped-tools`.
    pub dropped_tools: Vec<String>,
}

/// A Messages request body in the neutral form, checked first the way Anthropic checks it.
pub fn translate(body: &[u8]) -> Result<Translated, ProxyError> {
    from_request(&crate::openai::translate::json_object(body)?)
}

/// [`translate`] of a request already parsed.
pub fn from_request(request: &Map<String, Value>) -> Result<Translated, ProxyError> {
    let model = match request.get("model") {
        Some(Value::String(model)) if !model.is_empty() => model.clone(),
        _ => return Err(field("model", "Field required (a non-empty string).")),
    };
    let max_tokens = match request.get("max_tokens") {
        Some(Value::Number(n)) if n.as_u64().is_some_and(|n| n >= 1) => n.clone(),
        Some(_) => return Err(field("max_tokens", "Must be an integer of at least 1.")),
        None => return Err(field("max_tokens", "Field required.")),
    };
    let Some(Value::Array(messages)) = request.get("messages") else {
        return Err(field("messages", "Field required (a list of messages)."));
    };
    if messages.is_empty() {
        return Err(field("messages", "At least one message is required."));
    }
    if let Some(name) = UNTRANSLATABLE.iter().find(|n| request.contains_key(**n)) {
        return Err(untranslatable(&format!("'{name}'")));
    }
    let mut out = Vec::new();
    if let Some(system) = request.get("system") {
        let text = match system {
            Value::String(text) => text.clone(),
            Value::Array(blocks) => texts(blocks, "system")?,
            _ => {
                return Err(field(
                    "system",
                    "Must be a string or a list of text blocks.",
                ))
            }
        };
        if !text.is_empty() {
            out.push(Message::text_message("system", text));
        }
    }
    let mut origin = vec![None; out.len()];
    for (index, message) in messages.iter().enumerate() {
        convert_message(message, index, &mut out)?;
        origin.resize(out.len(), Some(index));
    }
    let user = match &request.get("metadata").unwrap_or(&Value::Null)["user_id"] {
        Value::Null => None,
        // Claude Code puts a JSON object of device and session ids there: not a person's name,
        // neither for memproxy's user nor as the upstream's `user`.
        Value::String(user) if user.trim_start().starts_with('{') => None,
        Value::String(user) => Some(user.clone()),
        _ => return Err(field("metadata.user_id", "Must be a string.")),
    };
    let mut parameters = Parameters {
        max_tokens: Some(max_tokens),
        ..Parameters::default()
    };
    let number = |name: &str| {
        crate::server::core::surface::number_setting(request, name).map_err(|why| field(name, &why))
    };
    parameters.temperature = number("temperature")?;
    parameters.top_p = number("top_p")?;
    parameters.top_k = number("top_k")?;
    parameters.stop =
        crate::server::core::surface::stop_setting(request.get("stop_sequences"), false)
            .ok_or_else(|| field("stop_sequences", "Must be a list of strings."))?;
    let mut dropped_tools = Vec::new();
    let mut tools = Vec::new();
    if let Some(offered) = request.get("tools").filter(|t| !t.is_null()) {
        (tools, dropped_tools) = convert_tools(offered)?;
    }
    let mut tool_choice = None;
    if let Some(choice) = request.get("tool_choice").filter(|c| !c.is_null()) {
        tool_choice = Some(convert_tool_choice(choice)?);
        if choice["disable_parallel_tool_use"] == true {
            parameters.parallel_tool_calls = Some(false);
        }
    }
    let stream = request.get("stream") == Some(&Value::Bool(true));
    Ok(Translated {
        request: Request {
            model: Some(model),
            messages: out,
            stream,
            user,
            tools,
            tool_choice,
            parameters,
        },
        origin,
        dropped_tools,
    })
}

fn field(name: &str, problem: &str) -> ProxyError {
    ProxyError::invalid(format!("{name}: {problem}"), Some(name))
}

/// A feature of the Messages API that a Chat Completions upstream cannot serve.
pub fn untranslatable(what: &str) -> ProxyError {
    ProxyError::invalid(
        format!("{what} cannot be translated to the Chat Completions API the configured upstream speaks; leave it out, or configure an upstream that speaks the Messages API."),
        None,
    )
}

/// The text of a list of text blocks (`cache_control` and citations dropped).
fn texts(blocks: &[Value], place: &str) -> Result<String, ProxyError> {
    let mut parts = Vec::new();
    for block in blocks {
        match (block["type"].as_str(), block["text"].as_str()) {
            (Some("text"), Some(text)) => parts.push(text),
            _ => {
                return Err(field(
                    place,
                    "Each block must be {\"type\": \"text\", \"text\": ...}.",
                ))
            }
        }
    }
    Ok(parts.join("\n\n"))
}

fn convert_message(
    message: &Value,
    index: usize,
    out: &mut Vec<Message>,
) -> Result<(), ProxyError> {
    let at = format!("messages.{index}");
    let role = match message["role"].as_str() {
        Some(role @ ("user" | "assistant")) => role,
        // Instructions in the middle of the conversation (Claude Code sends them).
        Some("system") => {
            let text = match &message["content"] {
                Value::String(text) => text.clone(),
                Value::Array(blocks) => texts(blocks, &format!("{at}.content"))?,
                _ => return Err(field(&format!("{at}.content"), "Must be text.")),
            };
            out.push(Message::text_message("system", text));
            return Ok(());
        }
        _ => {
            return Err(field(
                &format!("{at}.role"),
                "Must be 'user', 'assistant' or 'system'.",
            ))
        }
    };
    let blocks = match &message["content"] {
        Value::String(text) => {
            out.push(Message::text_message(role, text.clone()));
            return Ok(());
        }
        Value::Array(blocks) => blocks,
        _ => {
            return Err(field(
                &format!("{at}.content"),
                "Must be a string or a list of content blocks.",
            ))
        }
    };
    let mut parts: Vec<Part> = Vec::new();
    let mut calls: Vec<Call> = Vec::new();
    let mut results: Vec<Message> = Vec::new();
    for (position, block) in blocks.iter().enumerate() {
        let place = format!("{at}.content.{position}");
        match block["type"].as_str().unwrap_or_default() {
            "text" => match block["text"].as_str() {
                Some(text) => parts.push(Part::Text(text.to_owned())),
                None => return Err(field(&place, "A text block needs 'text'.")),
            },
            "image" if role == "user" => parts.push(image_part(&block["source"], &place)?),
            "tool_use" if role == "assistant" => {
                let (Some(id), Some(name)) = (block["id"].as_str(), block["name"].as_str()) else {
                    return Err(field(&place, "A tool_use block needs 'id' and 'name'."));
                };
                let input = if block["input"].is_null() {
                    json!({})
                } else {
                    block["input"].clone()
                };
                calls.push(Call {
                    id: id.to_owned(),
                    name: name.to_owned(),
                    arguments: input.to_string(),
                });
            }
            "tool_result" if role == "user" => {
                let Some(id) = block["tool_use_id"].as_str() else {
                    return Err(field(&place, "A tool_result block needs 'tool_use_id'."));
                };
                let mut content = match &block["content"] {
                    Value::Null => String::new(),
                    Value::String(text) => text.clone(),
                    Value::Array(inner) => result_text(inner, &place)?,
                    _ => return Err(field(&place, "'content' must be a string or blocks.")),
                };
                if block["is_error"] == true {
                    content = format!("Error: {content}");
                }
                results.push(Message {
                    call_id: Some(id.to_owned()),
                    ..Message::text_message("tool", content)
                });
            }
            // The model's earlier reasoning: a Chat Completions upstream has no place for it.
            "thinking" | "redacted_thinking" if role == "assistant" => {}
            other => {
                return Err(untranslatable(&format!(
                    "The content block type '{other}' in a{} {role} message ({place})",
                    if role == "assistant" { "n" } else { "" }
                )))
            }
        }
    }
    // Tool results answer the previous assistant message's calls: they come first.
    out.extend(results);
    let texts: Vec<&str> = parts
        .iter()
        .filter_map(|part| match part {
            Part::Text(text) => Some(text.as_str()),
            _ => None,
        })
        .collect();
    if role == "assistant" {
        let text = texts.concat();
        if calls.is_empty() && text.is_empty() {
            return Ok(());
        }
        let mut said = Message::text_message("assistant", text);
        if !calls.is_empty() {
            if said.text().is_empty() {
                said.content = None;
            }
            said.calls = Some(calls);
        }
        out.push(said);
    } else if !parts.is_empty() {
        let content = if texts.len() == parts.len() {
            Content::Text(texts.join("\n\n"))
        } else {
            Content::Parts(parts)
        };
        out.push(Message {
            content: Some(content),
            ..Message::text_message("user", String::new())
        });
    }
    Ok(())
}

/// A tool result's blocks as text (images cannot go into a Chat Completions tool message).
fn result_text(blocks: &[Value], place: &str) -> Result<String, ProxyError> {
    let mut parts = Vec::new();
    for block in blocks {
        match (block["type"].as_str(), block["text"].as_str()) {
            (Some("text"), Some(text)) => parts.push(text),
            (Some(other), _) => {
                return Err(untranslatable(&format!(
                    "A '{other}' block inside a tool_result ({place})"
                )))
            }
            _ => return Err(field(place, "Each block needs a 'type'.")),
        }
    }
    Ok(parts.join("\n\n"))
}

fn image_part(source: &Value, place: &str) -> Result<Part, ProxyError> {
    let url = match source["type"].as_str() {
        Some("base64") => match (source["media_type"].as_str(), source["data"].as_str()) {
            (Some(media), Some(data)) => format!("data:{media};base64,{data}"),
            _ => {
                return Err(field(
                    place,
                    "A base64 image needs 'media_type' and 'data'.",
                ))
            }
        },
        Some("url") => match source["url"].as_str() {
            Some(url) => url.to_owned(),
            None => return Err(field(place, "A url image needs 'url'.")),
        },
        _ => return Err(field(place, "An image 'source' must be base64 or url.")),
    };
    Ok(Part::Image { url, detail: None })
}

/// Custom tools as functions, and the names of server tools (left out: see [`Translated`]).
fn convert_tools(tools: &Value) -> Result<(Vec<Tool>, Vec<String>), ProxyError> {
    let Value::Array(tools) = tools else {
        return Err(field("tools", "Must be a list of tools."));
    };
    let mut out = Vec::with_capacity(tools.len());
    let mut dropped = Vec::new();
    for (index, tool) in tools.iter().enumerate() {
        match tool["type"].as_str() {
            None | Some("custom") => {}
            Some(kind) => {
                dropped.push(tool["name"].as_str().unwrap_or(kind).to_owned());
                continue;
            }
        }
        let Some(name) = tool["name"].as_str() else {
            return Err(field(&format!("tools.{index}.name"), "Field required."));
        };
        if !tool["input_schema"].is_object() {
            return Err(field(
                &format!("tools.{index}.input_schema"),
                "Field required (a JSON schema object).",
            ));
        }
        out.push(Tool {
            name: name.to_owned(),
            description: tool["description"].as_str().map(str::to_owned),
            parameters: Some(tool["input_schema"].clone()),
            strict: None,
        });
    }
    Ok((out, dropped))
}

fn convert_tool_choice(choice: &Value) -> Result<ToolChoice, ProxyError> {
    match choice["type"].as_str() {
        Some("auto") => Ok(ToolChoice::Auto),
        Some("any") => Ok(ToolChoice::Required),
        Some("none") => Ok(ToolChoice::None),
        Some("tool") => match choice["name"].as_str() {
            Some(name) => Ok(ToolChoice::Named(name.to_owned())),
            None => Err(field("tool_choice.name", "Field required.")),
        },
        _ => Err(field(
            "tool_choice.type",
            "Must be 'auto', 'any', 'tool' or 'none'.",
        )),
    }
}

/// Anthropic's error `type` for a status.
pub fn error_type(status: u16) -> &'static str {
    match status {
        400 | 408 | 415 | 422 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        503 | 529 => "overloaded_error",
        _ => "api_error",
    }
}

/// `{"type": "error", "error": {"type", "message"}}`.
pub fn error_body(status: u16, message: &str) -> Value {
    json!({"type": "error", "error": {"type": error_type(status), "message": message}})
}

/// A memproxy error in Anthropic's shape, with the same status.
pub fn error_response(error: &ProxyError) -> axum::response::Response {
    let (status, _, _) = error.catalogue();
    if status.is_server_error() {
        tracing::warn!(%error, "request failed");
    }
    let mut response = axum::response::Response::new(
        error_body(status.as_u16(), &error.to_string())
            .to_string()
            .into(),
    );
    *response.status_mut() = status;
    response.headers_mut().insert(
        axum::http::header::CONTENT_TYPE,
        axum::http::HeaderValue::from_static("application/json"),
    );
    if let Some(wait) = error.retry_after() {
        response
            .headers_mut()
            .insert(axum::http::header::RETRY_AFTER, wait);
    }
    response
}

#[cfg(test)]
mod tests;

/// The Messages surface (and the model list Anthropic's clients ask for).
pub const SURFACE: crate::server::surfaces::ApiSurface = crate::server::surfaces::ApiSurface {
    routes: || {
        use axum::routing::{get, post};
        axum::Router::new()
            .route("/v1/models", get(handler::models))
            .route("/{mode}/v1/models", get(handler::mode_models))
            .route("/v1/messages", post(handler::default_route))
            .route("/{mode}/v1/messages", post(handler::mode_route))
            .route("/v1/messages/count_tokens", post(handler::count_tokens))
            .route(
                "/{mode}/v1/messages/count_tokens",
                post(handler::count_tokens),
            )
    },
    owns: |path| path.ends_with("/v1/messages") || path.ends_with("/v1/messages/count_tokens"),
    error: |error| error_response(&error),
};
