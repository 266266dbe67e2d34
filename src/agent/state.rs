//! The state of one agent turn in progress (what is in context, what this turn added, the
//! trace so far) and the small builders of the messages the loop sends.

use serde_json::{json, Value};

use super::context;
use super::tools::{ClientTools, Registry};
use crate::dates;
use crate::store::{now_ms, AgentMessage, StepRecord, StoredMessage, Summary, UserScope};
use crate::text::clip;

/// The agent's memory as the turn has it in view.
pub(super) struct InView {
    /// The compiled core memory ([`context::compile_memory`]); `None`: to be compiled again.
    pub system: Option<String>,
    /// The agent's memory epoch `system` was compiled at (it is stored only if still current).
    pub epoch: i64,
    /// Where core memory goes in the prompt.
    pub memory_at: super::CoreMemoryAt,
    /// The memory tools offered, and the instructions that name them.
    pub tool_set: super::Tools,
    /// The memory-pressure alert was given since the last eviction.
    pub alerted: bool,
    /// Render past `send_message` calls as plain assistant text (`explicit.replies_as_text`).
    pub replies_as_text: bool,
    pub summary: Option<Summary>,
    /// Stored messages still in context.
    pub queue: Vec<StoredMessage>,
    /// How many of `queue` came before this turn (only those may be evicted: the turn's own
    /// messages hold the question being answered).
    pub earlier: usize,
}

/// What recall before the turn found out of view for its message ([`super::recall`]).
#[derive(Default)]
pub(super) struct Recall {
    /// Found, not yet fitted.
    pub candidates: Vec<crate::memory::Hit>,
    /// What of it is shown this turn.
    pub shown: Option<String>,
    /// Things the new message takes for granted that the user never mentioned, not yet shown
    /// ([`crate::memory::unmentioned`]).
    pub never_mentioned: Vec<String>,
}

/// The tools a turn offers: memory tools, the client's, `send_message`.
pub(super) struct Offered {
    pub registry: Registry,
    pub client: ClientTools,
    /// Tokens they add to every request.
    pub tokens: usize,
}

/// A turn's agent among the user's other agents.
#[derive(Default)]
pub(super) struct Among {
    /// The user's other agents (whom the messaging tools reach).
    pub peers: Vec<crate::store::AgentRecord>,
    /// The agents waiting for this turn's reply.
    pub chain: Vec<String>,
    /// How many messages between agents led to this turn.
    pub depth: usize,
    /// Messages this turn sent to other agents (`limits.max_agent_messages_per_turn`).
    pub sent: std::sync::atomic::AtomicUsize,
}

/// The mutable state of a turn in progress, by concern: who and what model; the agent's memory
/// in view (compiled core memory, summary, queue); what recall added; this turn's own messages
/// and trace; the tools offered; its place among the user's agents.
pub(super) struct Turn {
    pub id: String,
    pub scope: UserScope,
    pub agent: String,
    pub model: String,
    /// `X-Memproxy-Record: false`: search only, store nothing.
    pub read_only: bool,
    /// The time of this turn's messages when the client set one (`X-Memproxy-Time`).
    pub clock: Option<i64>,
    /// The agent's memory in view.
    pub view: InView,
    /// What recall before the turn found, shows, and found never mentioned.
    pub recall: Recall,
    /// What the user said in this turn (before a pause too).
    pub said: Vec<String>,
    /// Messages of this turn not yet stored.
    pub buffer: Vec<AgentMessage>,
    /// Contents of buffered messages that are for this turn only (nudges after an unusable
    /// answer): stored, a small model would learn to imitate them.
    pub transient: Vec<String>,
    pub steps: Vec<StepRecord>,
    pub llm_ms: f64,
    /// The turn was paused on client tool calls and resumed by this request.
    pub resumed: bool,
    /// The tools this turn offers.
    pub offered: Offered,
    /// The agent among the user's other agents.
    pub agents: Among,
}

impl Turn {
    /// The user's newest message of this turn, clipped, to quote in a notice.
    pub fn newest_said(&self) -> String {
        clip(self.said.last().map_or("", |s| s.trim()), 200)
    }

