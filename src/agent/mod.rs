//! Explicit mode: a MemGPT agent per (tenant, user, agent) running inside the proxy (architecture §3).
//!
//! The client sends ordinary chat completions; [`Agents::run_turn`] feeds the agent the new user
//! messages, steps it against the upstream with the memory tools until it answers with
//! `send_message` (or a plain text, or `max_steps`), and returns the reply. All state (core
//! blocks, log, archival passages, summary, step trace) lives in the memory layer.

mod after;
mod caches;
mod calls;
mod compact;
pub mod context;
mod evict;
mod fallback;
pub mod foreground;
pub mod history;
pub mod hygiene;
pub mod lenient;
pub mod mail;
mod material;
pub mod model;
mod notes;
pub mod one_memory;
mod open;
mod pause;
mod preview;
pub mod recall;
mod retired;
mod save;
mod save_prompt;
mod state;
mod step;
pub mod tools;
mod turn;
pub mod turn_types;
mod unusable;
mod warm;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

pub use crate::config::explicit::{CoreMemoryAt, ExplicitConfig, Rewarm, Tools};
pub use after::TurnTasks;
pub use model::{ChatModel, ModelAnswer, ModelError, UpstreamModel};
pub use preview::Preview;
pub use step::passes_through;
pub use turn_types::{
    ClientToolsAsked, Ending, Stop, ToolResult, TurnError, TurnInput, TurnOutcome,
};

use crate::memory::{MemoryResult, MemoryService};
use crate::postprocess::llm::MemoryLlm;
use crate::store::{AgentCounts, CoreBlock, StoredMessage, Summary, UserScope};

/// Default agent name when the request names none.
pub const DEFAULT_AGENT: &str = "default";

type AgentKey = (String, String, String);

/// What an agent's next request is built from.
pub struct AgentView {
    pub blocks: Vec<CoreBlock>,
    pub counts: AgentCounts,
    pub summary: Option<Summary>,
    /// Messages in context, oldest first.
    pub queue: Vec<StoredMessage>,
}

/// An agent's turn lock, in this process and (replicas) in the store; the store's is released
/// first.
pub(crate) struct TurnGuard {
    _shared: Option<crate::store::TurnLock>,
    _local: tokio::sync::OwnedMutexGuard<()>,
}

pub struct Agents {
    memory: Arc<MemoryService>,
    config: ExplicitConfig,
    summarizer: Arc<MemoryLlm>,
    summary_prompt: String,
    extract_prompt: String,
    /// One turn at a time per agent: two concurrent turns would interleave the message queue.
    locks: Mutex<HashMap<AgentKey, Arc<tokio::sync::Mutex<()>>>>,
    /// Per model: upstream prompt tokens / our estimate, learned from reported usage.
    token_scales: Mutex<HashMap<String, f64>>,
    /// The turns running now: background model calls give way to them.
    foreground: foreground::Foreground,
    /// What each chat upstream said of its prompt caches, by base URL ([`caches`]).
    caches: Mutex<HashMap<String, caches::PromptCaches>>,
}

impl Agents {
    pub fn new(
        memory: Arc<MemoryService>,
        config: &crate::config::Config,
        services: &crate::postprocess::MemoryServices,
    ) -> Self {
        Agents {
            memory,
            config: config.explicit.clone(),
            summarizer: Arc::clone(&services.llm),
            summary_prompt: services.prompts.summarize_notes.clone(),
            extract_prompt: services.prompts.extract.clone(),
            locks: Mutex::new(HashMap::new()),
            token_scales: Mutex::new(HashMap::new()),
            foreground: foreground::Foreground::default(),
            caches: Mutex::new(HashMap::new()),
        }
    }

    pub fn config(&self) -> &ExplicitConfig {
        &self.config
    }

    pub fn memory(&self) -> &Arc<MemoryService> {
        &self.memory
    }

    /// Core memory of a new agent.
    pub fn default_blocks(&self) -> Vec<CoreBlock> {
        self.config.starting_blocks()
    }

    /// The agent as it stands, read without writing: a new agent's defaults if it does not exist
    /// yet (read-only turns and the context simulator must not create it).
    pub async fn view(&self, scope: &UserScope, agent: &str) -> MemoryResult<AgentView> {
        let (scope, agent, defaults) = (scope.clone(), agent.to_owned(), self.default_blocks());
        self.memory
            .blocking(move |store, _| {
                if !store.list_agents(&scope)?.iter().any(|a| a.name == agent) {
                    return Ok(AgentView {
                        blocks: defaults,
                        counts: AgentCounts::default(),
                        summary: None,
                        queue: Vec::new(),
                    });
                }
                let (summary, queue) = store.agent_context(&scope, &agent)?;
                Ok(AgentView {
                    blocks: store.core_blocks(&scope, &agent)?,
                    counts: store.agent_counts(&scope, &agent)?,
                    summary,
                    queue,
                })
            })
            .await
    }

    fn token_scale(&self, model: &str) -> f64 {
        let scales = self
            .token_scales
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        scales.get(model).copied().unwrap_or(1.0)
    }

    /// Learns the upstream's tokens-per-our-token from a reported prompt size.
    fn calibrate(&self, model: &str, estimated: usize, reported: usize) {
        if estimated < 100 || reported == 0 {
            return;
        }
        let observed = (reported as f64 / estimated as f64).clamp(0.5, 3.0);
        let mut scales = self
            .token_scales
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let scale = scales.entry(model.to_owned()).or_insert(observed);
        // Smoothed: one odd count (a cached prompt reported as 0, a template quirk) moves it little.
        *scale = 0.7 * *scale + 0.3 * observed;
    }

    /// Runs a management edit of an agent's memory between its turns: a turn holds the queue in
    /// memory, so an edit (a deleted message, a reset) must not land in the middle of one.
    pub async fn between_turns<T>(
        &self,
        scope: &UserScope,
        agent: &str,
        edit: impl std::future::Future<Output = T>,
    ) -> T {
        let _turn_guard = self.turn_lock(scope, agent).await;
        edit.await
    }

    /// Waits for the agent's turn lock (held by a turn, a background save, a management edit):
    /// this process's, then the store's, which replicas sharing a database hold in turn.
    async fn turn_lock(&self, scope: &UserScope, agent: &str) -> TurnGuard {
        let key = (scope.tenant.clone(), scope.user.clone(), agent.to_owned());
        let local = self.lock_of(&key).lock_owned().await;
        let (who, name) = (scope.clone(), agent.to_owned());
        let shared = self
            .memory
            .blocking(move |store, _| Ok(store.hold_turn_lock(&who, &name)?))
            .await
            .unwrap_or_else(|error| {
                // The store is failing: the turn's own reads and writes will report it.
                tracing::warn!(%error, agent, "cannot take the agent's turn lock in the store");
                None
            });
        TurnGuard {
            _shared: shared,
            _local: local,
        }
    }

    fn lock_of(&self, key: &AgentKey) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = self
            .locks
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        // Forget locks nobody holds or waits for, so the map stays as small as the active set.
        locks.retain(|_, lock| Arc::strong_count(lock) > 1);
        Arc::clone(locks.entry(key.clone()).or_default())
    }
}
