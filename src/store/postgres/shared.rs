//! Shared core-memory blocks (see [`crate::store::blocks`]) on PostgreSQL, by SQLite's rules
//! (`store::sqlite::shared`): stored once, attached to agents of one user; a change drops the
//! compiled system message of every agent it is attached to, in the same transaction.

use tokio_postgres::{GenericClient, Row};

use super::agent_row::{ensure_agent, invalidate_system};
use super::{ensure_uid, find_uid, PostgresStore};
use crate::store::blocks::{self, CoreBlock, SharedBlock, SharedBlocks};
use crate::store::{now_ms, StoreError, StoreResult, UserScope};

const COLUMNS: &str = "s.id, s.name, s.label, s.value, s.char_limit, s.read_only, s.updated_at";

fn row_block(row: &Row) -> (i64, SharedBlock) {
    (
        row.get(0),
        SharedBlock {
            name: row.get(1),
            label: row.get(2),
            value: row.get(3),
            char_limit: row.get(4),
            read_only: row.get(5),
            updated_at_ms: row.get(6),
            agents: Vec::new(),
        },
    )
}

/// The shared blocks attached to an agent, in the order they were attached.
pub(super) async fn attached(
    client: &impl GenericClient,
    uid: i64,
    agent: &str,
) -> StoreResult<Vec<CoreBlock>> {
    let rows = client
        .query(
            &format!(
                "SELECT {COLUMNS} FROM block_attachments a JOIN shared_blocks s ON s.id = a.block_id
                 WHERE a.uid = $1 AND a.agent = $2 ORDER BY a.id"
            ),
            &[&uid, &agent],
        )
        .await?;
    Ok(rows.iter().map(|row| row_block(row).1.as_core()).collect())
}

/// The id of the shared block the agent has under `label`, if it has one.
pub(super) async fn attached_id(
    client: &impl GenericClient,
    uid: i64,
    agent: &str,
    label: &str,
) -> StoreResult<Option<i64>> {
    Ok(client
        .query_opt(
            "SELECT s.id FROM block_attachments a JOIN shared_blocks s ON s.id = a.block_id
             WHERE a.uid = $1 AND a.agent = $2 AND s.label = $3",
            &[&uid, &agent, &label],
        )
        .await?
        .map(|row| row.get(0)))
}

/// Writes a value (and limit, read-only flag) to the shared block `id`, for every agent it is
/// attached to.
pub(super) async fn write_value(
    client: &impl GenericClient,
    uid: i64,
    id: i64,
    block: &CoreBlock,
) -> StoreResult<()> {
    blocks::check_block(block)?;
    client
        .execute(
            "UPDATE shared_blocks SET value = $3, char_limit = $4, read_only = $5, updated_at = $6
             WHERE uid = $1 AND id = $2",
            &[
                &uid,
                &id,
                &block.value,
                &block.char_limit,
                &block.read_only,
                &now_ms(),
            ],
        )
        .await?;
    invalidate_attached(client, uid, id).await
}

async fn invalidate_attached(client: &impl GenericClient, uid: i64, id: i64) -> StoreResult<()> {
    client
        .execute(
            "UPDATE agents SET system_message = NULL, memory_epoch = memory_epoch + 1
             WHERE uid = $1 AND name IN (SELECT agent FROM block_attachments WHERE block_id = $2)",
            &[&uid, &id],
        )
        .await?;
    Ok(())
}

/// The shared block `name`, locked for the rest of the transaction.
async fn find(
    client: &impl GenericClient,
    uid: i64,
    name: &str,
) -> StoreResult<Option<(i64, SharedBlock)>> {
    Ok(client
        .query_opt(
            &format!(
                "SELECT {COLUMNS} FROM shared_blocks s WHERE s.uid = $1 AND s.name = $2 FOR UPDATE"
            ),
            &[&uid, &name],
        )
        .await?
        .map(|row| row_block(&row)))
}

/// Forgets the agent's attachments (the agent is being reset); the blocks stay for the others.
pub(super) async fn detach_all(
    client: &impl GenericClient,
    uid: i64,
    agent: &str,
) -> StoreResult<u64> {
    Ok(client
        .execute(
            "DELETE FROM block_attachments WHERE uid = $1 AND agent = $2",
            &[&uid, &agent],
        )
        .await?)
}

/// The user's shared blocks, each with the agents it is attached to.
pub(super) async fn list(client: &impl GenericClient, uid: i64) -> StoreResult<Vec<SharedBlock>> {
    let rows = client
        .query(
            &format!(
                "SELECT {COLUMNS}, ARRAY(SELECT agent FROM block_attachments
                                         WHERE block_id = s.id ORDER BY agent)
                 FROM shared_blocks s WHERE s.uid = $1 ORDER BY s.name"
            ),
            &[&uid],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|row| {
            let (_, mut block) = row_block(row);
            block.agents = row.get(7);
            block
        })
        .collect())
}

