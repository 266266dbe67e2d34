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
/// The mode switches: every session told in one mode, every probe asked in the other, on one
/// memory (a user who switches their app between the modes).
pub const IMPLICIT_TO_EXPLICIT: &str = "implicit>explicit";
pub const EXPLICIT_TO_IMPLICIT: &str = "explicit>implicit";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EvalStrategy {
    Memory(Mode),
    FullContext,
    AddOnly,
    Explicit2k,
    /// Told in `told`, asked in the other memory mode ([`IMPLICIT_TO_EXPLICIT`],
    /// [`EXPLICIT_TO_IMPLICIT`]).
    Switch {
        told: Mode,
    },
}

impl EvalStrategy {
    pub fn as_str(self) -> &'static str {
        match self {
            EvalStrategy::Memory(mode) => mode.as_str(),
            EvalStrategy::FullContext => FULL_CONTEXT,
            EvalStrategy::AddOnly => ADD_ONLY,
            EvalStrategy::Explicit2k => EXPLICIT_2K,
            EvalStrategy::Switch {
                told: Mode::Explicit,
            } => EXPLICIT_TO_IMPLICIT,
            EvalStrategy::Switch { .. } => IMPLICIT_TO_EXPLICIT,
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
            EvalStrategy::Memory(_) | EvalStrategy::FullContext | EvalStrategy::Switch { .. } => {}
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
            EvalStrategy::Switch { told } => told,
        }
    }

    /// The mode the probes are asked in (the replay's but for a switch).
    pub fn asked(self) -> Mode {
        match self {
            EvalStrategy::Switch {
                told: Mode::Explicit,
            } => Mode::Implicit,
            EvalStrategy::Switch { .. } => Mode::Explicit,
            other => other.mode(),
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
            IMPLICIT_TO_EXPLICIT => {
                return Ok(EvalStrategy::Switch {
                    told: Mode::Implicit,
                })
            }
            EXPLICIT_TO_IMPLICIT => {
                return Ok(EvalStrategy::Switch {
                    told: Mode::Explicit,
                })
            }
            _ => {}
        }
        text.parse::<Mode>().map(EvalStrategy::Memory).map_err(|error| {
            format!("{error}, {FULL_CONTEXT}, {ADD_ONLY}, {EXPLICIT_2K}, {IMPLICIT_TO_EXPLICIT} or {EXPLICIT_TO_IMPLICIT}")
        })
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
        for (name, told, asked) in [
            ("implicit>explicit", Mode::Implicit, Mode::Explicit),
            ("explicit>implicit", Mode::Explicit, Mode::Implicit),
        ] {
            let switch: EvalStrategy = name.parse().expect("a switch");
            assert_eq!(
                (switch.mode(), switch.asked(), switch.as_str()),
                (told, asked, name)
            );
        }
    }
}