    /// Whether what the user said this turn asks how things were: only then does the agent read
    /// core memory's history lines ([`super::history`]).
    pub fn asks_about_the_past(&self) -> bool {
        super::history::asked_about(&self.said)
    }

    pub fn now(&self) -> i64 {
        self.clock.unwrap_or_else(now_ms)
    }

    /// Empties the buffer for storing, leaving out transient messages.
    pub fn take_buffer(&mut self) -> Vec<AgentMessage> {
        let transient = std::mem::take(&mut self.transient);
        std::mem::take(&mut self.buffer)
            .into_iter()
            .filter(|m| !transient.contains(&m.content))
            .collect()
    }

    /// Traces one step (`number`: the loop step it belongs to).
    pub fn step(
        &mut self,
        number: usize,
        tool: &str,
        arguments: String,
        status: &str,
        result: String,
    ) -> &mut StepRecord {
        self.steps.push(StepRecord {
            turn: self.id.clone(),
            step: number as i64,
            tool: tool.to_owned(),
            arguments: clip(&arguments, 2000),
            status: status.to_owned(),
            result: clip(&result, 2000),
            heartbeat: false,
            prompt_tokens: 0,
            completion_tokens: 0,
            cached_tokens: None,
            latency_ms: 0.0,
            created_at_ms: now_ms(),
        });
        let last = self.steps.len() - 1;
        &mut self.steps[last]
    }

    /// The request's messages: system, summary, stored queue, this turn's messages.
    pub fn messages(&self) -> Vec<Value> {
        let messages = self.wire_messages();
        if self.view.replies_as_text {
            context::replies_as_text(messages)
        } else {
            messages
        }
    }

    fn wire_messages(&self) -> Vec<Value> {
        context::layout(
            (
                self.view.memory_at,
                self.view.tool_set,
                self.asks_about_the_past(),
            ),
            self.view.system.as_deref().unwrap_or_default(),
            self.recall.shown.as_deref(),
            self.view.summary.as_ref(),
            self.view.queue.iter().map(context::wire_message),
            self.buffer.iter().map(buffered_wire),
        )
    }
}

fn buffered_wire(message: &AgentMessage) -> Value {
    let mut wire = json!({"role": message.role, "content": message.content});
    if let Some(calls) = message
        .tool_calls
        .as_deref()
        .and_then(|c| serde_json::from_str::<Value>(c).ok())
    {
        wire["tool_calls"] = calls;
        if message.content.is_empty() {
            wire["content"] = Value::Null;
        }
    }
    if let Some(id) = &message.tool_call_id {
        wire["tool_call_id"] = json!(id);
    }
    wire
}

pub fn user_json(kind: &str, field: &str, text: &str, now: i64) -> String {
    json!({"type": kind, field: text, "time": dates::timestamp(now)}).to_string()
}

pub fn system_notice(kind: &str, reason: &str, now: i64) -> AgentMessage {
    AgentMessage {
        role: "user".to_owned(),
        content: user_json(
            kind,
            if kind == "heartbeat" {
                "reason"
            } else {
                "message"
            },
            reason,
            now,
        ),
        tool_calls: None,
        tool_call_id: None,
        search_text: String::new(),
        created_at_ms: now,
    }
}

/// `(prompt tokens, tokens of system message + tools alone)` as counted with cl100k.
/// Core memory counts as fixed wherever it is: it cannot be evicted.
pub fn raw_measure(turn: &Turn) -> (usize, usize) {
    let messages = turn.messages();
    let all: usize = messages.iter().map(context::message_tokens).sum();
    let memory = match turn.view.memory_at {
        super::CoreMemoryAt::System => 0,
        super::CoreMemoryAt::Turn => {
            crate::tokens::count(turn.view.system.as_deref().unwrap_or_default())
        }
    } + turn.recall.shown.as_deref().map_or(0, crate::tokens::count);
    let fixed = context::message_tokens(&messages[0]) + memory + turn.offered.tokens;
    (all + turn.offered.tokens, fixed)
}
