//! The agent's tools as a registry: each tool is one type implementing [`Tool`] (its name, its
//! schema, whether it writes memory, and how it runs), in a file of its own: the memory tools
//! (names and signatures as in MemGPT, descriptions in our own words), `send_message`, and the
//! client's own tools ([`client`]). A turn offers one [`Registry`]: the memory tools, then the
//! client's, then `send_message`.
//!
//! Every failure is a result the model can read and act on, never an error of the turn: a wrong
//! call costs a step, not the conversation.

mod archival;
pub mod client;
mod conversation;
mod core_memory;
mod kit;
pub mod messaging;
pub mod names;
mod registry;
mod reply;

use serde_json::Value;

pub use crate::agent::Tools;
pub use client::{ClientCall, ClientTools};
pub use kit::{wants_heartbeat, Effect, Messaging, Tool, ToolOutcome, ToolScope};
pub use names::{SEND_MESSAGE, SENT};
pub use registry::Registry;

/// The tools a request offers the agent: the memory tools, the messaging tools when the agent has
/// others to reach, and the client's (see [`client`]).
pub fn for_request(
    asked: &crate::agent::ClientToolsAsked,
    peers: &[crate::store::AgentRecord],
    set: Tools,
) -> (Registry, ClientTools) {
    let client = ClientTools::from_request(asked);
    let mut registry = Registry::memory_for(set);
    if !peers.is_empty() {
        registry = registry.with(Registry::messaging(peers));
    }
    (registry.with(client.tools()), client)
}

/// The memory tools' schemas.
pub fn schemas(set: Tools) -> Vec<Value> {
    Registry::memory_for(set).schemas()
}

/// Whether a traced step's tool changes memory.
pub fn writes(name: &str) -> bool {
    Registry::memory().get(name).is_some_and(|t| t.writes())
}
