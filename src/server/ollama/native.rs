//! Memory in Ollama's own shape, for an Ollama server upstream (`[upstream.ollama]`): the
//! strategy's [`Plan`] applied to the request as the client wrote it (everything else, `options`,
//! `keep_alive`, `think`, images, stays byte for byte), and the answer, whole or streamed as
//! NDJSON, read back into the neutral replies the recall log and hooks get. Explicit mode does
//! not come here (its agent loop runs on the Chat Completions upstream), nor does a request
//! memproxy cannot read (relayed as it is, and the answer says so).

use axum::body::Bytes;
use axum::http::Method;
use axum::response::Response;
use serde_json::{json, Map, Value};

use super::reply::Route;
use crate::conversation::reply::{Call as ReplyCall, Finish, Reply, Usage};
use crate::conversation::request::Message;
use crate::error::ProxyError;
use crate::openai::sse::Framing;
use crate::server::core::watch::Watch;
use crate::strategy::{cut_keeps, Placement, Plan};

use crate::server::core::forward::Reading;
use crate::server::core::native::{Call, Native};

pub async fn handle(call: Call, route: Route) -> Response {
    let Call {
        state,
        context,
        mode,
        headers,
        body,
        upstream,
    } = call;
    let path = match route {
        Route::Chat => "/api/chat",
        Route::Generate => "/api/generate",
    };
    let read = crate::openai::translate::json_object(&body).and_then(|wire| {
        let neutral = match route {
            Route::Chat => super::from_chat(&wire)?,
            Route::Generate => super::from_generate(&wire)?,
        };
        Ok((neutral, wire))
    });
    let answered = match read {
        Ok((Some(neutral), wire)) => {
            let (origin, apply): (Vec<Option<usize>>, crate::server::core::native::Apply) =
                match route {
                    Route::Chat => ((0..neutral.messages.len()).map(Some).collect(), apply_chat),
                    Route::Generate => (
                        neutral
                            .messages
                            .iter()
                            .map(|m| (m.role == "user").then_some(0))
                            .collect(),
                        apply_generate,
                    ),
                };
            let request = Native {
                route: path,
                path,
                upstream,
                body,
                wire,
                neutral,
                origin,
                apply,
                reading: Reading {
                    watch: Box::new(OllamaWatch::default()),
                    whole: Box::new(|bytes: &[u8]| Ok(whole(bytes))),
                    strip_usage: false,
                    framing: Framing::Lines,
                },
            };
            crate::server::core::native::handle(state, context, mode, headers, request)
                .await
                .map(crate::server::core::Answer::into_response)
        }
        // Ollama is the judge of its own API: what memproxy cannot read (or a request that only
        // loads the model) goes as it is.
        read => {
            let why = read.err();
            let request = (Method::POST, path, body);
            crate::server::core::native::relay_raw(
                &state,
                &context,
                &headers,
                &upstream,
                request,
                why.as_ref(),
            )
            .await
        }
    };
    answered.unwrap_or_else(|error| super::error_response(&error))
}

/// Applies `plan` to an `/api/chat` request, whose messages are the neutral ones one for one:
/// the leading system messages stay, the oldest turns after them are dropped (never splitting a
/// tool call from its result), and the block goes where the plan says.
pub(super) fn apply_chat(
    request: &mut Map<String, Value>,
    neutral: &[Message],
    _origin: &[Option<usize>],
    plan: &Plan,
) {
    let Some(Value::Array(messages)) = request
        .get_mut("messages")
        .filter(|m| m.as_array().is_some_and(|m| !m.is_empty()))
    else {
        return;
    };
    let leading = messages
        .iter()
        .take_while(|m| m["role"] == "system")
        .count();
    let mut cut = plan.first_kept.min(messages.len().saturating_sub(1));
    while cut > leading && messages[cut]["role"] != "user" {
        cut -= 1;
    }
    let before = messages.len();
    let mut at = 0;
    messages.retain(|message| {
        at += 1;
        cut_keeps(at - 1, cut, message["role"] == "system")
    });
    let dropped = before - messages.len();
    let Some((block, placement)) = &plan.block else {
        return;
    };
    let newest_user = neutral
        .iter()
        .rposition(|m| m.role == "user")
        .and_then(|at| at.checked_sub(dropped));
    match (placement, newest_user) {
        (Placement::User, Some(at)) => prepend(&mut messages[at], block),
        (Placement::History, _) => {
            messages.insert(leading, json!({"role": "assistant", "content": "Noted."}));
            messages.insert(leading, json!({"role": "user", "content": block}));
        }
        _ => match messages.first_mut().filter(|m| m["role"] == "system") {
            Some(system) => append(system, block),
            None => messages.insert(0, json!({"role": "system", "content": block})),
        },
    }
}

