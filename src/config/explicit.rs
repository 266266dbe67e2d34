//! Configuration of explicit mode (`[explicit]`): loop limits, the context window per model,
//! the memory-pressure thresholds and the agent's starting core memory. Read by `agent`, which
//! re-exports these types; they live here, below every module that reads them.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ExplicitConfig {
    /// Upstream calls one turn may make before it ends with whatever was said.
    pub max_steps: usize,
    /// Unusable replies (empty, the user's message said back, a repeat, a lesson on the agent's
    /// functions) asked again with the reason before the plain reply answers instead, in turns
    /// without the app's functions or other agents: a small model's reply asked again is seldom
    /// usable and costs a whole agent step, the plain reply usually is and costs little
    /// (figures: docs/eval-history.md).
    pub reply_retries: usize,
    /// Send `tool_choice: "required"` (and a named choice when only `send_message` is offered).
    /// Turn off for upstreams that reject `tool_choice`.
    pub require_tool_choice: bool,
    /// Context window assumed for models not listed in `context_windows`, in tokens.
    pub context_window_tokens: usize,
    /// Context window per model name.
    pub context_windows: BTreeMap<String, usize>,
    /// Share of the window at which the agent is told to save what matters (once).
    pub pressure_alert_ratio: f64,
    /// Share of the window past which the oldest messages are evicted and summarised.
    pub evict_ratio: f64,
    /// Share of the window eviction brings the prompt down to.
    pub evict_target_ratio: f64,
    /// Results per page of the search tools.
    pub page_size: usize,
    /// Turns of step trace kept per agent.
    pub trace_turns: usize,
    /// Starting core memory blocks of a new agent.
    pub persona: String,
    pub human: String,
    /// Character limit of each core memory block.
    pub block_char_limit: usize,
    /// Show the agent its past `send_message` calls as plain assistant messages (small models
    /// given a history of their own reply calls often answer nothing).
    pub replies_as_text: bool,
    /// A streamed turn still running after this long starts its SSE answer at once and sends a
    /// keep-alive comment this often, so chat apps and reverse proxies with read timeouts do not
    /// give up on a long tool loop. 0 turns it off (the stream starts when the reply is ready).
    #[serde(with = "humantime_serde")]
    pub stream_keepalive: Duration,
    /// After a turn in which the agent saved nothing although the user said something, one
    /// background memory LLM call (off the request path) extracts what is worth keeping, and it is
    /// added to the `human` block (or archival memory when the block is full).
    pub background_save: bool,
    /// Where the agent sees its core memory: `turn` (the default), in a message just before each
    /// new user message, so a memory change re-reads only the newest turn from an upstream's
    /// prompt cache; `system`, inside the system message as MemGPT has it, so a change re-reads
    /// the whole conversation.
    pub core_memory_at: CoreMemoryAt,
    /// Passages and past messages out of view that match the user's new message, searched once
    /// when a turn opens and shown with core memory (at most a tenth of the window); 0 turns it
    /// off and leaves every search to the agent's tools.
    pub recall_before_turn: usize,
    /// For a new message asking about "my <thing>" that nothing the user said mentions (in
    /// view, in core or archival memory, or stored), tell the agent so with what was recalled
    /// ([`crate::memory::unmentioned`]).
    pub never_mentioned: bool,
    /// Below this context window (tokens) the agent is offered the compact tool set and
    /// instructions: core memory, `conversation_search` and `send_message`, about 470 tokens
    /// fewer per step, where the full set would take most of the window (recall before the turn
    /// still searches archival memory and the conversation for each new message). 0: always the
    /// full MemGPT set.
    pub compact_below_tokens: usize,
    /// When to send the agent's prompt again (`max_tokens: 1`, off the request path) after an
    /// answered turn, as the next turn will open it, so that a local server's prompt cache holds
    /// it for the next turn: `auto` (for an upstream on loopback or a private network that keeps
    /// one prompt cache; `agent::caches`), `always`, `never`.
    pub rewarm_cache: Rewarm,
    /// Where the background save asks its question: inside the agent's own prompt, as the next
    /// turn opens it (`agent::save_prompt`), so that the server's prompt cache keeps that prompt
    /// and no re-warm has to process it again; or in a prompt of its own to the memory LLM.
    /// `auto`: inside the agent's prompt where a prompt of its own would evict the cache that the
    /// re-warm keeps, i.e. the memory LLM is the chat model on the same upstream and
    /// `rewarm_cache` applies to it; `always`; `never` (the default).
    pub save_in_prompt: Rewarm,
    /// Whether background model calls (the background save, eviction after the turn, the
    /// re-warm) give way to turns: they wait while a turn runs, and a turn that starts cancels
    /// the one in flight (a save is redone, a re-warm dropped). The same answers as
    /// `rewarm_cache`: `auto` (the default) for an upstream on loopback or a private network
    /// that keeps one prompt cache, `always`, `never` (`agent::foreground`).
    pub yield_to_turns: Rewarm,
    /// After a finished turn, evict the oldest messages (off the request path) when the next
    /// turn, adding about as much as this one did, would pass `evict_ratio` and the agent has had
    /// its memory-pressure step; the next turn then does not wait for the summary call.
    pub evict_after_turn: bool,
    /// Longest wait of `send_message_to_agent_and_wait_for_reply` for the other agent's reply.
    #[serde(with = "humantime_serde")]
    pub agent_reply_timeout: Duration,
}

