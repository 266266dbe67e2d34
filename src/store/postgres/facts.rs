//! Facts (`memories`) on PostgreSQL with their audit log, by SQLite's rules
//! (`store::sqlite::memories`): one live memory per text, the turns a changed fact came from
//! marked outdated, every change audited and bumping the user's vector generation.

use tokio_postgres::error::SqlState;
use tokio_postgres::GenericClient;

use super::{bump_generation, ensure_uid, find_uid, require_uid, PostgresStore};
use crate::store::{
    content_hash, now_ms, Corpus, Embedding, Facts, FormerFact, Inserted, Memory, MemoryEvent,
    NewMemory, Page, Source, StoreError, StoreResult, UserScope,
};

/// The live memory of a user with a text's content hash (at most one: a unique index).
const LIVE_BY_HASH: &str =
    "SELECT id FROM memories WHERE uid = $1 AND content_hash = $2 AND valid_until IS NULL";

async fn log_event(
    client: &impl GenericClient,
    uid: i64,
    memory_id: i64,
    action: &str,
    old: Option<&str>,
    new: Option<&str>,
    cause: &str,
) -> StoreResult<()> {
    client
        .execute(
            "INSERT INTO memory_events (uid, memory_id, action, old_value, new_value, cause,
                 created_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
            &[&uid, &memory_id, &action, &old, &new, &cause, &now_ms()],
        )
        .await?;
    Ok(())
}

/// The text and sources of the user's memory `id` that meets `condition` (on `valid_until`),
/// locked for the rest of the transaction.
async fn memory_of(
    client: &impl GenericClient,
    uid: i64,
    id: i64,
    condition: &str,
    what: &str,
) -> StoreResult<(String, Vec<Source>)> {
    let row = client
        .query_opt(
            &format!(
                "SELECT text, sources FROM memories WHERE id = $1 AND uid = $2 AND {condition}
                 FOR UPDATE"
            ),
            &[&id, &uid],
        )
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("{what} {id}")))?;
    let sources: String = row.get(1);
    Ok((
        row.get(0),
        serde_json::from_str(&sources).unwrap_or_default(),
    ))
}

/// A write that would make two live memories say the same.
fn duplicate_text(error: tokio_postgres::Error) -> StoreError {
    if error.code() == Some(&SqlState::UNIQUE_VIOLATION) {
        StoreError::DuplicateText
    } else {
        error.into()
    }
}

/// The turns a memory was drawn from (except `keep`) are outdated from now on (see SQLite's).
async fn outdate_sources(
    client: &impl GenericClient,
    uid: i64,
    sources: &[Source],
    keep: &[Source],
) -> StoreResult<()> {
    let now = now_ms();
    for source in sources
        .iter()
        .filter(|s| !keep.iter().any(|k| k.same_turn(s)))
    {
        client
            .execute(
                "UPDATE messages SET outdated_at = $1
                 WHERE uid = $2 AND position = $3 AND outdated_at IS NULL
                   AND conversation_id = (SELECT id FROM conversations
                                          WHERE uid = $2 AND external_id = $4)",
                &[&now, &uid, &source.position, &source.conversation],
            )
            .await?;
    }
    Ok(())
}

fn check_text(text: &str) -> StoreResult<&str> {
    let text = text.trim();
    if text.is_empty() {
        return Err(StoreError::Invalid("a memory needs text".to_owned()));
    }
    Ok(text)
}

