//! Facts (`memories`) with their audit log, and the turns their changes make outdated.

use super::SqliteStore;
use crate::store::Facts;
use rusqlite::{params, Connection, OptionalExtension, Transaction};

use super::{bump_generation, ensure_uid, find_uid, require_uid, to_blob};
use crate::store::{
    content_hash, now_ms, Corpus, Embedding, Inserted, Memory, MemoryEvent, NewMemory, Page,
    Source, StoreError, StoreResult, UserScope,
};

/// The live memory of a user with a text's content hash (at most one: a unique index).
const LIVE_BY_HASH: &str =
    "SELECT id FROM memories WHERE uid = ?1 AND content_hash = ?2 AND valid_until IS NULL";

fn log_event(
    tx: &Transaction,
    uid: i64,
    memory_id: i64,
    action: &str,
    old: Option<&str>,
    new: Option<&str>,
    cause: &str,
) -> StoreResult<()> {
    tx.execute(
        "INSERT INTO memory_events (uid, memory_id, action, old_value, new_value, cause, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![uid, memory_id, action, old, new, cause, now_ms()],
    )?;
    Ok(())
}

/// The text of the user's memory `id` that meets `condition` (on its `valid_until`).
fn text_of(
    tx: &Transaction,
    uid: i64,
    id: i64,
    condition: &str,
    what: &str,
) -> StoreResult<String> {
    tx.query_row(
        &format!("SELECT text FROM memories WHERE id = ?1 AND uid = ?2 AND {condition}"),
        params![id, uid],
        |row| row.get(0),
    )
    .optional()?
    .ok_or_else(|| StoreError::NotFound(format!("{what} {id}")))
}

fn live_text(tx: &Transaction, uid: i64, id: i64) -> StoreResult<String> {
    text_of(tx, uid, id, "valid_until IS NULL", "memory")
}

/// A write that would make two live memories say the same.
fn duplicate_text(error: rusqlite::Error) -> StoreError {
    match error {
        rusqlite::Error::SqliteFailure(failure, _)
            if failure.code == rusqlite::ErrorCode::ConstraintViolation =>
        {
            StoreError::DuplicateText
        }
        other => other.into(),
    }
}

fn sources_of(tx: &Transaction, uid: i64, id: i64) -> StoreResult<Vec<Source>> {
    let sources: Option<String> = tx
        .query_row(
            "SELECT sources FROM memories WHERE id = ?1 AND uid = ?2",
            params![id, uid],
            |row| row.get(0),
        )
        .optional()?;
    Ok(sources
        .and_then(|s| serde_json::from_str::<Vec<Source>>(&s).ok())
        .unwrap_or_default())
}

/// The turns a memory was drawn from (except `keep`, which say its new version) are outdated from
/// now on: what they said was replaced, and injecting them beside the newer fact would contradict
/// it. They stay in the recall log and in search.
fn outdate_sources(
    tx: &Transaction,
    uid: i64,
    sources: &[Source],
    keep: &[Source],
) -> StoreResult<()> {
    let mut statement = tx.prepare_cached(
        "UPDATE messages SET outdated_at = ?1
         WHERE uid = ?2 AND position = ?3 AND outdated_at IS NULL
           AND conversation_id = (SELECT id FROM conversations WHERE uid = ?2 AND external_id = ?4)",
    )?;
    let now = now_ms();
    for source in sources
        .iter()
        .filter(|s| !keep.iter().any(|k| k.same_turn(s)))
    {
        statement.execute(params![now, uid, source.position, source.conversation])?;
    }
    Ok(())
}

/// The live memory whose text is `text` (trimmed), by its content hash.
pub fn live_id(connection: &Connection, scope: &UserScope, text: &str) -> StoreResult<Option<i64>> {
    let Some(uid) = find_uid(connection, scope)? else {
        return Ok(None);
    };
    let mut statement = connection.prepare_cached(LIVE_BY_HASH)?;
    Ok(statement
        .query_row(params![uid, content_hash(text.trim())], |row| row.get(0))
        .optional()?)
}

