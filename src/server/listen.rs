//! Taking connections: at most `server.max_connections` open (and `max_connections_per_ip` from
//! one address), each with `server.header_timeout` to send a request's headers, so that idle or
//! slow clients cannot use up the process's file descriptors and lock everyone else out. Past a
//! cap a new connection is closed at once, where waiting in the kernel's queue would hang it.
//! Stopping: no new connections, and each open one finishes its requests in flight, then closes
//! (the caller bounds the wait by `server.shutdown_grace` and then drops the rest).

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use crate::config::ServerConfig;

/// The caps and the header deadline of [`serve`].
#[derive(Clone, Debug)]
pub struct ConnectionLimits {
    pub max_connections: usize,
    pub max_connections_per_ip: usize,
    pub header_timeout: Duration,
}

impl ConnectionLimits {
    /// From the config, the total cap lowered to what the open-file limit leaves (after raising
    /// that limit as far as the system allows).
    pub fn of(config: &ServerConfig) -> ConnectionLimits {
        let files = raise_open_file_limit();
        let mut max_connections = config.max_connections;
        if let Some(files) = files {
            // The database, indexes, upstream connections and log files need descriptors too.
            let room =
                usize::try_from(files.saturating_sub(RESERVED_FILES).max(16)).unwrap_or(usize::MAX);
            if room < max_connections {
                tracing::warn!(
                    configured = max_connections,
                    open_file_limit = files,
                    "server.max_connections lowered to {room}: the open-file limit leaves no more"
                );
                max_connections = room;
            }
        }
        ConnectionLimits {
            max_connections,
            max_connections_per_ip: config.max_connections_per_ip,
            header_timeout: config.header_timeout,
        }
    }
}

/// Descriptors kept for everything but client connections.
const RESERVED_FILES: u64 = 256;

/// Raises the soft open-file limit to the hard one (as Go's runtime does at start): the default
/// soft limit of 1,024 is a few hundred idle clients away. Returns the limit now in force.
fn raise_open_file_limit() -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit only read and write the struct passed.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return None;
        }
        if limit.rlim_cur < limit.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: limit.rlim_max,
                rlim_max: limit.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                limit = raised;
            }
        }
    }
    if limit.rlim_cur == libc::RLIM_INFINITY {
        return None;
    }
    Some(limit.rlim_cur)
}

/// Open connections, in all and per client address.
#[derive(Default)]
struct Open {
    counts: Mutex<(usize, HashMap<IpAddr, usize>)>,
}

/// One admitted connection; gives its place back when dropped.
struct Slot {
    open: Arc<Open>,
    ip: IpAddr,
}

impl Open {
    fn admit(self: &Arc<Self>, ip: IpAddr, limits: &ConnectionLimits) -> Option<Slot> {
        let mut counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        let (total, per_ip) = &mut *counts;
        let from_ip = per_ip.get(&ip).copied().unwrap_or(0);
        let per_ip_full =
            limits.max_connections_per_ip > 0 && from_ip >= limits.max_connections_per_ip;
        if *total >= limits.max_connections || per_ip_full {
            return None;
        }
        *total += 1;
        per_ip.insert(ip, from_ip + 1);
        Some(Slot {
            open: Arc::clone(self),
            ip,
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut counts = self.open.counts.lock().unwrap_or_else(|p| p.into_inner());
        let (total, per_ip) = &mut *counts;
        *total = total.saturating_sub(1);
        if let Some(count) = per_ip.get_mut(&self.ip) {
            *count -= 1;
            if *count == 0 {
                per_ip.remove(&self.ip);
            }
        }
    }
}

/// HTTP/2's connection preface; any other first bytes are HTTP/1.
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Whether the client's first bytes, enough to tell HTTP/1 from HTTP/2, arrive within `limit`.
async fn protocol_known(stream: &tokio::net::TcpStream, limit: Duration) -> bool {
    let wait = async {
        let mut first = [0u8; 24];
        loop {
            match stream.peek(&mut first).await {
                Ok(0) | Err(_) => return false,
                Ok(n) if n >= H2_PREFACE.len() || first[..n] != H2_PREFACE[..n] => return true,
                // A beginning of the HTTP/2 preface: wait for the rest of it.
                Ok(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            }
        }
    };
    tokio::time::timeout(limit, wait).await.unwrap_or(false)
}

/// Serves `app` on `listener` until `stop`, then lets open connections finish their requests.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ConnectionLimits,
    stop: CancellationToken,
    refused: impl Fn() + Send + Sync + 'static,
) -> std::io::Result<()> {
    let open = Arc::new(Open::default());
    let mut connections = JoinSet::new();
    loop {
        while connections.try_join_next().is_some() {}
        let (stream, peer): (_, SocketAddr) = tokio::select! {
            _ = stop.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of descriptors (or a connection reset before it was taken): wait a
                    // moment instead of spinning on the same error.
                    tracing::warn!(%error, "cannot accept a connection");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let Some(slot) = open.admit(peer.ip(), &limits) else {
            refused();
            tracing::debug!(%peer, "connection refused: server.max_connections or max_connections_per_ip reached");
            drop(stream);
            continue;
        };
        no_delay_on(&stream);
        let service = TowerToHyperService::new(
            app.clone()
                .map_request(|request: Request<Incoming>| request.map(Body::new)),
        );
        let stop = stop.clone();
        let header_timeout = limits.header_timeout;
        connections.spawn(async move {
            // hyper's header deadline starts once it knows the protocol; until the first bytes
            // say which, the wait is bounded here.
            let known = tokio::select! {
                known = protocol_known(&stream, header_timeout) => known,
                _ = stop.cancelled() => false,
            };
            if !known {
                tracing::trace!(%peer, "connection closed: nothing sent within server.header_timeout");
                return;
            }
            let mut builder = Builder::new(TokioExecutor::new());
            builder
                .http1()
                .timer(TokioTimer::new())
                .header_read_timeout(header_timeout);
            builder.http2().timer(TokioTimer::new());
            let connection = builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
            tokio::pin!(connection);
            let mut stopping = false;
            loop {
                tokio::select! {
                    result = connection.as_mut() => {
                        if let Err(error) = result {
                            tracing::trace!(%peer, %error, "connection ended with an error");
                        }
                        break;
                    }
                    _ = stop.cancelled(), if !stopping => {
                        stopping = true;
                        connection.as_mut().graceful_shutdown();
                    }
                }
            }
            drop(slot);
        });
    }
    drop(listener);
    while connections.join_next().await.is_some() {}
    Ok(())
}

/// Streams are written event by event: without TCP_NODELAY, Nagle's algorithm holds small writes
/// back until the previous one is acknowledged (~40 ms with delayed ACKs).
pub fn no_delay(stream: &mut tokio::net::TcpStream) {
    no_delay_on(stream);
}

fn no_delay_on(stream: &tokio::net::TcpStream) {
    if let Err(error) = stream.set_nodelay(true) {
        tracing::debug!(%error, "cannot set TCP_NODELAY");
    }
}
