//! The HTTP client for the upstream LLM: URL mapping, header hygiene, keys and timeouts.
//!
//! One pooled `reqwest` client serves every request. Header filtering lives here so that the rules
//! about what crosses the proxy (hop-by-hop headers, memproxy's own headers, and above all which
//! `Authorization` the upstream sees) are written once for chat and for the generic relay.

use std::error::Error as _;
use std::time::Duration;

use axum::http::{header, HeaderMap, HeaderName, HeaderValue, Method};

pub use crate::config::upstream::{ApiUpstream, AuthHeader};
use crate::config::{Secret, UpstreamConfig};
use crate::error::ProxyError;

pub struct Upstream {
    client: reqwest::Client,
    /// Base URL without a trailing slash, e.g. `http://127.0.0.1:11434/v1`.
    base: String,
    api_key: Option<Secret>,
    /// The header that carries `api_key`.
    auth_header: AuthHeader,
    pub config: UpstreamConfig,
}

/// Headers that describe one connection, not the message (RFC 9110 §7.6.1), plus those the
/// proxy recomputes itself.
const HOP_BY_HOP: [&str; 10] = [
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "content-length",
];

impl Upstream {
    pub fn new(config: &UpstreamConfig) -> Result<Upstream, ProxyError> {
        let client = reqwest::Client::builder()
            .connect_timeout(config.connect_timeout)
            .tcp_nodelay(true)
            .pool_idle_timeout(Duration::from_secs(90))
            .build()
            .map_err(|error| ProxyError::Internal(format!("HTTP client: {error}")))?;
        Ok(Upstream {
            client,
            base: config.url.trim_end_matches('/').to_owned(),
            api_key: config.api_key.clone(),
            auth_header: AuthHeader::Authorization,
            config: config.clone(),
        })
    }

    /// The upstream of one other API (`api`), with the timeouts of `config`; its key goes in
    /// `api.auth_header`, else in `usual`.
    pub fn for_api(
        config: &UpstreamConfig,
        api: &ApiUpstream,
        usual: AuthHeader,
    ) -> Result<Upstream, ProxyError> {
        let mut upstream = Upstream::new(config)?;
        upstream.base = api.url.trim_end_matches('/').to_owned();
        upstream.api_key = api.api_key.clone();
        upstream.auth_header = api.auth_header.unwrap_or(usual);
        Ok(upstream)
    }

    /// Puts the credentials this upstream gets into `headers` (already filtered by
    /// [`request_headers`], so without the client's `authorization`): the configured key in its
    /// header, replacing any client `x-api-key`; else, only when proxy auth is off, the client's
    /// own `authorization` and `x-api-key` (with auth on, the client's key was memproxy's and is
    /// gone already).
    pub fn put_credentials(
        &self,
        headers: &mut HeaderMap,
        client_authorization: Option<&HeaderValue>,
        proxy_auth_enabled: bool,
    ) {
        const API_KEY: HeaderName = HeaderName::from_static("x-api-key");
        if let Some(key) = &self.api_key {
            headers.remove(header::AUTHORIZATION);
            headers.remove(API_KEY);
            let (name, text) = match self.auth_header {
                AuthHeader::Authorization => {
                    (header::AUTHORIZATION, format!("Bearer {}", key.expose()))
                }
                AuthHeader::XApiKey => (API_KEY, key.expose().to_owned()),
            };
            if let Ok(mut value) = HeaderValue::from_str(&text) {
                value.set_sensitive(true);
                headers.insert(name, value);
            }
            return;
        }
        if proxy_auth_enabled {
            headers.remove(API_KEY);
            return;
        }
        if let Some(value) = client_authorization {
            headers.insert(header::AUTHORIZATION, value.clone());
        }
    }

    pub fn base_url(&self) -> &str {
        &self.base
    }

    /// GET `path` at the base URL's origin (its scheme, host and port): a server's own routes
    /// beside the API it serves (llama.cpp's `/props`), bounded by the first-byte timeout.
    pub async fn get_at_origin(
        &self,
        path: &str,
        headers: HeaderMap,
    ) -> Result<reqwest::Response, ProxyError> {
        let url = reqwest::Url::parse(&self.base)
            .and_then(|base| base.join(path))
            .map_err(|error| ProxyError::Internal(format!("upstream URL: {error}")))?;
        self.headers_of(self.client.get(url).headers(headers)).await
    }