/// When a measure for a local server with one prompt cache applies (`explicit.rewarm_cache`,
/// `save_in_prompt`, `yield_to_turns`): `auto` for an upstream on loopback or a private network
/// that does not say it keeps several (llama.cpp's `total_slots` above 1, vLLM: `agent::caches`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Rewarm {
    /// For an upstream on loopback or a private network with one prompt cache.
    #[default]
    Auto,
    Always,
    Never,
}

/// Where the agent's core memory goes in its prompt.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CoreMemoryAt {
    System,
    #[default]
    Turn,
}

impl ExplicitConfig {
    /// Core memory of a new agent: `persona` and `human`, each within the block limit.
    pub fn starting_blocks(&self) -> Vec<crate::store::CoreBlock> {
        let limit = self.block_char_limit;
        [("persona", &self.persona), ("human", &self.human)]
            .into_iter()
            .map(|(label, value)| crate::store::CoreBlock {
                label: label.to_owned(),
                value: value.chars().take(limit).collect(),
                char_limit: limit as i64,
                read_only: false,
                updated_at_ms: 0,
                shared: None,
            })
            .collect()
    }
}

impl Default for ExplicitConfig {
    fn default() -> Self {
        ExplicitConfig {
            max_steps: 8,
            reply_retries: 0,
            require_tool_choice: true,
            context_window_tokens: 8192,
            context_windows: BTreeMap::new(),
            pressure_alert_ratio: 0.75,
            evict_ratio: 0.9,
            evict_target_ratio: 0.7,
            page_size: 5,
            trace_turns: 50,
            persona: "I am a helpful assistant with a long-term memory. I keep notes about the \
                      person I talk with and use them to be more useful over time."
                .to_owned(),
            human: "Nothing is known about the user yet.".to_owned(),
            block_char_limit: 2000,
            replies_as_text: true,
            stream_keepalive: Duration::from_secs(10),
            agent_reply_timeout: Duration::from_secs(120),
            background_save: true,
            core_memory_at: CoreMemoryAt::Turn,
            recall_before_turn: 4,
            never_mentioned: true,
            compact_below_tokens: 4096,
            rewarm_cache: Rewarm::Auto,
            // Off until it keeps what the memory LLM's own prompt keeps: asked with the whole
            // conversation in view, a small model quotes older facts instead of the new message,
            // and a change fact was lost in 3 of 6 runs (docs/eval-history.md, "The background
            // save inside the agent's prompt").
            save_in_prompt: Rewarm::Never,
            // On a one-slot local server a quick next turn otherwise waits behind the last
            // turn's save and re-warm; since a question-only turn sets off no save, giving way
            // costs no redone saves there (docs/eval-history.md, "Background work that gives way
            // to turns, a third time").
            yield_to_turns: Rewarm::Auto,
            evict_after_turn: true,
        }
    }
}

/// Which memory tools (and matching instructions) a turn offers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Tools {
    /// MemGPT's: core, archival and recall memory, `send_message`.
    #[default]
    Full,
    /// Core memory, `conversation_search`, `send_message`: for small windows.
    Compact,
}

impl ExplicitConfig {
    /// The tool set for `model`'s window.
    pub fn tools(&self, model: &str) -> Tools {
        if self.context_window(model) < self.compact_below_tokens {
            Tools::Compact
        } else {
            Tools::Full
        }
    }

    pub fn context_window(&self, model: &str) -> usize {
        self.context_windows
            .get(model)
            .copied()
            .unwrap_or(self.context_window_tokens)
    }

    pub fn validate(&self) -> Result<(), String> {
        let ratios = [
            self.evict_target_ratio,
            self.pressure_alert_ratio,
            self.evict_ratio,
        ];
        if !ratios.windows(2).all(|pair| pair[0] < pair[1]) || ratios[2] > 1.0 || ratios[0] <= 0.0 {
            return Err(
                "explicit: need 0 < evict_target_ratio < pressure_alert_ratio < evict_ratio <= 1"
                    .to_owned(),
            );
        }
        if self.max_steps == 0 || self.page_size == 0 || self.block_char_limit == 0 {
            return Err(
                "explicit: max_steps, page_size and block_char_limit must be > 0".to_owned(),
            );
        }
        Ok(())
    }
}
