//! Configuration of memory (`[memory]`): the budgets of what implicit mode keeps and injects,
//! where the block goes, the post-processor's jobs and the memory LLM. Read by `strategy`,
//! `postprocess` and `memory`; it lives here, below them.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::secret::Secret;

/// Where the memory block goes in the request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Placement {
    /// Appended to the system message (created if the request has none).
    System,
    /// Prefixed to the newest user message.
    User,
    /// A synthetic user/assistant exchange before the kept history.
    History,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MemoryConfig {
    /// Conversation turns kept verbatim (newest first), in tokens.
    pub history_budget_tokens: usize,
    /// Injected memories (facts, past turns), in tokens.
    pub memory_budget_tokens: usize,
    /// Where the memory block goes: system | user | history.
    pub inject: Placement,
    /// Time the pre-processor may take; past it the request goes upstream unmodified.
    #[serde(with = "humantime_serde")]
    pub preprocess_timeout: Duration,
    /// Minimum cosine similarity of a memory found by vectors alone.
    pub min_similarity: f32,
    /// Most memories injected.
    pub max_memories: usize,
    /// Also inject relevant turns of past conversations (and of this one, out of the window).
    pub past_turns: bool,
    /// For a question about the past ("What was my job before?"), also show this many facts
    /// that no longer hold (replaced or retired), apart and dated ([`crate::memory::history`]).
    /// 0: never.
    pub former_facts: usize,
    /// For a question about "my <thing>" that nothing the user said mentions ("What is my dog's
    /// name?" from a user with a cat), tell the chat model so ([`crate::memory::unmentioned`]).
    pub never_mentioned: bool,
    /// Wait this long after a conversation's last exchange before extracting facts from it.
    #[serde(with = "humantime_serde")]
    pub extraction_debounce: Duration,
    /// Refresh the rolling summary once this many turns fell out of the window unsummarised.
    pub summary_min_turns: usize,
    /// Only add facts (no reconcile call: no updates or invalidations).
    pub add_only: bool,
    /// A new fact at least this close (cosine) to a live memory, or to an earlier fact of the same
    /// extraction, that names the same names and numbers says it again and is not stored twice
    /// ([`crate::postprocess`]'s restatement rule). The scale is the embedding model's: 0.95
    /// suits the local all-MiniLM-L6-v2 (paraphrases measured at 0.96–0.99, a negation at 0.86).
    /// Above 1: never.
    pub restatement_similarity: f32,
    /// Older memories (same subject, most alike first) checked per new fact for whether the fact
    /// makes them untrue (`postprocess::changed`: two memory LLM questions each, the second only
    /// when the first says it changed). 0: no check.
    pub change_checks: usize,
    /// Background consolidation of a user's facts (junk the gates missed, facts another one
    /// contains, scattered facts about one subject merged), this long after their last new fact.
    /// `"off"`: never.
    #[serde(with = "off_or_duration")]
    pub consolidation_delay: Option<Duration>,
    /// Consolidation runs per user per day at most (each makes at most one memory LLM call).
    pub consolidation_runs_per_day: u64,
    /// Stored Responses (the log behind `previous_response_id` and `GET /v1/responses/{id}`) are
    /// deleted this long after they were made; `"off"`: kept until deleted.
    #[serde(with = "off_or_duration")]
    pub responses_max_age: Option<Duration>,
    /// Stored Responses one user keeps at most (the newest); older ones are deleted.
    pub responses_per_user: usize,
    /// Attempts of a post-processing job before it is marked failed.
    pub job_attempts: i64,
    /// A job still `running` after this long lost its worker and is run again. Longer than any
    /// job takes (two memory LLM calls, each bounded by the upstream timeouts).
    #[serde(with = "humantime_serde")]
    pub job_lease: Duration,
    /// Jobs run at once (of different users: one user's jobs never overlap).
    pub job_workers: usize,
    /// Directory with prompt files overriding the built-in ones (extract.md, reconcile.md, summarize.md, consolidate.md).
    pub prompts_dir: Option<PathBuf>,
    /// Vector indexes kept in memory (one per user and corpus); the least recently used close first.
    pub open_vector_indexes: usize,
    pub llm: MemoryLlmConfig,
}

/// The LLM that extracts facts, reconciles them and writes summaries.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MemoryLlmConfig {
    /// Base URL ending in /v1; empty: the upstream.
    pub url: Option<String>,
    /// Model; empty: the model of the chat request.
    pub model: Option<String>,
    /// Key; empty: the upstream key.
    pub api_key: Option<Secret>,
    /// Longest answer of one memory call, in tokens (small models can loop inside a JSON
    /// grammar until the server's own limit; this bounds what one job attempt costs).
    pub max_tokens: Option<u32>,
}

impl Default for MemoryLlmConfig {
    fn default() -> Self {
        MemoryLlmConfig {
            url: None,
            model: None,
            api_key: None,
            max_tokens: Some(1024),
        }
    }
}

impl Default for MemoryConfig {
    fn default() -> Self {
        MemoryConfig {
            history_budget_tokens: 2000,
            memory_budget_tokens: 800,
            inject: Placement::System,
            preprocess_timeout: Duration::from_secs(2),
            min_similarity: 0.3,
            max_memories: 12,
            past_turns: true,
            former_facts: 3,
            never_mentioned: true,
            extraction_debounce: Duration::from_secs(3),
            summary_min_turns: 6,
            add_only: false,
            restatement_similarity: 0.95,
            change_checks: 2,
            consolidation_delay: Some(Duration::from_secs(30 * 60)),
            consolidation_runs_per_day: 4,
            responses_max_age: Some(Duration::from_secs(30 * 24 * 3600)),
            responses_per_user: 1000,
            job_attempts: 5,
            job_lease: Duration::from_secs(20 * 60),
            job_workers: 2,
            prompts_dir: None,
            open_vector_indexes: crate::vector::DEFAULT_OPEN_LIMIT,
            llm: MemoryLlmConfig::default(),
        }
    }
}

/// A duration that can be switched off: `"off"` in the file (and when printed) is `None`. A
/// missing key takes the default, so "leave it out" could never mean off.
mod off_or_duration {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(
        value: &Option<Duration>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match value {
            Some(duration) => humantime_serde::serialize(duration, serializer),
            None => serializer.serialize_str("off"),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<Duration>, D::Error> {
        let text = String::deserialize(deserializer)?;
        if text.trim() == "off" {
            return Ok(None);
        }
        humantime::parse_duration(text.trim())
            .map(Some)
            .map_err(|error| {
                serde::de::Error::custom(format!(
                    "{error} (a duration such as \"30m\", or \"off\")"
                ))
            })
    }
}
