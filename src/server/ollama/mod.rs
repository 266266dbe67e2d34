//! Ollama's own API surface (`POST /api/chat`, `POST /api/generate`, and the model routes its
//! clients call around them): a request read and checked as Ollama reads it, into the neutral
//! request memproxy's core, strategies, recall log and hooks work on
//! ([`crate::conversation::request::Request`]); the answer and its NDJSON stream translated back ([`reply`],
//! [`events`]); errors in Ollama's shape (`{"error": "…"}` with the status).
//!
//! Ollama streams unless the request says `"stream": false`. Images (base64, on a message) become
//! image parts; tool calls carry their arguments as an object and tool results name their tool
//! (`tool_name`), which is matched to the call it answers. Options with a Chat Completions
//! counterpart are carried (`num_predict` as `max_tokens`); the model server's own settings
//! (`num_ctx`, `num_gpu`, `keep_alive`, `think`, …) are for the server that loads the model and
//! are dropped. What would change the answer and has no counterpart (`raw`, `template`,
//! `suffix`, `context`, `logprobs`) is refused by name.

pub mod events;
pub(super) mod handler;
pub mod native;
pub mod reply;

use serde_json::{json, Map, Value};

use crate::conversation::content::{Content, Part};
use crate::conversation::reply::Call;
use crate::conversation::request::{Format, Message, Parameters, Request, Tool};
use crate::error::ProxyError;

/// The Ollama API version whose shapes this surface speaks, answered at `/api/version` when the
/// upstream is no Ollama server (clients check it before using tools or structured output).
pub const API_VERSION: &str = "0.12.0";

/// Request fields that would change the answer and have no Chat Completions counterpart.
const UNTRANSLATABLE: [&str; 5] = ["raw", "template", "suffix", "context", "logprobs"];

fn invalid(message: impl Into<String>) -> ProxyError {
    ProxyError::invalid(message, None)
}

/// An `/api/chat` request in the neutral form. `None`: a request with no messages, which Ollama
/// answers by loading the model (`done_reason: "load"`), and which has nothing to forward.
pub fn from_chat(request: &Map<String, Value>) -> Result<Option<Request>, ProxyError> {
    let mut out = settings(request)?;
    refuse_untranslatable(request)?;
    let messages = match request.get("messages") {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Array(messages)) if messages.is_empty() => return Ok(None),
        Some(Value::Array(messages)) => messages,
        Some(_) => return Err(invalid("messages must be a list of messages")),
    };
    let mut calls = Calls::default();
    for (index, message) in messages.iter().enumerate() {
        out.messages
            .push(convert_message(message, index, &mut calls)?);
    }
    if let Some(tools) = request.get("tools").filter(|t| !t.is_null()) {
        let Value::Array(tools) = tools else {
            return Err(invalid("tools must be a list of tools"));
        };
        out.tools = tools
            .iter()
            .enumerate()
            .map(|(index, tool)| convert_tool(tool, index))
            .collect::<Result<_, _>>()?;
    }
    Ok(Some(out))
}

/// An `/api/generate` request in the neutral form: `system` and `prompt` (with its images) as
/// one exchange. `None`: an empty prompt, which Ollama answers by loading the model.
pub fn from_generate(request: &Map<String, Value>) -> Result<Option<Request>, ProxyError> {
    let mut out = settings(request)?;
    refuse_untranslatable(request)?;
    let prompt = match request.get("prompt") {
        None | Some(Value::Null) => "",
        Some(Value::String(prompt)) => prompt,
        Some(_) => return Err(invalid("prompt must be a string")),
    };
    if prompt.is_empty() {
        return Ok(None);
    }
    match request.get("system") {
        None | Some(Value::Null) => {}
        Some(Value::String(system)) if system.is_empty() => {}
        Some(Value::String(system)) => out
            .messages
            .push(Message::text_message("system", system.clone())),
        Some(_) => return Err(invalid("system must be a string")),
    }
    let content = with_images(prompt, request.get("images"), "images")?;
    out.messages.push(Message {
        content: Some(content),
        ..Message::text_message("user", String::new())
    });
    Ok(Some(out))
}

/// A function tool as Ollama gives it (the Chat Completions form: `{"type": "function",
/// "function": {name, description, parameters}}`).
fn convert_tool(tool: &Value, index: usize) -> Result<Tool, ProxyError> {
    let function = &tool["function"];
    let Some(name) = function["name"].as_str().filter(|name| !name.is_empty()) else {
        return Err(invalid(format!("tools[{index}].function.name is required")));
    };
    Ok(Tool {
        name: name.to_owned(),
        description: function["description"].as_str().map(str::to_owned),
        parameters: function.get("parameters").filter(|p| !p.is_null()).cloned(),
        strict: function["strict"].as_bool(),
    })
}

fn model(request: &Map<String, Value>) -> Result<String, ProxyError> {
    match request.get("model") {
        Some(Value::String(model)) if !model.trim().is_empty() => Ok(model.clone()),
        _ => Err(invalid("model is required")),
    }
}

