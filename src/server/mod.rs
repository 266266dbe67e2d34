//! The HTTP server: shared state, start-up, and graceful shutdown.
//!
//! Shutdown order (SIGINT/SIGTERM or [`RunningServer::shutdown`]): stop accepting, let in-flight
//! requests and streams finish for at most `server.shutdown_grace`, then wait (same bound) for the
//! background tasks that post-process finished exchanges.

mod admin;
pub use admin::{AdminTenant, KeyUser};
mod agents_api;
mod auth;
mod blocks_api;
mod chat;
mod check_api;
pub mod console;
mod core;
mod extract;
mod guard;
mod listen;
pub mod messages;
pub mod ollama;
mod openapi;
mod ops;
mod refusal;
mod relay;
pub mod responses;
mod routes;
mod simulate;
mod state;
mod surfaces;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::Config;
use crate::hooks::SharedHook;
use crate::memory::MemoryService;
use crate::metrics::Metrics;
use crate::postprocess::PostProcessor;

pub use auth::RequestContext;
pub use listen::no_delay;
pub use state::{AppState, SharedState};

pub fn router(state: SharedState) -> axum::Router {
    routes::router(state)
}

/// A server running in the background of the current runtime.
pub struct RunningServer {
    pub addr: SocketAddr,
    pub state: SharedState,
    stop: CancellationToken,
    /// Stops background maintenance, after the last request is done.
    stop_maintenance: CancellationToken,
    serving: JoinHandle<std::io::Result<()>>,
}

/// Binds `config.listen` and starts serving.
pub async fn start(config: Config, hook: SharedHook) -> anyhow::Result<RunningServer> {
    let listener = TcpListener::bind(config.listen)
        .await
        .map_err(|error| anyhow::anyhow!("cannot listen on {}: {error}", config.listen))?;
    start_on(listener, config, hook).await
}

/// Serves on an already bound listener (tests bind port 0).
pub async fn start_on(
    listener: TcpListener,
    config: Config,
    hook: SharedHook,
) -> anyhow::Result<RunningServer> {
    let addr = listener.local_addr()?;
    // The address really bound decides (the config's may have been replaced by a flag).
    let exposure = config.exposure(addr)?;
    let memory = MemoryService::from_config(&config).await?;
    let metrics = Arc::new(Metrics::new()?);
    // The services built once: every part that needs them gets these.
    let services = crate::postprocess::MemoryServices::build(&config)?;
    let post = Arc::new(PostProcessor::new(
        Arc::clone(&memory),
        &config,
        Arc::clone(&metrics),
        &services,
    ));
    let hooks: Vec<SharedHook> = vec![post.clone(), hook];
    let state = AppState::new(
        config,
        hooks,
        memory,
        metrics,
        &services,
        Arc::clone(&post),
        routes::SURFACES,
    )?;
    post.register(
        crate::agent::mail::AGENT_MESSAGE,
        Arc::new(crate::agent::mail::AgentMail {
            agents: Arc::clone(&state.agents),
            upstream: Arc::clone(&state.upstream),
        }),
    );
    if let Some(warning) = exposure {
        tracing::warn!("{warning}");
        let _ = state.exposure_warning.set(warning);
    }
    let stop = CancellationToken::new();
    let stop_maintenance = CancellationToken::new();
    // A store that cannot be written gets no background work: every piece of it writes.
    if !state.memory.store().read_only() {
        spawn_maintenance(&state, stop_maintenance.clone());
        state
            .memory
            .spawn_backlog_embedder(&state.tasks, stop_maintenance.clone());
        post.spawn_workers(&state.tasks, stop_maintenance.clone());
    }
    let app = router(Arc::clone(&state));
    let limits = listen::ConnectionLimits::of(&state.config.server);
    let metrics = Arc::clone(&state.metrics);
    let serving = tokio::spawn(listen::serve(
        listener,
        app,
        limits,
        stop.clone(),
        move || metrics.count_refused_connection(),
    ));
    tracing::info!(%addr, upstream = state.upstream.shown(state.upstream.base_url()), mode = %state.config.mode, "memproxy listening");
    Ok(RunningServer {
        addr,
        state,
        stop,
        stop_maintenance,
        serving,
    })
}

