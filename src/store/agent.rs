//! Store types of explicit-mode agents: the agent row, the messages of its loop, its step trace,
//! and the `Within` filter that keeps one agent's searches inside its own memory.

use serde::{Deserialize, Serialize};

/// Conversation id of an agent's own log (its message queue and recall memory). Client-chosen
/// conversation ids may not use this prefix.
pub const AGENT_CONVERSATION_PREFIX: &str = "agent:";

pub fn agent_conversation(agent: &str) -> String {
    format!("{AGENT_CONVERSATION_PREFIX}{agent}")
}

/// An agent's turn lock held in the store, for processes that share it (replicas on one
/// PostgreSQL); released when dropped, and by the database if the process dies.
pub struct TurnLock(pub Box<dyn Send + Sync>);

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AgentRecord {
    pub name: String,
    /// The compiled system message; `None` when memory changed and it must be rebuilt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_message: Option<String>,
    /// The memory-pressure alert was given since the last eviction.
    pub pressure_alerted: bool,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
    /// Labels that group agents (`send_message_to_agents_matching_tags`).
    #[serde(default)]
    pub tags: Vec<String>,
    /// Counts changes to what the system message shows (a block, shared or own, the archive).
    #[serde(default)]
    pub memory_epoch: i64,
}

/// One message of an agent's loop as it is appended to its log.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AgentMessage {
    pub role: String,
    /// Exactly what the model sees (user messages are JSON-wrapped, architecture §3).
    pub content: String,
    /// Tool calls as JSON text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// What `conversation_search` finds this message by; empty: not searchable (heartbeats,
    /// alerts, tool results).
    pub search_text: String,
    pub created_at_ms: i64,
}

impl AgentMessage {
    /// What the model is sent for it: content and tool calls.
    fn wire(&self) -> String {
        format!(
            "{}{}",
            self.content,
            self.tool_calls.as_deref().unwrap_or_default()
        )
    }

    /// Its tokens in the agent's context (a rule both backends store).
    pub fn token_count(&self) -> i64 {
        crate::tokens::count_message(&self.role, &self.wire()) as i64
    }

    /// Its identity in the log.
    pub fn log_hash(&self) -> String {
        super::content_hash(&format!("{}\u{0}{}", self.role, self.wire()))
    }

    /// The message as stored with `id` at `position` of the agent's log `conversation`.
    pub fn stored(&self, id: i64, conversation: &str, position: i64) -> super::StoredMessage {
        super::StoredMessage {
            id,
            conversation: conversation.to_owned(),
            position,
            role: self.role.clone(),
            content: self.content.clone(),
            name: None,
            tool_calls: self.tool_calls.clone(),
            tool_call_id: self.tool_call_id.clone(),
            created_at_ms: self.created_at_ms,
            token_count: self.token_count(),
            superseded: false,
            search_text: Some(self.search_text.clone()),
        }
    }
}

/// Counts the system message reports to the agent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct AgentCounts {
    /// Every message in the agent's log.
    pub messages: i64,
    /// Messages still in the context window (after the summary).
    pub in_context: i64,
    pub passages: i64,
}

/// One step of an agent turn, as traced for operators.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StepRecord {
    pub turn: String,
    pub step: i64,
    /// Tool name, or `(text)` for a plain-text answer, `(summarize)` for an eviction.
    pub tool: String,
    pub arguments: String,
    /// `ok`, `failed`, `reply`, `upstream_error`.
    pub status: String,
    pub result: String,
    pub heartbeat: bool,
    pub prompt_tokens: i64,
    pub completion_tokens: i64,
    /// Prompt tokens the upstream served from its prompt cache, where it reports them
    /// (`usage.prompt_tokens_details.cached_tokens`, or llama.cpp's `timings.cache_n`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_tokens: Option<i64>,
    pub latency_ms: f64,
    pub created_at_ms: i64,
}

/// Restricts a search to one agent's memory inside a user's.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Within {
    /// Archival passages of this agent.
    Agent(String),
    /// Messages of this conversation.
    Conversation(String),
    /// An agent's recall memory: the messages of its log (this conversation) and of the user's
    /// chats in the other modes (every conversation that is no agent's log), not other agents'
    /// logs. A user has one memory whichever mode they talked in.
    Recall(String),
}

/// Most tags an agent may have, and the longest tag.
pub const MAX_TAGS: usize = 32;
pub const MAX_TAG_CHARS: usize = 64;

/// An agent's tags as stored: trimmed, sorted, without repeats; `Err` when there are too many or
/// one is empty or too long (the API and the CLI apply the same rule).
pub fn normalize_tags(tags: &[String]) -> Result<Vec<String>, String> {
    let mut tags: Vec<String> = tags.iter().map(|t| t.trim().to_owned()).collect();
    if tags.len() > MAX_TAGS
        || tags
            .iter()
            .any(|t| t.is_empty() || t.chars().count() > MAX_TAG_CHARS)
    {
        return Err(format!(
            "Up to {MAX_TAGS} tags, each 1 to {MAX_TAG_CHARS} characters."
        ));
    }
    tags.sort();
    tags.dedup();
    Ok(tags)
}
