//! The core's answer as a value, not an HTTP response: its status, the headers it carries (the
//! upstream's relayed ones and memproxy's own), its body, and the prompt's size as memproxy
//! counted it. The body is either the upstream's bytes, whole or streamed (in the Chat
//! Completions shape, or on a native upstream the API's own), or a reply memproxy made itself
//! (explicit mode), in no API's shape. A surface reads what it needs: bytes it relays as they are
//! ([`Answer::into_response`]), and the neutral reply it writes in its own shape
//! ([`AnswerBody::said`]), so no surface parses JSON that memproxy wrote.

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::Response;
use futures_util::stream::BoxStream;

use crate::conversation::reply::{Events as ReplyEvents, Reply};
use crate::error::ProxyError;

/// A streamed body's events, as the bytes they came in.
pub type Events = BoxStream<'static, Result<Bytes, std::io::Error>>;

/// The body of an answer.
pub enum AnswerBody {
    /// Read whole (a non-streamed answer, or any error).
    Whole(Bytes),
    /// Relayed as it comes: a successful stream.
    Stream(Events),
    /// A successful answer memproxy made, whole.
    Reply(Reply),
    /// A successful answer memproxy made, as it streams.
    Replying(ReplyEvents),
}

/// What a successful answer said, in no API's shape.
pub enum Said {
    Whole(Reply),
    Streamed(ReplyEvents),
}

impl AnswerBody {
    /// The successful answer read as a neutral reply: the upstream's Chat Completions bytes read
    /// once, memproxy's own reply as it is; a whole body that is no chat completion is a broken
    /// upstream.
    pub fn said(self) -> Result<Said, ProxyError> {
        match self {
            AnswerBody::Reply(reply) => Ok(Said::Whole(reply)),
            AnswerBody::Replying(events) => Ok(Said::Streamed(events)),
            AnswerBody::Stream(bytes) => {
                Ok(Said::Streamed(crate::openai::reply::read_stream(bytes)))
            }
            AnswerBody::Whole(bytes) => crate::openai::reply::completion(&bytes)
                .map(Said::Whole)
                .ok_or_else(|| {
                    ProxyError::UpstreamBroken(
                        "the upstream's answer is not a chat completion".to_owned(),
                    )
                }),
        }
    }
}

/// One answer of the conversation core.
pub struct Answer {
    pub status: StatusCode,
    /// Every header the answer carries: the upstream's relayed ones (content type included) and
    /// memproxy's (`x-memproxy-*`).
    pub headers: HeaderMap,
    pub body: AnswerBody,
    /// The prompt's tokens after memproxy's rewrite, as memproxy counted them; `None` where it
    /// counted nothing (passthrough, explicit mode).
    pub prompt_tokens: Option<u64>,
}

impl Answer {
    /// A whole answer.
    pub fn whole(status: StatusCode, headers: HeaderMap, body: Bytes) -> Answer {
        Answer {
            status,
            headers,
            body: AnswerBody::Whole(body),
            prompt_tokens: None,
        }
    }

    /// A successful stream of server-sent events (the content type and no-cache set).
    pub fn event_stream(mut headers: HeaderMap, events: Events) -> Answer {
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/event-stream"),
        );
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        Answer {
            status: StatusCode::OK,
            headers,
            body: AnswerBody::Stream(events),
            prompt_tokens: None,
        }
    }

    /// A whole reply memproxy made.
    pub fn reply(headers: HeaderMap, reply: Reply) -> Answer {
        Answer {
            status: StatusCode::OK,
            headers,
            body: AnswerBody::Reply(reply),
            prompt_tokens: None,
        }
    }

    /// A reply memproxy makes as it streams.
    pub fn replying(headers: HeaderMap, events: ReplyEvents) -> Answer {
        Answer {
            status: StatusCode::OK,
            headers,
            body: AnswerBody::Replying(events),
            prompt_tokens: None,
        }
    }

    /// Sets one of memproxy's headers; a value that is no header value is left out.
    pub fn put(&mut self, name: &'static str, value: &str) {
        if let Ok(value) = HeaderValue::from_str(value) {
            self.headers.insert(HeaderName::from_static(name), value);
        }
    }

    /// The answer relayed as the client gets it on the API it is already in. A reply memproxy
    /// made has no wire shape yet: its surface writes it first (the Chat Completions surface does;
    /// the native relays never get one), so here it is an internal error, not a guess at a shape.
    pub fn into_response(self) -> Response {
        let body = match self.body {
            AnswerBody::Whole(bytes) => Body::from(bytes),
            AnswerBody::Stream(events) => Body::from_stream(events),
            AnswerBody::Reply(_) | AnswerBody::Replying(_) => {
                let error = ProxyError::Internal(
                    "a reply memproxy made reached a relay that only sends bytes".to_owned(),
                );
                return axum::response::IntoResponse::into_response(error);
            }
        };
        build(self.status, self.headers, body)
    }

    /// The headers a translated answer keeps: `x-memproxy-*`, `x-request-id`,
    /// `x-upstream-request-id`, and `retry-after` (every API's SDK waits as it says). The rest
    /// (content type and length, the upstream's own) describe the Chat Completions body.
    pub fn kept_headers(&self) -> HeaderMap {
        let mut kept = HeaderMap::new();
        for (name, value) in &self.headers {
            let text = name.as_str();
            if text.starts_with("x-memproxy-")
                || text == "x-request-id"
                || text == "x-upstream-request-id"
                || name == header::RETRY_AFTER
            {
                kept.append(name.clone(), value.clone());
            }
        }
        kept
    }
}

/// A response of this status, headers and body (what every surface sends in the end).
pub fn build(status: StatusCode, headers: HeaderMap, body: Body) -> Response {
    let mut response = Response::new(body);
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn translated_answers_keep_only_memproxys_headers_and_the_ids() {
        let mut headers = HeaderMap::new();
        for (name, value) in [
            ("content-type", "application/json"),
            ("content-length", "12"),
            ("x-memproxy-mode", "implicit"),
            ("x-request-id", "r1"),
            ("x-upstream-request-id", "u1"),
            ("retry-after", "3"),
            ("openai-processing-ms", "40"),
        ] {
            headers.insert(
                HeaderName::from_static(name),
                HeaderValue::from_static(value),
            );
        }
        let answer = Answer::whole(StatusCode::OK, headers, Bytes::from_static(b"{}"));
        let kept = answer.kept_headers();
        let mut names: Vec<&str> = kept.keys().map(HeaderName::as_str).collect();
        names.sort_unstable();
        assert_eq!(
            names,
            [
                "retry-after",
                "x-memproxy-mode",
                "x-request-id",
                "x-upstream-request-id"
            ]
        );
    }

    #[test]
    fn the_chat_surface_gets_status_headers_and_body_as_they_are() {
        let mut answer = Answer::whole(
            StatusCode::TOO_MANY_REQUESTS,
            HeaderMap::new(),
            Bytes::from_static(b"slow down"),
        );
        answer.put("x-memproxy-mode", "window");
        answer.put("x-memproxy-degraded", "not\na header value");
        let response = answer.into_response();
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(response.headers()["x-memproxy-mode"], "window");
        assert!(!response.headers().contains_key("x-memproxy-degraded"));
    }
}
