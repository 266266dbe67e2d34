//! `[server]`: how memproxy takes connections and requests from clients: body size, the time a
//! client has to send a request, how many connections it may hold, and which `Host` and `Origin`
//! a browser may reach it under (see `server::guard` and `server::listen`).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{invalid, ConfigError};

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// Largest accepted request body (every route, MCP's included).
    pub max_body_bytes: usize,
    /// How long shutdown waits for in-flight requests and background work.
    #[serde(with = "humantime_serde")]
    pub shutdown_grace: Duration,
    /// How long a connection may take to send a request's headers: counted from the connection's
    /// opening and again from the end of each response, so it is also how long an idle keep-alive
    /// connection stays open.
    #[serde(with = "humantime_serde")]
    pub header_timeout: Duration,
    /// How long a client may take to send a whole request body once its headers are in.
    #[serde(with = "humantime_serde")]
    pub body_timeout: Duration,
    /// Open client connections at most; past it a new connection is closed at once. Lowered at
    /// start-up to what the process's open-file limit allows.
    pub max_connections: usize,
    /// Open connections from one client address at most (0: no per-address cap). Behind a
    /// reverse proxy every client has the proxy's address: raise it or set 0 there.
    pub max_connections_per_ip: usize,
    /// `Host` names accepted besides loopback names and IP addresses: the names a reverse proxy
    /// or a DNS name reaches memproxy under (`memory.example.com`, or `.example.com` for every
    /// subdomain). Without proxy keys only these are accepted (DNS rebinding); with keys, an
    /// empty list accepts every name and a non-empty one is enforced.
    pub allowed_hosts: Vec<String>,
    /// Web origins (`https://chat.example.com`) allowed to send state-changing requests besides
    /// memproxy's own (its console). Other origins get a 403: a web page cannot write memory or
    /// chat through a browser that can reach memproxy.
    pub allowed_origins: Vec<String>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            max_body_bytes: 16 * 1024 * 1024,
            shutdown_grace: Duration::from_secs(30),
            header_timeout: Duration::from_secs(30),
            body_timeout: Duration::from_secs(60),
            max_connections: 10_000,
            max_connections_per_ip: 1_000,
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
        }
    }
}

impl ServerConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.max_body_bytes < 1024 {
            return Err(invalid("server.max_body_bytes", "must be at least 1024"));
        }
        for (key, value) in [
            ("server.header_timeout", self.header_timeout),
            ("server.body_timeout", self.body_timeout),
        ] {
            if value.is_zero() {
                return Err(invalid(key, "must be greater than zero"));
            }
        }
        if self.max_connections == 0 {
            return Err(invalid("server.max_connections", "must be at least 1"));
        }
        for host in &self.allowed_hosts {
            let name = host.strip_prefix('.').unwrap_or(host);
            if name.is_empty() || name.contains([':', '/', ' ', '*']) {
                return Err(invalid(
                    "server.allowed_hosts",
                    format!("'{host}' is not a host name (no port, scheme or '*'; '.example.com' for subdomains)"),
                ));
            }
        }
        for origin in &self.allowed_origins {
            let parsed = reqwest::Url::parse(origin).ok();
            let bare = parsed.as_ref().is_some_and(|url| {
                url.host_str().is_some() && matches!(url.path(), "" | "/") && url.query().is_none()
            });
            if !bare {
                return Err(invalid(
                    "server.allowed_origins",
                    format!("'{origin}' is not an origin such as 'https://chat.example.com'"),
                ));
            }
        }
        Ok(())
    }
}

/// A comma-separated list from the environment, empty items left out.
pub fn list(text: &str) -> Vec<String> {
    text.split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .map(str::to_owned)
        .collect()
}
