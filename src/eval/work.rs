//! What a replay cost upstream: calls, tokens and prompt reuse per kind of work (chat, agent
//! steps, extraction, reconciliation, summaries), added up from the eval tap's ledger.

use std::collections::{BTreeMap, HashSet};

use serde::{Deserialize, Serialize};

use super::tap::Call;
use crate::mode::Mode;

/// Calls and tokens of one kind of upstream work.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Work {
    pub calls: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// Of `prompt_tokens`, what the upstream served from its prompt cache, counted over the
    /// `cache_reported` calls whose upstream said so.
    #[serde(default)]
    pub cached_tokens: u64,
    #[serde(default)]
    pub cache_reported: u64,
    /// The prompts' length and the part byte-identical to the previous chat call's start
    /// (cl100k tokens; see `tap::Call`).
    #[serde(default)]
    pub prompt_text_tokens: u64,
    #[serde(default)]
    pub shared_prefix_tokens: u64,
    /// The calls' time at the upstream, start to last byte (ms): the model's time they took.
    #[serde(default)]
    pub model_ms: f64,
}

impl Work {
    pub fn add(&mut self, other: &Work) {
        self.calls += other.calls;
        self.prompt_tokens += other.prompt_tokens;
        self.completion_tokens += other.completion_tokens;
        self.cached_tokens += other.cached_tokens;
        self.cache_reported += other.cache_reported;
        self.prompt_text_tokens += other.prompt_text_tokens;
        self.shared_prefix_tokens += other.shared_prefix_tokens;
        self.model_ms += other.model_ms;
    }
}

/// Adds up a pair's upstream calls by kind. In explicit mode the first chat call of each client
/// request is the answer's and the others are agent steps (memory work).
pub(super) fn account(
    work: &mut BTreeMap<String, Work>,
    mode: Mode,
    calls: &[Call],
    requests: &[(usize, usize)],
) {
    let answering: HashSet<usize> = requests
        .iter()
        .filter_map(|(from, to)| {
            (*from..*to).find(|&i| calls.get(i).is_some_and(|c| c.kind == "chat"))
        })
        .collect();
    for (index, call) in calls.iter().enumerate() {
        let kind = match call.kind.as_str() {
            "chat" if mode == Mode::Explicit && !answering.contains(&index) => "agent_step",
            other => other,
        };
        work.entry(kind.to_owned())
            .or_default()
            .add(&one_call(call));
    }
}

/// Books the calls of the memory LLM's own upstream (`--memory-upstream`): every one is memory
/// work, under its prompt's marker, or `memory` when it has none.
pub(super) fn account_memory(work: &mut BTreeMap<String, Work>, calls: &[Call]) {
    for call in calls {
        let kind = match call.kind.as_str() {
            "chat" => "memory",
            other => other,
        };
        work.entry(kind.to_owned())
            .or_default()
            .add(&one_call(call));
    }
}

/// The work of one upstream call.
fn one_call(call: &Call) -> Work {
    Work {
        calls: 1,
        prompt_tokens: call.prompt_tokens,
        completion_tokens: call.completion_tokens,
        cached_tokens: call.cached_tokens.unwrap_or(0),
        cache_reported: u64::from(call.cached_tokens.is_some()),
        prompt_text_tokens: call.prompt_text_tokens,
        shared_prefix_tokens: call.shared_prefix_tokens,
        model_ms: call.ms,
    }
}
