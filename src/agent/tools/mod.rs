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
pub mod messaging;
pub mod names;
mod reply;

use std::sync::{Arc, OnceLock};

use async_trait::async_trait;
use serde_json::{json, Map, Value};

use super::lenient::{text_arg, truthy};
use super::ExplicitConfig;
use crate::dates;
use crate::memory::MemoryService;
use crate::store::UserScope;

pub use crate::agent::Tools;
pub use client::{ClientCall, ClientTools};
pub use names::{SEND_MESSAGE, SENT};

/// What a call asks of the loop besides its result.
#[derive(Clone, Debug, PartialEq)]
pub enum Effect {
    /// Nothing: the loop goes on (or the turn ends, without a heartbeat).
    None,
    /// The reply to the user (`send_message`): the turn ends.
    Reply(String),
    /// A core block changed: the compiled core memory must be rebuilt.
    MemoryChanged,
    /// A client tool was called: the turn pauses until the client sends its result.
    Client(ClientCall),
}

/// What a tool did, as the loop needs it.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolOutcome {
    pub ok: bool,
    /// Shown to the model as the result's `message`.
    pub message: String,
    pub effect: Effect,
}

impl ToolOutcome {
    pub fn ok(message: impl Into<String>) -> Self {
        ToolOutcome {
            ok: true,
            message: message.into(),
            effect: Effect::None,
        }
    }

    pub fn failed(message: impl Into<String>) -> Self {
        ToolOutcome {
            ok: false,
            message: message.into(),
            effect: Effect::None,
        }
    }

    pub fn with(self, effect: Effect) -> Self {
        ToolOutcome { effect, ..self }
    }

    /// The tool message content (architecture §3).
    pub fn result_json(&self, now_ms: i64) -> String {
        json!({
            "status": if self.ok { "OK" } else { "Failed" },
            "message": self.message,
            "time": dates::timestamp(now_ms),
        })
        .to_string()
    }
}

/// Whose memory a tool works on.
pub struct ToolScope<'a> {
    /// A read-only turn (`X-Memproxy-Record: false`): memory may be searched, not changed.
    pub read_only: bool,
    pub memory: &'a MemoryService,
    pub scope: &'a UserScope,
    pub agent: &'a str,
    pub config: &'a ExplicitConfig,
    /// What the user said this turn (a persona write restating it is refused).
    pub user_said: &'a [String],
    /// The turn's clock (`X-Memproxy-Time`), for what the tools date.
    pub clock: Option<i64>,
    /// The memory tools the turn offers (a message points only to those).
    pub tool_set: Tools,
    /// What the messaging tools need (`None`: the agent has no other agents).
    pub messaging: Option<Messaging<'a>>,
}

/// The sender's side of a message to another agent.
pub struct Messaging<'a> {
    pub agents: &'a super::Agents,
    pub model: &'a dyn super::ChatModel,
    pub model_name: &'a str,
    /// The agents waiting for this turn's reply, up the chain (never waited for in turn).
    pub chain: &'a [String],
    /// How many messages between agents led to this turn (0: the user's own request).
    pub depth: usize,
    /// Messages this turn has sent to other agents so far.
    pub sent: &'a std::sync::atomic::AtomicUsize,
    /// The other agents of the user.
    pub peers: &'a [crate::store::AgentRecord],
}

/// One tool the agent may call.
#[async_trait]
pub trait Tool: Send + Sync {
    /// The name the model calls it by.
    fn name(&self) -> &str;
    /// The entry of the request's `tools` array.
    fn schema(&self) -> Value;
    /// Whether it changes memory (refused in read-only turns; a turn that wrote needs no
    /// background save).
    fn writes(&self) -> bool {
        false
    }
    /// Runs one call with its parsed arguments; every problem is a failed outcome.
    async fn execute(&self, tools: &ToolScope<'_>, arguments: &Map<String, Value>) -> ToolOutcome;
}

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

/// The tools a request offers the agent: the memory tools, the messaging tools when the agent has
/// others to reach, and the client's (see [`client`]).
pub fn for_request(
    params: &Map<String, Value>,
    peers: &[crate::store::AgentRecord],
    set: Tools,
) -> (Registry, ClientTools) {
    let client = ClientTools::from_request(params);
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

const HEARTBEAT: &str = "request_heartbeat";

/// A memory tool's schema: every tool but `send_message` takes `request_heartbeat`.
fn function(name: &str, description: &str, properties: Value, required: &[&str]) -> Value {
    let mut properties = properties;
    let mut required: Vec<&str> = required.to_vec();
    if name != SEND_MESSAGE {
        properties[HEARTBEAT] = json!({
            "type": "boolean",
            "description": "true to act again after this function (for example to call send_message next); false ends your turn."
        });
        required.push(HEARTBEAT);
    }
    json!({"type": "function", "function": {
        "name": name,
        "description": description,
        "parameters": {"type": "object", "properties": properties, "required": required},
    }})
}

pub fn wants_heartbeat(arguments: &Map<String, Value>) -> bool {
    truthy(arguments.get(HEARTBEAT))
}

fn required(arguments: &Map<String, Value>, name: &str) -> Result<String, ToolOutcome> {
    text_arg(arguments, name)
        .ok_or_else(|| ToolOutcome::failed(format!("missing required argument '{name}'")))
}

fn page_schema() -> Value {
    json!({"type": "integer", "description": "Page of results, from 0."})
}

/// "Showing x of N results (page p/P)" with the page's items, as MemGPT words it (P = last page).
fn paged(items: Vec<String>, total: usize, page: usize, page_size: usize) -> ToolOutcome {
    if total == 0 {
        return ToolOutcome::ok("No results found.");
    }
    let last = total.div_ceil(page_size) - 1;
    if page > last {
        return ToolOutcome::failed(format!(
            "page {page} is past the last page ({last}) of {total} results"
        ));
    }
    ToolOutcome::ok(format!(
        "Showing {} of {total} results (page {page}/{last}):\n{}",
        items.len(),
        items.join("\n")
    ))
}
