//! What a tool is ([`Tool`]) and what it gives back ([`ToolOutcome`], [`Effect`]), whose memory
//! it works on ([`ToolScope`]), and the helpers every tool's schema and arguments share: the
//! heartbeat argument, required arguments, pages of results.

use async_trait::async_trait;
use serde_json::{json, Map, Value};

use super::names::SEND_MESSAGE;
use crate::agent::lenient::{text_arg, truthy};
use crate::agent::turn_types::ClientCall;
use crate::agent::{ExplicitConfig, Tools};
use crate::dates;
use crate::memory::MemoryService;
use crate::store::UserScope;

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
    pub agents: &'a crate::agent::Agents,
    pub model: &'a dyn crate::agent::ChatModel,
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

const HEARTBEAT: &str = "request_heartbeat";

/// A memory tool's schema: every tool but `send_message` takes `request_heartbeat`.
pub(super) fn function(
    name: &str,
    description: &str,
    properties: Value,
    required: &[&str],
) -> Value {
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

pub(super) fn required(arguments: &Map<String, Value>, name: &str) -> Result<String, ToolOutcome> {
    text_arg(arguments, name)
        .ok_or_else(|| ToolOutcome::failed(format!("missing required argument '{name}'")))
}

pub(super) fn page_schema() -> Value {
    json!({"type": "integer", "description": "Page of results, from 0."})
}

/// "Showing x of N results (page p/P)" with the page's items, as MemGPT words it (P = last page).
pub(super) fn paged(
    items: Vec<String>,
    total: usize,
    page: usize,
    page_size: usize,
) -> ToolOutcome {
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
