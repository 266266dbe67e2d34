//! What keeps a web page from using memproxy through the browser of someone who can reach it,
//! and a slow client from holding a request open: checked on every route before anything else.
//!
//! - **Host** (DNS rebinding): a page on `evil.example` can point that name at 127.0.0.1 and read
//!   a local memproxy as its own origin. Such a request carries `Host: evil.example`, so memproxy
//!   answers only under loopback names (`localhost`, `*.localhost`), IP addresses (a rebinding
//!   page cannot make the browser send one) and `server.allowed_hosts`. With proxy keys and no
//!   list, every name is accepted: a page cannot send a key it does not know.
//! - **Origin** (cross-site requests): a page can send a POST to any address without reading the
//!   answer. A request that changes something (any method but GET, HEAD, OPTIONS) from a browser
//!   page of another origin than memproxy's own (`Origin`, or `Sec-Fetch-Site` when a browser sent
//!   no origin) is refused unless the origin is in `server.allowed_origins`.
//!
//! Routes that read a JSON body (every route but the `/v1/*` relay, which streams bodies through
//! under the upstream's timeouts) also get [`json_body`]:
//! - **Content type**: a page can send `text/plain`, form data or multipart without asking the
//!   server first; JSON routes refuse those, so even a browser that sent no origin cannot smuggle
//!   JSON in one of them.
//! - **Body deadline**: the body must arrive whole within `server.body_timeout` and
//!   `server.max_body_bytes`, so a client that trickles it cannot hold a request open.

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, Method};
use axum::middleware::Next;
use axum::response::Response;
use http_body_util::BodyExt;

use crate::config::ServerConfig;
use crate::error::ProxyError;

use super::refusal::refusal;
use super::SharedState;

/// The `Host` and `Origin` checks.
pub async fn guard(State(state): State<SharedState>, request: Request, next: Next) -> Response {
    let keys = !state.tenant_keys.is_empty();
    let checked = check_host(&state.config.server, keys, &request)
        .and_then(|host| check_origin(&state.config.server, host.as_deref(), &request));
    if let Err(error) = checked {
        return refusal(state.surfaces, request.uri().path(), error);
    }
    next.run(request).await
}

/// The request's host and port as sent (`Host`, or HTTP/2's `:authority`), lower-cased.
fn authority(request: &Request) -> Option<String> {
    request
        .uri()
        .authority()
        .map(|authority| authority.as_str().to_owned())
        .or_else(|| {
            let host = request.headers().get(header::HOST)?;
            host.to_str().ok().map(str::to_owned)
        })
        .map(|text| text.trim().to_ascii_lowercase())
}

/// The host part of `host[:port]` or `[v6]:port`.
fn host_of(authority: &str) -> &str {
    if let Some(rest) = authority.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    match authority.rsplit_once(':') {
        Some((host, port)) if port.bytes().all(|b| b.is_ascii_digit()) => host,
        _ => authority,
    }
}

/// Refuses a `Host` that a DNS-rebinding page could have sent; returns the authority for the
/// origin check (absent for an HTTP/1.0 request without `Host`, which no browser sends).
fn check_host(
    config: &ServerConfig,
    keys: bool,
    request: &Request,
) -> Result<Option<String>, ProxyError> {
    let Some(authority) = authority(request) else {
        return Ok(None);
    };
    if keys && config.allowed_hosts.is_empty() {
        return Ok(Some(authority));
    }
    let host = host_of(&authority);
    let host = host.strip_suffix('.').unwrap_or(host);
    let listed = config.allowed_hosts.iter().any(|allowed| {
        let allowed = allowed.to_ascii_lowercase();
        match allowed.strip_prefix('.') {
            Some(parent) => host == parent || host.ends_with(&allowed),
            None => host == allowed,
        }
    });
    let loopback_name = host == "localhost" || host.ends_with(".localhost");
    if listed || loopback_name || host.parse::<std::net::IpAddr>().is_ok() {
        Ok(Some(authority))
    } else {
        Err(ProxyError::HostNotAllowed(host.to_owned()))
    }
}

