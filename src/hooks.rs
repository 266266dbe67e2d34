//! The post-processing hook: what the relay hands over once an exchange is over.
//!
//! Memory strategies learn from finished exchanges (store the reply, extract facts) off the hot
//! path. The relay builds an [`Exchange`] when a response completes, fails, or the client goes away
//! mid-stream (what was generated so far still counts), and submits it to the hook as a tracked
//! background task, so shutdown can wait for it.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;

use crate::conversation::reply::{Reply, Usage};
use crate::conversation::request::Request;
use crate::identity::Scope;
use crate::mode::Mode;

#[derive(Clone, Debug)]
pub struct Exchange {
    pub request_id: String,
    pub scope: Scope,
    pub mode: Mode,
    /// The request as the client sent it, in no API's shape.
    pub request: Arc<Request>,
    /// The assistant's replies, one per choice (partial when the client disconnected).
    pub replies: Vec<Reply>,
    pub usage: Option<Usage>,
    pub outcome: Outcome,
    pub started_at: SystemTime,
    pub elapsed: Duration,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Completed,
    /// The client went away before the end; `replies` holds what had been generated.
    ClientDisconnected,
    /// The upstream answered an error status, broke the stream or timed out.
    UpstreamFailed {
        status: Option<u16>,
        message: String,
    },
}

impl Outcome {
    pub fn label(&self) -> &'static str {
        match self {
            Outcome::Completed => "completed",
            Outcome::ClientDisconnected => "client_disconnected",
            Outcome::UpstreamFailed { .. } => "upstream_failed",
        }
    }
}

#[async_trait]
pub trait ExchangeHook: Send + Sync + 'static {
    async fn on_exchange(&self, exchange: Exchange);
}

/// The default hook until memory strategies exist: a debug log line (never message content).
pub struct LogExchanges;

#[async_trait]
impl ExchangeHook for LogExchanges {
    async fn on_exchange(&self, exchange: Exchange) {
        tracing::debug!(
            request_id = %exchange.request_id,
            mode = %exchange.mode,
            user = %exchange.scope.user,
            conversation = %exchange.scope.conversation,
            outcome = exchange.outcome.label(),
            choices = exchange.replies.len(),
            total_tokens = exchange.usage.map(|u| u.total()),
            elapsed_ms = exchange.elapsed.as_millis() as u64,
            "exchange finished"
        );
    }
}

pub type SharedHook = Arc<dyn ExchangeHook>;
