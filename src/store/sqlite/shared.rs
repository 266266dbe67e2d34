//! Shared core-memory blocks (see [`crate::store::blocks`]) in SQLite: `shared_blocks` holds the
//! block once, `block_attachments` names the agents that have it. A change to a shared block drops
//! the compiled system message of every agent it is attached to, in the same transaction.

use rusqlite::{params, Connection, OptionalExtension, Transaction};

use super::{ensure_uid, find_uid};
use crate::store::blocks::{self, CoreBlock, SharedBlock, SharedBlocks};
use crate::store::{now_ms, StoreError, StoreResult, UserScope};

const COLUMNS: &str = "s.id, s.name, s.label, s.value, s.char_limit, s.read_only, s.updated_at";

fn row_block(row: &rusqlite::Row) -> rusqlite::Result<(i64, SharedBlock)> {
    Ok((
        row.get(0)?,
        SharedBlock {
            name: row.get(1)?,
            label: row.get(2)?,
            value: row.get(3)?,
            char_limit: row.get(4)?,
            read_only: row.get(5)?,
            updated_at_ms: row.get(6)?,
            agents: Vec::new(),
        },
    ))
}

/// The shared blocks attached to an agent, in the order they were attached.
pub fn attached(connection: &Connection, uid: i64, agent: &str) -> StoreResult<Vec<CoreBlock>> {
    let mut statement = connection.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM block_attachments a JOIN shared_blocks s ON s.id = a.block_id
         WHERE a.uid = ?1 AND a.agent = ?2 ORDER BY a.id"
    ))?;
    let rows = statement
        .query_map(params![uid, agent], row_block)?
        .map(|row| row.map(|(_, block)| block.as_core()))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

/// The id of the shared block the agent has under `label`, if it has one.
pub fn attached_id(
    connection: &Connection,
    uid: i64,
    agent: &str,
    label: &str,
) -> StoreResult<Option<i64>> {
    Ok(connection
        .query_row(
            "SELECT s.id FROM block_attachments a JOIN shared_blocks s ON s.id = a.block_id
             WHERE a.uid = ?1 AND a.agent = ?2 AND s.label = ?3",
            params![uid, agent, label],
            |row| row.get(0),
        )
        .optional()?)
}

/// Writes the value (and limit, read-only flag) an agent or an operator gave the shared block
/// `id`, for every agent it is attached to.
pub fn write_value(tx: &Transaction, uid: i64, id: i64, block: &CoreBlock) -> StoreResult<()> {
    blocks::check_block(block)?;
    tx.execute(
        "UPDATE shared_blocks SET value = ?3, char_limit = ?4, read_only = ?5, updated_at = ?6
         WHERE uid = ?1 AND id = ?2",
        params![
            uid,
            id,
            block.value,
            block.char_limit,
            block.read_only,
            now_ms()
        ],
    )?;
    invalidate_attached(tx, uid, id)
}

/// Every agent the block is attached to compiles its system message again.
fn invalidate_attached(tx: &Transaction, uid: i64, id: i64) -> StoreResult<()> {
    tx.execute(
        "UPDATE agents SET system_message = NULL, memory_epoch = memory_epoch + 1
         WHERE uid = ?1 AND name IN (SELECT agent FROM block_attachments WHERE block_id = ?2)",
        params![uid, id],
    )?;
    Ok(())
}

fn find(connection: &Connection, uid: i64, name: &str) -> StoreResult<Option<(i64, SharedBlock)>> {
    Ok(connection
        .query_row(
            &format!("SELECT {COLUMNS} FROM shared_blocks s WHERE s.uid = ?1 AND s.name = ?2"),
            params![uid, name],
            row_block,
        )
        .optional()?)
}

