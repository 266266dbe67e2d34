//! The "cold long chat" case of `memproxy bench implicit`: an existing chat of many exchanges
//! pointed at memproxy for the first time. Its first request stores the whole backlog; only the
//! newest turns are embedded on the request path, the rest in the background, so the first
//! request is already compacted and carries memory, and no request waits for the backlog.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::quantile_ms;
use super::retrieval::{sentence, Rng};
use crate::store::Corpus;

/// Requests of each cold chat sent at once (the first is the cold one); one more is sent after
/// the background embedder has caught up.
const FOLLOW_UPS: usize = 4;

pub struct ColdChat<'a> {
    pub client: &'a reqwest::Client,
    pub proxy_url: &'a str,
    pub memory: &'a crate::memory::MemoryService,
    pub exchanges: usize,
    pub chats: usize,
}

impl ColdChat<'_> {
    pub async fn run(&self, rng: &mut Rng) -> anyhow::Result<()> {
        // Per request index: overhead ms, tokens before, tokens after, memories.
        let mut rows: Vec<Vec<(f64, f64, f64, f64)>> = vec![Vec::new(); FOLLOW_UPS + 1];
        let mut backlog = Vec::new();
        for chat in 0..self.chats {
            let user = format!("cold-{chat}");
            let mut messages =
                vec![json!({"role": "system", "content": "You are a helpful assistant."})];
            for _ in 0..self.exchanges {
                messages.push(json!({"role": "user", "content": sentence(rng)}));
                messages.push(json!({"role": "assistant", "content": sentence(rng)}));
            }
            let started = Instant::now();
            for (n, row) in rows.iter_mut().enumerate() {
                if n == FOLLOW_UPS {
                    backlog.push(self.wait_for_backlog(started).await?);
                }
                messages.push(json!({"role": "user", "content": format!("{} What did I say about that?", sentence(rng))}));
                let response = self
                    .client
                    .post(self.proxy_url)
                    .header("x-memproxy-user", &user)
                    .json(&json!({"model": "mock-model", "messages": messages}))
                    .send()
                    .await?;
                anyhow::ensure!(
                    response.headers().get("x-memproxy-degraded").is_none(),
                    "request {} of a cold chat was degraded (pre-processor timeout)",
                    n + 1
                );
                let header = |name: &str| super::header_number(&response, name);
                row.push((
                    header("x-memproxy-overhead-ms"),
                    header("x-memproxy-prompt-tokens-before"),
                    header("x-memproxy-prompt-tokens-after"),
                    header("x-memproxy-memories"),
                ));
                let body: Value = response.json().await?;
                let reply = body["choices"][0]["message"]["content"].clone();
                messages.push(json!({"role": "assistant", "content": reply}));
            }
        }
        println!();
        println!(
            "cold long chat: {} chats of {} exchanges ({} messages) sent to implicit mode for the first time",
            self.chats,
            self.exchanges,
            2 * self.exchanges + 2
        );
        println!("request  overhead p50 / max    prompt tokens before -> after   memories");
        for (n, row) in rows.iter().enumerate() {
            let mut overhead: Vec<Duration> = row
                .iter()
                .map(|r| Duration::from_secs_f64(r.0 / 1e3))
                .collect();
            overhead.sort_unstable();
            let mean = |f: fn(&(f64, f64, f64, f64)) -> f64| {
                row.iter().map(f).sum::<f64>() / row.len().max(1) as f64
            };
            let label = if n == FOLLOW_UPS {
                format!("{} (after the backlog)", n + 1)
            } else {
                (n + 1).to_string()
            };
            println!(
                "{label:>7}  {:>8.1} / {:>6.1} ms   {:>8.0} -> {:>6.0}              {:>4.1}",
                quantile_ms(&overhead, 0.5),
                quantile_ms(&overhead, 1.0),
                mean(|r| r.1),
                mean(|r| r.2),
                mean(|r| r.3),
            );
        }
        backlog.sort_unstable();
        println!(
            "backlog embedded in the background within {:.1} s of the first request (median)",
            quantile_ms(&backlog, 0.5) / 1e3
        );
        Ok(())
    }

    /// Waits until the background embedder has embedded every stored turn; returns when.
    async fn wait_for_backlog(&self, started: Instant) -> anyhow::Result<Duration> {
        let model = self.memory.embedder().model_id().to_owned();
        loop {
            let wanted = model.clone();
            let left = self
                .memory
                .blocking(move |store, _| {
                    Ok(store.rows_to_embed(Corpus::Message, &wanted, 1)?.len())
                })
                .await?;
            if left == 0 || started.elapsed() > Duration::from_secs(300) {
                return Ok(started.elapsed());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}
