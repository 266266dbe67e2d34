//! The HTTP server: shared state, start-up, and graceful shutdown.
//!
//! Shutdown order (SIGINT/SIGTERM or [`RunningServer::shutdown`]): stop accepting, let in-flight
//! requests and streams finish for at most `server.shutdown_grace`, then wait (same bound) for the
//! background tasks that post-process finished exchanges.

mod auth;
mod chat;
mod exchange;
mod ops;
mod relay;
mod routes;
mod stream;

use std::collections::HashMap;
use std::future::IntoFuture;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::serve::ListenerExt;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::Config;
use crate::hooks::SharedHook;
use crate::metrics::Metrics;
use crate::upstream::Upstream;

pub use auth::RequestContext;

/// Everything handlers share, built once at start-up.
pub struct AppState {
    pub config: Config,
    pub upstream: Upstream,
    pub metrics: Metrics,
    pub hook: SharedHook,
    /// Background work (post-processing); drained on shutdown.
    pub tasks: TaskTracker,
    /// SHA-256 of each proxy key → tenant. Empty: auth off.
    pub tenant_keys: HashMap<[u8; 32], String>,
}

pub type SharedState = Arc<AppState>;

impl AppState {
    pub fn new(config: Config, hook: SharedHook) -> anyhow::Result<SharedState> {
        Ok(Arc::new(AppState {
            upstream: Upstream::new(&config.upstream)?,
            metrics: Metrics::new()?,
            tenant_keys: config.tenant_keys()?,
            hook,
            tasks: TaskTracker::new(),
            config,
        }))
    }
}

pub fn router(state: SharedState) -> axum::Router {
    routes::router(state)
}

/// A server running in the background of the current runtime.
pub struct RunningServer {
    pub addr: SocketAddr,
    pub state: SharedState,
    stop: CancellationToken,
    serving: JoinHandle<std::io::Result<()>>,
}

/// Binds `config.listen` and starts serving.
pub async fn start(config: Config, hook: SharedHook) -> anyhow::Result<RunningServer> {
    let listener = TcpListener::bind(config.listen)
        .await
        .map_err(|error| anyhow::anyhow!("cannot listen on {}: {error}", config.listen))?;
    start_on(listener, config, hook)
}

/// Serves on an already bound listener (tests bind port 0).
pub fn start_on(
    listener: TcpListener,
    config: Config,
    hook: SharedHook,
) -> anyhow::Result<RunningServer> {
    let addr = listener.local_addr()?;
    let state = AppState::new(config, hook)?;
    let stop = CancellationToken::new();
    let app = router(Arc::clone(&state));
    let serving = tokio::spawn(
        axum::serve(listener.tap_io(no_delay), app)
            .with_graceful_shutdown(stop.clone().cancelled_owned())
            .into_future(),
    );
    tracing::info!(%addr, upstream = state.upstream.base_url(), mode = %state.config.mode, "memproxy listening");
    Ok(RunningServer {
        addr,
        state,
        stop,
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
        drain(&self.state.tasks, grace).await;
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

/// Streams are written event by event: without TCP_NODELAY, Nagle's algorithm holds small writes
/// back until the previous one is acknowledged (~40 ms with delayed ACKs).
pub fn no_delay(stream: &mut tokio::net::TcpStream) {
    if let Err(error) = stream.set_nodelay(true) {
        tracing::debug!(%error, "cannot set TCP_NODELAY");
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