/// Refuses a state-changing request that a browser sent for a page of another origin.
fn check_origin(
    config: &ServerConfig,
    authority: Option<&str>,
    request: &Request,
) -> Result<(), ProxyError> {
    if matches!(
        *request.method(),
        Method::GET | Method::HEAD | Method::OPTIONS
    ) {
        return Ok(());
    }
    let headers = request.headers();
    let Some(origin) = text(headers, header::ORIGIN.as_str()) else {
        // Browsers send `Origin` with every cross-origin POST; one that did not still says
        // where the request came from in `Sec-Fetch-Site`.
        return match text(headers, "sec-fetch-site").as_deref() {
            Some("cross-site" | "same-site") => {
                Err(ProxyError::OriginNotAllowed("(not sent)".to_owned()))
            }
            _ => Ok(()),
        };
    };
    let origin = origin.trim().trim_end_matches('/').to_ascii_lowercase();
    if same_origin(&origin, authority)
        || config
            .allowed_origins
            .iter()
            .any(|allowed| allowed.trim_end_matches('/').eq_ignore_ascii_case(&origin))
    {
        Ok(())
    } else {
        Err(ProxyError::OriginNotAllowed(origin))
    }
}

fn text(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned)
}

/// Whether `origin` (`scheme://host[:port]`) names the host and port the request was sent to:
/// memproxy's own pages (the console), also behind a reverse proxy that keeps `Host`.
fn same_origin(origin: &str, authority: Option<&str>) -> bool {
    let (Some(authority), Ok(url)) = (authority, reqwest::Url::parse(origin)) else {
        return false;
    };
    let (Some(host), Some(port)) = (url.host_str(), url.port_or_known_default()) else {
        return false;
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let sent_host = host_of(authority);
    let sent_port = authority
        .strip_prefix(&format!("[{sent_host}]"))
        .or_else(|| authority.strip_prefix(sent_host))
        .and_then(|rest| rest.strip_prefix(':'))
        .and_then(|port| port.parse::<u16>().ok())
        .unwrap_or(port);
    host == sent_host && port == sent_port
}

/// Reads the whole body within `server.body_timeout` and `server.max_body_bytes`.
async fn read_body(config: &ServerConfig, request: Request) -> Result<Request, ProxyError> {
    let (parts, body) = request.into_parts();
    let limit = config.max_body_bytes;
    let limited = http_body_util::Limited::new(body, limit);
    let collected = tokio::time::timeout(config.body_timeout, limited.collect())
        .await
        .map_err(|_| ProxyError::BodyTimeout(config.body_timeout))?;
    let bytes = match collected {
        Ok(collected) => collected.to_bytes(),
        Err(error) if error.is::<http_body_util::LengthLimitError>() => {
            return Err(ProxyError::PayloadTooLarge { limit })
        }
        Err(error) => {
            return Err(ProxyError::invalid(
                format!("The request body could not be read: {error}"),
                None,
            ))
        }
    };
    Ok(Request::from_parts(parts, Body::from(bytes)))
}

/// For routes that read a JSON (or JSON Lines) body: a body in another content type, which is
/// what a web page can send without the browser asking first, gets a 415. A body without a
/// content type is read as JSON (browsers always name one; command-line clients may not). Then
/// the body is read whole within its deadline and size limit.
pub async fn json_body(State(state): State<SharedState>, request: Request, next: Next) -> Response {
    let path = request.uri().path().to_owned();
    if let Err(error) = json_content(&request) {
        return refusal(state.surfaces, &path, error);
    }
    match read_body(&state.config.server, request).await {
        Ok(request) => next.run(request).await,
        Err(error) => refusal(state.surfaces, &path, error),
    }
}

fn json_content(request: &Request) -> Result<(), ProxyError> {
    let declared = text(request.headers(), header::CONTENT_TYPE.as_str());
    if let Some(declared) = declared {
        let essence = declared
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase();
        let json = essence == "application/json"
            || (essence.starts_with("application/") && essence.ends_with("+json"))
            || JSON_LINES.contains(&essence.as_str());
        if !json {
            return Err(ProxyError::UnsupportedMediaType(essence));
        }
    }
    Ok(())
}

/// The names JSON Lines goes by (imports, which export writes as `application/x-ndjson`).
const JSON_LINES: &[&str] = &[
    "application/x-ndjson",
    "application/ndjson",
    "application/jsonl",
    "application/x-jsonlines",
    "application/jsonlines",
];

#[cfg(test)]
mod tests {
    use super::*;

    fn request(host: &str, method: Method, origin: Option<&str>) -> Request {
        let mut builder = Request::builder()
            .method(method)
            .uri("/v1/chat/completions")
            .header(header::HOST, host);
        if let Some(origin) = origin {
            builder = builder.header(header::ORIGIN, origin);
        }
        builder.body(Body::empty()).unwrap_or_default()
    }

    #[test]
    fn loopback_names_and_addresses_pass_other_names_do_not() {
        let config = ServerConfig::default();
        for host in [
            "127.0.0.1:8080",
            "localhost:8080",
            "LOCALHOST",
            "app.localhost:1",
            "[::1]:8080",
            "192.168.1.5",
        ] {
            let checked = check_host(&config, false, &request(host, Method::GET, None));
            assert!(checked.is_ok(), "{host}");
        }
        for host in [
            "evil.example:8080",
            "localhost.evil.example",
            "127.0.0.1.nip.io",
        ] {
            let checked = check_host(&config, false, &request(host, Method::GET, None));
            assert!(
                matches!(checked, Err(ProxyError::HostNotAllowed(_))),
                "{host}"
            );
        }
    }

    #[test]
    fn listed_names_pass_and_keys_alone_accept_any_name() {
        let mut config = ServerConfig::default();
        let evil = request("memory.example.com", Method::GET, None);
        assert!(check_host(&config, true, &evil).is_ok());
        config.allowed_hosts = vec![".example.com".to_owned(), "mem.test".to_owned()];
        assert!(check_host(&config, true, &evil).is_ok());
        assert!(check_host(&config, false, &request("mem.test:9", Method::GET, None)).is_ok());
        let other = request("example.org", Method::GET, None);
        assert!(check_host(&config, true, &other).is_err());
    }

    #[test]
    fn a_foreign_origin_may_read_but_not_write() {
        let config = ServerConfig::default();
        let check = |method: Method, origin: &str| {
            let request = request("127.0.0.1:8080", method, Some(origin));
            check_origin(&config, authority(&request).as_deref(), &request)
        };
        assert!(check(Method::GET, "http://evil.example").is_ok());
        assert!(check(Method::POST, "http://evil.example").is_err());
        assert!(check(Method::POST, "null").is_err());
        assert!(check(Method::DELETE, "http://127.0.0.1:9999").is_err());
        assert!(check(Method::POST, "http://127.0.0.1:8080").is_ok());
        let mut config = config;
        config.allowed_origins = vec!["https://chat.example.com".to_owned()];
        let listed = request(
            "127.0.0.1:8080",
            Method::POST,
            Some("https://chat.example.com"),
        );
        assert!(check_origin(&config, authority(&listed).as_deref(), &listed).is_ok());
    }

    #[test]
    fn same_origin_knows_default_ports_and_ipv6() {
        assert!(same_origin("https://mem.example", Some("mem.example:443")));
        assert!(same_origin("https://mem.example", Some("mem.example")));
        assert!(same_origin("http://[::1]:8080", Some("[::1]:8080")));
        assert!(!same_origin("http://mem.example", Some("mem.example:8080")));
        assert!(!same_origin("http://a.example:80", Some("b.example:80")));
    }
}
