//! The memory store: the source of truth for everything memproxy remembers.
//!
//! Small synchronous traits, one per area ([`areas`]: users, recall log, facts, agents, search,
//! transfer, jobs; [`responses::ResponseLog`], [`blocks::SharedBlocks`]), together [`Store`],
//! and an error type that names no driver. One implementation today, SQLite ([`sqlite`]); a
//! PostgreSQL backend for several replicas is a second one behind the same traits. Rules that are
//! not storage (history alignment, block checks) are pure functions both call ([`history`],
//! [`blocks`]).
//! Every method that touches memory takes a [`UserScope`]: there is no way to read or write
//! memory without naming whose it is. Callers on the async runtime go through
//! [`crate::memory::MemoryService`], which runs these calls on the blocking pool.

pub mod agent;
pub mod areas;
pub mod blocks;
pub mod history;
pub mod keywords;
pub mod open;
pub mod postgres;
pub mod responses;
pub mod sqlite;

pub use agent::{
    agent_conversation, AgentCounts, AgentMessage, AgentRecord, StepRecord, TurnLock, Within,
    AGENT_CONVERSATION_PREFIX,
};
pub use areas::{Agents, Facts, Integrity, Jobs, RecallLog, Search, Transfer, Users};
pub use blocks::{CoreBlock, SharedBlock, SharedBlocks, CLIENT_BLOCK};
pub use open::{Backend, StoreConfig};
pub use responses::ResponseLog;

/// Every area trait, for code that calls a concrete backend (`SqliteStore`) rather than a
/// `dyn Store`: `use crate::store::prelude::*;`.
pub mod prelude {
    pub use super::{
        Agents, Facts, Integrity, Jobs, RecallLog, ResponseLog, Search, SharedBlocks, Store,
        Transfer, Users,
    };
}

use serde::{Deserialize, Serialize};

/// Whose memory: one user of one tenant.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct UserScope {
    pub tenant: String,
    pub user: String,
}

