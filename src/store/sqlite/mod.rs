//! The SQLite store (bundled SQLite, WAL): the embedded default backend.
//!
//! One writer connection (SQLite serialises writers anyway) and a few reader connections, so
//! retrieval reads are not queued behind writes. Every write runs in one transaction: a failure
//! leaves nothing half-written. Schema changes are migrations recorded in `schema_migrations`.

mod agent;
mod agent_log;
mod agent_pause;
mod jobs;
mod memories;
mod recall;
mod responses;
mod schema;
mod search;
mod shared;
mod transfer;

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

use rusqlite::{params, Connection, OptionalExtension, Transaction, TransactionBehavior};

use super::{Corpus, StoreError, StoreResult, UserScope, Within};

const READERS: usize = 4;

pub struct SqliteStore {
    writer: Mutex<Connection>,
    readers: Vec<Mutex<Connection>>,
    next_reader: AtomicUsize,
    common_terms: search::CommonTerms,
}

fn lock(mutex: &Mutex<Connection>) -> MutexGuard<'_, Connection> {
    // A panic while holding a connection cannot leave a transaction open (rusqlite rolls back on
    // drop), so a poisoned lock is safe to reuse.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn open_connection(path: &Path) -> StoreResult<Connection> {
    let connection = Connection::open(path)?;
    connection.busy_timeout(std::time::Duration::from_secs(10))?;
    connection.execute_batch(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON;",
    )?;
    Ok(connection)
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `path` and applies pending migrations.
    pub fn open(path: &Path) -> StoreResult<SqliteStore> {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let writer = open_connection(path)?;
        migrate(&writer)?;
        let readers = (0..READERS)
            .map(|_| open_connection(path).map(Mutex::new))
            .collect::<StoreResult<Vec<_>>>()?;
        Ok(SqliteStore {
            writer: Mutex::new(writer),
            readers,
            next_reader: AtomicUsize::new(0),
            common_terms: search::CommonTerms::default(),
        })
    }

    /// Runs `work` in an immediate (write-locking) transaction, committed only if it succeeds.
    fn write<T>(&self, work: impl FnOnce(&Transaction) -> StoreResult<T>) -> StoreResult<T> {
        let mut connection = lock(&self.writer);
        let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let value = work(&transaction)?;
        transaction.commit()?;
        Ok(value)
    }

    fn read<T>(&self, work: impl FnOnce(&Connection) -> StoreResult<T>) -> StoreResult<T> {
        let start = self.next_reader.fetch_add(1, Ordering::Relaxed);
        for offset in 0..self.readers.len() {
            if let Ok(connection) = self.readers[(start + offset) % self.readers.len()].try_lock() {
                return work(&connection);
            }
        }
        work(&lock(&self.readers[start % self.readers.len()]))
    }

    pub fn schema_version(&self) -> StoreResult<i64> {
        self.read(|c| {
            Ok(c.query_row(
                "SELECT COALESCE(MAX(version), 0) FROM schema_migrations",
                [],
                |r| r.get(0),
            )?)
        })
    }
}

fn migrate(connection: &Connection) -> StoreResult<()> {
    connection.execute_batch(
        "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL);",
    )?;
    let current: i64 = connection.query_row(
        "SELECT COALESCE(MAX(version), 0) FROM schema_migrations",
        [],
        |row| row.get(0),
    )?;
    if current > schema::MIGRATIONS.len() as i64 {
        return Err(StoreError::Invalid(format!(
            "the database has schema version {current}, newer than this memproxy knows ({}); upgrade memproxy",
            schema::MIGRATIONS.len()
        )));
    }
    for (index, migration) in schema::MIGRATIONS.iter().enumerate().skip(current as usize) {
        let version = index as i64 + 1;
        connection.execute_batch("BEGIN IMMEDIATE")?;
        let applied = connection.execute_batch(migration).and_then(|()| {
            connection.execute(
                "INSERT INTO schema_migrations (version, applied_at) VALUES (?1, ?2)",
                params![version, super::now_ms()],
            )
        });
        match applied {
            Ok(_) => connection.execute_batch("COMMIT")?,
            Err(error) => {
                connection.execute_batch("ROLLBACK")?;
                return Err(error.into());
            }
        }
        tracing::info!(version, "applied database migration");
    }
    Ok(())
}