pub fn insert(
    tx: &Transaction,
    scope: &UserScope,
    memory: &NewMemory,
    cause: &str,
) -> StoreResult<Inserted> {
    let text = memory.text.trim();
    if text.is_empty() {
        return Err(StoreError::Invalid("a memory needs text".to_owned()));
    }
    let uid = ensure_uid(tx, scope)?;
    let hash = content_hash(text);
    let existing: Option<i64> = tx
        .query_row(LIVE_BY_HASH, params![uid, hash], |row| row.get(0))
        .optional()?;
    if let Some(id) = existing {
        return Ok(Inserted::Duplicate { id });
    }
    let sources = serde_json::to_string(&memory.sources)
        .map_err(|error| StoreError::Invalid(error.to_string()))?;
    let now = now_ms();
    tx.execute(
        "INSERT INTO memories (uid, text, kind, sources, created_at, updated_at, content_hash,
             embedding_model, embedding, subject)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
        params![
            uid,
            text,
            memory.kind,
            sources,
            memory.created_at_ms,
            now,
            hash,
            memory.embedding.as_ref().map(|e| e.model.as_str()),
            memory.embedding.as_ref().map(|e| to_blob(&e.vector)),
            memory.subject,
        ],
    )?;
    let id = tx.last_insert_rowid();
    log_event(tx, uid, id, "add", None, Some(text), cause)?;
    let generation = bump_generation(tx, uid, Corpus::Memory)?;
    Ok(Inserted::New { id, generation })
}

pub fn update(
    tx: &Transaction,
    scope: &UserScope,
    id: i64,
    text: &str,
    embedding: Option<&Embedding>,
    new_sources: &[Source],
    cause: &str,
) -> StoreResult<u64> {
    let text = text.trim();
    if text.is_empty() {
        return Err(StoreError::Invalid("a memory needs text".to_owned()));
    }
    let uid = require_uid(tx, scope)?;
    let old = live_text(tx, uid, id)?;
    let mut sources = sources_of(tx, uid, id)?;
    if old != text {
        outdate_sources(tx, uid, &sources, new_sources)?;
    }
    for source in new_sources {
        if !sources.contains(source) {
            sources.push(source.clone());
        }
    }
    let sources =
        serde_json::to_string(&sources).map_err(|error| StoreError::Invalid(error.to_string()))?;
    tx.execute(
        "UPDATE memories SET text = ?1, content_hash = ?2, updated_at = ?3,
             embedding_model = ?4, embedding = ?5, sources = ?6
         WHERE id = ?7 AND uid = ?8",
        params![
            text,
            content_hash(text),
            now_ms(),
            embedding.map(|e| e.model.as_str()),
            embedding.map(|e| to_blob(&e.vector)),
            sources,
            id,
            uid
        ],
    )
    .map_err(duplicate_text)?;
    log_event(tx, uid, id, "update", Some(&old), Some(text), cause)?;
    bump_generation(tx, uid, Corpus::Memory)
}

pub fn invalidate(tx: &Transaction, scope: &UserScope, id: i64, cause: &str) -> StoreResult<u64> {
    let uid = require_uid(tx, scope)?;
    let old = live_text(tx, uid, id)?;
    outdate_sources(tx, uid, &sources_of(tx, uid, id)?, &[])?;
    let now = now_ms();
    tx.execute(
        "UPDATE memories SET valid_until = ?1, updated_at = ?1 WHERE id = ?2 AND uid = ?3",
        params![now, id, uid],
    )?;
    log_event(tx, uid, id, "invalidate", Some(&old), None, cause)?;
    bump_generation(tx, uid, Corpus::Memory)
}

pub fn restore(tx: &Transaction, scope: &UserScope, id: i64, cause: &str) -> StoreResult<u64> {
    let uid = require_uid(tx, scope)?;
    let text = text_of(tx, uid, id, "valid_until IS NOT NULL", "retired memory")?;
    tx.execute(
        "UPDATE memories SET valid_until = NULL, updated_at = ?1 WHERE id = ?2 AND uid = ?3",
        params![now_ms(), id, uid],
    )
    .map_err(duplicate_text)?;
    log_event(tx, uid, id, "restore", None, Some(&text), cause)?;
    bump_generation(tx, uid, Corpus::Memory)
}

pub fn delete(tx: &Transaction, scope: &UserScope, id: i64, cause: &str) -> StoreResult<u64> {
    let uid = require_uid(tx, scope)?;
    text_of(tx, uid, id, "TRUE", "memory")?;
    tx.execute(
        "DELETE FROM memories WHERE id = ?1 AND uid = ?2",
        params![id, uid],
    )?;
    // Deleted is forgotten: the audit log keeps what happened to the memory, not its words.
    tx.execute(
        "UPDATE memory_events SET old_value = NULL, new_value = NULL WHERE uid = ?1 AND memory_id = ?2",
        params![uid, id],
    )?;
    log_event(tx, uid, id, "delete", None, None, cause)?;
    bump_generation(tx, uid, Corpus::Memory)
}

