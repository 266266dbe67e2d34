//! Bounds on what one request, one user or one key may ask of memproxy (`[limits]` in the
//! config): messages per request, the length of a memory, agents per user, core blocks per
//! agent, shared blocks per user, and an optional request rate per proxy key.
//!
//! The rules are pure functions over what the caller already read, so every path that creates an
//! agent, adds a block or stores a memory (API, agent loop, MCP) applies the same one, whichever
//! store backend is behind it. A refusal says which limit and which config key raises it; the API
//! surface renders it in its own shape (`400 limit_exceeded`, or `429` with `retry-after`).
//! The body size limit is `server.max_body_bytes`, applied before any parsing.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Most messages in one request, counted after translation to the conversation core (a
    /// Responses chain includes the turns `previous_response_id` brings back).
    pub max_messages: usize,
    /// Longest memory text in characters (facts, archival passages, imported memories).
    pub max_memory_chars: usize,
    /// Most explicit-mode agents one user may have (each agent name used creates one).
    pub max_agents_per_user: usize,
    /// Most core memory blocks one agent may hold (its own and attached shared blocks).
    pub max_blocks_per_agent: usize,
    /// Most shared blocks one user may have (each may be attached to several agents).
    pub max_shared_blocks_per_user: usize,
    /// Requests per minute per key on every route that can call an LLM: `/v1`, MCP and the
    /// simulator (with auth off, all requests share one budget); 0: no limit.
    pub requests_per_minute: u32,
    /// Requests a key may send at once above the steady rate; 0: as many as `requests_per_minute`.
    pub burst: u32,
    /// Messages one agent turn may send to other agents (each runs that agent's turn upstream).
    pub max_agent_messages_per_turn: usize,
    /// How many agents a message may pass through: a turn started by a message of depth
    /// `max_agent_message_depth` sends none further.
    pub max_agent_message_depth: usize,
    /// Most items (memories, messages, passages, blocks) one import may carry.
    pub max_import_items: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_messages: 4096,
            max_memory_chars: 4000,
            max_agents_per_user: 1000,
            max_blocks_per_agent: 32,
            max_shared_blocks_per_user: 100,
            requests_per_minute: 0,
            burst: 0,
            max_agent_messages_per_turn: 4,
            max_agent_message_depth: 2,
            max_import_items: 10_000,
        }
    }
}

impl Limits {
    /// The message count of one request.
    pub fn messages(&self, count: usize) -> Result<(), String> {
        if count > self.max_messages {
            return Err(format!(
                "The request has {count} messages, more than the limit of {} (limits.max_messages).",
                self.max_messages
            ));
        }
        Ok(())
    }

    /// Whether `text` can be a memory: not blank, at most `max_memory_chars` characters. A blank
    /// text is an invalid request, a long one a limit.
    pub fn memory_text(&self, text: &str) -> Result<(), TextRefusal> {
        if text.trim().is_empty() {
            return Err(TextRefusal::Blank);
        }
        let length = text.chars().count();
        if length > self.max_memory_chars {
            return Err(TextRefusal::TooLong(format!(
                "A memory holds at most {} characters (limits.max_memory_chars); this one has {length}.",
                self.max_memory_chars
            )));
        }
        Ok(())
    }

    /// Whether `agent` may be used by a user whose agents are `existing`: an agent that exists
    /// always may; a new one only below the limit.
    pub fn agent<'a>(
        &self,
        agent: &str,
        existing: impl IntoIterator<Item = &'a str>,
    ) -> Result<(), String> {
        room(agent, existing, self.max_agents_per_user).map_err(|count| {
            format!("This user already has {count} agents, the limit (limits.max_agents_per_user); reuse one, or delete one first.")
        })
    }

    /// Whether a block labelled `label` may be written to an agent whose blocks are `existing`:
    /// replacing one always may; a new label only below the limit.
    pub fn block<'a>(
        &self,
        label: &str,
        existing: impl IntoIterator<Item = &'a str>,
    ) -> Result<(), String> {
        room(label, existing, self.max_blocks_per_agent).map_err(|count| {
            format!("This agent already has {count} core memory blocks, the limit (limits.max_blocks_per_agent); replace or delete one first.")
        })
    }

    /// Whether a shared block named `name` may be written for a user whose shared blocks are
    /// `existing`: updating one always may; a new name only below the limit.
    pub fn shared_block<'a>(
        &self,
        name: &str,
        existing: impl IntoIterator<Item = &'a str>,
    ) -> Result<(), String> {
        room(name, existing, self.max_shared_blocks_per_user).map_err(|count| {
            format!("This user already has {count} shared blocks, the limit (limits.max_shared_blocks_per_user); update or delete one first.")
        })
    }

    pub fn validate(&self) -> Result<(), String> {
        if self.max_messages == 0
            || self.max_memory_chars == 0
            || self.max_agents_per_user == 0
            || self.max_blocks_per_agent == 0
            || self.max_shared_blocks_per_user == 0
            || self.max_agent_messages_per_turn == 0
            || self.max_import_items == 0
        {
            return Err("max_messages, max_memory_chars, max_agents_per_user, max_blocks_per_agent, max_shared_blocks_per_user, max_agent_messages_per_turn and max_import_items must be > 0".to_owned());
        }
        Ok(())
    }
}