impl Facts for PostgresStore {
    fn insert_memory(
        &self,
        scope: &UserScope,
        memory: &NewMemory,
        cause: &str,
    ) -> StoreResult<Inserted> {
        let text = check_text(&memory.text)?;
        let sources = serde_json::to_string(&memory.sources)
            .map_err(|error| StoreError::Invalid(error.to_string()))?;
        in_transaction!(self, |tx| {
            let uid = ensure_uid(tx, scope).await?;
            let hash = content_hash(text);
            // The same text inserted at once by two replicas: one row, the other a duplicate.
            let row = tx
                .query_opt(
                    "INSERT INTO memories (uid, text, kind, sources, created_at, updated_at,
                         content_hash, embedding_model, embedding, subject)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::REAL[]::vector, $10)
                     ON CONFLICT (uid, content_hash) WHERE valid_until IS NULL DO NOTHING
                     RETURNING id",
                    &[
                        &uid,
                        &text,
                        &memory.kind,
                        &sources,
                        &memory.created_at_ms,
                        &now_ms(),
                        &hash,
                        &memory.embedding.as_ref().map(|e| e.model.as_str()),
                        &memory.embedding.as_ref().map(|e| e.vector.as_slice()),
                        &memory.subject,
                    ],
                )
                .await?;
            match row {
                Some(row) => {
                    let id: i64 = row.get(0);
                    log_event(tx, uid, id, "add", None, Some(text), cause).await?;
                    let generation = bump_generation(tx, uid, Corpus::Memory).await?;
                    Inserted::New { id, generation }
                }
                None => {
                    let row = tx.query_one(LIVE_BY_HASH, &[&uid, &hash]).await?;
                    Inserted::Duplicate { id: row.get(0) }
                }
            }
        })
    }

    fn update_memory(
        &self,
        scope: &UserScope,
        id: i64,
        text: &str,
        embedding: Option<&Embedding>,
        new_sources: &[Source],
        cause: &str,
    ) -> StoreResult<u64> {
        let text = check_text(text)?;
        in_transaction!(self, |tx| {
            let uid = require_uid(tx, scope).await?;
            let (old, mut sources) =
                memory_of(tx, uid, id, "valid_until IS NULL", "memory").await?;
            if old != text {
                outdate_sources(tx, uid, &sources, new_sources).await?;
            }
            for source in new_sources {
                if !sources.contains(source) {
                    sources.push(source.clone());
                }
            }
            let sources = serde_json::to_string(&sources)
                .map_err(|error| StoreError::Invalid(error.to_string()))?;
            tx.execute(
                "UPDATE memories SET text = $1, content_hash = $2, updated_at = $3,
                     embedding_model = $4, embedding = $5::REAL[]::vector, sources = $6
                 WHERE id = $7 AND uid = $8",
                &[
                    &text,
                    &content_hash(text),
                    &now_ms(),
                    &embedding.map(|e| e.model.as_str()),
                    &embedding.map(|e| e.vector.as_slice()),
                    &sources,
                    &id,
                    &uid,
                ],
            )
            .await
            .map_err(duplicate_text)?;
            log_event(tx, uid, id, "update", Some(&old), Some(text), cause).await?;
            bump_generation(tx, uid, Corpus::Memory).await?
        })
    }

    fn invalidate_memory(&self, scope: &UserScope, id: i64, cause: &str) -> StoreResult<u64> {
        in_transaction!(self, |tx| {
            let uid = require_uid(tx, scope).await?;
            let (old, sources) = memory_of(tx, uid, id, "valid_until IS NULL", "memory").await?;
            outdate_sources(tx, uid, &sources, &[]).await?;
            let now = now_ms();
            tx.execute(
                "UPDATE memories SET valid_until = $1, updated_at = $1 WHERE id = $2 AND uid = $3",
                &[&now, &id, &uid],
            )
            .await?;
            log_event(tx, uid, id, "invalidate", Some(&old), None, cause).await?;
            bump_generation(tx, uid, Corpus::Memory).await?
        })
    }

    fn delete_memory(&self, scope: &UserScope, id: i64, cause: &str) -> StoreResult<u64> {
        in_transaction!(self, |tx| {
            let uid = require_uid(tx, scope).await?;
            memory_of(tx, uid, id, "TRUE", "memory").await?;
            tx.execute(
                "DELETE FROM memories WHERE id = $1 AND uid = $2",
                &[&id, &uid],
            )
            .await?;
            // Deleted is forgotten: the audit log keeps what happened to the memory, not its words.
            tx.execute(
                "UPDATE memory_events SET old_value = NULL, new_value = NULL WHERE uid = $1 AND memory_id = $2",
                &[&uid, &id],
            )
            .await?;
            log_event(tx, uid, id, "delete", None, None, cause).await?;
            bump_generation(tx, uid, Corpus::Memory).await?
        })
    }

    fn restore_memory(&self, scope: &UserScope, id: i64, cause: &str) -> StoreResult<u64> {
        in_transaction!(self, |tx| {
            let uid = require_uid(tx, scope).await?;
            let (text, _) =
                memory_of(tx, uid, id, "valid_until IS NOT NULL", "retired memory").await?;
            tx.execute(
                "UPDATE memories SET valid_until = NULL, updated_at = $1 WHERE id = $2 AND uid = $3",
                &[&now_ms(), &id, &uid],
            )
            .await
            .map_err(duplicate_text)?;
            log_event(tx, uid, id, "restore", None, Some(&text), cause).await?;
            bump_generation(tx, uid, Corpus::Memory).await?
        })
    }

    fn list_memories(
        &self,
        scope: &UserScope,
        include_invalid: bool,
        page: Page,
    ) -> StoreResult<Vec<Memory>> {
        self.run(|pool| async move {
            let client = pool.get().await?;
            let Some(uid) = find_uid(&**client, scope).await? else {
                return Ok(Vec::new());
            };
            let rows = client
                .query(
                    "SELECT id, text, kind, sources, created_at, updated_at, valid_until,
                            embedding_model, subject
                     FROM memories WHERE uid = $1 AND ($2 OR valid_until IS NULL)
                     ORDER BY id LIMIT $3 OFFSET $4",
                    &[
                        &uid,
                        &include_invalid,
                        &(page.limit as i64),
                        &(page.offset as i64),
                    ],
                )
                .await?;
            Ok(rows
                .iter()
                .map(|row| {
                    let sources: String = row.get(3);
                    Memory {
                        id: row.get(0),
                        text: row.get(1),
                        kind: row.get(2),
                        sources: serde_json::from_str(&sources).unwrap_or_default(),
                        created_at_ms: row.get(4),
                        updated_at_ms: row.get(5),
                        valid_until_ms: row.get(6),
                        embedding_model: row.get(7),
                        subject: row.get(8),
                    }
                })
                .collect())
        })
    }

    fn memory_events(&self, scope: &UserScope) -> StoreResult<Vec<MemoryEvent>> {
        self.run(|pool| async move {
            let client = pool.get().await?;
            let Some(uid) = find_uid(&**client, scope).await? else {
                return Ok(Vec::new());
            };
            let rows = client
                .query(
                    "SELECT memory_id, action, old_value, new_value, cause, created_at
                     FROM memory_events WHERE uid = $1 ORDER BY id",
                    &[&uid],
                )
                .await?;
            Ok(rows
                .iter()
                .map(|row| MemoryEvent {
                    memory_id: row.get(0),
                    action: row.get(1),
                    old_value: row.get(2),
                    new_value: row.get(3),
                    cause: row.get(4),
                    created_at_ms: row.get(5),
                })
                .collect())
        })
    }

    fn live_memory_id(&self, scope: &UserScope, text: &str) -> StoreResult<Option<i64>> {
        let hash = content_hash(text.trim());
        self.run(|pool| async move {
            let client = pool.get().await?;
            let Some(uid) = find_uid(&**client, scope).await? else {
                return Ok(None);
            };
            let row = client.query_opt(LIVE_BY_HASH, &[&uid, &hash]).await?;
            Ok(row.map(|row| row.get(0)))
        })
    }

    fn former_facts(&self, scope: &UserScope, limit: usize) -> StoreResult<Vec<FormerFact>> {
        let sql = crate::store::FORMER_FACTS_SQL
            .replace("{uid}", "$1")
            .replace("{limit}", "$2");
        self.run(|pool| async move {
            let client = pool.get().await?;
            let Some(uid) = find_uid(&**client, scope).await? else {
                return Ok(Vec::new());
            };
            let rows = client.query(&sql, &[&uid, &(limit as i64)]).await?;
            Ok(rows
                .iter()
                .map(|row| FormerFact {
                    memory_id: row.get(0),
                    text: row.get(1),
                    replaced_by: row.get(2),
                    until_ms: row.get(3),
                })
                .collect())
        })
    }
}