fn find_uid(connection: &Connection, scope: &UserScope) -> StoreResult<Option<i64>> {
    Ok(connection
        .query_row(
            "SELECT id FROM users WHERE tenant = ?1 AND name = ?2",
            params![scope.tenant, scope.user],
            |row| row.get(0),
        )
        .optional()?)
}

fn require_uid(connection: &Connection, scope: &UserScope) -> StoreResult<i64> {
    find_uid(connection, scope)?.ok_or_else(|| {
        StoreError::NotFound(format!(
            "user '{}' of tenant '{}'",
            scope.user, scope.tenant
        ))
    })
}

fn ensure_uid(connection: &Connection, scope: &UserScope) -> StoreResult<i64> {
    connection.execute(
        "INSERT OR IGNORE INTO users (tenant, name, created_at) VALUES (?1, ?2, ?3)",
        params![scope.tenant, scope.user, super::now_ms()],
    )?;
    require_uid(connection, scope)
}

/// Bumps and returns the vector generation of one scope and corpus.
fn bump_generation(connection: &Connection, uid: i64, corpus: Corpus) -> StoreResult<u64> {
    let generation: i64 = connection.query_row(
        "INSERT INTO vector_generations (uid, corpus, generation) VALUES (?1, ?2, 1)
         ON CONFLICT (uid, corpus) DO UPDATE SET generation = generation + 1
         RETURNING generation",
        params![uid, corpus.as_str()],
        |row| row.get(0),
    )?;
    Ok(generation as u64)
}

fn to_blob(vector: &[f32]) -> Vec<u8> {
    vector.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn from_blob(blob: &[u8]) -> Vec<f32> {
    blob.chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

/// Table, text expression (on the table aliased `t`) and FTS table of each corpus.
fn corpus_tables(corpus: Corpus) -> (&'static str, &'static str, &'static str) {
    match corpus {
        Corpus::Memory => ("memories", "t.text", "memories_fts"),
        Corpus::Message => (
            "messages",
            "COALESCE(t.search_text, t.content)",
            "messages_fts",
        ),
        Corpus::Passage => ("archival_passages", "t.text", "passages_fts"),
    }
}

/// The SQL condition (on the table aliased `t`, user id in `?1`/`?2` already bound as `t.uid`)
/// restricting a corpus to one agent or conversation, and the key to bind at `placeholder`.
fn within_condition(
    corpus: Corpus,
    within: &Within,
    placeholder: &str,
) -> StoreResult<(String, String)> {
    match (corpus, within) {
        (Corpus::Passage, Within::Agent(agent)) => {
            Ok((format!("t.agent = {placeholder}"), agent.clone()))
        }
        (Corpus::Message, Within::Conversation(conversation)) => Ok((
            format!(
                "t.conversation_id = (SELECT c.id FROM conversations c
                 WHERE c.uid = t.uid AND c.external_id = {placeholder})"
            ),
            conversation.clone(),
        )),
        (corpus, within) => Err(StoreError::Invalid(format!(
            "cannot restrict {} search to {within:?}",
            corpus.as_str()
        ))),
    }
}

/// Only live rows are searchable: invalidated memories are history, not knowledge.
/// A condition on the table aliased `t`.
fn live_condition(corpus: Corpus) -> &'static str {
    match corpus {
        Corpus::Memory => "t.valid_until IS NULL",
        Corpus::Message => "t.superseded = 0",
        Corpus::Passage => "TRUE",
    }
}

