//! The Chat Completions request to and from the neutral request: [`chat_request`] writes the one
//! a translated request sends to a Chat Completions upstream (every surface goes through it, so
//! the field names of that API live here only); [`ChatRequest::neutral`] reads a client's own
//! Chat Completions request, whose bytes still go upstream as they came.

use serde_json::{json, Map, Value};

use super::{ChatMessage, ChatRequest, FunctionCall, StreamOptions, ToolCall};
use crate::conversation::content::Content;
use crate::conversation::reply::Call;
use crate::conversation::request::{Format, Message, Parameters, Request, Tool, ToolChoice};

impl From<&Call> for ToolCall {
    fn from(call: &Call) -> Self {
        ToolCall {
            id: call.id.clone(),
            kind: "function".to_owned(),
            function: FunctionCall {
                name: call.name.clone(),
                arguments: call.arguments.clone(),
            },
        }
    }
}

/// A neutral message as Chat Completions writes it.
pub fn chat_message(message: &Message) -> ChatMessage {
    ChatMessage {
        role: message.role.clone(),
        content: Some(
            message
                .content
                .as_ref()
                .map_or(Value::Null, Content::to_json),
        ),
        name: message.name.clone(),
        tool_calls: message
            .calls
            .as_ref()
            .map(|calls| calls.iter().map(ToolCall::from).collect()),
        tool_call_id: message.call_id.clone(),
        extra: Map::new(),
    }
}

/// A neutral request as a Chat Completions request. A stream asks for usage, which every API's
/// stream reports and memproxy counts.
pub fn chat_request(request: &Request) -> ChatRequest {
    let mut extra = Map::new();
    write_parameters(&request.parameters, &mut extra);
    if !request.tools.is_empty() {
        let tools = request.tools.iter().map(tool).collect();
        extra.insert("tools".into(), Value::Array(tools));
    }
    if let Some(choice) = &request.tool_choice {
        let choice = match choice {
            ToolChoice::Auto => json!("auto"),
            ToolChoice::None => json!("none"),
            ToolChoice::Required => json!("required"),
            ToolChoice::Named(name) => json!({"type": "function", "function": {"name": name}}),
        };
        extra.insert("tool_choice".into(), choice);
    }
    ChatRequest {
        model: request.model.clone(),
        messages: request.messages.iter().map(chat_message).collect(),
        stream: request.stream.then_some(true),
        stream_options: request.stream.then(|| StreamOptions {
            include_usage: Some(true),
            extra: Map::new(),
        }),
        user: request.user.clone(),
        extra,
    }
}

fn write_parameters(parameters: &Parameters, out: &mut Map<String, Value>) {
    let numbers = [
        ("max_tokens", &parameters.max_tokens),
        ("temperature", &parameters.temperature),
        ("top_p", &parameters.top_p),
        ("top_k", &parameters.top_k),
        ("min_p", &parameters.min_p),
        ("seed", &parameters.seed),
        ("presence_penalty", &parameters.presence_penalty),
        ("frequency_penalty", &parameters.frequency_penalty),
    ];
    for (name, value) in numbers {
        if let Some(number) = value {
            out.insert(name.into(), Value::Number(number.clone()));
        }
    }
    if !parameters.stop.is_empty() {
        out.insert("stop".into(), json!(parameters.stop));
    }
    if let Some(parallel) = parameters.parallel_tool_calls {
        out.insert("parallel_tool_calls".into(), json!(parallel));
    }
    match &parameters.format {
        None => {}
        Some(Format::Json) => {
            out.insert("response_format".into(), json!({"type": "json_object"}));
        }
        Some(Format::Schema {
            name,
            schema,
            strict,
        }) => {
            let mut inner = json!({"name": name, "schema": schema});
            if let Some(strict) = strict {
                inner["strict"] = json!(strict);
            }
            out.insert(
                "response_format".into(),
                json!({"type": "json_schema", "json_schema": inner}),
            );
        }
    }
}

/// A neutral tool as a Chat Completions function tool.
pub fn tool(tool: &Tool) -> Value {
    let mut function = json!({"name": tool.name});
    if let Some(description) = &tool.description {
        function["description"] = json!(description);
    }
    if let Some(parameters) = &tool.parameters {
        function["parameters"] = parameters.clone();
    }
    if let Some(strict) = tool.strict {
        function["strict"] = json!(strict);
    }
    json!({"type": "function", "function": function})
}

impl ChatMessage {
    /// The message in no API's shape.
    pub fn neutral(&self) -> Message {
        Message {
            role: self.role.clone(),
            content: self.content.as_ref().and_then(Content::from_json),
            name: self.name.clone(),
            calls: self
                .tool_calls
                .as_ref()
                .map(|calls| calls.iter().map(Into::into).collect()),
            call_id: self.tool_call_id.clone(),
        }
    }
}

impl ChatRequest {
    /// The request in no API's shape, as identity, the strategies, the recall log and the hooks
    /// read it. A field memproxy cannot read (a tool of another type, a setting of the wrong
    /// type) is left out of the neutral request; the client's bytes still carry it upstream,
    /// which judges it.
    pub fn neutral(&self) -> Request {
        Request {
            model: self.model.clone(),
            messages: self.messages.iter().map(ChatMessage::neutral).collect(),
            stream: self.is_stream(),
            user: self.user.clone(),
            tools: self.extra.get("tools").map_or_else(Vec::new, read_tools),
            tool_choice: self.extra.get("tool_choice").and_then(read_tool_choice),
            parameters: read_parameters(&self.extra),
        }
    }
}