fn memory_row(row: &rusqlite::Row) -> rusqlite::Result<Memory> {
    let sources: String = row.get(3)?;
    Ok(Memory {
        id: row.get(0)?,
        text: row.get(1)?,
        kind: row.get(2)?,
        sources: serde_json::from_str::<Vec<Source>>(&sources).unwrap_or_default(),
        created_at_ms: row.get(4)?,
        updated_at_ms: row.get(5)?,
        valid_until_ms: row.get(6)?,
        embedding_model: row.get(7)?,
        subject: row.get(8)?,
    })
}

pub fn list(
    connection: &Connection,
    scope: &UserScope,
    include_invalid: bool,
    page: Page,
) -> StoreResult<Vec<Memory>> {
    let Some(uid) = find_uid(connection, scope)? else {
        return Ok(Vec::new());
    };
    let mut statement = connection.prepare(
        "SELECT id, text, kind, sources, created_at, updated_at, valid_until, embedding_model,
                subject
         FROM memories WHERE uid = ?1 AND (?2 OR valid_until IS NULL)
         ORDER BY id LIMIT ?3 OFFSET ?4",
    )?;
    let rows = statement
        .query_map(
            params![uid, include_invalid, page.limit as i64, page.offset as i64],
            memory_row,
        )?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

pub fn events(connection: &Connection, scope: &UserScope) -> StoreResult<Vec<MemoryEvent>> {
    let Some(uid) = find_uid(connection, scope)? else {
        return Ok(Vec::new());
    };
    let mut statement = connection.prepare(
        "SELECT memory_id, action, old_value, new_value, cause, created_at FROM memory_events
         WHERE uid = ?1 ORDER BY id",
    )?;
    let rows = statement
        .query_map([uid], |row| {
            Ok(MemoryEvent {
                memory_id: row.get(0)?,
                action: row.get(1)?,
                old_value: row.get(2)?,
                new_value: row.get(3)?,
                cause: row.get(4)?,
                created_at_ms: row.get(5)?,
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

pub fn former(
    connection: &Connection,
    scope: &UserScope,
    limit: usize,
) -> StoreResult<Vec<crate::store::FormerFact>> {
    let Some(uid) = find_uid(connection, scope)? else {
        return Ok(Vec::new());
    };
    let sql = crate::store::FORMER_FACTS_SQL
        .replace("{uid}", "?1")
        .replace("{limit}", "?2");
    let mut statement = connection.prepare(&sql)?;
    let rows = statement
        .query_map(rusqlite::params![uid, limit as i64], |row| {
            Ok(crate::store::FormerFact {
                memory_id: row.get(0)?,
                text: row.get(1)?,
                replaced_by: row.get(2)?,
                until_ms: row.get(3)?,
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

impl Facts for SqliteStore {
    fn insert_memory(
        &self,
        scope: &UserScope,
        memory: &crate::store::NewMemory,
        cause: &str,
    ) -> StoreResult<crate::store::Inserted> {
        self.write(|tx| insert(tx, scope, memory, cause))
    }

    fn update_memory(
        &self,
        scope: &UserScope,
        id: i64,
        text: &str,
        embedding: Option<&crate::store::Embedding>,
        new_sources: &[crate::store::Source],
        cause: &str,
    ) -> StoreResult<u64> {
        self.write(|tx| update(tx, scope, id, text, embedding, new_sources, cause))
    }

    fn invalidate_memory(&self, scope: &UserScope, id: i64, cause: &str) -> StoreResult<u64> {
        self.write(|tx| invalidate(tx, scope, id, cause))
    }

    fn delete_memory(&self, scope: &UserScope, id: i64, cause: &str) -> StoreResult<u64> {
        self.erase(|tx| delete(tx, scope, id, cause))
    }

    fn restore_memory(&self, scope: &UserScope, id: i64, cause: &str) -> StoreResult<u64> {
        self.write(|tx| restore(tx, scope, id, cause))
    }

    fn list_memories(
        &self,
        scope: &UserScope,
        include_invalid: bool,
        page: crate::store::Page,
    ) -> StoreResult<Vec<crate::store::Memory>> {
        self.read(|c| list(c, scope, include_invalid, page))
    }

    fn memory_events(&self, scope: &UserScope) -> StoreResult<Vec<crate::store::MemoryEvent>> {
        self.read(|c| events(c, scope))
    }

    fn live_memory_id(&self, scope: &UserScope, text: &str) -> StoreResult<Option<i64>> {
        self.read(|c| live_id(c, scope, text))
    }

    fn former_facts(
        &self,
        scope: &UserScope,
        limit: usize,
    ) -> StoreResult<Vec<crate::store::FormerFact>> {
        self.read(|c| former(c, scope, limit))
    }
}
