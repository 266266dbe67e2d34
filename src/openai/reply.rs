//! A Chat Completions answer read into the neutral reply ([`crate::conversation::reply`]), in one
//! place: a whole `chat.completion` ([`completion`]), a stream's events one by one
//! ([`ChunkReader`]) or the whole stream ([`read_stream`]); and the API's names for why an answer
//! ended, both ways.

use std::collections::VecDeque;

use bytes::Bytes;
use futures_util::stream::BoxStream;
use futures_util::StreamExt;
use serde_json::Value;

use super::sse::{event_data, SseSplitter};
use crate::conversation::reply::{Call, CallPart, Event, Events, Finish, Reply, Usage};

/// Chat Completions' `finish_reason` as why the answer ended; a reason it does not name (an
/// upstream's own) is an ordinary stop.
pub fn finish_of(reason: &str) -> Finish {
    match reason {
        "length" => Finish::Length,
        "tool_calls" | "function_call" => Finish::ToolCalls,
        "content_filter" => Finish::ContentFilter,
        _ => Finish::Stop,
    }
}

/// Why an answer ended, as Chat Completions names it.
pub fn finish_name(finish: Finish) -> &'static str {
    match finish {
        Finish::Stop => "stop",
        Finish::Length => "length",
        Finish::ToolCalls => "tool_calls",
        Finish::ContentFilter => "content_filter",
    }
}

/// The usage a completion or chunk reports, if it has a `usage` object (cached prompt tokens as
/// OpenAI's `prompt_tokens_details` or llama.cpp's `timings` say).
pub fn usage_of(value: &Value) -> Option<Usage> {
    let usage = value.get("usage").filter(|usage| usage.is_object())?;
    Some(Usage {
        prompt_tokens: usage["prompt_tokens"].as_u64().unwrap_or(0),
        completion_tokens: usage["completion_tokens"].as_u64().unwrap_or(0),
        cached_tokens: super::cached_prompt_tokens(value),
    })
}

/// The id without the API's prefix.
fn bare_id(id: &str) -> String {
    id.trim_start_matches("chatcmpl-").to_owned()
}

