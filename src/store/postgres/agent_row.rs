//! The agent row on PostgreSQL, by SQLite's rules (`store::sqlite::agent_row`): its columns,
//! found or created (with its starting blocks and its log's conversation), and the compiled system
//! message marked stale when what it shows changes. Below the agent's blocks, log and shared
//! blocks, which all create or invalidate it.

use tokio_postgres::{GenericClient, Row};

use super::ensure_uid;
use crate::store::{
    agent_conversation, blocks, now_ms, AgentRecord, CoreBlock, StoreError, StoreResult, UserScope,
};

pub(super) const AGENT_COLUMNS: &str =
    "name, system_message, pressure_alerted, created_at, updated_at, tags, memory_epoch";

pub(super) fn agent_row(row: &Row) -> AgentRecord {
    let tags: String = row.get(5);
    AgentRecord {
        name: row.get(0),
        system_message: row.get(1),
        pressure_alerted: row.get(2),
        created_at_ms: row.get(3),
        updated_at_ms: row.get(4),
        tags: serde_json::from_str(&tags).unwrap_or_default(),
        memory_epoch: row.get(6),
    }
}

/// Marks the compiled system message stale (a block or the archive changed).
pub(super) async fn invalidate_system(
    client: &impl GenericClient,
    uid: i64,
    agent: &str,
) -> StoreResult<()> {
    client
        .execute(
            "UPDATE agents SET system_message = NULL, memory_epoch = memory_epoch + 1
             WHERE uid = $1 AND name = $2",
            &[&uid, &agent],
        )
        .await?;
    Ok(())
}

pub(super) async fn find_agent(
    client: &impl GenericClient,
    uid: i64,
    agent: &str,
) -> StoreResult<Option<AgentRecord>> {
    Ok(client
        .query_opt(
            &format!("SELECT {AGENT_COLUMNS} FROM agents WHERE uid = $1 AND name = $2"),
            &[&uid, &agent],
        )
        .await?
        .map(|row| agent_row(&row)))
}

/// The agent, created with `blocks` and its log on first use (by one replica if two race).
pub(super) async fn ensure_agent(
    client: &impl GenericClient,
    scope: &UserScope,
    agent: &str,
    blocks: &[CoreBlock],
) -> StoreResult<AgentRecord> {
    let uid = ensure_uid(client, scope).await?;
    let now = now_ms();
    let created = client
        .execute(
            "INSERT INTO agents (uid, name, created_at, updated_at) VALUES ($1, $2, $3, $3)
             ON CONFLICT (uid, name) DO NOTHING",
            &[&uid, &agent, &now],
        )
        .await?;
    if created > 0 {
        client
            .execute(
                "INSERT INTO conversations (uid, external_id, agent, created_at, updated_at)
                 VALUES ($1, $2, $3, $4, $4) ON CONFLICT (uid, external_id) DO NOTHING",
                &[&uid, &agent_conversation(agent), &agent, &now],
            )
            .await?;
        for block in blocks {
            blocks::check_block(block)?;
            insert_own(client, uid, agent, block, "DO NOTHING").await?;
        }
    }
    find_agent(client, uid, agent)
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("agent '{agent}'")))
}

/// Writes one of the agent's own blocks; `on_conflict` says what an existing one becomes.
pub(super) async fn insert_own(
    client: &impl GenericClient,
    uid: i64,
    agent: &str,
    block: &CoreBlock,
    on_conflict: &str,
) -> StoreResult<()> {
    client
        .execute(
            &format!(
                "INSERT INTO core_blocks (uid, agent, label, value, char_limit, read_only,
                     updated_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (uid, agent, label) {on_conflict}"
            ),
            &[
                &uid,
                &agent,
                &block.label,
                &block.value,
                &block.char_limit,
                &block.read_only,
                &now_ms(),
            ],
        )
        .await?;
    invalidate_system(client, uid, agent).await
}