fn refuse_untranslatable(request: &Map<String, Value>) -> Result<(), ProxyError> {
    let used = |value: &Value| match value {
        Value::Null | Value::Bool(false) => false,
        Value::String(text) => !text.is_empty(),
        Value::Array(items) => !items.is_empty(),
        _ => true,
    };
    match UNTRANSLATABLE
        .iter()
        .find(|name| request.get(**name).is_some_and(used))
    {
        Some(name) => Err(ProxyError::InvalidRequest {
            message: format!(
                "'{name}' has no Chat Completions counterpart: memproxy cannot carry it to its \
                 upstream. Configure [upstream.ollama] to relay it to an Ollama server, or leave \
                 it out."
            ),
            param: Some((*name).to_owned()),
            code: "untranslatable",
        }),
        None => Ok(()),
    }
}

/// The model, the stream flag (Ollama streams unless told not to), `format` and `options`: a
/// request with no messages yet. Options with a Chat Completions counterpart are kept; the model
/// server's own (`num_ctx`, `num_gpu`, …) are dropped.
fn settings(request: &Map<String, Value>) -> Result<Request, ProxyError> {
    let model = model(request)?;
    let stream = match request.get("stream") {
        None | Some(Value::Null) => true,
        Some(Value::Bool(stream)) => *stream,
        Some(_) => return Err(invalid("stream must be true or false")),
    };
    let format = match request.get("format") {
        None | Some(Value::Null) => None,
        Some(Value::String(format)) if format.is_empty() => None,
        Some(Value::String(format)) if format == "json" => Some(Format::Json),
        Some(schema @ Value::Object(_)) => Some(Format::Schema {
            name: "format".to_owned(),
            schema: schema.clone(),
            strict: None,
        }),
        Some(_) => return Err(invalid("format must be \"json\" or a JSON schema object")),
    };
    let mut parameters = Parameters {
        format,
        ..Parameters::default()
    };
    match request.get("options") {
        None | Some(Value::Null) => {}
        Some(Value::Object(options)) => read_options(options, &mut parameters)?,
        Some(_) => return Err(invalid("options must be an object")),
    }
    Ok(Request {
        model: Some(model),
        stream,
        parameters,
        ..Request::default()
    })
}

/// The `options` that have a counterpart in every API memproxy speaks upstream.
fn read_options(options: &Map<String, Value>, into: &mut Parameters) -> Result<(), ProxyError> {
    let number = |name: &str| {
        crate::server::core::surface::number_setting(options, name)
            .map_err(|why| invalid(format!("options: {why}")))
    };
    into.temperature = number("temperature")?;
    into.top_p = number("top_p")?;
    into.top_k = number("top_k")?;
    into.min_p = number("min_p")?;
    into.seed = number("seed")?;
    into.presence_penalty = number("presence_penalty")?;
    into.frequency_penalty = number("frequency_penalty")?;
    // Ollama's -1 (until the model stops) and -2 (until the context is full) are no limit.
    into.max_tokens = number("num_predict")?.filter(|n| n.as_i64().is_some_and(|n| n > 0));
    into.stop = crate::server::core::surface::stop_setting(options.get("stop"), true)
        .ok_or_else(|| invalid("options: 'stop' must be a list of strings."))?;
    Ok(())
}

/// Tool calls seen so far, for matching a tool result to the call it answers.
#[derive(Default)]
struct Calls {
    /// `(id, tool name, answered)` in the order the calls were made.
    made: Vec<(String, String, bool)>,
}

impl Calls {
    /// The id of the call a tool result answers: its own `tool_call_id` if it names one, else
    /// the oldest unanswered call of the tool it names, else the oldest unanswered call.
    fn answer(&mut self, id: Option<&str>, tool: Option<&str>) -> Option<String> {
        let at = match id {
            Some(id) => self.made.iter().position(|(made, _, _)| made == id),
            None => self
                .made
                .iter()
                .position(|(_, name, answered)| !answered && Some(name.as_str()) == tool)
                .or_else(|| self.made.iter().position(|(_, _, answered)| !answered)),
        };
        match at {
            Some(at) => {
                self.made[at].2 = true;
                Some(self.made[at].0.clone())
            }
            None => id.map(str::to_owned),
        }
    }
}

