//! Putting the agent's prompt back in a local upstream's prompt cache after a turn. A one-slot
//! local server (llama.cpp with one slot, `../shared/tools/real-llm`) keeps the KV cache of the
//! last prompt it processed only. When a turn ends with the plain reply (a short prompt of its
//! own, no tools), or a background save asked the same server, the agent's ~1,400-token prompt is
//! gone, and the next turn processes it from scratch: several times as long as a turn whose prompt
//! is cached on a local server (figures: docs/eval-history.md). After any other turn the turn's
//! messages join the queue, before core memory: the next turn would process them and core memory
//! again at their new place. Re-warming sends the agent's
//! context as the next turn will start it (system message, tools, summary, the queue with this
//! turn in it, core memory) with `max_tokens: 1`, off the request path, after any background
//! save. The next turn then reuses all of it but its recall and its own new messages. One prompt-only request;
//! `explicit.rewarm_cache` decides when (`auto`: only for an upstream on this machine or a
//! private network, where nobody bills the input tokens, and only one that keeps a single prompt
//! cache: [`super::caches`]).

use std::net::IpAddr;
use std::time::Instant;

use super::Rewarm;
use serde_json::json;

use super::model::ChatModel;
use super::step::{Offer, Progress};
use super::turn_types::{Ending, TurnInput, TurnOutcome};
use super::Agents;

/// Whether `url`'s host is this machine or a private network address.
pub fn is_local(url: &str) -> bool {
    let host = url
        .split("://")
        .nth(1)
        .unwrap_or(url)
        .split(['/', '?'])
        .next()
        .unwrap_or_default();
    let host = host.rsplit('@').next().unwrap_or(host);
    let host = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => host.split(':').next().unwrap_or_default(),
    };
    if host.eq_ignore_ascii_case("localhost") || host.ends_with(".local") {
        return true;
    }
    match host.parse::<IpAddr>() {
        Ok(IpAddr::V4(ip)) => ip.is_loopback() || ip.is_private() || ip.is_link_local(),
        Ok(IpAddr::V6(ip)) => ip.is_loopback() || (ip.segments()[0] & 0xfe00) == 0xfc00,
        Err(_) => false,
    }
}

impl Agents {
    /// Whether the agent's prompt is sent again after this turn: the turn was recorded, and it
    /// answered (its messages now sit before core memory, where the server has not processed
    /// them; after the plain reply the server holds a short prompt of its own), or the server's
    /// cache no longer holds the prompt (`cache_lost`: a background save asked the same server,
    /// or eviction after the turn changed the prompt's start).
    pub fn needs_rewarm(
        &self,
        input: &TurnInput,
        outcome: &TurnOutcome,
        one_local_cache: bool,
        cache_lost: bool,
    ) -> bool {
        let wanted = self.rewarms_on(one_local_cache);
        // A paused turn (the client's tools) comes back with their results, not a new turn.
        let replied = matches!(outcome.ending, Ending::Reply { .. });
        wanted && input.record && (replied || cache_lost)
    }

    /// Whether the agent's prompt is kept in the chat upstream's prompt cache
    /// (`explicit.rewarm_cache`); `auto` where the upstream is local with one cache
    /// ([`Agents::one_local_cache`]).
    pub fn rewarms_on(&self, one_local_cache: bool) -> bool {
        match self.config.rewarm_cache {
            Rewarm::Always => true,
            Rewarm::Never => false,
            Rewarm::Auto => one_local_cache,
        }
    }

    /// Whether the chat upstream of `model` is on this machine or a private network and keeps
    /// one prompt cache, or does not say how many ([`super::caches`]): where the `auto` measures
    /// for a one-cache server apply. Asked of each upstream once.
    pub async fn one_local_cache(&self, model: &super::model::UpstreamModel) -> bool {
        let url = model.upstream.base_url();
        if !is_local(url) {
            return false;
        }
        let caches_of = || {
            self.caches
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
        };
        let known = caches_of().get(url).copied();
        let caches = match known {
            Some(caches) => caches,
            None => {
                let caches = super::caches::probe(model).await;
                tracing::info!(?caches, "the chat upstream's prompt caches");
                caches_of().insert(url.to_owned(), caches);
                caches
            }
        };
        !caches.several()
    }

    /// Whether the memory LLM (the background save's) is the chat upstream at `upstream_url`.
    pub fn memory_llm_on(&self, upstream_url: &str) -> bool {
        self.summarizer
            .url()
            .starts_with(upstream_url.trim_end_matches('/'))
    }

    /// The request of the agent's context as the next turn will open it (no new messages, not
    /// streamed, no length of its own): what a re-warm sends, and what the save inside the prompt
    /// adds its question to ([`super::save_prompt`]).
    pub(super) async fn warm_body(&self, input: &TurnInput) -> Result<serde_json::Value, String> {
        // A read-only view: reads the agent as it is now, writes nothing.
        let mut input = input.clone();
        input.record = false;
        input.user_messages.clear();
        input.tool_results.clear();
        input.app_reply = None;
        let turn = self.load_turn(&input).await.map_err(|e| e.to_string())?;
        let mut body = self.request_body(&input, &turn, &Progress::default(), Offer::All);
        if let Some(body) = body.as_object_mut() {
            body.remove("max_completion_tokens");
            body.remove("stream");
        }
        Ok(body)
    }

    /// Sends the agent's context as the next turn will open it, for one token; every problem
    /// is logged, never raised.
    pub async fn rewarm(&self, model: &dyn ChatModel, input: TurnInput) {
        let started = Instant::now();
        let mut body = match self.warm_body(&input).await {
            Ok(body) => body,
            Err(error) => {
                tracing::warn!(%error, agent = %input.agent, "prompt cache re-warm: agent not loaded");
                return;
            }
        };
        if let Some(body) = body.as_object_mut() {
            body.insert("max_tokens".to_owned(), json!(1));
        }
        match model.complete(body).await {
            Ok(answer) => tracing::info!(
                agent = %input.agent,
                prompt_tokens = answer.usage.prompt_tokens,
                latency_ms = started.elapsed().as_secs_f64() * 1e3,
                "prompt cache re-warmed"
            ),
            Err(error) => {
                tracing::warn!(%error, agent = %input.agent, "prompt cache re-warm failed")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_upstreams_are_loopback_private_and_named_local() {
        for url in [
            "http://127.0.0.1:8090/v1",
            "http://localhost:11434/v1",
            "http://[::1]:8080/v1",
            "http://10.0.0.7/v1",
            "http://192.168.1.20:8000/v1",
            "http://user:pw@172.16.3.4:8000/v1",
            "http://gpu-box.local:8000/v1",
        ] {
            assert!(is_local(url), "{url}");
        }
        for url in [
            "https://api.openai.com/v1",
            "https://api.anthropic.com/v1",
            "http://8.8.8.8/v1",
            "http://[2001:db8::1]/v1",
        ] {
            assert!(!is_local(url), "{url}");
        }
    }
}
