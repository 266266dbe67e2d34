//! The tools one turn offers ([`Registry`]), in the order the request lists them: the memory
//! tools, the messaging tools, the client's, and `send_message` last; and the call of one by name.

use std::sync::{Arc, OnceLock};

use serde_json::{Map, Value};

use super::kit::{Tool, ToolOutcome, ToolScope};
use super::names::SEND_MESSAGE;
use super::{archival, conversation, core_memory, messaging, reply};
use crate::agent::Tools;

/// The tools one turn offers, in the order the request lists them.
#[derive(Clone)]
pub struct Registry {
    tools: Vec<Arc<dyn Tool>>,
}

impl Registry {
    /// The memory tools and `send_message`. Memory tools come first: small models lean towards
    /// the first tool listed, and answering without saving is the failure that loses facts.
    pub fn memory() -> Registry {
        static MEMORY: OnceLock<Registry> = OnceLock::new();
        MEMORY
            .get_or_init(|| Registry {
                tools: vec![
                    Arc::new(core_memory::Append),
                    Arc::new(core_memory::Replace),
                    Arc::new(archival::Insert),
                    Arc::new(archival::Search),
                    Arc::new(conversation::Search),
                    Arc::new(conversation::SearchDate),
                    Arc::new(reply::SendMessage),
                ],
            })
            .clone()
    }

    /// The memory tools a turn offers: all of them, or at a small window ([`Tools::Compact`])
    /// core memory, `conversation_search` and `send_message` (recall before the turn searches
    /// archival memory and the conversation for every new message).
    pub fn memory_for(set: Tools) -> Registry {
        static COMPACT: OnceLock<Registry> = OnceLock::new();
        match set {
            Tools::Full => Registry::memory(),
            Tools::Compact => COMPACT
                .get_or_init(|| Registry {
                    tools: vec![
                        Arc::new(core_memory::Append),
                        Arc::new(core_memory::Replace),
                        Arc::new(conversation::Search),
                        Arc::new(reply::SendMessage),
                    ],
                })
                .clone(),
        }
    }

    /// The messaging tools (for an agent whose user has other agents: `peers`).
    pub fn messaging(peers: &[crate::store::AgentRecord]) -> Vec<Arc<dyn Tool>> {
        let peers = messaging::Peers::of(peers);
        vec![
            Arc::new(messaging::SendAsync(peers.clone())),
            Arc::new(messaging::SendAndWait(peers.clone())),
            Arc::new(messaging::SendToTags(peers)),
        ]
    }

    /// This registry with more tools before `send_message` (which stays last).
    pub fn with(mut self, more: impl IntoIterator<Item = Arc<dyn Tool>>) -> Registry {
        let at = self
            .tools
            .iter()
            .position(|t| t.name() == SEND_MESSAGE)
            .unwrap_or(self.tools.len());
        let tail = self.tools.split_off(at);
        self.tools.extend(more);
        self.tools.extend(tail);
        self
    }

    pub fn get(&self, name: &str) -> Option<&dyn Tool> {
        self.tools
            .iter()
            .find(|t| t.name() == name)
            .map(|t| t.as_ref())
    }

    pub fn names(&self) -> Vec<&str> {
        self.tools.iter().map(|t| t.name()).collect()
    }

    /// The request's `tools` array.
    pub fn schemas(&self) -> Vec<Value> {
        self.tools.iter().map(|t| t.schema()).collect()
    }

    /// Runs one call; a name the registry does not hold is a failed result naming the tools.
    pub async fn execute(
        &self,
        tools: &ToolScope<'_>,
        name: &str,
        arguments: &Map<String, Value>,
    ) -> ToolOutcome {
        let Some(tool) = self.get(name) else {
            return ToolOutcome::failed(format!(
                "there is no function '{name}'; the functions are: {}",
                self.names().join(", ")
            ));
        };
        if tools.read_only && tool.writes() {
            return ToolOutcome::failed(format!(
                "{name} is not available: this conversation is private and memory is read-only"
            ));
        }
        tool.execute(tools, arguments).await
    }
}