fn read_tools(tools: &Value) -> Vec<Tool> {
    let Value::Array(tools) = tools else {
        return Vec::new();
    };
    tools
        .iter()
        // A tool with a `function` and no `type` is a function too: lenient servers (llama.cpp,
        // vLLM) take it so, and clients written against them send it so.
        .filter(|tool| {
            tool["type"] == "function" || (tool["type"].is_null() && tool["function"].is_object())
        })
        .filter_map(|tool| {
            let function = &tool["function"];
            Some(Tool {
                name: function["name"].as_str()?.to_owned(),
                description: function["description"].as_str().map(str::to_owned),
                parameters: function.get("parameters").filter(|p| !p.is_null()).cloned(),
                strict: function["strict"].as_bool(),
            })
        })
        .collect()
}

fn read_tool_choice(choice: &Value) -> Option<ToolChoice> {
    match choice {
        Value::String(mode) => match mode.as_str() {
            "auto" => Some(ToolChoice::Auto),
            "none" => Some(ToolChoice::None),
            "required" => Some(ToolChoice::Required),
            _ => None,
        },
        _ => choice["function"]["name"]
            .as_str()
            .map(|name| ToolChoice::Named(name.to_owned())),
    }
}

fn read_parameters(fields: &Map<String, Value>) -> Parameters {
    let number = |name: &str| match fields.get(name) {
        Some(Value::Number(number)) => Some(number.clone()),
        _ => None,
    };
    let stop = match fields.get("stop") {
        Some(Value::String(stop)) => vec![stop.clone()],
        Some(Value::Array(stops)) => stops
            .iter()
            .filter_map(|stop| stop.as_str().map(str::to_owned))
            .collect(),
        _ => Vec::new(),
    };
    let format =
        fields
            .get("response_format")
            .and_then(|format| match format["type"].as_str()? {
                "json_object" => Some(Format::Json),
                "json_schema" => {
                    let inner = &format["json_schema"];
                    Some(Format::Schema {
                        name: inner["name"].as_str().unwrap_or("response").to_owned(),
                        schema: inner["schema"].clone(),
                        strict: inner["strict"].as_bool(),
                    })
                }
                _ => None,
            });
    Parameters {
        max_tokens: number("max_completion_tokens").or_else(|| number("max_tokens")),
        temperature: number("temperature"),
        top_p: number("top_p"),
        top_k: number("top_k"),
        min_p: number("min_p"),
        seed: number("seed"),
        presence_penalty: number("presence_penalty"),
        frequency_penalty: number("frequency_penalty"),
        stop,
        parallel_tool_calls: fields.get("parallel_tool_calls").and_then(Value::as_bool),
        format,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a client's Chat Completions request says in fields memproxy reads comes back out of
    /// the writer the same: the two directions are one mapping.
    #[test]
    fn a_chat_request_read_and_written_again_keeps_its_tools_and_settings() {
        let body = json!({
            "model": "m", "stream": true, "user": "ana",
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": [{"type": "text", "text": "hi"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}}]},
                {"role": "assistant", "content": null, "tool_calls": [{"id": "c1",
                    "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "done"}
            ],
            "tools": [{"type": "function", "function": {"name": "f", "description": "d",
                "parameters": {"type": "object"}, "strict": true}}],
            "tool_choice": {"type": "function", "function": {"name": "f"}},
            "max_tokens": 7, "temperature": 1, "top_p": 0.5, "top_k": 3, "min_p": 0.1,
            "seed": 42, "presence_penalty": 0.2, "frequency_penalty": -0.5,
            "stop": ["END", "STOP"], "parallel_tool_calls": false,
            "response_format": {"type": "json_schema",
                "json_schema": {"name": "r", "schema": {"type": "object"}, "strict": true}},
            "stream_options": {"include_usage": true}
        });
        let request = ChatRequest::parse(body.to_string().as_bytes()).expect("parses");
        let written = serde_json::to_value(chat_request(&request.neutral())).expect("json");
        assert_eq!(written, body);
    }

    #[test]
    fn what_memproxy_cannot_read_is_left_out_of_the_neutral_request() {
        let body = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}],
            "tools": [{"type": "web_search"}], "tool_choice": "sometimes",
            "temperature": "hot", "stop": "END", "max_completion_tokens": 9});
        let request = ChatRequest::parse(body.to_string().as_bytes()).expect("parses");
        let neutral = request.neutral();
        assert!(neutral.tools.is_empty() && neutral.tool_choice.is_none());
        assert_eq!(neutral.parameters.temperature, None);
        assert_eq!(neutral.parameters.stop, vec!["END".to_owned()]);
        assert_eq!(neutral.parameters.max_tokens, Some(9.into()));
    }

    #[test]
    fn a_function_without_a_type_is_a_function_tool() {
        let body = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}],
            "tools": [{"function": {"name": "f", "parameters": {"type": "object"}}},
                {"type": "web_search", "function": {"name": "g"}}]});
        let request = ChatRequest::parse(body.to_string().as_bytes()).expect("parses");
        let tools = request.neutral().tools;
        assert_eq!(tools.len(), 1);
        assert_eq!(tools[0].name, "f");
    }
}