impl super::Store for SqliteStore {
    fn ensure_user(&self, scope: &UserScope) -> StoreResult<i64> {
        if let Some(uid) = self.find_user(scope)? {
            return Ok(uid);
        }
        self.write(|tx| ensure_uid(tx, scope))
    }

    fn find_user(&self, scope: &UserScope) -> StoreResult<Option<i64>> {
        self.read(|c| find_uid(c, scope))
    }

    fn list_users(&self, tenant: &str) -> StoreResult<Vec<String>> {
        self.read(|c| {
            let mut statement =
                c.prepare("SELECT name FROM users WHERE tenant = ?1 ORDER BY name")?;
            let names = statement
                .query_map([tenant], |row| row.get(0))?
                .collect::<Result<Vec<String>, _>>()?;
            Ok(names)
        })
    }

    fn delete_user(&self, scope: &UserScope) -> StoreResult<bool> {
        self.write(|tx| {
            let Some(uid) = find_uid(tx, scope)? else {
                return Ok(false);
            };
            // Cascades to every table that holds the user's memory (FTS rows via triggers).
            tx.execute("DELETE FROM users WHERE id = ?1", [uid])?;
            Ok(true)
        })
    }

    fn sync_messages_embedded(
        &self,
        scope: &UserScope,
        conversation: &str,
        agent: &str,
        turns: &[super::NewMessage],
        known: &[(String, super::Embedding)],
    ) -> StoreResult<super::Synced> {
        self.write(|tx| {
            let (conversation, stored) = recall::sync(tx, scope, conversation, agent, turns)?;
            let mut embedded = Vec::new();
            for message in &stored {
                if let Some((_, embedding)) =
                    known.iter().find(|(text, _)| *text == message.content)
                {
                    let (uid, generation) =
                        search::set_embedding(tx, Corpus::Message, message.id, embedding)?;
                    embedded.push((message.id, uid, generation));
                }
            }
            Ok(super::Synced {
                conversation,
                stored,
                embedded,
            })
        })
    }

    fn extraction_progress(&self, scope: &UserScope, conversation: &str) -> StoreResult<i64> {
        self.read(|c| recall::extraction_progress(c, scope, conversation))
    }

    fn set_extraction_progress(
        &self,
        scope: &UserScope,
        conversation: &str,
        position: i64,
    ) -> StoreResult<()> {
        self.write(|tx| recall::set_extraction_progress(tx, scope, conversation, position))
    }

    fn list_conversations(&self, scope: &UserScope) -> StoreResult<Vec<super::Conversation>> {
        self.read(|c| recall::conversations(c, scope))
    }

    fn list_messages(
        &self,
        scope: &UserScope,
        conversation: &str,
        page: super::Page,
    ) -> StoreResult<Vec<super::StoredMessage>> {
        self.read(|c| recall::messages(c, scope, conversation, page))
    }

    fn insert_memory(
        &self,
        scope: &UserScope,
        memory: &super::NewMemory,
        cause: &str,
    ) -> StoreResult<super::Inserted> {
        self.write(|tx| memories::insert(tx, scope, memory, cause))
    }

    fn update_memory(
        &self,
        scope: &UserScope,
        id: i64,
        text: &str,
        embedding: Option<&super::Embedding>,
        new_sources: &[super::Source],
        cause: &str,
    ) -> StoreResult<u64> {
        self.write(|tx| memories::update(tx, scope, id, text, embedding, new_sources, cause))
    }

    fn invalidate_memory(&self, scope: &UserScope, id: i64, cause: &str) -> StoreResult<u64> {
        self.write(|tx| memories::invalidate(tx, scope, id, cause))
    }

    fn delete_memory(&self, scope: &UserScope, id: i64, cause: &str) -> StoreResult<u64> {
        self.write(|tx| memories::delete(tx, scope, id, cause))
    }

    fn restore_memory(&self, scope: &UserScope, id: i64, cause: &str) -> StoreResult<u64> {
        self.write(|tx| memories::restore(tx, scope, id, cause))
    }

