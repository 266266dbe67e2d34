//! The agent row in SQLite: its columns, found or created (with its starting blocks and its log's
//! conversation), and the compiled system message marked stale when what it shows changes. Below
//! the agent's blocks, log and shared blocks, which all create or invalidate it.

use rusqlite::{params, Connection, OptionalExtension, Transaction};

use super::recall::conversation_id;
use super::{ensure_uid, find_uid};
use crate::store::{
    agent_conversation, blocks, now_ms, AgentRecord, CoreBlock, StoreResult, UserScope,
};

pub(super) const AGENT_COLUMNS: &str =
    "name, system_message, pressure_alerted, created_at, updated_at, tags, memory_epoch";

pub(super) fn agent_row(row: &rusqlite::Row) -> rusqlite::Result<AgentRecord> {
    Ok(AgentRecord {
        name: row.get(0)?,
        system_message: row.get(1)?,
        pressure_alerted: row.get(2)?,
        created_at_ms: row.get(3)?,
        updated_at_ms: row.get(4)?,
        tags: serde_json::from_str(&row.get::<_, String>(5)?).unwrap_or_default(),
        memory_epoch: row.get(6)?,
    })
}

pub fn find(
    connection: &Connection,
    scope: &UserScope,
    agent: &str,
) -> StoreResult<Option<AgentRecord>> {
    let Some(uid) = find_uid(connection, scope)? else {
        return Ok(None);
    };
    Ok(connection
        .query_row(
            &format!("SELECT {AGENT_COLUMNS} FROM agents WHERE uid = ?1 AND name = ?2"),
            params![uid, agent],
            agent_row,
        )
        .optional()?)
}

pub fn ensure(
    tx: &Transaction,
    scope: &UserScope,
    agent: &str,
    blocks: &[CoreBlock],
) -> StoreResult<AgentRecord> {
    let uid = ensure_uid(tx, scope)?;
    let now = now_ms();
    let created = tx.execute(
        "INSERT OR IGNORE INTO agents (uid, name, created_at, updated_at) VALUES (?1, ?2, ?3, ?3)",
        params![uid, agent, now],
    )?;
    if created > 0 {
        conversation_id(tx, uid, &agent_conversation(agent), agent)?;
        for block in blocks {
            put_starting_block(tx, scope, agent, block)?;
        }
    }
    Ok(tx.query_row(
        &format!("SELECT {AGENT_COLUMNS} FROM agents WHERE uid = ?1 AND name = ?2"),
        params![uid, agent],
        agent_row,
    )?)
}

/// Marks the compiled system message stale (a block or the archive changed).
pub fn invalidate_system(tx: &Transaction, uid: i64, agent: &str) -> StoreResult<()> {
    tx.execute(
        "UPDATE agents SET system_message = NULL, memory_epoch = memory_epoch + 1
         WHERE uid = ?1 AND name = ?2",
        params![uid, agent],
    )?;
    Ok(())
}

/// Writes one of the agent's own blocks; `on_conflict` says what an existing one of its label
/// becomes. The compiled system message is dropped.
pub(super) fn insert_own(
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
    invalidate_system(tx, uid, agent)
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
