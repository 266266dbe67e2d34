//! The state every handler shares ([`AppState`]), built once at start-up: the configuration,
//! the upstreams, memory, the post-processor and agents, the trackers of background work, the
//! API surfaces served and the proxy keys.

use std::collections::HashMap;
use std::sync::Arc;

use tokio_util::task::TaskTracker;

use crate::config::Config;
use crate::hooks::SharedHook;
use crate::memory::MemoryService;
use crate::metrics::Metrics;
use crate::postprocess::PostProcessor;
use crate::upstream::{AuthHeader, Upstream};

use super::responses::pending::Pending;
use super::surfaces::ApiSurface;

/// Everything handlers share, built once at start-up.
pub struct AppState {
    pub config: Config,
    pub upstream: Arc<Upstream>,
    /// `[upstream.messages]`: Messages requests go there in their own shape (else translated).
    pub messages_upstream: Option<Arc<Upstream>>,
    /// `[upstream.responses]`: the same for Responses requests.
    pub responses_upstream: Option<Arc<Upstream>>,
    /// `[upstream.ollama]`: an Ollama server for Ollama's own API.
    pub ollama_upstream: Option<Arc<Upstream>>,
    pub metrics: Arc<Metrics>,
    /// Post-processing hooks, each handed every finished exchange.
    pub hooks: Vec<SharedHook>,
    pub memory: Arc<MemoryService>,
    /// The post-processor (also one of the hooks): MCP's `add_memory` reconciles through it.
    pub post: Arc<PostProcessor>,
    /// Explicit-mode agents (they share the memory layer).
    pub agents: Arc<crate::agent::Agents>,
    /// Background work (post-processing workers, maintenance, agent turns); drained on shutdown.
    pub tasks: TaskTracker,
    /// What runs after an exchange has been answered (its hooks: recording it, queueing its
    /// extraction; an agent's background save). Drained first on shutdown, and awaited by
    /// `memproxy eval` before it looks at what memory learned.
    pub after_exchange: TaskTracker,
    /// Responses answered whose log write is still under way (read-your-write for
    /// `previous_response_id`).
    pub pending_responses: Pending,
    /// The API surfaces served, for refusals in each one's shape (`routes::SURFACES`).
    pub surfaces: &'static [ApiSurface],
    /// SHA-256 of each proxy key → tenant. Empty: auth off.
    pub tenant_keys: HashMap<[u8; 32], crate::keys::KeyGrant>,
    /// Per-key request budgets (`limits.requests_per_minute`); `None`: no rate limit.
    pub rate_limiter: Option<crate::limits::RateLimiter>,
    /// Set when serving a non-loopback address without proxy keys (the operator opted in):
    /// logged at start-up and shown on `/readyz`.
    pub exposure_warning: std::sync::OnceLock<String>,
}

pub type SharedState = Arc<AppState>;

impl AppState {
    pub fn new(
        config: Config,
        hooks: Vec<SharedHook>,
        memory: Arc<MemoryService>,
        metrics: Arc<Metrics>,
        services: &crate::postprocess::MemoryServices,
        post: Arc<PostProcessor>,
        surfaces: &'static [ApiSurface],
    ) -> anyhow::Result<SharedState> {
        let native = |api: &Option<crate::upstream::ApiUpstream>, usual| {
            api.as_ref()
                .map(|api| Upstream::for_api(&config.upstream, api, usual).map(Arc::new))
                .transpose()
        };
        let messages_upstream = native(&config.upstream.messages, AuthHeader::XApiKey)?;
        let responses_upstream = native(&config.upstream.responses, AuthHeader::Authorization)?;
        let ollama_upstream = native(&config.upstream.ollama, AuthHeader::Authorization)?;
        Ok(Arc::new(AppState {
            upstream: Arc::new(Upstream::new(&config.upstream)?),
            messages_upstream,
            responses_upstream,
            ollama_upstream,
            metrics,
            tenant_keys: config.tenant_keys()?,
            rate_limiter: crate::limits::RateLimiter::new(&config.limits),
            exposure_warning: std::sync::OnceLock::new(),
            hooks,
            agents: Arc::new(crate::agent::Agents::new(
                Arc::clone(&memory),
                &config,
                services,
            )),
            memory,
            post,
            tasks: TaskTracker::new(),
            after_exchange: TaskTracker::new(),
            pending_responses: Pending::default(),
            surfaces,
            config,
        }))
    }
}