    fn list_memories(
        &self,
        scope: &UserScope,
        include_invalid: bool,
        page: super::Page,
    ) -> StoreResult<Vec<super::Memory>> {
        self.read(|c| memories::list(c, scope, include_invalid, page))
    }

    fn memory_events(&self, scope: &UserScope) -> StoreResult<Vec<super::MemoryEvent>> {
        self.read(|c| memories::events(c, scope))
    }

    fn core_blocks(&self, scope: &UserScope, agent: &str) -> StoreResult<Vec<super::CoreBlock>> {
        self.read(|c| agent::blocks(c, scope, agent))
    }

    fn put_core_block(
        &self,
        scope: &UserScope,
        agent: &str,
        block: &super::CoreBlock,
    ) -> StoreResult<()> {
        self.write(|tx| agent::put_block(tx, scope, agent, block))
    }

    fn edit_core_block(
        &self,
        scope: &UserScope,
        agent: &str,
        label: &str,
        edit: &mut dyn FnMut(&super::CoreBlock) -> Result<String, String>,
    ) -> StoreResult<Result<Result<super::CoreBlock, String>, Vec<String>>> {
        self.write(|tx| {
            let blocks = agent::blocks(tx, scope, agent)?;
            let labels: Vec<String> = blocks.iter().map(|b| b.label.clone()).collect();
            let Some(mut block) = blocks.into_iter().find(|b| b.label == label) else {
                return Ok(Err(labels));
            };
            match edit(&block) {
                Ok(value) => {
                    block.value = value;
                    agent::put_block(tx, scope, agent, &block)?;
                    Ok(Ok(Ok(block)))
                }
                Err(refused) => Ok(Ok(Err(refused))),
            }
        })
    }

    fn insert_passage(
        &self,
        scope: &UserScope,
        agent: &str,
        text: &str,
        created_at_ms: i64,
        embedding: Option<&super::Embedding>,
    ) -> StoreResult<(i64, u64)> {
        self.write(|tx| agent::insert_passage(tx, scope, agent, text, created_at_ms, embedding))
    }

    fn list_passages(
        &self,
        scope: &UserScope,
        agent: Option<&str>,
        page: super::Page,
    ) -> StoreResult<Vec<super::Passage>> {
        self.read(|c| agent::passages(c, scope, agent, page))
    }

    fn delete_passage(&self, scope: &UserScope, agent: &str, id: i64) -> StoreResult<u64> {
        self.write(|tx| agent::delete_passage(tx, scope, agent, id))
    }

    fn delete_core_block(&self, scope: &UserScope, agent: &str, label: &str) -> StoreResult<bool> {
        self.write(|tx| agent::delete_block(tx, scope, agent, label))
    }

    fn ensure_agent(
        &self,
        scope: &UserScope,
        agent: &str,
        blocks: &[super::CoreBlock],
    ) -> StoreResult<super::AgentRecord> {
        if let Some(found) = self.read(|c| agent_log::find(c, scope, agent))? {
            return Ok(found);
        }
        self.write(|tx| agent_log::ensure(tx, scope, agent, blocks))
    }

    fn list_agents(&self, scope: &UserScope) -> StoreResult<Vec<super::AgentRecord>> {
        self.read(|c| agent_log::list(c, scope))
    }

    fn agent_memory_epoch(&self, scope: &UserScope, agent: &str) -> StoreResult<i64> {
        self.read(|c| Ok(agent_log::find(c, scope, agent)?.map_or(0, |a| a.memory_epoch)))
    }

    fn set_agent_state(
        &self,
        scope: &UserScope,
        agent: &str,
        system: Option<(&str, i64)>,
        pressure_alerted: bool,
    ) -> StoreResult<()> {
        self.write(|tx| agent_log::set_state(tx, scope, agent, system, pressure_alerted))
    }

    fn reset_agent(&self, scope: &UserScope, agent: &str) -> StoreResult<bool> {
        self.write(|tx| agent_log::reset(tx, scope, agent))
    }