/// Whether `name` fits among `existing` under `max`: one that is there always does, a new one
/// only below `max`; `Err(how many there are)`.
fn room<'a>(
    name: &str,
    existing: impl IntoIterator<Item = &'a str>,
    max: usize,
) -> Result<(), usize> {
    let mut count = 0;
    for other in existing {
        if other == name {
            return Ok(());
        }
        count += 1;
    }
    if count >= max {
        return Err(count);
    }
    Ok(())
}

/// Why a text cannot be a memory.
#[derive(Debug, PartialEq)]
pub enum TextRefusal {
    Blank,
    TooLong(String),
}

/// Per-key token buckets: each key may send `burst` requests at once, refilled at
/// `requests_per_minute`. Keys are the configured ones (by digest), so the table never grows
/// beyond them.
pub struct RateLimiter {
    per_second: f64,
    burst: f64,
    buckets: Mutex<HashMap<[u8; 32], Bucket>>,
}

struct Bucket {
    tokens: f64,
    at: Instant,
}

impl RateLimiter {
    /// `None` when the limits set no rate.
    pub fn new(limits: &Limits) -> Option<RateLimiter> {
        if limits.requests_per_minute == 0 {
            return None;
        }
        let burst = match limits.burst {
            0 => limits.requests_per_minute,
            burst => burst,
        };
        Some(RateLimiter {
            per_second: f64::from(limits.requests_per_minute) / 60.0,
            burst: f64::from(burst),
            buckets: Mutex::new(HashMap::new()),
        })
    }

    /// Takes one request from `key`'s budget at `now`; `Err(wait)` when it is spent, with how
    /// long until the next request is allowed.
    pub fn take(&self, key: [u8; 32], now: Instant) -> Result<(), Duration> {
        let mut buckets = self
            .buckets
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let bucket = buckets.entry(key).or_insert(Bucket {
            tokens: self.burst,
            at: now,
        });
        let elapsed = now.saturating_duration_since(bucket.at).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * self.per_second).min(self.burst);
        bucket.at = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            return Ok(());
        }
        Err(Duration::from_secs_f64(
            (1.0 - bucket.tokens) / self.per_second,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits {
            max_messages: 3,
            max_memory_chars: 10,
            max_agents_per_user: 2,
            max_blocks_per_agent: 2,
            max_shared_blocks_per_user: 1,
            requests_per_minute: 60,
            burst: 2,
            ..Limits::default()
        }
    }

    #[test]
    fn each_rule_allows_up_to_its_limit_and_names_its_key() {
        let limits = limits();
        assert!(limits.messages(3).is_ok());
        assert!(limits
            .messages(4)
            .unwrap_err()
            .contains("limits.max_messages"));
        assert!(limits.memory_text("0123456789").is_ok());
        assert_eq!(limits.memory_text("  "), Err(TextRefusal::Blank));
        assert!(
            matches!(limits.memory_text("0123456789a"), Err(TextRefusal::TooLong(m)) if m.contains("limits.max_memory_chars"))
        );
        // Characters, not bytes.
        assert!(limits.memory_text("éééééééééé").is_ok());
        assert!(limits.agent("a", ["a", "b"]).is_ok());
        assert!(limits.agent("c", ["a"]).is_ok());
        assert!(limits
            .agent("c", ["a", "b"])
            .unwrap_err()
            .contains("limits.max_agents_per_user"));
        assert!(limits.block("human", ["persona", "human"]).is_ok());
        assert!(limits
            .block("notes", ["persona", "human"])
            .unwrap_err()
            .contains("limits.max_blocks_per_agent"));
        assert!(limits.shared_block("team", ["team"]).is_ok());
        assert!(limits
            .shared_block("family", ["team"])
            .unwrap_err()
            .contains("limits.max_shared_blocks_per_user"));
    }

    #[test]
    fn a_key_gets_its_burst_then_the_steady_rate_and_keys_are_apart() {
        let limiter = RateLimiter::new(&limits()).unwrap();
        let start = Instant::now();
        let (ana, bob) = ([1; 32], [2; 32]);
        assert!(limiter.take(ana, start).is_ok());
        assert!(limiter.take(ana, start).is_ok());
        let wait = limiter.take(ana, start).unwrap_err();
        assert!(wait > Duration::from_millis(900) && wait <= Duration::from_secs(1));
        assert!(limiter.take(bob, start).is_ok(), "Bob has his own budget");
        // One request a second comes back.
        assert!(limiter
            .take(ana, start + Duration::from_millis(1001))
            .is_ok());
        assert!(limiter
            .take(ana, start + Duration::from_millis(1002))
            .is_err());
        assert!(RateLimiter::new(&Limits::default()).is_none());
    }
}
