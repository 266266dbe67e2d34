//! What an agent turn takes and gives: what the client asked ([`TurnInput`]), how the turn ended
//! ([`Ending`]: a reply, or the client's tool calls that pause it, [`ClientCall`]), its outcome and
//! its errors. Plain data, below the turn itself ([`super::turn`]) and the tools that start turns
//! of other agents.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::model::ModelError;
use crate::openai::Usage;
use crate::store::{StepRecord, UserScope};

/// The client's tools as its request offers them ([`crate::agent::tools::ClientTools`] reads
/// them for the agent).
#[derive(Clone, Debug, Default)]
pub struct ClientToolsAsked {
    pub tools: Vec<crate::conversation::request::Tool>,
    pub choice: Option<crate::conversation::request::ToolChoice>,
    /// `Some(false)`: at most one call per answer.
    pub parallel: Option<bool>,
}

/// What the client asked, reduced to what the agent needs.
#[derive(Clone, Debug)]
pub struct TurnInput {
    pub scope: UserScope,
    pub agent: String,
    pub model: String,
    /// The chat app's own system prompt (a read-only block).
    pub client_system: Option<String>,
    /// The new user messages (after the client's last assistant message).
    pub user_messages: Vec<String>,
    /// The text of the client's last assistant message (one without tool calls): what the user
    /// saw before writing. When it is not a reply the agent gave (the app edited it, or put it
    /// there), the agent records it as said ([`super::open`]).
    pub app_reply: Option<String>,
    /// The results of the client tool calls a paused turn waits for (resuming it).
    pub tool_results: Vec<ToolResult>,
    /// Sampling parameters passed through to every step (temperature, max_tokens, ...), as the
    /// Chat Completions upstream takes them: the agent's steps are Chat Completions requests.
    pub params: Map<String, Value>,
    /// The client's own tools, what its tool choice asks, and whether it allows several calls
    /// at once, read from the neutral request.
    pub client_tools: ClientToolsAsked,
    /// When the user said it (`X-Memproxy-Time`); `None`: now.
    pub clock: Option<i64>,
    /// `false` (`X-Memproxy-Record: false`): a read-only turn. The agent may search its memory
    /// but not change it, and nothing of the turn is stored.
    pub record: bool,
    /// The agent the message is from (a message between agents), `None`: from the user.
    pub from_agent: Option<String>,
    /// The agents waiting for this turn's reply (send_message_to_agent_and_wait_for_reply).
    pub chain: Vec<String>,
    /// How many messages between agents led to this turn (0: the user's own request); bounds
    /// how far one request's messages can spread (`limits.max_agent_message_depth`).
    pub depth: usize,
}

/// The client's result of one of its tool calls.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolResult {
    pub call_id: String,
    pub content: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// The agent called `send_message`.
    Replied,
    /// The agent answered in plain text (taken as the reply).
    PlainText,
    /// The loop could not get a usable answer (or ran out of steps) and the plain reply
    /// (see [`super::fallback`]) answered.
    PlainReply,
    /// `max_steps` ran out first and not even the plain reply answered.
    MaxSteps,
}

impl Stop {
    pub fn as_str(self) -> &'static str {
        match self {
            Stop::Replied => "send_message",
            Stop::PlainText => "plain_text",
            Stop::PlainReply => "plain_reply",
            Stop::MaxSteps => "max_steps",
        }
    }
}

/// How a turn ended.
#[derive(Clone, Debug, PartialEq)]
pub enum Ending {
    /// The answer to the user.
    Reply { text: String, stop: Stop },
    /// The agent called the client's tools: the turn is paused until their results come.
    ToolCalls(Vec<ClientCall>),
}

impl Ending {
    /// `x-memproxy-stop`.
    pub fn stop_name(&self) -> &'static str {
        match self {
            Ending::Reply { stop, .. } => stop.as_str(),
            Ending::ToolCalls(_) => "client_tool_calls",
        }
    }
}

#[derive(Clone, Debug)]
pub struct TurnOutcome {
    pub turn: String,
    pub ending: Ending,
    /// What the user said in the whole turn (before a pause too).
    pub said: Vec<String>,
    pub steps: Vec<StepRecord>,
    /// Summed over the chat model's steps (of this request).
    pub usage: Usage,
    /// Upstream calls made (steps, retries included).
    pub model_calls: usize,
    /// Time spent waiting for LLMs (steps and summaries).
    pub llm_ms: f64,
}

impl TurnOutcome {
    /// The reply, when the turn answered.
    pub fn reply(&self) -> Option<&str> {
        match &self.ending {
            Ending::Reply { text, .. } => Some(text),
            Ending::ToolCalls(_) => None,
        }
    }
}

/// Why a turn failed.
#[derive(Debug, thiserror::Error)]
pub enum TurnError {
    #[error(transparent)]
    Model(#[from] ModelError),
    #[error(transparent)]
    Memory(#[from] crate::memory::MemoryError),
    /// The system message (instructions + core memory) alone leaves no room.
    #[error("The agent's system message and tools take {needed} tokens, more than the {window}-token context window of model '{model}' allows; shorten its core memory or raise explicit.context_window_tokens.")]
    ContextTooSmall {
        needed: usize,
        window: usize,
        model: String,
    },
    /// The request's tool results do not answer the calls the agent's turn waits for.
    #[error("{0}")]
    ToolResults(String),
}

/// A call of a client tool, as the client gets it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientCall {
    /// The call id (memproxy's own; the client's result must name it).
    pub id: String,
    /// The client's name of the tool.
    pub name: String,
    /// The arguments as JSON text.
    pub arguments: String,
}
