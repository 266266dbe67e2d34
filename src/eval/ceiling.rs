//! What `memproxy eval` compares: the memory strategies, and `full-context`, an oracle that needs
//! no memory. It replays nothing and asks each probe with every session of the conversation in
//! the prompt (through `passthrough`), so where the conversation fits the model's window its score
//! is the ceiling the strategies are measured against.

use std::str::FromStr;

use serde_json::{json, Value};

use super::dataset::Conversation;
use crate::dates;
use crate::mode::Mode;

pub const FULL_CONTEXT: &str = "full-context";
/// Implicit mode with `memory.add_only`: every extracted fact is added (no reconcile call), and
/// the newest-first dates decide between old and new (mem0 v3's choice), against `implicit`'s
/// LLM reconciliation.
pub const ADD_ONLY: &str = "implicit-add-only";
/// Explicit mode with a 2,000-token context window: the dialogues overflow the agent's message
/// queue, so what it recalls comes from its memory (core, archival, summary, recall search).
pub const EXPLICIT_2K: &str = "explicit@2k";
const SMALL_WINDOW_TOKENS: usize = 2000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EvalStrategy {
    Memory(Mode),
    FullContext,
    AddOnly,
    Explicit2k,
}

impl EvalStrategy {
    pub fn as_str(self) -> &'static str {
        match self {
            EvalStrategy::Memory(mode) => mode.as_str(),
            EvalStrategy::FullContext => FULL_CONTEXT,
            EvalStrategy::AddOnly => ADD_ONLY,
            EvalStrategy::Explicit2k => EXPLICIT_2K,
        }
    }

    /// The configuration memproxy serves it with, from the run's.
    pub fn configure(self, mut config: crate::config::Config) -> crate::config::Config {
        match self {
            EvalStrategy::AddOnly => config.memory.add_only = true,
            EvalStrategy::Explicit2k => {
                config.explicit.context_window_tokens = SMALL_WINDOW_TOKENS;
                config.explicit.context_windows.clear();
            }
            EvalStrategy::Memory(_) | EvalStrategy::FullContext => {}
        }
        config
    }

    /// The mode memproxy serves it with.
    pub fn mode(self) -> Mode {
        match self {
            EvalStrategy::Memory(mode) => mode,
            EvalStrategy::FullContext => Mode::Passthrough,
            EvalStrategy::AddOnly => Mode::Implicit,
            EvalStrategy::Explicit2k => Mode::Explicit,
        }
    }
}

impl std::fmt::Display for EvalStrategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for EvalStrategy {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            FULL_CONTEXT => return Ok(EvalStrategy::FullContext),
            ADD_ONLY => return Ok(EvalStrategy::AddOnly),
            EXPLICIT_2K => return Ok(EvalStrategy::Explicit2k),
            _ => {}
        }
        text.parse::<Mode>()
            .map(EvalStrategy::Memory)
            .map_err(|error| format!("{error}, {FULL_CONTEXT}, {ADD_ONLY} or {EXPLICIT_2K}"))
    }
}

/// Every session of `conversation`, each opened by its date, as the messages before a probe.
pub fn whole_conversation(conversation: &Conversation) -> Vec<Value> {
    let mut messages = Vec::new();
    for (s, session) in conversation.sessions.iter().enumerate() {
        for (t, turn) in session.turns.iter().enumerate() {
            let content = match (t, session.time_ms) {
                (0, Some(at)) => format!(
                    "[Session {}, {}] {}",
                    s + 1,
                    dates::ymd_weekday(at),
                    turn.content
                ),
                _ => turn.content.clone(),
            };
            messages.push(json!({"role": turn.role, "content": content}));
        }
    }
    messages
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strategies_parse_with_the_ceiling() {
        assert_eq!(
            "full-context".parse::<EvalStrategy>(),
            Ok(EvalStrategy::FullContext)
        );
        assert_eq!(
            "implicit".parse::<EvalStrategy>(),
            Ok(EvalStrategy::Memory(Mode::Implicit))
        );
        assert_eq!(
            "implicit-add-only".parse::<EvalStrategy>(),
            Ok(EvalStrategy::AddOnly)
        );
        assert_eq!(EvalStrategy::AddOnly.mode(), Mode::Implicit);
        let config = EvalStrategy::AddOnly.configure(crate::config::Config::default());
        assert!(config.memory.add_only);
        let config = EvalStrategy::Explicit2k.configure(crate::config::Config::default());
        assert_eq!(config.explicit.context_window_tokens, 2000);
        assert_eq!(EvalStrategy::Explicit2k.mode(), Mode::Explicit);
        assert!("nonsense".parse::<EvalStrategy>().is_err());
        assert_eq!(EvalStrategy::FullContext.mode(), Mode::Passthrough);
    }
}
