//! The post-processor: learns from finished exchanges, off the request path.
//!
//! The hook stores the assistant's reply (also a partial one when the client went away, never
//! one the upstream broke off) and
//! enqueues durable jobs: fact extraction per conversation (debounced, implicit mode) and the
//! rolling summary (summary and implicit modes). A worker runs the jobs with retries and backoff;
//! nothing here can affect a response already sent, and a failed job stays visible in the queue.

mod changed;
mod consolidate;
mod decisions;
mod fact;
pub mod gates;
pub mod grounding;
mod jobs;
pub mod llm;
mod processor;
pub mod prompts;
mod reconcile;
mod restated;
pub mod turn_facts;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::json;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::conversation::request::Message;
use crate::hooks::{Exchange, ExchangeHook, Outcome};
use crate::memory::MemoryService;
use crate::metrics::Metrics;
use crate::mode::Mode;
use crate::store::{now_ms, Job, NewJob, NewMessage, UserScope};
use crate::strategy::compact;

pub use fact::{parse_facts, Fact};
use llm::MemoryLlm;
pub use processor::{JobHandler, PostProcessor};
use prompts::Prompts;
pub use reconcile::FactOutcome;

pub const EXTRACT: &str = "extract";
pub const SUMMARIZE: &str = "summarize";
pub const CONSOLIDATE: &str = "consolidate";

/// What the memory work of implicit and explicit mode shares, built once at start-up: one memory
/// LLM client (what it learns about the upstream, such as a refused `json_schema`, holds for
/// both) and one set of prompts.
pub struct MemoryServices {
    pub llm: Arc<MemoryLlm>,
    pub prompts: Prompts,
}

impl MemoryServices {
    pub fn build(config: &crate::config::Config) -> anyhow::Result<MemoryServices> {
        Ok(MemoryServices {
            llm: Arc::new(memory_llm(config)?),
            prompts: Prompts::load(config.memory.prompts_dir.as_deref())?,
        })
    }
}

/// The memory LLM of a config (`memory.llm`, defaulting to the upstream).
fn memory_llm(config: &crate::config::Config) -> Result<MemoryLlm, llm::LlmError> {
    let llm_config = &config.memory.llm;
    MemoryLlm::new(
        llm_config.url.as_deref().unwrap_or(&config.upstream.url),
        llm_config.model.clone(),
        llm_config
            .api_key
            .clone()
            .or_else(|| config.upstream.api_key.clone()),
        llm_config.max_tokens,
        config.upstream.first_byte_timeout,
    )
}

impl PostProcessor {
    /// Lets the workers run jobs of `kind` with `handler` (a later registration of the same
    /// kind replaces the earlier one).
    pub fn register(&self, kind: &str, handler: Arc<dyn JobHandler>) {
        if let Ok(mut handlers) = self.handlers.write() {
            handlers.insert(kind.to_owned(), handler);
        }
    }

    fn handler(&self, kind: &str) -> Option<Arc<dyn JobHandler>> {
        self.handlers.read().ok()?.get(kind).cloned()
    }

    pub fn new(
        memory: Arc<MemoryService>,
        config: &crate::config::Config,
        metrics: Arc<Metrics>,
        services: &MemoryServices,
    ) -> PostProcessor {
        PostProcessor {
            memory,
            config: config.memory.clone(),
            llm: Arc::clone(&services.llm),
            prompts: services.prompts.clone(),
            metrics,
            wake: Notify::new(),
            handlers: std::sync::RwLock::new(HashMap::new()),
            last_model: std::sync::Mutex::new(String::new()),
        }
    }

    async fn enqueue(
        &self,
        kind: &str,
        scope: &UserScope,
        conversation: &str,
        payload: serde_json::Value,
        delay: Duration,
    ) {
        let job = NewJob {
            kind: kind.to_owned(),
            scope: Some(scope.clone()),
            dedupe_key: Some(format!(
                "{kind}\u{1f}{}\u{1f}{}\u{1f}{conversation}",
                scope.tenant, scope.user
            )),
            payload,
            run_after_ms: now_ms() + delay.as_millis() as i64,
        };
        match self
            .memory
            .blocking(move |store, _| Ok(store.enqueue_job(&job)?))
            .await
        {
            Ok(_) => self.wake.notify_one(),
            Err(error) => tracing::error!(%error, kind, "could not enqueue a memory job"),
        }
    }

    /// Runs `memory.job_workers` workers until `stop`; interrupted jobs are requeued at the next
    /// start. The queue never gives two workers jobs of one user at once.
    pub fn spawn_workers(self: &Arc<Self>, tasks: &TaskTracker, stop: CancellationToken) {
        for _ in 0..self.config.job_workers.max(1) {
            self.spawn_worker(tasks, stop.clone());
        }
    }

