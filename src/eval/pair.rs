//! What one `memproxy eval` run is asked (its command line) and what one conversation replayed
//! under one strategy gives: the types the replay, its client, its report and its cost ledger
//! share.

use std::collections::BTreeMap;
use std::path::PathBuf;

use clap::Args;
use serde::{Deserialize, Serialize};

use super::ceiling::EvalStrategy;
use super::dataset::Format;
use super::work::Work;

#[derive(Args, Clone, Debug)]
pub struct RunArgs {
    /// Dataset file (or a directory of scenario files).
    #[arg(long)]
    pub dataset: Option<PathBuf>,
    /// Dataset format; guessed from the content when absent.
    #[arg(long, value_enum)]
    pub format: Option<Format>,
    /// Strategies to compare, comma-separated; `full-context` is the no-memory ceiling (every
    /// session in the prompt), `implicit-add-only` implicit mode without reconciliation,
    /// `explicit@2k` explicit mode with a 2,000-token window.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "passthrough,window,summary,implicit,explicit"
    )]
    pub strategies: Vec<EvalStrategy>,
    /// Upstream base URL ending in /v1 (key: MEMPROXY_UPSTREAM_API_KEY or OPENAI_API_KEY).
    #[arg(long, default_value = "http://127.0.0.1:8090/v1")]
    pub upstream: String,
    /// Chat model (also the memory LLM).
    #[arg(long)]
    pub model: Option<String>,
    /// Grade answers with this model too (fixed prompt; CORRECT/WRONG).
    #[arg(long)]
    pub judge_model: Option<String>,
    /// The judge at another /v1 endpoint (default: --upstream), so its short prompts do not
    /// evict the chat model's cached prompt on a one-slot local server.
    #[arg(long)]
    pub judge_upstream: Option<String>,
    /// Only the first N conversations.
    #[arg(long)]
    pub limit: Option<usize>,
    /// Only the first N sessions of each conversation, and the probes answerable from them.
    #[arg(long)]
    pub max_sessions: Option<usize>,
    /// Only the first N probes of each conversation.
    #[arg(long)]
    pub max_probes: Option<usize>,
    /// Include LoCoMo's adversarial questions (category 5).
    #[arg(long)]
    pub include_adversarial: bool,
    /// Output directory: runs.jsonl, results.json, report.html.
    #[arg(long, default_value = "eval-out")]
    pub out: PathBuf,
    /// Continue an interrupted run in --out (finished pairs are kept).
    #[arg(long)]
    pub resume: bool,
    /// Where the local embedding model is installed (scripts/fetch-model).
    #[arg(long, default_value = "./.memproxy")]
    pub model_data_dir: PathBuf,
    /// Embed through this OpenAI-compatible /v1 endpoint instead of the local model.
    #[arg(long)]
    pub embeddings_url: Option<String>,
    /// Context window assumed for the model (explicit mode), in tokens.
    #[arg(long)]
    pub context_window: Option<usize>,
    /// Where explicit-mode agents see core memory: `turn` (the default) or `system`.
    #[arg(long, value_parser = ["turn", "system"])]
    pub core_memory_at: Option<String>,
    /// Cap on the model's reply while replaying (replies are mostly discarded).
    #[arg(long, default_value_t = 96)]
    pub replay_max_tokens: u64,
    /// Cap on the model's answer to a probe.
    #[arg(long, default_value_t = 160)]
    pub answer_max_tokens: u64,
    /// Keep each pair's data directory under OUT/data (to inspect memories and agent traces).
    #[arg(long)]
    pub keep_data: bool,
    /// Cap on each memory LLM answer (extraction, reconcile, summary).
    #[arg(long, default_value_t = 512)]
    pub memory_max_tokens: u32,
    /// The memory LLM at another /v1 endpoint (default: --upstream), e.g. a second server, so its
    /// calls do not evict the chat model's prompt cache.
    #[arg(long)]
    pub memory_upstream: Option<String>,
    /// Wait after each replayed turn until the work it set off (extraction jobs, an agent's
    /// background save) is done, as a user who reads the reply before typing: turn latencies
    /// then show no contention with that work on a shared machine, and the wait is reported
    /// on its own.
    #[arg(long)]
    pub settle: bool,
    /// Seconds to wait after each replayed turn's reply before sending the next turn, as a
    /// person reading and typing: background work runs meanwhile, and a turn still waits for it
    /// only when it takes longer than the pause. 0: back to back.
    #[arg(long, default_value_t = 0.0)]
    pub pause: f64,
    /// Replay all conversations of one strategy, then the next, instead of each conversation's
    /// strategies in turn: on an upstream with one prompt cache (a one-slot local server), one
    /// strategy's requests then do not evict the prefix another's next request shares.
    #[arg(long)]
    pub by_strategy: bool,
    /// Whether an agent's background calls give way to turns (`explicit.yield_to_turns`):
    /// `auto` (for a local upstream), `always`, `never`; unset: the configuration's default.
    #[arg(long, value_parser = ["auto", "always", "never"])]
    pub yield_to_turns: Option<String>,
    /// Where an agent's background save asks its question (`explicit.save_in_prompt`): `auto`
    /// (inside the agent's prompt when the memory LLM is the chat model on a local upstream),
    /// `always`, `never` (a prompt of its own); unset: the configuration's default.
    #[arg(long, value_parser = ["auto", "always", "never"])]
    pub save_in_prompt: Option<String>,
    /// Audit the fact store: label every memory a replay left (correct, misattributed, wrong
    /// subject, stale, duplicate, not a fact) with the judge model (`--judge-model`, else the
    /// chat model) reading the whole conversation.
    #[arg(long)]
    pub audit: bool,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ProbeResult {
    pub question: String,
    pub gold: String,
    pub answer: String,
    pub category: String,
    pub abstain: bool,
    pub f1: f64,
    pub contains: bool,
    pub judge: Option<bool>,
    /// Share of the evidence turns that appeared verbatim in what the model saw.
    pub evidence_in_context: Option<f64>,
}

/// One (conversation, strategy) replay.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PairResult {
    pub conversation: String,
    pub strategy: String,
    /// Upstream work by kind: chat, agent_step, extract, reconcile, summarize, consolidate, memory
    /// (other calls of a separate memory upstream).
    pub work: BTreeMap<String, Work>,
    /// Per client request: memproxy's own time (total − its upstream calls), ms.
    pub overhead_ms: Vec<f64>,
    /// Per client request: total time seen by the client, ms.
    pub total_ms: Vec<f64>,
    /// With `--settle`, per replayed turn: how long its background work ran on after the reply.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub settle_ms: Vec<f64>,
    pub probes: Vec<ProbeResult>,
    pub errors: Vec<String>,
    /// What the replay left in the memory store (strategies that keep facts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store: Option<super::store_stats::StoreStats>,
    /// The live memories the replay left, oldest first; labelled with `--audit`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub memories: Vec<super::audit::AuditedMemory>,
}
