//! The memory store: the source of truth for everything memproxy remembers.
//!
//! A small synchronous trait ([`Store`]) with one implementation today, SQLite ([`sqlite`]);
//! a PostgreSQL backend for several replicas would be a second file behind the same trait.
//! Every method that touches memory takes a [`UserScope`]: there is no way to read or write
//! memory without naming whose it is. Callers on the async runtime go through
//! [`crate::memory::MemoryService`], which runs these calls on the blocking pool.

pub mod agent;
pub mod blocks;
pub mod history;
pub mod responses;
pub mod sqlite;

pub use agent::{
    agent_conversation, AgentCounts, AgentMessage, AgentRecord, StepRecord, Within,
    AGENT_CONVERSATION_PREFIX,
};
pub use blocks::{CoreBlock, SharedBlock, SharedBlocks, CLIENT_BLOCK};

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

impl From<&crate::identity::Scope> for UserScope {
    fn from(scope: &crate::identity::Scope) -> Self {
        UserScope::new(&scope.tenant, &scope.user)
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
    #[error("database error: {0}")]
    Database(#[from] rusqlite::Error),
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

/// Where a memory came from: a turn of a conversation (portable: no row ids).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Source {
    pub conversation: String,
    pub position: i64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct NewMemory {
    pub text: String,
    pub kind: String,
    pub sources: Vec<Source>,
    pub created_at_ms: i64,
    pub embedding: Option<Embedding>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Memory {
    pub id: i64,
    pub text: String,
    pub kind: String,
    pub sources: Vec<Source>,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
    pub valid_until_ms: Option<i64>,
    pub embedding_model: Option<String>,
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
    pub embedding: Option<Embedding>,
    /// A turn whose facts were since replaced by newer ones (always false for other corpora).
    pub outdated: bool,
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

pub trait Store: responses::ResponseLog + blocks::SharedBlocks + Send + Sync + 'static {
    // Users.
    fn ensure_user(&self, scope: &UserScope) -> StoreResult<i64>;
    /// `None` when the user has never been seen.
    fn find_user(&self, scope: &UserScope) -> StoreResult<Option<i64>>;
    fn list_users(&self, tenant: &str) -> StoreResult<Vec<String>>;
    /// Removes the user and everything they own; returns whether they existed.
    fn delete_user(&self, scope: &UserScope) -> StoreResult<bool>;

    // Recall log (imports keep their positions through `import_user`).
    /// Stores a chat app's view of a conversation, aligned with the log by content (positions are
    /// assigned here; a history that leaves the log continues in a branch, see [`history`]).
    fn sync_messages(
        &self,
        scope: &UserScope,
        conversation: &str,
        agent: &str,
        turns: &[NewMessage],
    ) -> StoreResult<Synced> {
        self.sync_messages_embedded(scope, conversation, agent, turns, &[])
    }
    /// As `sync_messages`, giving the new turns whose text is in `known` that embedding in the
    /// same transaction.
    fn sync_messages_embedded(
        &self,
        scope: &UserScope,
        conversation: &str,
        agent: &str,
        turns: &[NewMessage],
        known: &[(String, Embedding)],
    ) -> StoreResult<Synced>;
    fn list_conversations(&self, scope: &UserScope) -> StoreResult<Vec<Conversation>>;
    /// Newest log position the fact extractor has read (-1: none).
    fn extraction_progress(&self, scope: &UserScope, conversation: &str) -> StoreResult<i64>;
    fn set_extraction_progress(
        &self,
        scope: &UserScope,
        conversation: &str,
        position: i64,
    ) -> StoreResult<()>;
    fn list_messages(
        &self,
        scope: &UserScope,
        conversation: &str,
        page: Page,
    ) -> StoreResult<Vec<StoredMessage>>;

    // Memories.
    fn insert_memory(
        &self,
        scope: &UserScope,
        memory: &NewMemory,
        cause: &str,
    ) -> StoreResult<Inserted>;
    fn update_memory(
        &self,
        scope: &UserScope,
        id: i64,
        text: &str,
        embedding: Option<&Embedding>,
        new_sources: &[Source],
        cause: &str,
    ) -> StoreResult<u64>;
    /// Marks a memory as no longer true (kept, with `valid_until`); returns the new generation.
    fn invalidate_memory(&self, scope: &UserScope, id: i64, cause: &str) -> StoreResult<u64>;
    fn delete_memory(&self, scope: &UserScope, id: i64, cause: &str) -> StoreResult<u64>;
    /// Makes a retired memory live again (undoes an invalidation); returns the new generation.
    /// `DuplicateText` when a live memory already says the same.
    fn restore_memory(&self, scope: &UserScope, id: i64, cause: &str) -> StoreResult<u64>;
    fn list_memories(
        &self,
        scope: &UserScope,
        include_invalid: bool,
        page: Page,
    ) -> StoreResult<Vec<Memory>>;
    fn memory_events(&self, scope: &UserScope) -> StoreResult<Vec<MemoryEvent>>;

    // Agents (explicit mode).
    fn core_blocks(&self, scope: &UserScope, agent: &str) -> StoreResult<Vec<CoreBlock>>;
    fn put_core_block(&self, scope: &UserScope, agent: &str, block: &CoreBlock) -> StoreResult<()>;
    /// Reads one block and writes the value `edit` makes of it in one transaction, so a concurrent
    /// writer's change is never lost in between. `edit` may refuse (`Err`, passed back as is).
    /// `Ok(Err(labels))`: no block `label`; the agent's labels.
    fn edit_core_block(
        &self,
        scope: &UserScope,
        agent: &str,
        label: &str,
        edit: &mut dyn FnMut(&CoreBlock) -> Result<String, String>,
    ) -> StoreResult<Result<Result<CoreBlock, String>, Vec<String>>>;
    fn insert_passage(
        &self,
        scope: &UserScope,
        agent: &str,
        text: &str,
        created_at_ms: i64,
        embedding: Option<&Embedding>,
    ) -> StoreResult<(i64, u64)>;
    /// Archival passages of one agent (all agents: `None`), oldest first.
    fn list_passages(
        &self,
        scope: &UserScope,
        agent: Option<&str>,
        page: Page,
    ) -> StoreResult<Vec<Passage>>;
    /// Deletes one of an agent's passages; returns the new vector generation.
    fn delete_passage(&self, scope: &UserScope, agent: &str, id: i64) -> StoreResult<u64>;
    fn delete_core_block(&self, scope: &UserScope, agent: &str, label: &str) -> StoreResult<bool>;
    /// The agent, created with `blocks` (and its log) on first use.
    fn ensure_agent(
        &self,
        scope: &UserScope,
        agent: &str,
        blocks: &[CoreBlock],
    ) -> StoreResult<AgentRecord>;
    fn list_agents(&self, scope: &UserScope) -> StoreResult<Vec<AgentRecord>>;
    /// The agent's [`AgentRecord::memory_epoch`] (0 for an agent not yet created). Read it before
    /// the blocks a system message is compiled from.
    fn agent_memory_epoch(&self, scope: &UserScope, agent: &str) -> StoreResult<i64>;
    /// Stores the agent's compiled system message and alert state. `system`: the message and the
    /// memory epoch it was compiled at ([`AgentRecord::memory_epoch`]); it is stored only if
    /// memory has not changed since (else the agent compiles it again on its next turn).
    fn set_agent_state(
        &self,
        scope: &UserScope,
        agent: &str,
        system: Option<(&str, i64)>,
        pressure_alerted: bool,
    ) -> StoreResult<()>;
    /// Forgets an agent: blocks, passages, log, summary, steps. Returns whether it existed.
    fn reset_agent(&self, scope: &UserScope, agent: &str) -> StoreResult<bool>;
    /// The state of the agent's turn paused on client tool calls, if one is.
    fn paused_turn(&self, scope: &UserScope, agent: &str) -> StoreResult<Option<String>>;
    /// Pauses (`Some((turn id, state))`) or ends the pause of (`None`) the agent's turn.
    /// Appending the agent's messages ends its pause too, in the same transaction.
    fn set_paused_turn(
        &self,
        scope: &UserScope,
        agent: &str,
        paused: Option<(&str, &str)>,
    ) -> StoreResult<()>;
    /// Deletes one message of an agent's log with the results of its tool calls; returns the
    /// deleted `(id, position)`s and the new message-vector generation.
    fn delete_agent_message(
        &self,
        scope: &UserScope,
        agent: &str,
        position: i64,
    ) -> StoreResult<(Vec<(i64, i64)>, u64)>;
    /// Appends to the agent's log (one transaction), each message with its optional embedding;
    /// `end_pause`: a finished turn's messages, which end the agent's pause in that transaction.
    /// Returns the stored messages and `(uid, generation)` when vectors were written.
    #[allow(clippy::type_complexity)]
    fn append_agent_messages(
        &self,
        scope: &UserScope,
        agent: &str,
        messages: &[(AgentMessage, Option<Embedding>)],
        end_pause: bool,
    ) -> StoreResult<(Vec<StoredMessage>, Option<(i64, u64)>)>;
    /// Replaces an agent's tags; `false` when the agent does not exist.
    fn set_agent_tags(&self, scope: &UserScope, agent: &str, tags: &[String]) -> StoreResult<bool>;
    /// The summary of evicted messages and the messages still in context, oldest first.
    fn agent_context(
        &self,
        scope: &UserScope,
        agent: &str,
    ) -> StoreResult<(Option<Summary>, Vec<StoredMessage>)>;
    fn agent_counts(&self, scope: &UserScope, agent: &str) -> StoreResult<AgentCounts>;
    /// Searchable messages of a conversation created in `[from_ms, to_ms)`, oldest first, with
    /// the total count.
    fn messages_between(
        &self,
        scope: &UserScope,
        conversation: &str,
        from_ms: i64,
        to_ms: i64,
        page: Page,
    ) -> StoreResult<(usize, Vec<StoredMessage>)>;
    /// Appends a turn's steps and keeps only the newest `keep_turns` turns of the agent.
    fn record_steps(
        &self,
        scope: &UserScope,
        agent: &str,
        steps: &[StepRecord],
        keep_turns: usize,
    ) -> StoreResult<()>;
    /// Steps of the newest `turns` turns, oldest first.
    fn agent_steps(
        &self,
        scope: &UserScope,
        agent: &str,
        turns: usize,
    ) -> StoreResult<Vec<StepRecord>>;
    fn summary(&self, scope: &UserScope, conversation: &str) -> StoreResult<Option<Summary>>;
    fn put_summary(&self, scope: &UserScope, summary: &Summary) -> StoreResult<()>;

    // Retrieval support.
    /// BM25 keyword search over live rows: `(id, score)` with higher scores better.
    fn keyword_search(
        &self,
        scope: &UserScope,
        corpus: Corpus,
        query: &str,
        limit: usize,
        within: Option<&Within>,
    ) -> StoreResult<Vec<(i64, f64)>>;
    /// Ids of the searchable rows inside `within` (for filtering vector search).
    fn ids_within(
        &self,
        scope: &UserScope,
        corpus: Corpus,
        within: &Within,
    ) -> StoreResult<Vec<i64>>;
    /// Live rows by id, with their embeddings; ids of other users or deleted rows are skipped.
    fn documents(
        &self,
        scope: &UserScope,
        corpus: Corpus,
        ids: &[i64],
    ) -> StoreResult<Vec<Document>>;
    /// Every live embedding of one scope and model, for (re)building its vector index.
    fn embeddings(
        &self,
        uid: i64,
        corpus: Corpus,
        model: &str,
    ) -> StoreResult<Vec<(i64, Vec<f32>)>>;
    fn vector_generation(&self, uid: i64, corpus: Corpus) -> StoreResult<u64>;
    /// Users that have vectors (for the start-up index check).
    fn indexed_users(&self) -> StoreResult<Vec<i64>>;
    /// Rows without an embedding of `model` (for `memproxy reindex`), any user.
    fn rows_to_embed(
        &self,
        corpus: Corpus,
        model: &str,
        limit: usize,
    ) -> StoreResult<Vec<(i64, i64, String)>>;
    /// Sets embeddings of rows (one transaction); returns `(id, uid, generation)` per row.
    fn set_embeddings(
        &self,
        corpus: Corpus,
        rows: &[(i64, Embedding)],
    ) -> StoreResult<Vec<(i64, i64, u64)>>;

    // Export and import.
    /// A consistent snapshot of one user's memory; `None` for an unknown user.
    fn export_user(&self, scope: &UserScope) -> StoreResult<Option<UserBundle>>;
    /// Adds a bundle to a user in one transaction: all of it or nothing.
    fn import_user(&self, scope: &UserScope, bundle: &UserBundle) -> StoreResult<ImportCounts>;

    // Durable jobs.
    fn enqueue_job(&self, job: &NewJob) -> StoreResult<i64>;
    /// Takes the oldest due job (state → running, attempts + 1), or one `running` for longer than
    /// `lease_ms` (its worker is gone).
    fn claim_job(&self, now_ms: i64, lease_ms: i64) -> StoreResult<Option<Job>>;
    /// Marks a job done with what it did.
    fn complete_job(&self, id: i64, report: &str) -> StoreResult<()>;
    /// `retry_at_ms`: queue again then; `None`: give up (state failed).
    fn fail_job(&self, id: i64, error: &str, retry_at_ms: Option<i64>) -> StoreResult<()>;
    /// Jobs left running by a crash go back to the queue; returns how many.
    fn requeue_interrupted_jobs(&self) -> StoreResult<usize>;
    fn list_jobs(&self, state: Option<&str>, page: Page) -> StoreResult<Vec<Job>>;
    /// Jobs of `kind` of one user finished (done) since `since_ms` (a per-user budget).
    fn count_done_jobs(&self, scope: &UserScope, kind: &str, since_ms: i64) -> StoreResult<u64>;
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