/// A whole `chat.completion` body's first choice; `None` for a body that is not one.
pub fn completion(bytes: &[u8]) -> Option<Reply> {
    let completion: Value = serde_json::from_slice(bytes).ok()?;
    let choice = &completion["choices"][0];
    let message = choice["message"].as_object()?;
    let calls = message
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|call| Call {
            id: call["id"].as_str().unwrap_or_default().to_owned(),
            name: call["function"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            arguments: call["function"]["arguments"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        })
        .collect();
    Some(Reply {
        id: bare_id(completion["id"].as_str().unwrap_or_default()),
        text: message
            .get("content")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        calls,
        finish: choice["finish_reason"].as_str().map(finish_of),
        usage: usage_of(&completion),
    })
}

/// One choice's message (with why it ended) as the neutral reply.
pub fn reply_of_message(message: &super::ChatMessage, finish: Option<&str>) -> Reply {
    Reply {
        text: message.text(),
        calls: message
            .tool_calls
            .iter()
            .flatten()
            .map(Call::from)
            .collect(),
        finish: finish.map(finish_of),
        ..Reply::default()
    }
}

/// A reply as the Chat Completions assistant message: its text, and its calls as `tool_calls`
/// (with `content: null` when it only calls).
pub fn assistant_message(reply: &Reply) -> Value {
    let mut message = serde_json::json!({"role": "assistant", "content": reply.text});
    if !reply.calls.is_empty() {
        let calls = reply.calls.iter().map(|call| {
            serde_json::json!({"id": call.id, "type": "function",
                "function": {"name": call.name, "arguments": call.arguments}})
        });
        if reply.text.is_empty() {
            message["content"] = Value::Null;
        }
        message["tool_calls"] = Value::Array(calls.collect());
    }
    message
}

/// An error object (OpenAI's `{"message", "type", "code"}`, or a bare string) as the in-stream
/// failure.
pub fn failed(error: &Value) -> Event {
    let message = error["message"]
        .as_str()
        .or_else(|| error.as_str())
        .unwrap_or("the upstream failed")
        .to_owned();
    Event::Failed {
        message,
        error: error.clone(),
    }
}

/// Reads a Chat Completions stream's raw events into neutral events: `Started` before the first
/// chunk's content, then per chunk its usage, text, call parts and finish reason.
#[derive(Debug, Default)]
pub struct ChunkReader {
    started: bool,
}

impl ChunkReader {
    /// The events one raw SSE event says; none for what carries nothing (blank events, JSON
    /// that does not read).
    pub fn read(&mut self, raw: &[u8]) -> Vec<Event> {
        let Some(data) = event_data(raw) else {
            return if raw.starts_with(b":") {
                vec![Event::KeepAlive(Bytes::copy_from_slice(raw))]
            } else {
                Vec::new()
            };
        };
        if data.trim() == "[DONE]" {
            return vec![Event::Done];
        }
        let Ok(chunk) = serde_json::from_str::<Value>(&data) else {
            return Vec::new();
        };
        if let Some(error) = chunk.get("error") {
            return vec![failed(error)];
        }
        let mut events = Vec::new();
        if !self.started {
            self.started = true;
            let id = bare_id(chunk["id"].as_str().unwrap_or_default());
            events.push(Event::Started { id });
        }
        events.extend(usage_of(&chunk).map(Event::Usage));
        let choice = &chunk["choices"][0];
        let delta = &choice["delta"];
        if let Some(text) = delta["content"].as_str().filter(|text| !text.is_empty()) {
            events.push(Event::Text(text.to_owned()));
        }
        for call in delta["tool_calls"].as_array().into_iter().flatten() {
            let text = |value: &Value| value.as_str().map(str::to_owned);
            events.push(Event::Call(CallPart {
                index: call["index"].as_u64().unwrap_or(0),
                id: text(&call["id"]),
                name: text(&call["function"]["name"]),
                arguments: text(&call["function"]["arguments"]).unwrap_or_default(),
            }));
        }
        if let Some(reason) = choice["finish_reason"].as_str() {
            events.push(Event::Finished(finish_of(reason)));
        }
        events
    }
}

struct Reading {
    input: BoxStream<'static, Result<Bytes, std::io::Error>>,
    splitter: SseSplitter,
    reader: ChunkReader,
    pending: VecDeque<Event>,
    done: bool,
}

/// A Chat Completions SSE body as neutral events (an event cut off by the end of the input is
/// read too; an I/O error ends the stream).
pub fn read_stream(input: BoxStream<'static, Result<Bytes, std::io::Error>>) -> Events {
    let state = Reading {
        input,
        splitter: SseSplitter::default(),
        reader: ChunkReader::default(),
        pending: VecDeque::new(),
        done: false,
    };
    futures_util::stream::unfold(state, |mut state| async move {
        loop {
            if let Some(next) = state.pending.pop_front() {
                return Some((Ok(next), state));
            }
            if state.done {
                return None;
            }
            match state.input.next().await {
                Some(Ok(bytes)) => {
                    state.splitter.push(&bytes);
                    while let Some(raw) = state.splitter.next_event() {
                        let events = state.reader.read(&raw);
                        state.pending.extend(events);
                    }
                }
                Some(Err(error)) => {
                    state.done = true;
                    return Some((Err(error), state));
                }
                None => {
                    state.done = true;
                    if let Some(rest) = state.splitter.finish() {
                        let events = state.reader.read(&rest);
                        state.pending.extend(events);
                    }
                }
            }
        }
    })
    .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_completion_reads_into_a_reply() {
        let body = json!({"id": "chatcmpl-abc", "choices": [{"index": 0, "finish_reason": "tool_calls",
            "message": {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1",
                "type": "function", "function": {"name": "weather", "arguments": "{}"}}]}}],
            "usage": {"prompt_tokens": 9, "completion_tokens": 2,
                "prompt_tokens_details": {"cached_tokens": 4}}});
        let reply = completion(body.to_string().as_bytes()).expect("a completion");
        assert_eq!(reply.id, "abc");
        assert_eq!(reply.text, "");
        assert_eq!(reply.calls[0].name, "weather");
        assert_eq!(reply.finish, Some(Finish::ToolCalls));
        let usage = reply.usage.expect("usage");
        assert_eq!((usage.prompt_tokens, usage.cached_tokens), (9, Some(4)));
        assert!(completion(br#"{"error": {"message": "no"}}"#).is_none());
        assert!(completion(b"not json").is_none());
    }

    #[test]
    fn a_streams_events_read_into_neutral_events_in_order() {
        let mut reader = ChunkReader::default();
        let mut events = reader.read(b": keep-alive\n\n");
        let chunk = json!({"id": "chatcmpl-x", "choices": [{"index": 0,
            "delta": {"role": "assistant", "content": "Hi"}, "finish_reason": null}]});
        events.extend(reader.read(format!("data: {chunk}\n\n").as_bytes()));
        let chunk = json!({"id": "chatcmpl-x", "choices": [{"index": 0, "delta": {"tool_calls":
            [{"index": 1, "id": "c", "function": {"name": "f", "arguments": "{"}}]},
            "finish_reason": "length"}], "usage": {"prompt_tokens": 3, "completion_tokens": 1}});
        events.extend(reader.read(format!("data: {chunk}\n\n").as_bytes()));
        events.extend(reader.read(b"data: {\"error\": {\"message\": \"boom\"}}\n\n"));
        events.extend(reader.read(b"data: [DONE]\n\n"));
        let usage = Usage {
            prompt_tokens: 3,
            completion_tokens: 1,
            cached_tokens: None,
        };
        assert_eq!(
            events,
            vec![
                Event::KeepAlive(Bytes::from_static(b": keep-alive\n\n")),
                Event::Started { id: "x".into() },
                Event::Text("Hi".into()),
                Event::Usage(usage),
                Event::Call(CallPart {
                    index: 1,
                    id: Some("c".into()),
                    name: Some("f".into()),
                    arguments: "{".into()
                }),
                Event::Finished(Finish::Length),
                Event::Failed {
                    message: "boom".into(),
                    error: json!({"message": "boom"})
                },
                Event::Done,
            ]
        );
    }

    #[test]
    fn finish_reasons_read_and_write_back() {
        for finish in [
            Finish::Stop,
            Finish::Length,
            Finish::ToolCalls,
            Finish::ContentFilter,
        ] {
            assert_eq!(finish_of(finish_name(finish)), finish);
        }
        assert_eq!(finish_of("eos"), Finish::Stop);
        assert_eq!(finish_of("function_call"), Finish::ToolCalls);
    }
}
