//! A reply memproxy made (explicit mode), written as Chat Completions: a whole `chat.completion`,
//! or the chunks OpenAI streams (the role first, content or tool-call deltas, the finish, the
//! usage chunk when the client asked for it, `[DONE]`). What the upstream sent is relayed as it
//! came and never passes here.

use axum::body::Bytes;
use axum::http::{header, HeaderValue};
use axum::response::Response;
use serde_json::{json, Value};

use crate::conversation::reply::{CallPart, Event, Reply, Usage};
use crate::openai::reply::{assistant_message, finish_name};
use crate::openai::translate::{translate_stream, StreamTranslator};

use crate::server::core::{Answer, AnswerBody};

/// What the client asked that shapes the answer.
pub struct Asked {
    pub model: String,
    /// `stream_options.include_usage`.
    pub include_usage: bool,
}

/// The core's answer as this API's response: relayed bytes as they are, a reply memproxy made
/// written as Chat Completions.
pub fn respond(mut answer: Answer, asked: Asked) -> Response {
    match std::mem::replace(&mut answer.body, AnswerBody::Whole(Bytes::new())) {
        AnswerBody::Reply(reply) => {
            let body = completion(&reply, &asked.model).to_string();
            answer.headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            answer.body = AnswerBody::Whole(Bytes::from(body));
        }
        AnswerBody::Replying(events) => {
            let chunks = translate_stream(events, ChunkWriter::new(asked));
            let headers = std::mem::take(&mut answer.headers);
            answer = Answer {
                status: answer.status,
                ..Answer::event_stream(headers, chunks)
            };
        }
        body => answer.body = body,
    }
    answer.into_response()
}

fn created() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn usage_json(usage: &Usage) -> Value {
    let mut out = json!({
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.prompt_tokens + usage.completion_tokens,
    });
    if let Some(cached) = usage.cached_tokens {
        out["prompt_tokens_details"] = json!({ "cached_tokens": cached });
    }
    out
}

/// A whole reply as a `chat.completion`, named `model` as the client asked.
pub fn completion(reply: &Reply, model: &str) -> Value {
    let message = assistant_message(reply);
    let mut body = json!({
        "id": format!("chatcmpl-{}", reply.id),
        "object": "chat.completion",
        "created": created(),
        "model": model,
        "choices": [{
            "index": 0,
            "message": message,
            "finish_reason": reply.finish.map(finish_name),
        }],
    });
    if let Some(usage) = &reply.usage {
        body["usage"] = usage_json(usage);
    }
    body
}

/// Writes a streamed reply's events as Chat Completions chunks.
pub struct ChunkWriter {
    asked: Asked,
    id: String,
    created: u64,
    role_sent: bool,
}

impl ChunkWriter {
    pub fn new(asked: Asked) -> ChunkWriter {
        ChunkWriter {
            asked,
            id: String::new(),
            created: created(),
            role_sent: false,
        }
    }

    fn chunk(&self, delta: Value, finish: Value) -> Bytes {
        let mut chunk = json!({
            "id": format!("chatcmpl-{}", self.id), "object": "chat.completion.chunk",
            "created": self.created, "model": self.asked.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        });
        if self.asked.include_usage {
            chunk["usage"] = Value::Null;
        }
        Bytes::from(format!("data: {chunk}\n\n"))
    }

    /// The role chunk, once, before the first delta: its content empty for text, null for calls.
    fn role(&mut self, content: Value, out: &mut Vec<Bytes>) {
        if !self.role_sent {
            self.role_sent = true;
            out.push(self.chunk(
                json!({"role": "assistant", "content": content}),
                Value::Null,
            ));
        }
    }

    fn call(&self, part: &CallPart) -> Bytes {
        let mut call = json!({"index": part.index, "function": {"arguments": part.arguments}});
        if let Some(id) = &part.id {
            call["id"] = json!(id);
            call["type"] = json!("function");
        }
        if let Some(name) = &part.name {
            call["function"]["name"] = json!(name);
        }
        self.chunk(json!({ "tool_calls": [call] }), Value::Null)
    }
}

impl StreamTranslator for ChunkWriter {
    fn on_event(&mut self, event: Event) -> Vec<Bytes> {
        let mut out = Vec::new();
        match event {
            Event::Started { id } => self.id = id,
            Event::Text(text) => {
                self.role(json!(""), &mut out);
                out.push(self.chunk(json!({ "content": text }), Value::Null));
            }
            Event::Call(part) => {
                self.role(Value::Null, &mut out);
                out.push(self.call(&part));
            }
            Event::Finished(finish) => {
                self.role(json!(""), &mut out);
                out.push(self.chunk(json!({}), json!(finish_name(finish))));
            }
            Event::Usage(usage) if self.asked.include_usage => {
                let chunk = json!({
                    "id": format!("chatcmpl-{}", self.id), "object": "chat.completion.chunk",
                    "created": self.created, "model": self.asked.model,
                    "choices": [], "usage": usage_json(&usage),
                });
                out.push(Bytes::from(format!("data: {chunk}\n\n")));
            }
            Event::Usage(_) => {}
            Event::KeepAlive(comment) => out.push(comment),
            Event::Done => out.push(Bytes::from_static(b"data: [DONE]\n\n")),
            Event::Failed { error, .. } => {
                out.push(Bytes::from(format!(
                    "data: {}\n\n",
                    json!({ "error": error })
                )));
            }
        }
        out
    }

    /// A reply memproxy made always ends with `Done` or `Failed`: nothing is due.
    fn end_of_input(&mut self) -> Vec<Bytes> {
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::reply::Finish;
    use crate::openai::reply::ChunkReader;

    fn asked(include_usage: bool) -> Asked {
        Asked {
            model: "m".to_owned(),
            include_usage,
        }
    }

    /// What the writer writes reads back into the same events (the upstream's reader is the
    /// check: a client reading these chunks reads what the agent said), and the usage chunk is
    /// written only for a client that asked for it.
    #[test]
    fn written_chunks_read_back_into_the_reply_events() {
        let usage = Usage {
            prompt_tokens: 7,
            completion_tokens: 3,
            cached_tokens: None,
        };
        let events = vec![
            Event::Started { id: "t1".into() },
            Event::Call(CallPart {
                index: 0,
                id: Some("call_1".into()),
                name: Some("weather".into()),
                arguments: String::new(),
            }),
            Event::Call(CallPart {
                index: 0,
                arguments: "{\"city\":\"Porto\"}".into(),
                ..CallPart::default()
            }),
            Event::Finished(Finish::ToolCalls),
            Event::Usage(usage),
            Event::Done,
        ];
        let mut writer = ChunkWriter::new(asked(true));
        let mut reader = ChunkReader::default();
        let mut read = Vec::new();
        for event in events.clone() {
            for bytes in writer.on_event(event) {
                read.extend(reader.read(&bytes));
            }
        }
        assert_eq!(read, events);
        let mut quiet = ChunkWriter::new(asked(false));
        assert!(quiet.on_event(Event::Usage(usage)).is_empty());
    }

    #[test]
    fn a_whole_reply_reads_back_as_the_same_reply() {
        let reply = Reply {
            id: "t2".into(),
            text: "Porto is sunny.".into(),
            calls: Vec::new(),
            finish: Some(Finish::Stop),
            usage: Some(Usage {
                prompt_tokens: 5,
                completion_tokens: 4,
                cached_tokens: Some(2),
            }),
        };
        let written = completion(&reply, "m").to_string();
        assert_eq!(
            crate::openai::reply::completion(written.as_bytes()),
            Some(reply)
        );
    }
}
