//! Explicit-mode state: core memory blocks, archival passages, and conversation summaries.

use rusqlite::{params, Connection, OptionalExtension, Transaction};

use super::{bump_generation, ensure_uid, find_uid, to_blob};
use crate::store::{
    blocks, now_ms, CoreBlock, Corpus, Embedding, Page, Passage, StoreError, StoreResult, Summary,
    UserScope,
};

/// The agent's own blocks, each replaced by an attached shared block of its label, then the
/// other attached shared blocks ([`crate::store::blocks::merge`]).
pub fn blocks(
    connection: &Connection,
    scope: &UserScope,
    agent: &str,
) -> StoreResult<Vec<CoreBlock>> {
    let Some(uid) = find_uid(connection, scope)? else {
        return Ok(Vec::new());
    };
    let mut statement = connection.prepare_cached(
        "SELECT label, value, char_limit, read_only, updated_at FROM core_blocks
         WHERE uid = ?1 AND agent = ?2 ORDER BY id",
    )?;
    let own = statement
        .query_map(params![uid, agent], |row| {
            Ok(CoreBlock {
                label: row.get(0)?,
                value: row.get(1)?,
                char_limit: row.get(2)?,
                read_only: row.get(3)?,
                updated_at_ms: row.get(4)?,
                shared: None,
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    let attached = super::shared::attached(connection, uid, agent)?;
    Ok(blocks::merge(own, attached))
}

/// Writes one of the agent's blocks: the shared block when one with this label is attached to
/// it (every agent it is attached to sees the change), else the agent's own.
pub fn put_block(
    tx: &Transaction,
    scope: &UserScope,
    agent: &str,
    block: &CoreBlock,
) -> StoreResult<()> {
    blocks::check_block(block)?;
    let uid = ensure_uid(tx, scope)?;
    if let Some(id) = super::shared::attached_id(tx, uid, agent, &block.label)? {
        return super::shared::write_value(tx, uid, id, block);
    }
    insert_own(
        tx,
        uid,
        agent,
        block,
        "DO UPDATE SET value = excluded.value, char_limit = excluded.char_limit,
             read_only = excluded.read_only, updated_at = excluded.updated_at",
    )
}

/// Writes one of the agent's own blocks; `on_conflict` says what an existing one of its label
/// becomes. The compiled system message is dropped.
fn insert_own(
    tx: &Transaction,
    uid: i64,
    agent: &str,
    block: &CoreBlock,
    on_conflict: &str,
) -> StoreResult<()> {
    tx.execute(
        &format!(
            "INSERT INTO core_blocks (uid, agent, label, value, char_limit, read_only, updated_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT (uid, agent, label) {on_conflict}"
        ),
        params![
            uid,
            agent,
            block.label,
            block.value,
            block.char_limit,
            block.read_only,
            now_ms()
        ],
    )?;
    super::agent_log::invalidate_system(tx, uid, agent)
}

/// Gives a new agent a starting block, unless it already has its own with that label (written
/// by an operator or an import before the agent's first turn).
pub fn put_starting_block(
    tx: &Transaction,
    scope: &UserScope,
    agent: &str,
    block: &CoreBlock,
) -> StoreResult<()> {
    blocks::check_block(block)?;
    let uid = ensure_uid(tx, scope)?;
    insert_own(tx, uid, agent, block, "DO NOTHING")
}

/// Deletes one of the agent's own blocks. A shared block is detached, not deleted through one
/// agent: `Invalid` names it.
pub fn delete_block(
    tx: &Transaction,
    scope: &UserScope,
    agent: &str,
    label: &str,
) -> StoreResult<bool> {
    let Some(uid) = find_uid(tx, scope)? else {
        return Ok(false);
    };
    if let Some(id) = super::shared::attached_id(tx, uid, agent, label)? {
        let name: String = tx.query_row(
            "SELECT name FROM shared_blocks WHERE id = ?1",
            params![id],
            |row| row.get(0),
        )?;
        return Err(StoreError::Invalid(format!(
            "block '{label}' of agent '{agent}' is the shared block '{name}': detach it instead"
        )));
    }
    let deleted = tx.execute(
        "DELETE FROM core_blocks WHERE uid = ?1 AND agent = ?2 AND label = ?3",
        params![uid, agent, label],
    )?;
    if deleted > 0 {
        super::agent_log::invalidate_system(tx, uid, agent)?;
    }
    Ok(deleted > 0)
}

pub fn delete_passage(
    tx: &Transaction,
    scope: &UserScope,
    agent: &str,
    id: i64,
) -> StoreResult<u64> {
    let uid = find_uid(tx, scope)?.ok_or_else(|| StoreError::NotFound(format!("passage {id}")))?;
    let deleted = tx.execute(
        "DELETE FROM archival_passages WHERE uid = ?1 AND agent = ?2 AND id = ?3",
        params![uid, agent, id],
    )?;
    if deleted == 0 {
        return Err(StoreError::NotFound(format!("passage {id}")));
    }
    bump_generation(tx, uid, Corpus::Passage)
}

pub fn insert_passage(
    tx: &Transaction,
    scope: &UserScope,
    agent: &str,
    text: &str,
    created_at_ms: i64,
    embedding: Option<&Embedding>,
) -> StoreResult<(i64, u64)> {
    let uid = ensure_uid(tx, scope)?;
    tx.execute(
        "INSERT INTO archival_passages (uid, agent, text, created_at, embedding_model, embedding)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![
            uid,
            agent,
            text,
            created_at_ms,
            embedding.map(|e| e.model.as_str()),
            embedding.map(|e| to_blob(&e.vector))
        ],
    )?;
    let id = tx.last_insert_rowid();
    Ok((id, bump_generation(tx, uid, Corpus::Passage)?))
}

pub fn passages(
    connection: &Connection,
    scope: &UserScope,
    agent: Option<&str>,
    page: Page,
) -> StoreResult<Vec<Passage>> {
    let Some(uid) = find_uid(connection, scope)? else {
        return Ok(Vec::new());
    };
    let mut statement = connection.prepare(
        "SELECT id, agent, text, created_at FROM archival_passages
         WHERE uid = ?1 AND (?4 IS NULL OR agent = ?4)
         ORDER BY id LIMIT ?2 OFFSET ?3",
    )?;
    let rows = statement
        .query_map(
            params![uid, page.limit as i64, page.offset as i64, agent],
            |row| {
                Ok(Passage {
                    id: row.get(0)?,
                    agent: row.get(1)?,
                    text: row.get(2)?,
                    created_at_ms: row.get(3)?,
                })
            },
        )?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

pub fn summary(
    connection: &Connection,
    scope: &UserScope,
    conversation: &str,
) -> StoreResult<Option<Summary>> {
    let Some(uid) = find_uid(connection, scope)? else {
        return Ok(None);
    };
    Ok(connection
        .query_row(
            "SELECT c.external_id, s.text, s.through_position, s.updated_at
             FROM summaries s JOIN conversations c ON c.id = s.conversation_id
             WHERE s.uid = ?1 AND c.external_id = ?2",
            params![uid, conversation],
            |row| {
                Ok(Summary {
                    conversation: row.get(0)?,
                    text: row.get(1)?,
                    through_position: row.get(2)?,
                    updated_at_ms: row.get(3)?,
                })
            },
        )
        .optional()?)
}

pub fn put_summary(tx: &Transaction, scope: &UserScope, summary: &Summary) -> StoreResult<()> {
    let uid = ensure_uid(tx, scope)?;
    let conversation_id: Option<i64> = tx
        .query_row(
            "SELECT id FROM conversations WHERE uid = ?1 AND external_id = ?2",
            params![uid, summary.conversation],
            |row| row.get(0),
        )
        .optional()?;
    let conversation_id = conversation_id
        .ok_or_else(|| StoreError::NotFound(format!("conversation '{}'", summary.conversation)))?;
    tx.execute(
        "INSERT INTO summaries (conversation_id, uid, text, through_position, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (conversation_id) DO UPDATE SET text = excluded.text,
             through_position = excluded.through_position, updated_at = excluded.updated_at",
        params![
            conversation_id,
            uid,
            summary.text,
            summary.through_position,
            summary.updated_at_ms
        ],
    )?;
    Ok(())
}
