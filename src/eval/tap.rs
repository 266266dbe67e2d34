//! A recording relay between memproxy and the upstream during an evaluation: every upstream call
//! is forwarded as is and noted (what kind of work it was, its tokens, its time, and on request
//! the prompt itself), so the accounting is exact and needs nothing from memproxy's internals.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Router;
use serde::Serialize;
use serde_json::Value;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// One upstream call.
#[derive(Clone, Debug, Serialize)]
pub struct Call {
    /// `chat`, `extract`, `reconcile` or `summarize` (memory calls carry a marker), or `rewarm`
    /// (an agent prompt sent again for one token).
    pub kind: String,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// Prompt tokens the upstream served from its prompt cache (`None`: it does not say).
    pub cached_tokens: Option<u64>,
    /// The prompt's length, and how much of it is byte-identical to the start of the previous
    /// chat call's prompt (tools, then messages), both in cl100k tokens: what a prefix cache
    /// could at best reuse, whether or not the upstream has one.
    pub prompt_text_tokens: u64,
    pub shared_prefix_tokens: u64,
    pub ms: f64,
    pub status: u16,
    /// The request body, when capturing (probes: what the model saw).
    #[serde(skip)]
    pub body: Option<String>,
}

#[derive(Default)]
struct Ledger {
    calls: Mutex<Vec<Call>>,
    capture: AtomicBool,
    /// The previous chat call's prompt as text (see [`prompt_text`]).
    last_chat_prompt: Mutex<String>,
}

struct TapState {
    upstream: String,
    client: reqwest::Client,
    ledger: Arc<Ledger>,
}

pub struct Tap {
    pub url: String,
    ledger: Arc<Ledger>,
    stop: CancellationToken,
}

fn locked(ledger: &Ledger) -> MutexGuard<'_, Vec<Call>> {
    ledger
        .calls
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Tap {
    /// Starts on a loopback port in front of `upstream` (a base URL ending in `/v1`).
    pub async fn start(upstream: &str) -> anyhow::Result<Tap> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}/v1", listener.local_addr()?);
        let ledger = Arc::new(Ledger::default());
        let state = Arc::new(TapState {
            upstream: upstream.trim_end_matches('/').to_owned(),
            client: reqwest::Client::builder().build()?,
            ledger: Arc::clone(&ledger),
        });
        let app = Router::new().fallback(forward).with_state(state);
        let stop = CancellationToken::new();
        let shutdown = stop.clone();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(shutdown.cancelled_owned())
                .await;
        });
        Ok(Tap { url, ledger, stop })
    }

    /// Calls noted so far (an index to slice from later).
    pub fn len(&self) -> usize {
        locked(&self.ledger).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Calls noted since `from`.
    pub fn since(&self, from: usize) -> Vec<Call> {
        locked(&self.ledger)
            .get(from..)
            .map(<[Call]>::to_vec)
            .unwrap_or_default()
    }

    /// Keep the prompts of the calls that follow (until turned off).
    pub fn capture(&self, on: bool) {
        self.ledger.capture.store(on, Ordering::SeqCst);
    }
}

impl Drop for Tap {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

const MARKERS: [(&str, &str); 6] = [
    ("MEMPROXY-EXTRACT", "extract"),
    ("MEMPROXY-RECONCILE", "reconcile"),
    ("MEMPROXY-SUMMARIZE", "summarize"),
    ("MEMPROXY-CONSOLIDATE", "consolidate"),
    ("MEMPROXY-CHANGED", "changed"),
    ("MEMPROXY-BOTH-TRUE", "changed"),
];

/// What kind of work a chat call is: memory calls carry a marker in their system prompt, or in
/// their last message when asked inside an agent's prompt (`agent::save_prompt`); an agent's
/// prompt sent again for one token (`agent::warm`) is a re-warm.
fn kind_of(request: &Value) -> &'static str {
    let messages = request["messages"]
        .as_array()
        .map_or(&[][..], Vec::as_slice);
    let marked = |message: Option<&Value>| {
        let text = message
            .and_then(|m| m["content"].as_str())
            .unwrap_or_default();
        MARKERS
            .iter()
            .find(|(marker, _)| text.contains(marker))
            .map(|(_, kind)| *kind)
    };
    let kind = marked(messages.first())
        .or_else(|| marked(messages.last()))
        .unwrap_or("chat");
    if kind == "chat" && request["max_tokens"] == 1 {
        "rewarm"
    } else {
        kind
    }
}

/// Books a chat call whose client went away before its answer.
struct Dropped<'a> {
    state: Option<&'a TapState>,
    started: Instant,
    body: &'a Bytes,
    chat: bool,
}