impl RunningServer {
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stops accepting, drains in-flight requests and background work (each bounded by the grace).
    pub async fn shutdown(self) {
        let grace = self.state.config.server.shutdown_grace;
        self.stop.cancel();
        let mut serving = self.serving;
        match tokio::time::timeout(grace, &mut serving).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(error))) => tracing::warn!(%error, "server stopped with an error"),
            Ok(Err(error)) => tracing::warn!(%error, "server task failed"),
            Err(_) => {
                tracing::warn!(grace = ?grace, "in-flight requests did not finish in time; closing them");
                serving.abort();
            }
        }
        // Exchanges' hooks first: they queue durable jobs the workers may still pick up. Then
        // the rest, and the hooks again: an agent turn finishing meanwhile may start a save.
        drain(&self.state.after_exchange, grace).await;
        self.stop_maintenance.cancel();
        drain(&self.state.tasks, grace).await;
        drain(&self.state.after_exchange, grace).await;
    }
}

/// Start-up recovery, then a periodic save of changed vector indexes (and a last one at stop).
fn spawn_maintenance(state: &SharedState, stop: CancellationToken) {
    let memory = Arc::clone(&state.memory);
    let retention = state.config.memory.clone();
    state.tasks.spawn(async move {
        match memory.recover().await {
            Ok((users, requeued)) => tracing::info!(users, requeued, "memory checked"),
            Err(error) => tracing::error!(%error, "memory check at start-up failed"),
        }
        // Agents' `human` lines written before a user had one memory become their facts.
        match crate::agent::one_memory::adopt(&memory).await {
            Ok(0) => {}
            Ok(adopted) => {
                tracing::info!(adopted, "core memory lines adopted as the users' facts");
                memory.embed_backlog();
            }
            Err(error) => tracing::error!(%error, "adopting core memory lines as facts failed"),
        }
        let mut ticks = 0u64;
        loop {
            if ticks % PRUNE_EVERY_TICKS == 0 {
                prune_responses(&memory, &retention).await;
            }
            ticks += 1;
            let stopping = tokio::select! {
                _ = stop.cancelled() => true,
                _ = tokio::time::sleep(FLUSH_EVERY) => false,
            };
            if let Err(error) = memory.flush().await {
                tracing::error!(%error, "saving vector indexes failed");
            }
            if stopping {
                break;
            }
        }
    });
}

/// How often changed vector indexes are saved (a crash in between only costs a rebuild).
const FLUSH_EVERY: Duration = Duration::from_secs(10);

/// The response log's retention runs at start and every hour (360 flushes).
const PRUNE_EVERY_TICKS: u64 = 360;

/// Deletes stored Responses past `memory.responses_max_age` or beyond `responses_per_user`.
async fn prune_responses(memory: &MemoryService, config: &crate::strategy::MemoryConfig) {
    let before = config.responses_max_age.map_or(i64::MIN, |age| {
        crate::store::now_ms().saturating_sub(i64::try_from(age.as_millis()).unwrap_or(i64::MAX))
    });
    let keep = config.responses_per_user;
    match memory
        .blocking(move |store, _| Ok(store.prune_responses(before, keep)?))
        .await
    {
        Ok(0) => {}
        Ok(pruned) => tracing::info!(pruned, "stored responses past their retention deleted"),
        Err(error) => tracing::warn!(%error, "pruning stored responses failed"),
    }
}

async fn drain(tasks: &TaskTracker, grace: Duration) {
    tasks.close();
    if tokio::time::timeout(grace, tasks.wait()).await.is_err() {
        tracing::warn!(
            pending = tasks.len(),
            "background tasks still running at shutdown"
        );
    }
}

/// Resolves on SIGINT (Ctrl-C) or SIGTERM.
pub async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut terminate =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(signal) => signal,
                Err(error) => {
                    tracing::warn!(%error, "cannot watch SIGTERM; only Ctrl-C stops memproxy");
                    let _ = interrupt.await;
                    return;
                }
            };
        tokio::select! {
            _ = interrupt => {}
            _ = terminate.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = interrupt.await;
    }
}
