//! The post-processor's state ([`PostProcessor`]) and the handlers of the job kinds that parts
//! above it own ([`JobHandler`]); its work is in the files beside this one (extraction and
//! reconciliation, changes, consolidation, the job workers), each an `impl` of it.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use tokio::sync::Notify;

use super::llm::MemoryLlm;
use super::prompts::Prompts;
use crate::memory::MemoryService;
use crate::metrics::Metrics;
use crate::store::{Job, UserScope};
use crate::strategy::MemoryConfig;

/// A handler of one kind of durable job that a part above the post-processor owns (agent
/// messaging): the workers reach it by the job's kind through [`PostProcessor::register`], so the
/// post-processor never names that part (the layers point one way).
#[async_trait]
pub trait JobHandler: Send + Sync + 'static {
    /// Runs one job of the user `scope`: its report, or the error that retries it.
    async fn run(&self, job: &Job, scope: &UserScope) -> Result<String, String>;
}

/// Extracts facts from finished exchanges and reconciles them with what is stored, in durable
/// background jobs.
pub struct PostProcessor {
    pub(super) memory: Arc<MemoryService>,
    pub(super) config: MemoryConfig,
    pub(super) llm: Arc<MemoryLlm>,
    pub(super) prompts: Prompts,
    pub(super) metrics: Arc<Metrics>,
    pub(super) wake: Notify,
    /// Handlers of the job kinds that parts above the post-processor own (agent messaging),
    /// by kind: registered at start-up, before the workers run.
    pub(super) handlers: std::sync::RwLock<HashMap<String, Arc<dyn JobHandler>>>,
    /// The model of the latest chat seen, for memory LLM calls that come with none (a fact
    /// saved over MCP) when `memory.llm.model` is not set.
    pub(super) last_model: std::sync::Mutex<String>,
}