async fn put(client: &impl GenericClient, uid: i64, block: &SharedBlock) -> StoreResult<()> {
    blocks::check_shared(block)?;
    match find(client, uid, &block.name).await? {
        Some((id, old)) => {
            blocks::check_update(&old, block)?;
            write_value(client, uid, id, &block.as_core()).await
        }
        None => {
            client
                .execute(
                    "INSERT INTO shared_blocks (uid, name, label, value, char_limit, read_only,
                         updated_at)
                     VALUES ($1, $2, $3, $4, $5, $6, $7)",
                    &[
                        &uid,
                        &block.name,
                        &block.label,
                        &block.value,
                        &block.char_limit,
                        &block.read_only,
                        &now_ms(),
                    ],
                )
                .await?;
            Ok(())
        }
    }
}

/// Writes an imported block with its time and attaches it to the agents the file names.
pub(super) async fn import(
    client: &impl GenericClient,
    uid: i64,
    block: &SharedBlock,
) -> StoreResult<()> {
    put(client, uid, block).await?;
    let Some((id, _)) = find(client, uid, &block.name).await? else {
        return Ok(());
    };
    client
        .execute(
            "UPDATE shared_blocks SET updated_at = $2 WHERE id = $1",
            &[&id, &block.updated_at_ms],
        )
        .await?;
    for agent in &block.agents {
        blocks::check_attach(&attached(client, uid, agent).await?, block)?;
        client
            .execute(
                "INSERT INTO block_attachments (uid, agent, block_id) VALUES ($1, $2, $3)
                 ON CONFLICT DO NOTHING",
                &[&uid, &agent, &id],
            )
            .await?;
    }
    invalidate_attached(client, uid, id).await
}

impl SharedBlocks for PostgresStore {
    fn shared_blocks(&self, scope: &UserScope) -> StoreResult<Vec<SharedBlock>> {
        self.run(|pool| async move {
            let client = pool.get().await?;
            match find_uid(&**client, scope).await? {
                Some(uid) => list(&**client, uid).await,
                None => Ok(Vec::new()),
            }
        })
    }

    fn put_shared_block(&self, scope: &UserScope, block: &SharedBlock) -> StoreResult<()> {
        blocks::check_shared(block)?;
        in_transaction!(self, |tx| {
            let uid = ensure_uid(tx, scope).await?;
            put(tx, uid, block).await?;
        })
    }

    fn delete_shared_block(&self, scope: &UserScope, name: &str) -> StoreResult<bool> {
        in_transaction!(self, |tx| {
            match find_uid(tx, scope).await? {
                None => false,
                Some(uid) => match find(tx, uid, name).await? {
                    None => false,
                    Some((id, _)) => {
                        invalidate_attached(tx, uid, id).await?;
                        tx.execute("DELETE FROM shared_blocks WHERE id = $1", &[&id])
                            .await?;
                        true
                    }
                },
            }
        })
    }

    fn attach_shared_block(
        &self,
        scope: &UserScope,
        agent: &str,
        name: &str,
        starting: &[CoreBlock],
    ) -> StoreResult<()> {
        in_transaction!(self, |tx| {
            let uid = ensure_uid(tx, scope).await?;
            let (id, block) = find(tx, uid, name)
                .await?
                .ok_or_else(|| StoreError::NotFound(format!("shared block '{name}'")))?;
            ensure_agent(tx, scope, agent, starting).await?;
            blocks::check_attach(&attached(tx, uid, agent).await?, &block)?;
            tx.execute(
                "INSERT INTO block_attachments (uid, agent, block_id) VALUES ($1, $2, $3)
                 ON CONFLICT DO NOTHING",
                &[&uid, &agent, &id],
            )
            .await?;
            invalidate_system(tx, uid, agent).await?;
        })
    }

    fn detach_shared_block(&self, scope: &UserScope, agent: &str, name: &str) -> StoreResult<bool> {
        in_transaction!(self, |tx| {
            match find_uid(tx, scope).await? {
                None => false,
                Some(uid) => match find(tx, uid, name).await? {
                    None => false,
                    Some((id, _)) => {
                        let removed = tx
                            .execute(
                                "DELETE FROM block_attachments
                                 WHERE uid = $1 AND agent = $2 AND block_id = $3",
                                &[&uid, &agent, &id],
                            )
                            .await?;
                        if removed > 0 {
                            invalidate_system(tx, uid, agent).await?;
                        }
                        removed > 0
                    }
                },
            }
        })
    }
}
