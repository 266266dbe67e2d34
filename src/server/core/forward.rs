//! The forward every exchange with memory ends in, on any surface and any upstream: the request
//! sent (the recorder's clock paused meanwhile), memproxy's headers on the answer (the mode, what
//! the strategy did), and the answer handed on as it came ([`Answer`]), whole or as a stream tee,
//! while the surface's [`Reading`] gives the recorder its replies.

use axum::body::Bytes;
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, Method};
use futures_util::StreamExt;

use crate::conversation::reply::{Reply, Usage};
use crate::error::ProxyError;
use crate::hooks::Outcome;
use crate::mode::Mode;
use crate::upstream::response_headers;

use super::answer::{Answer, AnswerBody};
use super::exchange::ExchangeRecorder;
use super::stream::{TeeSettings, TeeStream};
use super::watch::Watch;
use crate::server::SharedState;

const MODE_RESPONSE_HEADER: HeaderName = HeaderName::from_static("x-memproxy-mode");

/// A request on its way to an upstream.
pub struct Outgoing<'a> {
    pub upstream: &'a crate::upstream::Upstream,
    /// What follows the upstream's base URL (`/chat/completions`).
    pub path: &'a str,
    pub headers: HeaderMap,
    pub body: Bytes,
}

/// What the answer to it needs: the strategy's report for the headers, how to read it.
pub struct Relaying<'a> {
    pub mode: Mode,
    pub rewrite: &'a crate::strategy::Rewrite,
    pub wants_stream: bool,
    pub reading: Reading,
    pub deadline: tokio::time::Instant,
}

/// Sends the request (the recorder's clock paused while the upstream works) and hands on its
/// answer with memproxy's headers; a failure to send is recorded and returned.
pub async fn forward(
    state: &SharedState,
    outgoing: Outgoing<'_>,
    mut recorder: ExchangeRecorder,
    answer: Relaying<'_>,
) -> Result<Answer, ProxyError> {
    recorder.pause();
    let sent = outgoing
        .upstream
        .send(
            Method::POST,
            outgoing.path,
            outgoing.headers,
            outgoing.body.into(),
        )
        .await;
    recorder.resume();
    let upstream = match sent {
        Ok(response) => response,
        Err(error) => return Err(recorder.fail(None, error)),
    };
    let mut relayed = response_headers(upstream.headers());
    relayed.insert(
        MODE_RESPONSE_HEADER,
        HeaderValue::from_static(answer.mode.as_str()),
    );
    rewrite_headers(&mut relayed, answer.mode, answer.rewrite);
    let counted = answer.rewrite.tokens_after;
    let mut relayed = relay_answer(
        state,
        upstream,
        relayed,
        recorder,
        answer.wants_stream,
        answer.reading,
        answer.deadline,
    )
    .await?;
    if answer.mode != Mode::Passthrough && counted > 0 {
        relayed.prompt_tokens = u64::try_from(counted).ok();
    }
    Ok(relayed)
}

/// Reads a whole 2xx answer's replies and usage; `Err` says why the body is no answer at all
/// (the client then gets a 502 saying so, not a body its SDK cannot read).
pub type ReadWhole = Box<dyn FnOnce(&[u8]) -> Result<(Vec<Reply>, Option<Usage>), String> + Send>;

/// How an answer in one API's shape is read into the neutral replies for the recorder.
pub struct Reading {
    /// For a stream: reads its events.
    pub watch: Box<dyn Watch>,
    /// For a whole body: its replies and usage.
    pub whole: ReadWhole,
    /// Remove usage from a Chat Completions stream: memproxy asked for it, the client did not.
    pub strip_usage: bool,
    /// How the API's stream divides into events (SSE, or Ollama's NDJSON).
    pub framing: crate::openai::sse::Framing,
}

/// The upstream's answer (a stream event by event, or the whole body) as it came, except for
/// `relayed` headers, while the recorder learns the reply; the error of a broken or stalled
/// answer ends it, and is recorded.
async fn relay_answer(
    state: &SharedState,
    upstream: reqwest::Response,
    mut relayed: HeaderMap,
    mut recorder: ExchangeRecorder,
    wants_stream: bool,
    reading: Reading,
    deadline: tokio::time::Instant,
) -> Result<Answer, ProxyError> {
    let status = upstream.status();
    let is_stream = upstream
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with(reading.framing.content_type()));

    if wants_stream && status.is_success() && is_stream {
        relayed.insert("x-accel-buffering", HeaderValue::from_static("no"));
        relayed.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        let settings = TeeSettings {
            watch: reading.watch,
            framing: reading.framing,
            strip_usage: reading.strip_usage,
            idle_timeout: state.upstream.config.idle_timeout,
            total_timeout: state.upstream.config.total_timeout,
            deadline,
        };
        let tee = TeeStream::new(upstream.bytes_stream().boxed(), settings, recorder);
        return Ok(Answer {
            status,
            headers: relayed,
            body: AnswerBody::Stream(tee.boxed()),
            prompt_tokens: None,
        });
    }

    // Whole body: read it (bounded by the total deadline), relay it as is, learn from it.
    recorder.pause();
    let read = state.upstream.whole_body(upstream, deadline).await;
    recorder.resume();
    let bytes = match read {
        Ok(bytes) => bytes,
        Err(error) => return Err(recorder.fail(Some(status.as_u16()), error)),
    };
    if status.is_success() {
        let (replies, usage) = match (reading.whole)(&bytes) {
            Ok(read) => read,
            Err(why) => {
                let error = ProxyError::UpstreamBroken(why);
                return Err(recorder.fail(Some(status.as_u16()), error));
            }
        };
        recorder.finish(replies, usage, Outcome::Completed);
    } else {
        let outcome = Outcome::UpstreamFailed {
            status: Some(status.as_u16()),
            message: String::from_utf8_lossy(&bytes).chars().take(500).collect(),
        };
        recorder.finish(Vec::new(), None, outcome);
    }
    Ok(Answer::whole(status, relayed, bytes))
}

/// What the strategy did, for clients and comparisons (architecture §2).
fn rewrite_headers(headers: &mut HeaderMap, mode: Mode, rewrite: &crate::strategy::Rewrite) {
    if mode == Mode::Passthrough {
        return;
    }
    let mut put = |name: &'static str, value: String| {
        if let Ok(value) = HeaderValue::from_str(&value) {
            headers.insert(HeaderName::from_static(name), value);
        }
    };
    put("x-memproxy-memories", rewrite.memories.to_string());
    put(
        "x-memproxy-prompt-tokens-before",
        rewrite.tokens_before.to_string(),
    );
    put(
        "x-memproxy-prompt-tokens-after",
        rewrite.tokens_after.to_string(),
    );
    put(
        "x-memproxy-overhead-ms",
        format!("{:.1}", rewrite.elapsed.as_secs_f64() * 1e3),
    );
    if let Some(reason) = &rewrite.degraded {
        let printable: String = reason
            .chars()
            .filter(|c| c.is_ascii() && !c.is_ascii_control())
            .take(200)
            .collect();
        put("x-memproxy-degraded", printable);
    }
}