impl Drop for Dropped<'_> {
    fn drop(&mut self) {
        let Some(state) = self.state.filter(|_| self.chat) else {
            return;
        };
        let request: Value = serde_json::from_slice(self.body).unwrap_or(Value::Null);
        locked(&state.ledger).push(Call {
            kind: kind_of(&request).to_owned(),
            prompt_tokens: 0,
            completion_tokens: 0,
            cached_tokens: None,
            prompt_text_tokens: 0,
            shared_prefix_tokens: 0,
            ms: self.started.elapsed().as_secs_f64() * 1e3,
            status: 499,
            body: None,
        });
    }
}

async fn forward(State(state): State<Arc<TapState>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let Ok(body) = axum::body::to_bytes(body, usize::MAX).await else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let tail = path.strip_prefix("/v1").unwrap_or(path);
    let mut headers = HeaderMap::new();
    for name in ["authorization", "content-type"] {
        if let Some(value) = parts.headers.get(name) {
            headers.insert(name, value.clone());
        }
    }
    let started = Instant::now();
    // A call its client drops (memproxy cancelling background work for a turn) still took the
    // model's time until then: booked, with status 499, when this is dropped unanswered.
    let mut dropped = Dropped {
        state: Some(&state),
        started,
        body: &body,
        chat: path.contains("/chat/completions"),
    };
    let sent = state
        .client
        .request(parts.method.clone(), format!("{}{tail}", state.upstream))
        .headers(headers)
        .body(body.clone())
        .send()
        .await;
    let (status, answer) = match sent {
        Ok(response) => {
            let status = response.status().as_u16();
            (status, response.bytes().await.unwrap_or_default())
        }
        Err(error) => (
            502,
            Bytes::from(format!(
                "{{\"error\":{{\"message\":\"eval tap: {error}\"}}}}"
            )),
        ),
    };
    dropped.state = None;
    let ms = started.elapsed().as_secs_f64() * 1e3;
    if tail.starts_with("/chat/completions") {
        let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let kind = kind_of(&request);
        let completion: Value = serde_json::from_slice(&answer).unwrap_or(Value::Null);
        let usage = &completion["usage"];
        let (prompt_text_tokens, shared_prefix_tokens) = if kind == "chat" || kind == "rewarm" {
            let text = prompt_text(&request);
            let mut last = state
                .ledger
                .last_chat_prompt
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            let shared = shared_prefix(&last, &text);
            let counts = (
                crate::tokens::count(&text) as u64,
                crate::tokens::count(shared) as u64,
            );
            *last = text;
            counts
        } else {
            (0, 0)
        };
        let capture = state.ledger.capture.load(Ordering::SeqCst);
        locked(&state.ledger).push(Call {
            kind: kind.to_owned(),
            prompt_tokens: usage["prompt_tokens"].as_u64().unwrap_or(0),
            completion_tokens: usage["completion_tokens"].as_u64().unwrap_or(0),
            cached_tokens: crate::openai::cached_prompt_tokens(&completion),
            prompt_text_tokens,
            shared_prefix_tokens,
            ms,
            status,
            body: capture.then(|| String::from_utf8_lossy(&body).into_owned()),
        });
    }
    let mut response = Response::new(axum::body::Body::from(answer));
    *response.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY);
    response.headers_mut().insert(
        "content-type",
        axum::http::HeaderValue::from_static("application/json"),
    );
    response
}

/// A chat request's prompt in the order a chat template lays it out: the tools (most templates
/// put them in the system turn), then each message.
fn prompt_text(request: &Value) -> String {
    let mut text = request["tools"].to_string();
    for message in request["messages"].as_array().into_iter().flatten() {
        text.push('\n');
        text.push_str(&message.to_string());
    }
    text
}

/// The longest common start of `before` and `now`, cut at a character boundary of `now`.
fn shared_prefix<'a>(before: &str, now: &'a str) -> &'a str {
    let end = before
        .char_indices()
        .zip(now.chars())
        .find(|((_, a), b)| a != b)
        .map_or(before.len().min(now.len()), |((index, _), _)| index);
    // `before` and `now` agree up to `end`, so it is a boundary of `now` too.
    now.get(..end).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn shared_prefix_stops_at_the_first_difference() {
        assert_eq!(shared_prefix("abcdef", "abcxyz"), "abc");
        assert_eq!(shared_prefix("abc", "abcdef"), "abc");
        assert_eq!(shared_prefix("abcdef", "abc"), "abc");
        assert_eq!(shared_prefix("", "abc"), "");
        assert_eq!(shared_prefix("héllo", "hélp"), "hél");
    }

    #[test]
    fn prompt_text_puts_tools_first() {
        let a = json!({"tools": [{"n": 1}], "messages": [{"role": "system", "content": "s"}]});
        let b = json!({"tools": [{"n": 1}], "messages": [{"role": "system", "content": "s"},
            {"role": "user", "content": "u"}]});
        let (a, b) = (prompt_text(&a), prompt_text(&b));
        assert_eq!(shared_prefix(&a, &b), a.as_str());
        let changed =
            json!({"tools": [{"n": 2}], "messages": [{"role": "system", "content": "s"}]});
        assert!(shared_prefix(&a, &prompt_text(&changed)).len() < 10);
    }
}
