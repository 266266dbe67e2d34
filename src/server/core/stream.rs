//! The streaming relay: forwards upstream SSE events one by one as they arrive, and tees them
//! into an accumulator that rebuilds the final reply for post-processing.
//!
//! Events are forwarded as the upstream's own bytes. Two exceptions, both deliberate: when memproxy
//! itself asked for usage (`observe_stream_usage`), usage is removed again before the client sees
//! it; and when the upstream breaks, stalls or ends early, the stream ends with an OpenAI-shaped
//! `data: {"error":…}` event instead of hanging. Dropping the stream (client gone) drops the
//! upstream response, which cancels the upstream request.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures_util::stream::BoxStream;
use futures_util::Stream;
use serde_json::Value;
use tokio::time::{Instant, Sleep};

use crate::error::ProxyError;
use crate::hooks::Outcome;
use crate::openai::sse::{Framing, SseSplitter};

use super::exchange::ExchangeRecorder;
use super::watch::Watch;

pub struct TeeStream {
    upstream: BoxStream<'static, reqwest::Result<Bytes>>,
    splitter: SseSplitter,
    ready: VecDeque<Bytes>,
    accumulator: Box<dyn Watch>,
    /// Remove usage from chunks: memproxy asked for it, the client did not.
    strip_usage: bool,
    idle_timeout: Duration,
    idle: Pin<Box<Sleep>>,
    deadline: Pin<Box<Sleep>>,
    total_timeout: Duration,
    ended: bool,
    recorder: ExchangeRecorder,
}

pub struct TeeSettings {
    /// Reads the events into the reply (the API's own reader).
    pub watch: Box<dyn Watch>,
    /// How the stream's bytes divide into events.
    pub framing: Framing,
    pub strip_usage: bool,
    pub idle_timeout: Duration,
    pub total_timeout: Duration,
    /// When the whole request must be over.
    pub deadline: Instant,
}

impl TeeStream {
    pub fn new(
        upstream: BoxStream<'static, reqwest::Result<Bytes>>,
        settings: TeeSettings,
        mut recorder: ExchangeRecorder,
    ) -> Self {
        recorder.pause();
        TeeStream {
            upstream,
            splitter: SseSplitter::new(settings.framing),
            ready: VecDeque::new(),
            accumulator: settings.watch,
            strip_usage: settings.strip_usage,
            idle_timeout: settings.idle_timeout,
            idle: Box::pin(tokio::time::sleep(settings.idle_timeout)),
            deadline: Box::pin(tokio::time::sleep_until(settings.deadline)),
            total_timeout: settings.total_timeout,
            ended: false,
            recorder,
        }
    }

    fn take_event(&mut self, raw: Bytes) {
        let Some(data) = self.splitter.framing().payload(&raw) else {
            self.ready.push_back(raw);
            return;
        };
        self.accumulator.observe(&data);
        if self.strip_usage && data.contains("\"usage\"") {
            match without_usage(&data) {
                Rewritten::Drop => return,
                Rewritten::Event(event) => {
                    self.ready.push_back(event);
                    return;
                }
                Rewritten::Unchanged => {}
            }
        }
        self.ready.push_back(raw);
    }

    /// Ends the stream with an in-stream error event and reports the failure.
    fn fail(&mut self, error: ProxyError) {
        tracing::warn!(request_id = %self.recorder.request_id(), %error, "stream ended early");
        self.ready.push_back(self.accumulator.error_event(&error));
        self.ended = true;
        let outcome = Outcome::UpstreamFailed {
            status: None,
            message: error.to_string(),
        };
        self.recorder.finish(
            self.accumulator.replies(),
            self.accumulator.usage(),
            outcome,
        );
    }

    fn upstream_ended(&mut self) {
        if let Some(rest) = self.splitter.finish() {
            self.take_event(rest);
        }
        if let Some(error) = self.accumulator.error() {
            self.ended = true;
            let outcome = Outcome::UpstreamFailed {
                status: None,
                message: error,
            };
            self.recorder.finish(
                self.accumulator.replies(),
                self.accumulator.usage(),
                outcome,
            );
        } else if self.accumulator.finished() {
            self.ended = true;
            self.recorder.finish(
                self.accumulator.replies(),
                self.accumulator.usage(),
                Outcome::Completed,
            );
        } else {
            self.fail(ProxyError::UpstreamBroken(
                "the stream ended before the completion finished".to_owned(),
            ));
        }
    }
}

impl Stream for TeeStream {
    type Item = Result<Bytes, std::io::Error>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if let Some(event) = this.ready.pop_front() {
                return Poll::Ready(Some(Ok(event)));
            }
            if this.ended {
                return Poll::Ready(None);
            }
            if this.deadline.as_mut().poll(cx).is_ready() {
                this.fail(ProxyError::UpstreamTimeout(this.total_timeout));
                continue;
            }
            match this.upstream.as_mut().poll_next(cx) {
                Poll::Ready(Some(Ok(chunk))) => {
                    this.recorder.resume();
                    let next_idle = Instant::now() + this.idle_timeout;
                    this.idle.as_mut().reset(next_idle);
                    this.splitter.push(&chunk);
                    while let Some(event) = this.splitter.next_event() {
                        this.take_event(event);
                    }
                    this.recorder.pause();
                }
                Poll::Ready(Some(Err(error))) => {
                    this.fail(ProxyError::UpstreamBroken(error.to_string()));
                }
                Poll::Ready(None) => {
                    this.recorder.resume();
                    this.upstream_ended();
                }
                Poll::Pending => {
                    if this.idle.as_mut().poll(cx).is_ready() {
                        this.fail(ProxyError::UpstreamTimeout(this.idle_timeout));
                        continue;
                    }
                    return Poll::Pending;
                }
            }
        }
    }
}

impl Drop for TeeStream {
    fn drop(&mut self) {
        // Client gone before the end: what was generated so far still goes to the hook.
        self.recorder.finish(
            self.accumulator.replies(),
            self.accumulator.usage(),
            Outcome::ClientDisconnected,
        );
    }
}

enum Rewritten {
    Unchanged,
    /// A usage-only chunk the client never asked for.
    Drop,
    Event(Bytes),
}

/// Removes the top-level `usage` key from one chunk; a chunk that only carried usage goes away.
fn without_usage(data: &str) -> Rewritten {
    let Ok(Value::Object(mut chunk)) = serde_json::from_str::<Value>(data) else {
        return Rewritten::Unchanged;
    };
    if chunk.remove("usage").is_none() {
        return Rewritten::Unchanged;
    }
    let no_choices = chunk
        .get("choices")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty);
    if no_choices {
        return Rewritten::Drop;
    }
    Rewritten::Event(Bytes::from(format!("data: {}\n\n", Value::Object(chunk))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_usage_only_where_present() {
        assert!(matches!(
            without_usage(r#"{"choices":[],"usage":{"total_tokens":3}}"#),
            Rewritten::Drop
        ));
        let Rewritten::Event(event) = without_usage(
            r#"{"id":"x","choices":[{"index":0,"delta":{"content":"\"usage\""}}],"usage":null}"#,
        ) else {
            panic!("expected a rewritten event");
        };
        assert_eq!(
            &event[..],
            &br#"data: {"id":"x","choices":[{"index":0,"delta":{"content":"\"usage\""}}]}

"#[..]
        );
        assert!(matches!(
            without_usage(r#"{"choices":[{"delta":{"content":"usage"}}]}"#),
            Rewritten::Unchanged
        ));
    }
}