    /// The base URL as it may be shown (no credentials), and `text` with it in place of the real one.
    pub fn shown(&self, text: &str) -> String {
        text.replace(&self.base, &crate::secret::shown_url(&self.base))
    }

    /// The `Authorization` the upstream gets: the configured upstream key; else, only when proxy
    /// auth is off, the client's own header (so users can keep their key in the chat app).
    /// A proxy key is never passed on.
    pub fn authorization(
        &self,
        client_authorization: Option<&HeaderValue>,
        proxy_auth_enabled: bool,
    ) -> Option<HeaderValue> {
        if let Some(key) = &self.api_key {
            let mut value = HeaderValue::from_str(&format!("Bearer {}", key.expose())).ok()?;
            value.set_sensitive(true);
            return Some(value);
        }
        if proxy_auth_enabled {
            return None;
        }
        client_authorization.cloned()
    }

    /// Sends one request to `{base}{path_and_query}` (`path_and_query` is what follows `/v1`) and
    /// waits for the response headers, at most `first_byte_timeout`.
    pub async fn send(
        &self,
        method: Method,
        path_and_query: &str,
        headers: HeaderMap,
        body: reqwest::Body,
    ) -> Result<reqwest::Response, ProxyError> {
        let url = format!("{}{}", self.base, path_and_query);
        let request = self
            .client
            .request(method, &url)
            .headers(headers)
            .body(body);
        self.headers_of(request).await
    }

    /// Sends `request` and waits for the response headers, at most `first_byte_timeout`.
    async fn headers_of(
        &self,
        request: reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, ProxyError> {
        match tokio::time::timeout(self.config.first_byte_timeout, request.send()).await {
            Err(_) => Err(ProxyError::UpstreamTimeout(self.config.first_byte_timeout)),
            Ok(Err(error)) => Err(self.classify(error)),
            Ok(Ok(response)) => Ok(response),
        }
    }

    /// Reads a whole (non-streamed) body: cut with a 504 when no byte comes for `idle_timeout`
    /// or the body is still arriving at `deadline`, with a 502 when the connection breaks.
    /// Without the idle cut, an upstream that sent its headers and then went silent would hold a
    /// client that did not ask for a stream until the total timeout (30 minutes by default).
    pub async fn whole_body(
        &self,
        response: reqwest::Response,
        deadline: tokio::time::Instant,
    ) -> Result<bytes::Bytes, ProxyError> {
        use futures_util::StreamExt;
        let mut body = Box::pin(response.bytes_stream());
        let mut out = bytes::BytesMut::new();
        loop {
            let idle = tokio::time::Instant::now() + self.config.idle_timeout;
            let until = deadline.min(idle);
            match tokio::time::timeout_at(until, body.next()).await {
                Ok(Some(Ok(chunk))) => out.extend_from_slice(&chunk),
                Ok(Some(Err(error))) => return Err(ProxyError::UpstreamBroken(error.to_string())),
                Ok(None) => return Ok(out.freeze()),
                Err(_) if until == deadline => {
                    return Err(ProxyError::UpstreamTimeout(self.config.total_timeout))
                }
                Err(_) => return Err(ProxyError::UpstreamTimeout(self.config.idle_timeout)),
            }
        }
    }

    /// Maps a client error to the proxy's catalogue: connect failures are 502, timeouts 504.
    pub fn classify(&self, error: reqwest::Error) -> ProxyError {
        if error.is_timeout() {
            return ProxyError::UpstreamTimeout(self.config.connect_timeout);
        }
        // The message names the upstream by its shown URL (no credentials, no query); the
        // client's error would repeat the whole request URL, query string included.
        let error = error.without_url();
        let mut reason = error.to_string();
        let mut source = error.source();
        while let Some(cause) = source {
            reason = format!("{reason}: {cause}");
            source = cause.source();
        }
        if error.is_connect() || error.is_request() {
            ProxyError::UpstreamUnreachable {
                url: crate::secret::shown_url(&self.base),
                reason,
            }
        } else {
            ProxyError::UpstreamBroken(reason)
        }
    }

    /// Whether the upstream answers at all (any HTTP status counts: a 401 still proves it is up).
    pub async fn probe(&self) -> Result<u16, ProxyError> {
        let request = self.client.get(format!("{}/models", self.base));
        let request = match self.authorization(None, true) {
            Some(value) => request.header(header::AUTHORIZATION, value),
            None => request,
        };
        match tokio::time::timeout(Duration::from_secs(3), request.send()).await {
            Err(_) => Err(ProxyError::UpstreamTimeout(Duration::from_secs(3))),
            Ok(Err(error)) => Err(self.classify(error)),
            Ok(Ok(response)) => Ok(response.status().as_u16()),
        }
    }
}

/// Client headers to pass upstream: everything but hop-by-hop headers, `host`, memproxy's own
/// `x-memproxy-*` headers and the client's `authorization` (replaced by `authorization`).
/// `keep_encoding = false` drops `accept-encoding` where memproxy must read the body.
pub fn request_headers(
    incoming: &HeaderMap,
    authorization: Option<HeaderValue>,
    keep_encoding: bool,
) -> HeaderMap {
    let mut headers = HeaderMap::with_capacity(incoming.len());
    for (name, value) in incoming {
        let dropped = HOP_BY_HOP.contains(&name.as_str())
            || name == header::HOST
            || name == header::AUTHORIZATION
            || name.as_str().starts_with("x-memproxy-")
            || (!keep_encoding && name == header::ACCEPT_ENCODING);
        if !dropped {
            headers.append(name.clone(), value.clone());
        }
    }
    if let Some(value) = authorization {
        headers.insert(header::AUTHORIZATION, value);
    }
    headers
}

/// Upstream response headers to relay. The upstream's `x-request-id` becomes
/// `x-upstream-request-id`: memproxy's own request id owns the plain name.
pub fn response_headers(upstream: &HeaderMap) -> HeaderMap {
    let mut headers = HeaderMap::with_capacity(upstream.len());
    for (name, value) in upstream {
        if HOP_BY_HOP.contains(&name.as_str()) {
            continue;
        }
        if name == "x-request-id" {
            headers.append(
                HeaderName::from_static("x-upstream-request-id"),
                value.clone(),
            );
        } else {
            headers.append(name.clone(), value.clone());
        }
    }
    headers
}

#[cfg(test)]
mod tests {
    use super::*;