pub fn list(connection: &Connection, scope: &UserScope) -> StoreResult<Vec<SharedBlock>> {
    let Some(uid) = find_uid(connection, scope)? else {
        return Ok(Vec::new());
    };
    let mut statement = connection.prepare(&format!(
        "SELECT {COLUMNS}, (SELECT json_group_array(agent) FROM
             (SELECT agent FROM block_attachments WHERE block_id = s.id ORDER BY agent))
         FROM shared_blocks s WHERE s.uid = ?1 ORDER BY s.name"
    ))?;
    let rows = statement
        .query_map(params![uid], |row| {
            let (_, mut block) = row_block(row)?;
            let agents: String = row.get(7)?;
            block.agents = serde_json::from_str(&agents).unwrap_or_default();
            Ok(block)
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

fn put(tx: &Transaction, scope: &UserScope, block: &SharedBlock) -> StoreResult<()> {
    blocks::check_shared(block)?;
    let uid = ensure_uid(tx, scope)?;
    match find(tx, uid, &block.name)? {
        Some((id, old)) => {
            blocks::check_update(&old, block)?;
            write_value(tx, uid, id, &block.as_core())
        }
        None => {
            tx.execute(
                "INSERT INTO shared_blocks (uid, name, label, value, char_limit, read_only,
                     updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![
                    uid,
                    block.name,
                    block.label,
                    block.value,
                    block.char_limit,
                    block.read_only,
                    now_ms()
                ],
            )?;
            Ok(())
        }
    }
}

fn delete(tx: &Transaction, scope: &UserScope, name: &str) -> StoreResult<bool> {
    let Some(uid) = find_uid(tx, scope)? else {
        return Ok(false);
    };
    let Some((id, _)) = find(tx, uid, name)? else {
        return Ok(false);
    };
    invalidate_attached(tx, uid, id)?;
    // The attachments go with it (ON DELETE CASCADE).
    tx.execute("DELETE FROM shared_blocks WHERE id = ?1", params![id])?;
    Ok(true)
}

fn attach(
    tx: &Transaction,
    scope: &UserScope,
    agent: &str,
    name: &str,
    starting: &[CoreBlock],
) -> StoreResult<()> {
    let uid = ensure_uid(tx, scope)?;
    let (id, block) = find(tx, uid, name)?
        .ok_or_else(|| StoreError::NotFound(format!("shared block '{name}'")))?;
    super::agent_row::ensure(tx, scope, agent, starting)?;
    blocks::check_attach(&attached(tx, uid, agent)?, &block)?;
    tx.execute(
        "INSERT OR IGNORE INTO block_attachments (uid, agent, block_id) VALUES (?1, ?2, ?3)",
        params![uid, agent, id],
    )?;
    super::agent_row::invalidate_system(tx, uid, agent)
}

fn detach(tx: &Transaction, scope: &UserScope, agent: &str, name: &str) -> StoreResult<bool> {
    let Some(uid) = find_uid(tx, scope)? else {
        return Ok(false);
    };
    let Some((id, _)) = find(tx, uid, name)? else {
        return Ok(false);
    };
    let removed = tx.execute(
        "DELETE FROM block_attachments WHERE uid = ?1 AND agent = ?2 AND block_id = ?3",
        params![uid, agent, id],
    )?;
    if removed > 0 {
        super::agent_row::invalidate_system(tx, uid, agent)?;
    }
    Ok(removed > 0)
}

/// Writes an imported block with its time and attaches it to the agents the file names (their
/// rows come on first use, with their starting blocks under it).
pub fn import(tx: &Transaction, scope: &UserScope, block: &SharedBlock) -> StoreResult<()> {
    put(tx, scope, block)?;
    let uid = ensure_uid(tx, scope)?;
    let Some((id, _)) = find(tx, uid, &block.name)? else {
        return Ok(());
    };
    tx.execute(
        "UPDATE shared_blocks SET updated_at = ?2 WHERE id = ?1",
        params![id, block.updated_at_ms],
    )?;
    for agent in &block.agents {
        blocks::check_attach(&attached(tx, uid, agent)?, block)?;
        tx.execute(
            "INSERT OR IGNORE INTO block_attachments (uid, agent, block_id) VALUES (?1, ?2, ?3)",
            params![uid, agent, id],
        )?;
    }
    invalidate_attached(tx, uid, id)
}

/// Forgets the agent's attachments (the agent is being reset); the blocks stay for the others.
pub fn detach_all(tx: &Transaction, uid: i64, agent: &str) -> StoreResult<usize> {
    Ok(tx.execute(
        "DELETE FROM block_attachments WHERE uid = ?1 AND agent = ?2",
        params![uid, agent],
    )?)
}

impl SharedBlocks for super::SqliteStore {
    fn shared_blocks(&self, scope: &UserScope) -> StoreResult<Vec<SharedBlock>> {
        self.read(|connection| list(connection, scope))
    }

    fn put_shared_block(&self, scope: &UserScope, block: &SharedBlock) -> StoreResult<()> {
        self.write(|tx| put(tx, scope, block))
    }

    fn delete_shared_block(&self, scope: &UserScope, name: &str) -> StoreResult<bool> {
        self.erase(|tx| delete(tx, scope, name))
    }

    fn attach_shared_block(
        &self,
        scope: &UserScope,
        agent: &str,
        name: &str,
        starting: &[CoreBlock],
    ) -> StoreResult<()> {
        self.write(|tx| attach(tx, scope, agent, name, starting))
    }

    fn detach_shared_block(&self, scope: &UserScope, agent: &str, name: &str) -> StoreResult<bool> {
        self.write(|tx| detach(tx, scope, agent, name))
    }
}
