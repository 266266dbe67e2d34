//! The SQLite store (bundled SQLite, WAL): the embedded default backend.
//!
//! One writer connection (SQLite serialises writers anyway) and a few reader connections, so
//! retrieval reads are not queued behind writes. Every write runs in one transaction: a failure
//! leaves nothing half-written. Schema changes are migrations recorded in `schema_migrations`.

mod agent_log;
mod agent_row;
mod agents;
mod facts;
mod integrity;
mod jobs;
mod recall;
mod responses;
mod schema;
mod search;
mod shared;
mod transfer;
mod users;

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

use rusqlite::{params, Connection, OptionalExtension, Transaction, TransactionBehavior};

use super::{Corpus, StoreError, StoreResult, UserScope, Within, AGENT_CONVERSATION_PREFIX};

const READERS: usize = 4;

pub struct SqliteStore {
    writer: Mutex<Connection>,
    readers: Vec<Mutex<Connection>>,
    next_reader: AtomicUsize,
    common_terms: crate::store::keywords::CommonTerms,
    /// Opened read-only (see [`SqliteStore::open_or_read_only`]).
    read_only: bool,
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
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON; \
         PRAGMA secure_delete = ON;",
    )?;
    Ok(connection)
}

/// The driver's errors become the store's backend-neutral one.
impl From<rusqlite::Error> for StoreError {
    fn from(error: rusqlite::Error) -> Self {
        use rusqlite::ErrorCode::{CannotOpen, DiskFull, ReadOnly, SystemIoFailure};
        match &error {
            // A full disk shows as SQLITE_FULL, or as an I/O error when a write is cut short.
            rusqlite::Error::SqliteFailure(failure, _)
                if matches!(
                    failure.code,
                    DiskFull | ReadOnly | CannotOpen | SystemIoFailure
                ) =>
            {
                StoreError::CannotWrite(error.to_string())
            }
            _ => StoreError::Database(error.to_string()),
        }
    }
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `path` and applies pending migrations.
    pub fn open(path: &Path) -> StoreResult<SqliteStore> {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let writer = open_connection(path)?;
        // SQLite opens a file it cannot write read-only without saying so.
        if writer.is_readonly(rusqlite::MAIN_DB)? {
            return Err(StoreError::CannotWrite(format!(
                "{} is read-only",
                path.display()
            )));
        }
        migrate(&writer)?;
        SqliteStore::with_connections(writer, || open_connection(path), false)
    }

    /// Opens the database at `path`, or, when it exists but cannot be written (its directory or
    /// disk is read-only), opens it read-only: reads are served, every write fails with
    /// [`StoreError::CannotWrite`]. The second value says which (`true`: read-only).
    pub fn open_or_read_only(path: &Path) -> StoreResult<(SqliteStore, bool)> {
        match SqliteStore::open(path) {
            Ok(store) => Ok((store, false)),
            Err(error @ (StoreError::CannotWrite(_) | StoreError::Io(_))) if path.exists() => {
                match SqliteStore::open_read_only(path) {
                    Ok(store) => Ok((store, true)),
                    Err(_) => Err(error),
                }
            }
            Err(error) => Err(error),
        }
    }

    /// Opens an existing database that cannot be written: with the WAL a crash left beside it
    /// (SQLite reads a read-only WAL database when its `-shm` and `-wal` files exist), else as an
    /// immutable file (after a clean stop there is no WAL). Only a database at this memproxy's
    /// schema version can be served so.
    fn open_read_only(path: &Path) -> StoreResult<SqliteStore> {
        SqliteStore::open_read_only_as(path, false)
            .or_else(|_| SqliteStore::open_read_only_as(path, true))
    }

    fn open_read_only_as(path: &Path, immutable: bool) -> StoreResult<SqliteStore> {
        use rusqlite::OpenFlags;
        let encoded: String = path
            .to_string_lossy()
            .chars()
            .map(|c| match c {
                '%' => "%25".to_owned(),
                '?' => "%3f".to_owned(),
                '#' => "%23".to_owned(),
                c => c.to_string(),
            })
            .collect();
        let uri = if immutable {
            format!("file:{encoded}?immutable=1")
        } else {
            format!("file:{encoded}?mode=ro")
        };
        let open = || -> StoreResult<Connection> {
            let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
                | OpenFlags::SQLITE_OPEN_URI
                | OpenFlags::SQLITE_OPEN_NO_MUTEX;
            let connection = Connection::open_with_flags(&uri, flags)?;
            connection.execute_batch("PRAGMA foreign_keys = ON;")?;
            Ok(connection)
        };
        let writer = open()?;
        let current: i64 = writer.query_row(
            "SELECT COALESCE(MAX(version), 0) FROM schema_migrations",
            [],
            |row| row.get(0),
        )?;
        if current != schema::MIGRATIONS.len() as i64 {
            return Err(StoreError::CannotWrite(format!(
                "the database has schema version {current} and needs migrating to {}, but it cannot be written",
                schema::MIGRATIONS.len()
            )));
        }
        SqliteStore::with_connections(writer, open, true)
    }

    /// The store over its writer connection and `READERS` readers opened by `open`.
    fn with_connections(
        writer: Connection,
        open: impl Fn() -> StoreResult<Connection>,
        read_only: bool,
    ) -> StoreResult<SqliteStore> {
        let readers = (0..READERS)
            .map(|_| open().map(Mutex::new))
            .collect::<StoreResult<Vec<_>>>()?;
        Ok(SqliteStore {
            writer: Mutex::new(writer),
            readers,
            next_reader: AtomicUsize::new(0),
            common_terms: crate::store::keywords::CommonTerms::default(),
            read_only,
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

    /// A write that deletes what a user asked to have forgotten, and then leaves no copy of it in
    /// the files: `secure_delete` (every connection) zeroes the deleted cells and freed pages,
    /// the full-text indexes drop the deleted entries' tokens (`secure-delete`, migration 13), and
    /// a checkpoint copies the zeroed pages into the database and truncates the write-ahead log,
    /// which still held the text in the frames of earlier writes. A checkpoint that readers keep
    /// from finishing leaves the log to the next one, and says so.
    fn erase<T>(&self, work: impl FnOnce(&Transaction) -> StoreResult<T>) -> StoreResult<T> {
        let value = self.write(work)?;
        let connection = lock(&self.writer);
        let (busy, _, _): (i64, i64, i64) =
            connection.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |row| {
                Ok((row.get(0)?, row.get(1)?, row.get(2)?))
            })?;
        if busy != 0 {
            tracing::warn!("the write-ahead log could not be truncated after a deletion; the next checkpoint will");
        }
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
        .prepare_cached("SELECT id FROM users WHERE tenant = ?1 AND name = ?2")?
        .query_row(params![scope.tenant, scope.user], |row| row.get(0))
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
    if let Some(uid) = find_uid(connection, scope)? {
        return Ok(uid);
    }
    connection
        .prepare_cached(
            "INSERT OR IGNORE INTO users (tenant, name, created_at) VALUES (?1, ?2, ?3)",
        )?
        .execute(params![scope.tenant, scope.user, super::now_ms()])?;
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
        (Corpus::Message, Within::Recall(conversation)) => Ok((
            format!(
                "t.conversation_id IN (SELECT c.id FROM conversations c
                 WHERE c.uid = t.uid AND (c.external_id = {placeholder}
                 OR c.external_id NOT LIKE '{AGENT_CONVERSATION_PREFIX}%'))"
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