fn convert_message(
    message: &Value,
    index: usize,
    calls: &mut Calls,
) -> Result<Message, ProxyError> {
    let place = format!("messages[{index}]");
    let Value::Object(message) = message else {
        return Err(invalid(format!("{place} must be an object")));
    };
    let role = match message.get("role") {
        Some(Value::String(role)) => role.to_lowercase(),
        _ => return Err(invalid(format!("{place}.role is required"))),
    };
    let content = match message.get("content") {
        None | Some(Value::Null) => "",
        Some(Value::String(content)) => content.as_str(),
        Some(_) => return Err(invalid(format!("{place}.content must be a string"))),
    };
    let images = message.get("images");
    match role.as_str() {
        "system" | "user" => {
            let content = with_images(content, images, &format!("{place}.images"))?;
            Ok(Message {
                role,
                content: Some(content),
                ..Message::default()
            })
        }
        "assistant" => {
            let mut out = Message::text_message("assistant", content.to_owned());
            let made = message.get("tool_calls").and_then(Value::as_array);
            let mut converted = Vec::new();
            for (position, call) in made.into_iter().flatten().enumerate() {
                let name = call["function"]["name"].as_str().unwrap_or_default();
                if name.is_empty() {
                    return Err(invalid(format!(
                        "{place}.tool_calls[{position}].function.name is required"
                    )));
                }
                let id = call["id"]
                    .as_str()
                    .filter(|id| !id.is_empty())
                    .map_or_else(|| format!("call_{index}_{position}"), str::to_owned);
                let arguments = match &call["function"]["arguments"] {
                    Value::Null => "{}".to_owned(),
                    Value::String(text) => text.clone(),
                    other => other.to_string(),
                };
                calls.made.push((id.clone(), name.to_owned(), false));
                converted.push(Call {
                    id,
                    name: name.to_owned(),
                    arguments,
                });
            }
            if !converted.is_empty() {
                out.calls = Some(converted);
                if content.is_empty() {
                    out.content = None;
                }
            }
            Ok(out)
        }
        "tool" => {
            let answered = calls.answer(
                message.get("tool_call_id").and_then(Value::as_str),
                message.get("tool_name").and_then(Value::as_str),
            );
            let Some(id) = answered else {
                return Err(invalid(format!(
                    "{place} is a tool result, but no earlier assistant message made a tool call"
                )));
            };
            Ok(Message {
                call_id: Some(id),
                ..Message::text_message("tool", content.to_owned())
            })
        }
        other => Err(invalid(format!(
            "{place}.role '{other}' is not one of system, user, assistant, tool"
        ))),
    }
}

/// A message's text with its images (base64, as Ollama takes them) as parts.
fn with_images(text: &str, images: Option<&Value>, place: &str) -> Result<Content, ProxyError> {
    let images = match images {
        None | Some(Value::Null) => return Ok(Content::Text(text.to_owned())),
        Some(Value::Array(images)) if images.is_empty() => {
            return Ok(Content::Text(text.to_owned()))
        }
        Some(Value::Array(images)) => images,
        Some(_) => return Err(invalid(format!("{place} must be a list of base64 images"))),
    };
    let mut parts = Vec::new();
    if !text.is_empty() {
        parts.push(Part::Text(text.to_owned()));
    }
    for (position, image) in images.iter().enumerate() {
        let Some(data) = image.as_str().filter(|d| !d.is_empty()) else {
            return Err(invalid(format!(
                "{place}[{position}] must be a base64 string"
            )));
        };
        let url = format!("data:{};base64,{data}", image_type(data));
        parts.push(Part::Image { url, detail: None });
    }
    Ok(Content::Parts(parts))
}

/// The media type of a base64 image, from the first bytes its format always starts with.
fn image_type(base64: &str) -> &'static str {
    const SIGNATURES: [(&str, &str); 5] = [
        ("iVBORw0KGgo", "image/png"),
        ("/9j/", "image/jpeg"),
        ("R0lGOD", "image/gif"),
        ("UklGR", "image/webp"),
        ("Qk", "image/bmp"),
    ];
    SIGNATURES
        .iter()
        .find(|(start, _)| base64.starts_with(start))
        .map_or("image/png", |(_, kind)| kind)
}

/// `{"error": "…"}`.
pub fn error_body(message: &str) -> Value {
    json!({"error": message})
}

/// A memproxy error in Ollama's shape, with the same status.
pub fn error_response(error: &ProxyError) -> axum::response::Response {
    let (status, _, _) = error.catalogue();
    if status.is_server_error() {
        tracing::warn!(%error, "request failed");
    }
    let mut response = crate::server::core::surface::json(
        status,
        axum::http::HeaderMap::new(),
        &error_body(&error.to_string()),
    );
    if let Some(wait) = error.retry_after() {
        response
            .headers_mut()
            .insert(axum::http::header::RETRY_AFTER, wait);
    }
    response
}

/// Whether a path is one of Ollama's (`/api/…`, or `/{mode}/api/…`).
fn owns(path: &str) -> bool {
    path.starts_with("/api/")
        || path
            .split_once("/api/")
            .is_some_and(|(prefix, _)| prefix.len() > 1 && !prefix[1..].contains('/'))
}

#[cfg(test)]
mod tests;

/// The Ollama surface.
pub const SURFACE: crate::server::surfaces::ApiSurface = crate::server::surfaces::ApiSurface {
    routes: handler::routes,
    owns,
    error: |error| error_response(&error),
};