/// Applies `plan` to an `/api/generate` request (one exchange: nothing to drop): the block in
/// front of the prompt, or after the system prompt.
pub(super) fn apply_generate(
    request: &mut Map<String, Value>,
    _neutral: &[Message],
    _origin: &[Option<usize>],
    plan: &Plan,
) {
    let Some((block, placement)) = &plan.block else {
        return;
    };
    match placement {
        Placement::User | Placement::History => {
            let prompt = request.get("prompt").and_then(Value::as_str);
            let prompt = prompt.unwrap_or_default();
            let prompt = format!("{block}\n\n{prompt}");
            request.insert("prompt".into(), json!(prompt));
        }
        Placement::System => {
            let system = match request.get("system").and_then(Value::as_str) {
                Some(system) if !system.is_empty() => format!("{system}\n\n{block}"),
                _ => block.clone(),
            };
            request.insert("system".into(), json!(system));
        }
    }
}

fn prepend(message: &mut Value, block: &str) {
    let text = message["content"].as_str().unwrap_or_default();
    message["content"] = json!(format!("{block}\n\n{text}"));
}

fn append(message: &mut Value, block: &str) {
    let text = message["content"].as_str().unwrap_or_default();
    message["content"] = json!(if text.is_empty() {
        block.to_owned()
    } else {
        format!("{text}\n\n{block}")
    });
}

/// Ollama's `done_reason` as why the answer ended (Ollama says `stop` for an answer with tool
/// calls too).
fn finish_of(done: &str, calls: bool) -> Finish {
    match (done, calls) {
        ("length", _) => Finish::Length,
        (_, true) => Finish::ToolCalls,
        _ => Finish::Stop,
    }
}

/// Reads Ollama's objects (the whole answer, or each streamed line) into the reply.
#[derive(Default)]
pub struct OllamaWatch {
    reply: Reply,
    usage: Option<Usage>,
    done: bool,
    error: Option<String>,
}

impl OllamaWatch {
    fn read(&mut self, object: &Value) {
        if let Some(error) = object.get("error") {
            self.error = Some(error.as_str().unwrap_or("error").to_owned());
            return;
        }
        let message = &object["message"];
        let text = message["content"]
            .as_str()
            .or_else(|| object["response"].as_str())
            .unwrap_or_default();
        self.reply.text.push_str(text);
        for call in message["tool_calls"].as_array().into_iter().flatten() {
            let position = self.reply.calls.len();
            let arguments = match &call["function"]["arguments"] {
                Value::String(text) => text.clone(),
                Value::Null => "{}".to_owned(),
                other => other.to_string(),
            };
            self.reply.calls.push(ReplyCall {
                id: call["id"]
                    .as_str()
                    .map_or_else(|| format!("call_{position}"), str::to_owned),
                name: call["function"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                arguments,
            });
        }
        if object["done"] == true {
            self.done = true;
            let calls = !self.reply.calls.is_empty();
            let done = object["done_reason"].as_str().unwrap_or("stop");
            self.reply.finish = Some(finish_of(done, calls));
            let prompt = object["prompt_eval_count"].as_u64().unwrap_or(0);
            let completion = object["eval_count"].as_u64().unwrap_or(0);
            self.usage = Some(Usage {
                prompt_tokens: prompt,
                completion_tokens: completion,
                cached_tokens: None,
            });
        }
    }
}

impl Watch for OllamaWatch {
    fn observe(&mut self, data: &str) {
        if let Ok(object) = serde_json::from_str::<Value>(data) {
            self.read(&object);
        }
    }

    fn finished(&self) -> bool {
        self.done
    }

    fn error(&self) -> Option<String> {
        self.error.clone()
    }

    fn replies(&self) -> Vec<Reply> {
        vec![self.reply.clone()]
    }

    fn usage(&self) -> Option<Usage> {
        self.usage
    }

    fn error_event(&self, error: &ProxyError) -> Bytes {
        Bytes::from(format!("{}\n", super::error_body(&error.to_string())))
    }
}

/// The reply of a whole Ollama answer.
pub fn whole(bytes: &[u8]) -> (Vec<Reply>, Option<Usage>) {
    let Ok(object) = serde_json::from_slice::<Value>(bytes) else {
        return (Vec::new(), None);
    };
    let mut watch = OllamaWatch::default();
    watch.read(&object);
    (watch.replies(), watch.usage())
}