    fn paused_turn(&self, scope: &UserScope, agent: &str) -> StoreResult<Option<String>> {
        self.read(|c| agent_pause::get(c, scope, agent))
    }

    fn set_paused_turn(
        &self,
        scope: &UserScope,
        agent: &str,
        paused: Option<(&str, &str)>,
    ) -> StoreResult<()> {
        self.write(|tx| agent_pause::set(tx, scope, agent, paused))
    }

    fn delete_agent_message(
        &self,
        scope: &UserScope,
        agent: &str,
        position: i64,
    ) -> StoreResult<(Vec<(i64, i64)>, u64)> {
        self.write(|tx| agent_log::delete_message(tx, scope, agent, position))
    }

    fn append_agent_messages(
        &self,
        scope: &UserScope,
        agent: &str,
        messages: &[(super::AgentMessage, Option<super::Embedding>)],
        end_pause: bool,
    ) -> StoreResult<(Vec<super::StoredMessage>, Option<(i64, u64)>)> {
        self.write(|tx| agent_log::append(tx, scope, agent, messages, end_pause))
    }

    fn set_agent_tags(&self, scope: &UserScope, agent: &str, tags: &[String]) -> StoreResult<bool> {
        self.write(|tx| agent_log::set_tags(tx, scope, agent, tags))
    }

    fn agent_context(
        &self,
        scope: &UserScope,
        agent: &str,
    ) -> StoreResult<(Option<super::Summary>, Vec<super::StoredMessage>)> {
        self.read(|c| agent_log::context(c, scope, agent))
    }

    fn agent_counts(&self, scope: &UserScope, agent: &str) -> StoreResult<super::AgentCounts> {
        self.read(|c| agent_log::counts(c, scope, agent))
    }

    fn messages_between(
        &self,
        scope: &UserScope,
        conversation: &str,
        from_ms: i64,
        to_ms: i64,
        page: super::Page,
    ) -> StoreResult<(usize, Vec<super::StoredMessage>)> {
        self.read(|c| agent_log::between(c, scope, conversation, from_ms, to_ms, page))
    }

    fn record_steps(
        &self,
        scope: &UserScope,
        agent: &str,
        steps: &[super::StepRecord],
        keep_turns: usize,
    ) -> StoreResult<()> {
        self.write(|tx| agent_log::record_steps(tx, scope, agent, steps, keep_turns))
    }

    fn agent_steps(
        &self,
        scope: &UserScope,
        agent: &str,
        turns: usize,
    ) -> StoreResult<Vec<super::StepRecord>> {
        self.read(|c| agent_log::steps(c, scope, agent, turns))
    }

    fn summary(
        &self,
        scope: &UserScope,
        conversation: &str,
    ) -> StoreResult<Option<super::Summary>> {
        self.read(|c| agent::summary(c, scope, conversation))
    }

    fn put_summary(&self, scope: &UserScope, summary: &super::Summary) -> StoreResult<()> {
        self.write(|tx| agent::put_summary(tx, scope, summary))
    }

    fn keyword_search(
        &self,
        scope: &UserScope,
        corpus: Corpus,
        query: &str,
        limit: usize,
        within: Option<&Within>,
    ) -> StoreResult<Vec<(i64, f64)>> {
        self.read(|c| {
            search::keyword_search(c, &self.common_terms, scope, corpus, query, limit, within)
        })
    }

    fn ids_within(
        &self,
        scope: &UserScope,
        corpus: Corpus,
        within: &Within,
    ) -> StoreResult<Vec<i64>> {
        self.read(|c| search::ids_within(c, scope, corpus, within))
    }

    fn documents(
        &self,
        scope: &UserScope,
        corpus: Corpus,
        ids: &[i64],
    ) -> StoreResult<Vec<super::Document>> {
        self.read(|c| search::documents(c, scope, corpus, ids))
    }

