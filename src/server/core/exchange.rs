//! Per-request bookkeeping: time spent in memproxy vs the upstream, and the hand-over of the
//! finished exchange to the post-processing hook.
//!
//! A recorder is created when a chat request is accepted and finishes exactly once: explicitly
//! when the response is complete or failed, or from `Drop` when the client went away (the handler
//! future or the response stream was dropped), so a disconnect still reaches the hook.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use crate::conversation::reply::{Reply, Usage};
use crate::conversation::request::Request;
use crate::error::ProxyError;
use crate::hooks::{Exchange, Outcome};
use crate::identity::Scope;
use crate::mode::Mode;

use crate::server::SharedState;

pub struct ExchangeRecorder {
    state: SharedState,
    route: &'static str,
    request_id: String,
    scope: Scope,
    mode: Mode,
    request: Arc<Request>,
    started_at: SystemTime,
    started: Instant,
    /// Time spent in memproxy's own code so far.
    own_time: Duration,
    /// Start of the current stretch of own work; `None` while waiting on the upstream.
    working_since: Option<Instant>,
    finished: bool,
}

impl ExchangeRecorder {
    pub fn new(
        state: SharedState,
        route: &'static str,
        request_id: String,
        scope: Scope,
        mode: Mode,
        request: Arc<Request>,
        started: Instant,
    ) -> Self {
        ExchangeRecorder {
            state,
            route,
            request_id,
            scope,
            mode,
            request,
            started_at: SystemTime::now(),
            started,
            own_time: Duration::ZERO,
            working_since: Some(started),
            finished: false,
        }
    }

    /// Memproxy starts waiting (on the upstream, or on hyper to poll the stream again).
    pub fn pause(&mut self) {
        if let Some(since) = self.working_since.take() {
            self.own_time += since.elapsed();
        }
    }

    /// Memproxy has work to do again.
    pub fn resume(&mut self) {
        if self.working_since.is_none() {
            self.working_since = Some(Instant::now());
        }
    }

    pub fn request_id(&self) -> &str {
        &self.request_id
    }

    /// Records timing and submits the exchange to the hook; later calls do nothing.
    pub fn finish(&mut self, replies: Vec<Reply>, usage: Option<Usage>, outcome: Outcome) {
        if self.finished {
            return;
        }
        self.finished = true;
        self.pause();
        let elapsed = self.started.elapsed();
        let upstream = elapsed.saturating_sub(self.own_time);
        let metrics = &self.state.metrics;
        metrics.observe_timing(self.route, self.mode.as_str(), upstream, self.own_time);
        metrics.count_exchange(self.mode.as_str(), outcome.label(), usage);
        let exchange = Exchange {
            request_id: self.request_id.clone(),
            scope: self.scope.clone(),
            mode: self.mode,
            request: Arc::clone(&self.request),
            replies,
            usage,
            outcome,
            started_at: self.started_at,
            elapsed,
        };
        for hook in &self.state.hooks {
            let (hook, exchange) = (Arc::clone(hook), exchange.clone());
            self.state
                .after_exchange
                .spawn(async move { hook.on_exchange(exchange).await });
        }
    }
}

impl ExchangeRecorder {
    /// Finishes as a failed exchange and hands the error back for the response.
    pub fn fail(&mut self, status: Option<u16>, error: ProxyError) -> ProxyError {
        let message = error.to_string();
        self.finish(
            Vec::new(),
            None,
            Outcome::UpstreamFailed { status, message },
        );
        error
    }
}

impl Drop for ExchangeRecorder {
    fn drop(&mut self) {
        self.finish(Vec::new(), None, Outcome::ClientDisconnected);
    }
}