impl UserScope {
    pub fn new(tenant: impl Into<String>, user: impl Into<String>) -> Self {
        UserScope {
            tenant: tenant.into(),
            user: user.into(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{0} not found")]
    NotFound(String),
    #[error("{0}")]
    Invalid(String),
    /// An edit would give a memory the text of another live memory.
    #[error("another live memory already has this text")]
    DuplicateText,
    /// The backend failed (its driver's message; the type names no driver).
    #[error("database error: {0}")]
    Database(String),
    /// The backend does not have this area yet (PostgreSQL: explicit-mode agents, shared blocks,
    /// export/import).
    #[error("{0}")]
    Unsupported(String),
    /// The backend cannot write: its disk is full, or its files or database are read-only.
    #[error("the store cannot write (is its disk full or read-only?): {0}")]
    CannotWrite(String),
    #[error("storage I/O error: {0}")]
    Io(#[from] std::io::Error),
}

pub type StoreResult<T> = Result<T, StoreError>;

/// The searchable collections; each has its own keyword index and vector index per user.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Corpus {
    /// Extracted facts (`memories`).
    Memory,
    /// Past turns (`messages`, the recall log).
    Message,
    /// Archival passages (explicit mode).
    Passage,
}

impl Corpus {
    pub const ALL: [Corpus; 3] = [Corpus::Memory, Corpus::Message, Corpus::Passage];

    pub fn as_str(self) -> &'static str {
        match self {
            Corpus::Memory => "memory",
            Corpus::Message => "message",
            Corpus::Passage => "passage",
        }
    }
}

/// A vector with the id of the model that produced it.
#[derive(Clone, Debug, PartialEq)]
pub struct Embedding {
    pub model: String,
    pub vector: Vec<f32>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NewMessage {
    pub position: i64,
    pub role: String,
    pub content: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Tool calls as JSON text, as the client sent them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    pub created_at_ms: i64,
}

impl NewMessage {
    /// Its tokens (a rule both backends store).
    pub fn token_count(&self) -> i64 {
        crate::tokens::count_message(&self.role, &self.content) as i64
    }

    /// The turn as stored with `id` at `position` of `conversation`.
    pub fn stored(
        &self,
        id: i64,
        conversation: &str,
        position: i64,
        superseded: bool,
        search_text: Option<&str>,
    ) -> StoredMessage {
        StoredMessage {
            id,
            conversation: conversation.to_owned(),
            position,
            role: self.role.clone(),
            content: self.content.clone(),
            name: self.name.clone(),
            tool_calls: self.tool_calls.clone(),
            tool_call_id: self.tool_call_id.clone(),
            created_at_ms: self.created_at_ms,
            token_count: self.token_count(),
            superseded,
            search_text: search_text.map(str::to_owned),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct StoredMessage {
    pub id: i64,
    pub conversation: String,
    pub position: i64,
    pub role: String,
    pub content: String,
    pub name: Option<String>,
    pub tool_calls: Option<String>,
    pub tool_call_id: Option<String>,
    pub created_at_ms: i64,
    pub token_count: i64,
    /// Replaced by an edit or regeneration (kept, not searched).
    pub superseded: bool,
    /// What search sees when it differs from `content` (an agent's wrapped messages).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub search_text: Option<String>,
}

/// What storing a chat app's view of a conversation did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Synced {
    /// The conversation, or the branch of it, that the history continues.
    pub conversation: String,
    /// The turns stored now.
    pub stored: Vec<StoredMessage>,
    /// `(id, uid, generation)` of each new turn embedded in the same transaction.
    pub embedded: Vec<(i64, i64, u64)>,
}

#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Conversation {
    pub id: String,
    pub agent: String,
    pub messages: i64,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
    /// A branch's parent conversation (see [`history`]); its own turns start at `fork_position`,
    /// the parent's turns before it are its beginning.
    pub parent: Option<String>,
    pub fork_position: i64,
}

/// Where a memory came from: a turn of a conversation (portable: no row ids), and the words in
/// it that state the memory (a fact drawn from a chat carries them; see
/// `postprocess::grounding`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Source {
    pub conversation: String,
    pub position: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quote: Option<String>,
}

impl Source {
    /// Whether both name the same turn (whatever words of it they quote).
    pub fn same_turn(&self, other: &Source) -> bool {
        self.conversation == other.conversation && self.position == other.position
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct NewMemory {
    pub text: String,
    pub kind: String,
    pub sources: Vec<Source>,
    /// Whom the fact is about (see [`Memory::subject`]).
    pub subject: Option<String>,
    pub created_at_ms: i64,
    pub embedding: Option<Embedding>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Memory {
    pub id: i64,
    pub text: String,
    pub kind: String,
    pub sources: Vec<Source>,
    /// Whom the fact is about: `"user"`, `"assistant"` (its commitments) or the name of a person
    /// or pet in the user's life, as the extraction gave it once grounded
    /// (`postprocess::grounding`); `None` where no one said (facts stored before subjects were
    /// kept, and facts written without an extraction).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
    pub valid_until_ms: Option<i64>,
    pub embedding_model: Option<String>,
}

/// Whether two facts may be about the same one: their subjects are the same (by case), or one of
/// them is not known.
pub fn same_subject(a: Option<&str>, b: Option<&str>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => a.trim().eq_ignore_ascii_case(b.trim()),
        _ => true,
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum Inserted {
    New {
        id: i64,
        generation: u64,
    },
    /// A live memory with the same text already exists (exact duplicates are dropped).
    Duplicate {
        id: i64,
    },
}

/// A fact that held once and no longer does: a memory retired as untrue (not as junk or a
/// duplicate by consolidation), or the old text of a memory rewritten in place.
#[derive(Clone, Debug, PartialEq)]
pub struct FormerFact {
    pub memory_id: i64,
    /// What it said.
    pub text: String,
    /// What replaced it in place (an update), if anything.
    pub replaced_by: Option<String>,
    /// When it stopped holding.
    pub until_ms: i64,
}

/// The audit-log query behind [`FormerFact`] (both backends; `{uid}` and `{limit}` are their
/// placeholders): newest first.
pub const FORMER_FACTS_SQL: &str =
    "SELECT e.memory_id, COALESCE(e.old_value, m.text), e.new_value, e.created_at
     FROM memory_events e JOIN memories m ON m.id = e.memory_id AND m.uid = e.uid
     WHERE e.uid = {uid} AND e.cause NOT LIKE 'consolidation%'
       AND ((e.action = 'update' AND e.old_value IS NOT NULL)
         OR (e.action = 'invalidate' AND m.valid_until IS NOT NULL))
     ORDER BY e.created_at DESC, e.id DESC LIMIT {limit}";

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MemoryEvent {
    pub memory_id: i64,
    pub action: String,
    pub old_value: Option<String>,
    pub new_value: Option<String>,
    pub cause: String,
    pub created_at_ms: i64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Passage {
    pub id: i64,
    pub agent: String,
    pub text: String,
    pub created_at_ms: i64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Summary {
    pub conversation: String,
    pub text: String,
    pub through_position: i64,
    pub updated_at_ms: i64,
}

/// A searchable row as retrieval needs it.
#[derive(Clone, Debug, PartialEq)]
pub struct Document {
    pub corpus: Corpus,
    pub id: i64,
    pub text: String,
    pub created_at_ms: i64,
    pub conversation: Option<String>,
    pub role: Option<String>,
    /// A message's author as the client named them (`name`; `None` for other corpora).
    pub author: Option<String>,
    pub embedding: Option<Embedding>,
    /// A turn whose facts were since replaced by newer ones (always false for other corpora).
    pub outdated: bool,
    /// Whom a memory is about ([`Memory::subject`]; `None` for other corpora).
    pub subject: Option<String>,
    /// The turn before a past turn, as (role, text): what it may reply to (`None` for a
    /// conversation's first turn and for other corpora).
    pub replies_to: Option<(String, String)>,
}

/// The columns (role, text) that read the turn before the past turn `t` ([`Document::replies_to`]):
/// the live one at the position before in the same conversation, or, for the first turn of a
/// branch (an edited message, a regenerated answer), the one at that position in the conversation
/// it branched from, where the turns before the fork are; `null` twice for a corpus without
/// turns. One SQL for both backends; the keyword context of a stored turn reads the same turn
/// (SQLite migration 16, PostgreSQL schema 4).
pub fn previous_turn_columns(corpus: Corpus, null: &str) -> (String, String) {
    let read = |column: &str| match corpus {
        Corpus::Message => format!(
            "COALESCE(
               (SELECT {column} FROM messages p
                WHERE p.conversation_id = t.conversation_id AND p.position = t.position - 1
                ORDER BY p.superseded, p.id DESC LIMIT 1),
               (SELECT {column} FROM conversations b
                JOIN conversations f ON f.uid = b.uid AND f.external_id = b.parent
                JOIN messages p ON p.conversation_id = f.id
                WHERE b.id = t.conversation_id AND p.position = t.position - 1
                ORDER BY p.superseded, p.id DESC LIMIT 1))"
        ),
        _ => null.to_owned(),
    };
    (read("p.role"), read("COALESCE(p.search_text, p.content)"))
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NewJob {
    pub kind: String,
    pub scope: Option<UserScope>,
    /// At most one queued job per key: enqueueing again pushes its start back (debounce).
    pub dedupe_key: Option<String>,
    pub payload: serde_json::Value,
    pub run_after_ms: i64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Job {
    pub id: i64,
    pub kind: String,
    pub scope: Option<UserScope>,
    pub payload: serde_json::Value,
    pub state: String,
    pub attempts: i64,
    pub run_after_ms: i64,
    pub last_error: Option<String>,
    /// What a finished job did.
    pub report: Option<String>,
}

/// A memory as exported and imported: everything but database ids and the vector.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PortableMemory {
    pub text: String,
    pub kind: String,
    #[serde(default)]
    pub sources: Vec<Source>,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
    #[serde(default)]
    pub valid_until_ms: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
}

/// One turn of the recall log as exported: portable (no database ids), with what the log knows
/// beyond the client's message.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PortableMessage {
    pub conversation: String,
    #[serde(flatten)]
    pub message: NewMessage,
    /// Replaced by an edited or regenerated history (kept, not searched, not learned from).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub superseded: bool,
    /// What search and summaries read instead of the raw content (an agent's log entries).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search_text: Option<String>,
    /// Filled on import, never exported (vectors are recomputed by the importing instance).
    #[serde(skip)]
    pub embedding: Option<Embedding>,
}

impl PortableMessage {
    /// A stored turn as exported (`embedding`: carried in memory only, never into a file).
    pub fn exported(stored: StoredMessage, embedding: Option<Embedding>) -> PortableMessage {
        PortableMessage {
            conversation: stored.conversation,
            message: NewMessage {
                position: stored.position,
                role: stored.role,
                content: stored.content,
                name: stored.name,
                tool_calls: stored.tool_calls,
                tool_call_id: stored.tool_call_id,
                created_at_ms: stored.created_at_ms,
            },
            superseded: stored.superseded,
            search_text: stored.search_text,
            embedding,
        }
    }
}

impl PortableMessage {
    /// The text that is embedded and searched.
    pub fn searchable(&self) -> &str {
        self.search_text.as_deref().unwrap_or(&self.message.content)
    }
}

/// A conversation in an export: its id, agent and, for a branch, where it left its parent.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PortableConversation {
    pub id: String,
    pub agent: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub fork_position: i64,
    /// The newest position the fact extractor has read: an import does not learn from those
    /// turns again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extracted_through: Option<i64>,
}

fn is_zero(value: &i64) -> bool {
    *value == 0
}

/// One user's whole memory, for export and import (embeddings only on the way in).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct UserBundle {
    pub conversations: Vec<PortableConversation>,
    pub messages: Vec<PortableMessage>,
    pub memories: Vec<(PortableMemory, Option<Embedding>)>,
    pub blocks: Vec<(String, CoreBlock)>,
    /// Shared blocks, each with the agents it is attached to.
    pub shared_blocks: Vec<SharedBlock>,
    /// `(agent, text, created_at_ms, embedding)`.
    pub passages: Vec<(String, String, i64, Option<Embedding>)>,
    pub summaries: Vec<Summary>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct ImportCounts {
    pub conversations: usize,
    pub messages: usize,
    pub memories: usize,
    pub blocks: usize,
    pub passages: usize,
    pub summaries: usize,
}

impl ImportCounts {
    /// Adds the counts of another part of the same import.
    pub fn add(&mut self, other: &ImportCounts) {
        self.conversations += other.conversations;
        self.messages += other.messages;
        self.memories += other.memories;
        self.blocks += other.blocks;
        self.passages += other.passages;
        self.summaries += other.summaries;
    }
}

/// Paging for listings.
#[derive(Clone, Copy, Debug)]
pub struct Page {
    pub limit: usize,
    pub offset: usize,
}

impl Default for Page {
    fn default() -> Self {
        Page {
            limit: 100,
            offset: 0,
        }
    }
}

/// Everything a backend stores: each area, the response log and the shared blocks.
pub trait Store:
    Users
    + RecallLog
    + Facts
    + Agents
    + Search
    + Transfer
    + Jobs
    + Integrity
    + responses::ResponseLog
    + blocks::SharedBlocks
    + Send
    + Sync
    + 'static
{
}

impl<T> Store for T where
    T: Users
        + RecallLog
        + Facts
        + Agents
        + Search
        + Transfer
        + Jobs
        + Integrity
        + responses::ResponseLog
        + blocks::SharedBlocks
        + Send
        + Sync
        + 'static
{
}

pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// SHA-256 of normalised text (trimmed, whitespace collapsed, lower-cased): equal facts, equal hash.
pub fn content_hash(text: &str) -> String {
    use sha2::{Digest, Sha256};
    let normalised = text
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase();
    hex::encode(Sha256::digest(normalised.as_bytes()))
}
