//! How the eval talks to what it measures: the in-process proxy under test (one chat request,
//! timed, with the LLM calls it set off), the wait for its background work to finish between
//! sessions, and the judge model, asked directly.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::pair::{PairResult, RunArgs};
use super::score;
use super::tap::{Call, Tap};
use crate::config::Secret;
use crate::mode::Mode;

/// The user every replay speaks as (each pair has a fresh store).
pub(super) const EVAL_USER: &str = "eval";

pub(super) fn upstream_key() -> Option<Secret> {
    std::env::var("MEMPROXY_UPSTREAM_API_KEY")
        .or_else(|_| std::env::var("OPENAI_API_KEY"))
        .ok()
        .filter(|k| !k.trim().is_empty())
        .map(Secret::new)
}

/// Waits until what the last exchanges set off is done (their hooks, which queue extraction, and
/// agents' background saves) and the post-processing queue is empty: the next session must find
/// what it learned.
pub(super) async fn drain(server: &crate::server::RunningServer) -> anyhow::Result<()> {
    for _ in 0..36_000 {
        if !server.state.after_exchange.is_empty() {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        }
        let pending = server
            .state
            .memory
            .blocking(|store, _| {
                let page = crate::store::Page::default();
                Ok(store.list_jobs(Some("queued"), page)?.len()
                    + store.list_jobs(Some("running"), page)?.len())
            })
            .await?;
        if pending == 0 {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    anyhow::bail!("post-processing did not finish within an hour")
}

pub(super) struct Client<'a> {
    pub(super) http: reqwest::Client,
    pub(super) base: String,
    pub(super) args: &'a RunArgs,
    pub(super) tap: &'a Tap,
    pub(super) mode: Mode,
}

pub(super) struct Answer {
    pub(super) text: String,
    pub(super) calls: Vec<Call>,
    pub(super) total_ms: f64,
}

impl Client<'_> {
    pub(super) async fn send(
        &self,
        conversation: &str,
        time_ms: Option<i64>,
        messages: Vec<Value>,
        record: bool,
        max_tokens: u64,
    ) -> anyhow::Result<Answer> {
        let mut body = json!({"messages": messages, "temperature": 0, "max_tokens": max_tokens});
        if let Some(model) = &self.args.model {
            body["model"] = json!(model);
        }
        let mut request = self
            .http
            .post(format!("{}/v1/chat/completions", self.base))
            .header("x-memproxy-user", EVAL_USER)
            .header("x-memproxy-conversation", conversation)
            .header("x-memproxy-record", if record { "true" } else { "false" })
            // The server's mode but in the probes of a mode switch.
            .header("x-memproxy-mode", self.mode.as_str())
            .json(&body);
        if let Some(time) = time_ms {
            request = request.header("x-memproxy-time", time.to_string());
        }
        let before = self.tap.len();
        let started = Instant::now();
        let response = request.send().await?;
        let status = response.status();
        let reply: Value = response.json().await.unwrap_or(Value::Null);
        let total_ms = started.elapsed().as_secs_f64() * 1e3;
        if !status.is_success() {
            anyhow::bail!(
                "{} answered {status}: {}",
                self.mode,
                reply["error"]["message"]
            );
        }
        Ok(Answer {
            text: reply["choices"][0]["message"]["content"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            calls: self.tap.since(before),
            total_ms,
        })
    }
}

/// Memproxy's own time for one request: the client's total minus the LLM calls it waited for
/// (implicit mode's memory calls run after the answer, off the request path).
pub(super) fn book(pair: &mut PairResult, mode: Mode, answer: &Answer) {
    let waited: f64 = answer
        .calls
        .iter()
        .filter(|call| call.kind == "chat" || mode == Mode::Explicit)
        .map(|call| call.ms)
        .sum();
    pair.overhead_ms.push((answer.total_ms - waited).max(0.0));
    pair.total_ms.push(answer.total_ms);
}

/// Asks the judge model directly, at `--judge-upstream` or else `--upstream` (not through
/// memproxy; not counted as the strategy's work).
pub(super) async fn judge(
    args: &RunArgs,
    model: &str,
    question: &str,
    gold: &str,
    answer: &str,
) -> Option<bool> {
    let body = json!({"model": model, "temperature": 0, "max_tokens": 8, "messages": [
        {"role": "system", "content": score::JUDGE_PROMPT},
        {"role": "user", "content": score::judge_material(question, gold, answer)},
    ]});
    let mut request = reqwest::Client::new()
        .post(format!(
            "{}/chat/completions",
            args.judge_upstream
                .as_deref()
                .unwrap_or(&args.upstream)
                .trim_end_matches('/')
        ))
        .json(&body);
    if let Some(key) = upstream_key() {
        request = request.bearer_auth(key.expose());
    }
    let reply: Value = request.send().await.ok()?.json().await.ok()?;
    score::judge_verdict(reply["choices"][0]["message"]["content"].as_str()?)
}