    fn embeddings(
        &self,
        uid: i64,
        corpus: Corpus,
        model: &str,
    ) -> StoreResult<Vec<(i64, Vec<f32>)>> {
        self.read(|c| search::embeddings(c, uid, corpus, model))
    }

    fn vector_generation(&self, uid: i64, corpus: Corpus) -> StoreResult<u64> {
        self.read(|c| {
            let generation: Option<i64> = c
                .query_row(
                    "SELECT generation FROM vector_generations WHERE uid = ?1 AND corpus = ?2",
                    params![uid, corpus.as_str()],
                    |row| row.get(0),
                )
                .optional()?;
            Ok(generation.unwrap_or(0) as u64)
        })
    }

    fn indexed_users(&self) -> StoreResult<Vec<i64>> {
        self.read(|c| {
            let mut statement =
                c.prepare("SELECT DISTINCT uid FROM vector_generations ORDER BY uid")?;
            let uids = statement
                .query_map([], |row| row.get(0))?
                .collect::<Result<Vec<i64>, _>>()?;
            Ok(uids)
        })
    }

    fn rows_to_embed(
        &self,
        corpus: Corpus,
        model: &str,
        limit: usize,
    ) -> StoreResult<Vec<(i64, i64, String)>> {
        self.read(|c| search::rows_to_embed(c, corpus, model, limit))
    }

    fn set_embeddings(
        &self,
        corpus: Corpus,
        rows: &[(i64, super::Embedding)],
    ) -> StoreResult<Vec<(i64, i64, u64)>> {
        self.write(|tx| {
            rows.iter()
                .map(|(id, embedding)| {
                    let (uid, generation) = search::set_embedding(tx, corpus, *id, embedding)?;
                    Ok((*id, uid, generation))
                })
                .collect()
        })
    }

    fn export_user(&self, scope: &UserScope) -> StoreResult<Option<super::UserBundle>> {
        // One read transaction: a snapshot even while the proxy keeps writing.
        let mut connection = lock(&self.readers[0]);
        let snapshot = connection.transaction()?;
        transfer::export(&snapshot, scope)
    }

    fn import_user(
        &self,
        scope: &UserScope,
        bundle: &super::UserBundle,
    ) -> StoreResult<super::ImportCounts> {
        self.write(|tx| transfer::import(tx, scope, bundle))
    }

    fn enqueue_job(&self, job: &super::NewJob) -> StoreResult<i64> {
        self.write(|tx| jobs::enqueue(tx, job))
    }

    fn claim_job(&self, now_ms: i64, lease_ms: i64) -> StoreResult<Option<super::Job>> {
        self.write(|tx| jobs::claim(tx, now_ms, lease_ms))
    }

    fn complete_job(&self, id: i64, report: &str) -> StoreResult<()> {
        self.write(|tx| jobs::complete(tx, id, report))
    }

    fn fail_job(&self, id: i64, error: &str, retry_at_ms: Option<i64>) -> StoreResult<()> {
        self.write(|tx| jobs::fail(tx, id, error, retry_at_ms))
    }

    fn requeue_interrupted_jobs(&self) -> StoreResult<usize> {
        self.write(jobs::requeue_interrupted)
    }

    fn list_jobs(&self, state: Option<&str>, page: super::Page) -> StoreResult<Vec<super::Job>> {
        self.read(|c| jobs::list(c, state, page))
    }

    fn count_done_jobs(&self, scope: &UserScope, kind: &str, since_ms: i64) -> StoreResult<u64> {
        self.read(|c| {
            let Some(uid) = find_uid(c, scope)? else {
                return Ok(0);
            };
            let count: i64 = c.query_row(
                "SELECT COUNT(*) FROM jobs
                 WHERE uid = ?1 AND kind = ?2 AND state = 'done' AND updated_at >= ?3",
                params![uid, kind, since_ms],
                |row| row.get(0),
            )?;
            Ok(count as u64)
        })
    }
}