    fn upstream(key: Option<&str>) -> Upstream {
        let config = UpstreamConfig {
            api_key: key.map(Secret::new),
            ..UpstreamConfig::default()
        };
        Upstream::new(&config).expect("client")
    }

    #[test]
    fn proxy_keys_never_pass_and_client_keys_only_without_auth() {
        let client = HeaderValue::from_static("Bearer sk-client");
        let with_key = upstream(Some("sk-up"));
        assert_eq!(
            with_key
                .authorization(Some(&client), true)
                .as_ref()
                .map(|v| v.to_str().ok()),
            Some(Some("Bearer sk-up"))
        );
        let without_key = upstream(None);
        assert_eq!(
            without_key.authorization(Some(&client), false),
            Some(client.clone())
        );
        assert_eq!(without_key.authorization(Some(&client), true), None);
    }

    #[test]
    fn filters_headers_both_ways() {
        let mut incoming = HeaderMap::new();
        incoming.insert(
            "authorization",
            HeaderValue::from_static("Bearer proxy-key"),
        );
        incoming.insert("connection", HeaderValue::from_static("keep-alive"));
        incoming.insert("x-memproxy-user", HeaderValue::from_static("alice"));
        incoming.insert("accept-encoding", HeaderValue::from_static("gzip"));
        incoming.insert("openai-organization", HeaderValue::from_static("org-1"));
        let out = request_headers(&incoming, None, false);
        let names: Vec<_> = out.keys().map(|k| k.as_str()).collect();
        assert_eq!(names, ["openai-organization"]);

        let mut answer = HeaderMap::new();
        answer.insert("x-request-id", HeaderValue::from_static("up-1"));
        answer.insert("retry-after", HeaderValue::from_static("3"));
        answer.insert("transfer-encoding", HeaderValue::from_static("chunked"));
        let out = response_headers(&answer);
        assert_eq!(
            out.get("x-upstream-request-id").map(|v| v.as_bytes()),
            Some(&b"up-1"[..])
        );
        assert!(out.get("retry-after").is_some() && out.get("transfer-encoding").is_none());
    }
}
