//! The store's areas, one small trait each, so that a backend is written (and tested) area by
//! area. [`super::Store`] is every area together; callers on the async runtime reach it through
//! [`crate::memory::MemoryService`]. Every method that touches memory takes a [`UserScope`].

use super::{
    AgentCounts, AgentMessage, AgentRecord, Conversation, CoreBlock, Corpus, Document, Embedding,
    FormerFact, ImportCounts, Inserted, Job, Memory, MemoryEvent, NewJob, NewMemory, NewMessage,
    Page, Passage, Source, StepRecord, StoreError, StoreResult, StoredMessage, Summary, Synced,
    TurnLock, UserBundle, UserScope, Within,
};

/// Users of a tenant: each has an id the other areas (and the vector indexes) key rows by.
pub trait Users {
    fn ensure_user(&self, scope: &UserScope) -> StoreResult<i64>;
    /// `None` when the user has never been seen.
    fn find_user(&self, scope: &UserScope) -> StoreResult<Option<i64>>;
    fn list_users(&self, tenant: &str) -> StoreResult<Vec<String>>;
    /// Every tenant that has users (`memproxy migrate` copies them all).
    fn list_tenants(&self) -> StoreResult<Vec<String>>;
    /// Removes the user and everything they own; returns whether they existed.
    fn delete_user(&self, scope: &UserScope) -> StoreResult<bool>;
}

/// The recall log: every turn of every conversation (branches included), the extraction
/// progress over it, and the rolling summary of each conversation.
pub trait RecallLog {
    /// Stores a chat app's view of a conversation, aligned with the log by content (positions are
    /// assigned here; a history that leaves the log continues in a branch, see [`super::history`]).
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
    fn summary(&self, scope: &UserScope, conversation: &str) -> StoreResult<Option<Summary>>;
    fn put_summary(&self, scope: &UserScope, summary: &Summary) -> StoreResult<()>;
}

/// The facts learned about a user (implicit mode, the management API, MCP), with their audit
/// log. Writes return the vector generation they made.
pub trait Facts {
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
    /// The live memory that says exactly `text` (surrounding space aside), if one does.
    fn live_memory_id(&self, scope: &UserScope, text: &str) -> StoreResult<Option<i64>>;
    /// The newest `limit` facts that no longer hold ([`FormerFact`]), newest first.
    fn former_facts(&self, scope: &UserScope, limit: usize) -> StoreResult<Vec<FormerFact>>;
}

/// Explicit-mode agents: core blocks, archival passages, the agent's own log and context, a
/// paused turn, tags, step traces.
pub trait Agents {
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
    /// Searchable messages of an agent's recall memory (its log `conversation` and the user's
    /// chats, as [`Within::Recall`]) created in `[from_ms, to_ms)`, oldest first, with the total
    /// count.
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
    /// Waits for and holds the agent's turn lock across every process sharing this store, until
    /// the guard is dropped. `None`: one process has the store (SQLite), whose own lock suffices.
    fn hold_turn_lock(&self, _scope: &UserScope, _agent: &str) -> StoreResult<Option<TurnLock>> {
        Ok(None)
    }
}

/// What retrieval reads: keyword search, the rows and embeddings behind the vector indexes,
/// and re-embedding.
pub trait Search {
    /// BM25 keyword search over live rows: `(id, score)` with higher scores better.
    fn keyword_search(
        &self,
        scope: &UserScope,
        corpus: Corpus,
        query: &str,
        limit: usize,
        within: Option<&Within>,
    ) -> StoreResult<Vec<(i64, f64)>>;
    /// Up to `limit` texts of the user's live rows in `corpus` that contain one of `words` as
    /// keyword search matches words (stemmed), however common the words are: for telling whether
    /// the user ever said something. For messages, the user's own turns only.
    fn texts_with(
        &self,
        scope: &UserScope,
        corpus: Corpus,
        words: &[String],
        limit: usize,
    ) -> StoreResult<Vec<String>>;
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
    /// The live messages within `window` positions of each of `ids` in the same conversation
    /// (a turn's neighbours), as `(id, neighbour id, distance)`; other users' ids yield nothing.
    fn message_neighbours(
        &self,
        scope: &UserScope,
        ids: &[i64],
        window: i64,
    ) -> StoreResult<Vec<(i64, i64, i64)>>;
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
    /// Whether the backend searches vectors itself ([`Self::nearest`]). When it does not
    /// (SQLite), memproxy keeps index files beside the database ([`crate::vector`]).
    fn keeps_vectors(&self) -> bool {
        false
    }
    /// Makes the backend ready to search vectors of `model` (its indexes), at start-up.
    fn prepare_vectors(&self, _model: &str, _dimensions: usize) -> StoreResult<()> {
        Ok(())
    }
    /// The live rows of one user and corpus nearest to `query` among the vectors of `model`
    /// (only ids in `among`, when given): `(id, cosine similarity)`, best first.
    fn nearest(
        &self,
        _uid: i64,
        _corpus: Corpus,
        _model: &str,
        _query: &[f32],
        _k: usize,
        _among: Option<&[i64]>,
    ) -> StoreResult<Vec<(i64, f32)>> {
        Err(StoreError::Unsupported(
            "this store keeps no vectors; search its vector index files".to_owned(),
        ))
    }
}

/// Export and import of one user's whole memory.
pub trait Transfer {
    /// A consistent snapshot of one user's memory; `None` for an unknown user.
    fn export_user(&self, scope: &UserScope) -> StoreResult<Option<UserBundle>>;
    /// Adds a bundle to a user in one transaction: all of it or nothing.
    fn import_user(&self, scope: &UserScope, bundle: &UserBundle) -> StoreResult<ImportCounts>;
}

/// The durable job queue of the post-processor (leased; a crashed worker's job runs again).
pub trait Jobs {
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

/// What the consistency check (`memproxy check`, `GET /memproxy/v1/check`) asks of the store:
/// read-only, except the `repair` of what can be put right without losing anything.
pub trait Integrity {
    /// Whether the store was opened read-only (its files cannot be written): reads are served,
    /// every write fails with `CannotWrite`, and no background work is started.
    fn read_only(&self) -> bool {
        false
    }
    /// Problems the database finds in its own storage (SQLite's `integrity_check`; PostgreSQL
    /// checks its pages itself).
    fn storage_problems(&self) -> StoreResult<Vec<String>>;
    /// Rows whose parent row is gone, per table; `repair` deletes them (they belong to nothing).
    fn orphan_rows(&self, repair: bool) -> StoreResult<Vec<(String, u64)>>;
    /// Conversations whose extraction progress is past their last turn (the turns that come
    /// next would never be learned from); `repair` sets it back to the last turn.
    fn progress_past_end(&self, repair: bool) -> StoreResult<u64>;
    /// Live memories with blank text (no gate lets one in; an old version or a bug might have).
    fn blank_memories(&self) -> StoreResult<u64>;
    /// Ids of jobs `running` with no sign of life since `before_ms` (their worker is gone).
    fn stalled_jobs(&self, before_ms: i64) -> StoreResult<Vec<i64>>;
    /// How many jobs are in each state.
    fn job_states(&self) -> StoreResult<Vec<(String, u64)>>;
}