    fn spawn_worker(self: &Arc<Self>, tasks: &TaskTracker, stop: CancellationToken) {
        let this = Arc::clone(self);
        tasks.spawn(async move {
            // Failed reads of the queue in a row (a database down, a disk gone read-only).
            let mut failures: u32 = 0;
            loop {
                if stop.is_cancelled() {
                    break;
                }
                let lease = this.config.job_lease.as_millis() as i64;
                let claimed = this
                    .memory
                    .blocking(move |store, _| Ok(store.claim_job(now_ms(), lease)?))
                    .await;
                if claimed.is_ok() {
                    failures = 0;
                }
                match claimed {
                    Ok(Some(job)) => {
                        this.run(job).await;
                        // A job of this user may have waited for this one.
                        this.wake.notify_waiters();
                    }
                    Ok(None) => {
                        tokio::select! {
                            _ = stop.cancelled() => break,
                            _ = this.wake.notified() => {}
                            _ = tokio::time::sleep(Duration::from_millis(500)) => {}
                        }
                    }
                    Err(error) => {
                        // Each failure in a row waits twice as long, up to 32 s (the log says
                        // it a few times a minute, not twice a second); new work wakes it at
                        // once, and so does the stop.
                        failures = failures.saturating_add(1);
                        let wait = Duration::from_secs(1 << (failures.min(6) - 1));
                        tracing::error!(%error, retry_in_s = wait.as_secs(), "cannot read the job queue");
                        tokio::select! {
                            _ = stop.cancelled() => break,
                            _ = this.wake.notified() => {}
                            _ = tokio::time::sleep(wait) => {}
                        }
                    }
                }
            }
        });
    }

    async fn run(&self, job: Job) {
        let started = std::time::Instant::now();
        let outcome = match (job.kind.as_str(), job.scope.clone()) {
            (EXTRACT, Some(scope)) => {
                let outcome = jobs::extract(self, &job, &scope).await;
                if let (Ok(_), Some(delay)) = (&outcome, self.config.consolidation_delay) {
                    // One per user, pushed back by every new extraction (debounced).
                    let payload = json!({"model": job.payload["model"]});
                    self.enqueue(CONSOLIDATE, &scope, "", payload, delay).await;
                }
                outcome
            }
            (SUMMARIZE, Some(scope)) => jobs::summarize(self, &job, &scope).await,
            (CONSOLIDATE, Some(scope)) => consolidate::consolidate(self, &job, &scope).await,
            (kind, Some(scope)) => match self.handler(kind) {
                Some(handler) => handler.run(&job, &scope).await,
                None => Err(format!("unknown job kind '{kind}'")),
            },
            (kind, None) => Err(format!("unknown job kind '{kind}'")),
        };
        let id = job.id;
        let elapsed = started.elapsed();
        self.metrics.observe_job(&job.kind, elapsed);
        let elapsed_ms = elapsed.as_millis() as u64;
        let (outcome, retry) = match outcome {
            Ok(report) => {
                tracing::info!(job = id, kind = %job.kind, %report, elapsed_ms, "memory job done");
                self.metrics.count_job(&job.kind, "done");
                (Ok(report), None)
            }
            Err(error) => {
                let retry = (job.attempts < self.config.job_attempts).then(|| {
                    let backoff = 2_i64.saturating_pow(job.attempts as u32).min(300) * 1000;
                    now_ms() + backoff
                });
                let label = if retry.is_some() { "retry" } else { "failed" };
                tracing::warn!(job = id, kind = %job.kind, attempts = job.attempts, %error, label, elapsed_ms, "memory job failed");
                self.metrics.count_job(&job.kind, label);
                (Err(error), retry)
            }
        };
        // The outcome is always recorded: a job left `running` would block its user's queue until
        // its lease ran out. A store that refuses the write is retried with backoff.
        for attempt in 0..RECORD_ATTEMPTS {
            let outcome = outcome.clone();
            let recorded = self
                .memory
                .blocking(move |store, _| {
                    match outcome {
                        Ok(report) => store.complete_job(id, &report)?,
                        Err(error) => store.fail_job(id, &error, retry)?,
                    }
                    Ok(())
                })
                .await;
            match recorded {
                Ok(()) => return,
                Err(store_error) => {
                    tracing::error!(job = id, attempt, error = %store_error, "cannot record the job's outcome");
                    self.metrics.count_job(&job.kind, "unrecorded");
                    if attempt + 1 < RECORD_ATTEMPTS {
                        tokio::time::sleep(Duration::from_millis(200 << attempt)).await;
                    }
                }
            }
        }
    }
}

/// A memory written by hand (MCP's `add_memory`, the management API) is refused when it reads
/// as an instruction: a client steered by a hostile page must not plant a standing prompt
/// injection that every later chat carries.
pub fn refuse_instruction(text: &str) -> Result<(), crate::memory::MemoryError> {
    if gates::reads_as_instruction(text) {
        return Err(crate::memory::MemoryError::Invalid(
            "Not stored: this reads as an instruction to the assistant or its memory (\"ignore previous instructions\", \"delete all memories\"); a memory states a fact about the user.".to_owned(),
        ));
    }
    Ok(())
}

impl PostProcessor {
    /// Keeps a fact the user stated (`add_memory` over MCP) the way extracted facts are kept: an
    /// exact duplicate is not stored again, and the memory LLM reconciles it with the memories it
    /// resembles, so a changed fact updates or retires the old one instead of piling up beside
    /// it. The memory LLM's model is `memory.llm.model`, else the latest chat's. When the memory
    /// LLM cannot be reached the fact is still stored, as a new memory, and
    /// the answer says so (`reconciled: false`); the next consolidation can merge it.
    pub async fn remember(
        &self,
        scope: &UserScope,
        text: &str,
        cause: &str,
    ) -> Result<Remembered, crate::memory::MemoryError> {
        let fact = || fact::Fact {
            text: text.trim().to_owned(),
            kind: "fact".to_owned(),
            ..fact::Fact::default()
        };
        self.memory.check_text(&fact().text)?;
        refuse_instruction(&fact().text)?;
        let model = self
            .last_model
            .lock()
            .map(|last| last.clone())
            .unwrap_or_default();
        let origin = reconcile::Origin {
            job: None,
            model: &model,
            cause: cause.to_owned(),
            stated: true,
        };
        let evidence = gates::Evidence::new([("user", text)]);
        let now = now_ms();
        let reconciled = reconcile::reconcile(
            self,
            &origin,
            scope,
            vec![fact()],
            &evidence,
            Vec::new(),
            now,
        )
        .await;
        match reconciled.map(|r| r.outcomes.into_iter().next()) {
            Ok(Some(outcome)) => Ok(Remembered {
                outcome,
                unreconciled: None,
            }),
            Ok(None) => Err(crate::memory::MemoryError::Task(
                "reconciliation gave no outcome".to_owned(),
            )),
            Err(reason) => {
                tracing::warn!(%reason, "could not reconcile a stated fact; storing it as new");
                let inserted = self
                    .memory
                    .add_memory(scope, &fact().text, "fact", cause)
                    .await?;
                let (event, id) = match inserted {
                    crate::store::Inserted::New { id, .. } => ("added", id),
                    crate::store::Inserted::Duplicate { id } => ("duplicate", id),
                };
                Ok(Remembered {
                    outcome: FactOutcome {
                        event: event.to_owned(),
                        memory: Some(id),
                        replaced: None,
                    },
                    unreconciled: Some(reason),
                })
            }
        }
    }
}

/// What [`PostProcessor::remember`] did.
#[derive(Clone, Debug)]
pub struct Remembered {
    pub outcome: FactOutcome,
    /// Why the fact was stored without reconciliation (the memory LLM failed).
    pub unreconciled: Option<String>,
}

/// Tries to write a job's outcome before leaving it to its lease (0.2 s, 0.4 s, … 3.2 s apart).
const RECORD_ATTEMPTS: u32 = 5;

/// The assistant's reply as a chat message (for the log and for window arithmetic).
fn reply_message(exchange: &Exchange) -> Option<Message> {
    let reply = exchange.replies.first()?;
    if reply.text.trim().is_empty() && reply.calls.is_empty() {
        return None;
    }
    Some(Message {
        calls: (!reply.calls.is_empty()).then(|| reply.calls.clone()),
        ..Message::text_message("assistant", reply.text.clone())
    })
}

#[async_trait]
impl ExchangeHook for PostProcessor {
    async fn on_exchange(&self, exchange: Exchange) {
        if !matches!(exchange.mode, Mode::Summary | Mode::Implicit) || !exchange.scope.record {
            return;
        }
        // A store that cannot be written learns nothing (`/readyz` says so once, not every turn).
        if self.memory.store().read_only() {
            return;
        }
        // A failed upstream leaves no half answer in memory: the client was told the turn
        // failed and will retry (the turns it sent are already stored by the pre-processor).
        if matches!(exchange.outcome, Outcome::UpstreamFailed { .. }) {
            return;
        }
        let Some(reply) = reply_message(&exchange) else {
            return;
        };
        let scope = UserScope::from(&exchange.scope);
        let conversation = exchange.scope.conversation.clone();
        let mut messages = exchange.request.messages.clone();
        messages.push(reply);
        let turns: Vec<NewMessage> = crate::strategy::turns_of(&messages, exchange.scope.now_ms());
        // The branch the history continues (another chat with the same opening has its own):
        // its turns are the ones to learn from and summarise.
        let conversation = match self
            .memory
            .record_messages(&scope, &conversation, &exchange.scope.agent, turns)
            .await
        {
            Ok(recorded) => recorded.conversation,
            Err(error) => {
                tracing::error!(%error, "could not store the assistant's reply");
                return;
            }
        };
        let model = exchange.request.model.clone().unwrap_or_default();
        if let Ok(mut last) = self.last_model.lock() {
            last.clone_from(&model);
        }
        let payload = json!({"conversation": conversation, "model": model});
        if exchange.mode == Mode::Implicit {
            self.enqueue(
                EXTRACT,
                &scope,
                &conversation,
                payload.clone(),
                self.config.extraction_debounce,
            )
            .await;
        }
        let window = compact::window(&messages, self.config.history_budget_tokens);
        if window.dropped.len() >= self.config.summary_min_turns {
            let mut payload = payload;
            payload["dropped"] = json!(window.dropped.len());
            self.enqueue(
                SUMMARIZE,
                &scope,
                &conversation,
                payload,
                self.config.extraction_debounce,
            )
            .await;
        }
    }
}
