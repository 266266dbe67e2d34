//! Explicit-mode agents on PostgreSQL, by SQLite's rules (`store::sqlite::agent`, `agent_log`):
//! core blocks (an attached shared block in place of the own block of its label), archival
//! passages, the agent row with its compiled system message and memory epoch, tags; the log
//! and steps are in [`super::agent_log`]. Writes that change what the system message shows bump
//! the memory epoch in the same transaction, so a turn on another replica that compiled the older
//! memory does not store its system message over the change.

use tokio_postgres::GenericClient;

use super::agent_row::{
    agent_row, ensure_agent, find_agent, insert_own, invalidate_system, AGENT_COLUMNS,
};
use super::{agent_log, bump_generation, ensure_uid, find_uid, shared, PostgresStore};
use crate::store::{
    agent_conversation, blocks, now_ms, AgentCounts, AgentMessage, AgentRecord, Agents, CoreBlock,
    Corpus, Embedding, Page, Passage, StepRecord, StoreError, StoreResult, StoredMessage, Summary,
    TurnLock, UserScope,
};

async fn blocks_of(
    client: &impl GenericClient,
    uid: i64,
    agent: &str,
) -> StoreResult<Vec<CoreBlock>> {
    let own = client
        .query(
            "SELECT label, value, char_limit, read_only, updated_at FROM core_blocks
             WHERE uid = $1 AND agent = $2 ORDER BY id",
            &[&uid, &agent],
        )
        .await?
        .iter()
        .map(|row| CoreBlock {
            label: row.get(0),
            value: row.get(1),
            char_limit: row.get(2),
            read_only: row.get(3),
            updated_at_ms: row.get(4),
            shared: None,
        })
        .collect();
    let attached = shared::attached(client, uid, agent).await?;
    Ok(blocks::merge(own, attached))
}

/// Writes a block: the attached shared block of its label, else the agent's own.
pub(super) async fn put_block(
    client: &impl GenericClient,
    uid: i64,
    agent: &str,
    block: &CoreBlock,
) -> StoreResult<()> {
    blocks::check_block(block)?;
    if let Some(id) = shared::attached_id(client, uid, agent, &block.label).await? {
        return shared::write_value(client, uid, id, block).await;
    }
    insert_own(
        client,
        uid,
        agent,
        block,
        "DO UPDATE SET value = EXCLUDED.value, char_limit = EXCLUDED.char_limit,
             read_only = EXCLUDED.read_only, updated_at = EXCLUDED.updated_at",
    )
    .await
}

async fn reset(client: &impl GenericClient, scope: &UserScope, agent: &str) -> StoreResult<bool> {
    let Some(uid) = find_uid(client, scope).await? else {
        return Ok(false);
    };
    let mut changed = 0;
    for sql in [
        "DELETE FROM agents WHERE uid = $1 AND name = $2",
        "DELETE FROM core_blocks WHERE uid = $1 AND agent = $2",
        "DELETE FROM agent_steps WHERE uid = $1 AND agent = $2",
    ] {
        changed += client.execute(sql, &[&uid, &agent]).await?;
    }
    changed += shared::detach_all(client, uid, agent).await?;
    changed += agent_log::clear_pause(client, uid, agent).await?;
    let passages = client
        .execute(
            "DELETE FROM archival_passages WHERE uid = $1 AND agent = $2",
            &[&uid, &agent],
        )
        .await?;
    if passages > 0 {
        bump_generation(client, uid, Corpus::Passage).await?;
    }
    // Messages and the summary go with the conversation (ON DELETE CASCADE).
    let log = client
        .execute(
            "DELETE FROM conversations WHERE uid = $1 AND external_id = $2",
            &[&uid, &agent_conversation(agent)],
        )
        .await?;
    if log > 0 {
        bump_generation(client, uid, Corpus::Message).await?;
    }
    Ok(changed + passages + log > 0)
}

impl Agents for PostgresStore {
    fn core_blocks(&self, scope: &UserScope, agent: &str) -> StoreResult<Vec<CoreBlock>> {
        self.run(|pool| async move {
            let client = pool.get().await?;
            match find_uid(&**client, scope).await? {
                Some(uid) => blocks_of(&**client, uid, agent).await,
                None => Ok(Vec::new()),
            }
        })
    }

    fn put_core_block(&self, scope: &UserScope, agent: &str, block: &CoreBlock) -> StoreResult<()> {
        in_transaction!(self, |tx| {
            let uid = ensure_uid(tx, scope).await?;
            put_block(tx, uid, agent, block).await?;
        })
    }

    fn edit_core_block(
        &self,
        scope: &UserScope,
        agent: &str,
        label: &str,
        edit: &mut dyn FnMut(&CoreBlock) -> Result<String, String>,
    ) -> StoreResult<Result<Result<CoreBlock, String>, Vec<String>>> {
        in_transaction!(self, |tx| {
            let uid = ensure_uid(tx, scope).await?;
            // One edit of this agent's blocks at a time, on any replica.
            tx.execute(
                "SELECT 1 FROM agents WHERE uid = $1 AND name = $2 FOR UPDATE",
                &[&uid, &agent],
            )
            .await?;
            let blocks = blocks_of(tx, uid, agent).await?;
            let labels: Vec<String> = blocks.iter().map(|b| b.label.clone()).collect();
            match blocks.into_iter().find(|b| b.label == label) {
                None => Err(labels),
                Some(mut block) => match edit(&block) {
                    Ok(value) => {
                        block.value = value;
                        put_block(tx, uid, agent, &block).await?;
                        Ok(Ok(block))
                    }
                    Err(refused) => Ok(Err(refused)),
                },
            }
        })
    }

    fn insert_passage(
        &self,
        scope: &UserScope,
        agent: &str,
        text: &str,
        created_at_ms: i64,
        embedding: Option<&Embedding>,
    ) -> StoreResult<(i64, u64)> {
        in_transaction!(self, |tx| {
            let uid = ensure_uid(tx, scope).await?;
            let id: i64 = tx
                .query_one(
                    "INSERT INTO archival_passages (uid, agent, text, created_at,
                         embedding_model, embedding)
                     VALUES ($1, $2, $3, $4, $5, $6::REAL[]::vector) RETURNING id",
                    &[
                        &uid,
                        &agent,
                        &text,
                        &created_at_ms,
                        &embedding.map(|e| e.model.as_str()),
                        &embedding.map(|e| e.vector.as_slice()),
                    ],
                )
                .await?
                .get(0);
            (id, bump_generation(tx, uid, Corpus::Passage).await?)
        })
    }

    fn list_passages(
        &self,
        scope: &UserScope,
        agent: Option<&str>,
        page: Page,
    ) -> StoreResult<Vec<Passage>> {
        self.run(|pool| async move {
            let client = pool.get().await?;
            let Some(uid) = find_uid(&**client, scope).await? else {
                return Ok(Vec::new());
            };
            let rows = client
                .query(
                    "SELECT id, agent, text, created_at FROM archival_passages
                     WHERE uid = $1 AND ($4::TEXT IS NULL OR agent = $4)
                     ORDER BY id LIMIT $2 OFFSET $3",
                    &[&uid, &(page.limit as i64), &(page.offset as i64), &agent],
                )
                .await?;
            Ok(rows
                .iter()
                .map(|row| Passage {
                    id: row.get(0),
                    agent: row.get(1),
                    text: row.get(2),
                    created_at_ms: row.get(3),
                })
                .collect())
        })
    }

    fn delete_passage(&self, scope: &UserScope, agent: &str, id: i64) -> StoreResult<u64> {
        let missing = || StoreError::NotFound(format!("passage {id}"));
        in_transaction!(self, |tx| {
            let uid = find_uid(tx, scope).await?.ok_or_else(missing)?;
            let deleted = tx
                .execute(
                    "DELETE FROM archival_passages WHERE uid = $1 AND agent = $2 AND id = $3",
                    &[&uid, &agent, &id],
                )
                .await?;
            if deleted == 0 {
                return Err(missing());
            }
            bump_generation(tx, uid, Corpus::Passage).await?
        })
    }

    fn delete_core_block(&self, scope: &UserScope, agent: &str, label: &str) -> StoreResult<bool> {
        in_transaction!(self, |tx| {
            match find_uid(tx, scope).await? {
                None => false,
                Some(uid) => {
                    if let Some(id) = shared::attached_id(tx, uid, agent, label).await? {
                        let name: String = tx
                            .query_one("SELECT name FROM shared_blocks WHERE id = $1", &[&id])
                            .await?
                            .get(0);
                        return Err(StoreError::Invalid(format!(
                            "block '{label}' of agent '{agent}' is the shared block '{name}': detach it instead"
                        )));
                    }
                    let deleted = tx
                        .execute(
                            "DELETE FROM core_blocks WHERE uid = $1 AND agent = $2 AND label = $3",
                            &[&uid, &agent, &label],
                        )
                        .await?;
                    if deleted > 0 {
                        invalidate_system(tx, uid, agent).await?;
                    }
                    deleted > 0
                }
            }
        })
    }

    fn ensure_agent(
        &self,
        scope: &UserScope,
        agent: &str,
        blocks: &[CoreBlock],
    ) -> StoreResult<AgentRecord> {
        in_transaction!(self, |tx| ensure_agent(tx, scope, agent, blocks).await?)
    }

    fn list_agents(&self, scope: &UserScope) -> StoreResult<Vec<AgentRecord>> {
        self.run(|pool| async move {
            let client = pool.get().await?;
            let Some(uid) = find_uid(&**client, scope).await? else {
                return Ok(Vec::new());
            };
            let rows = client
                .query(
                    &format!("SELECT {AGENT_COLUMNS} FROM agents WHERE uid = $1 ORDER BY name"),
                    &[&uid],
                )
                .await?;
            Ok(rows.iter().map(agent_row).collect())
        })
    }

    fn agent_memory_epoch(&self, scope: &UserScope, agent: &str) -> StoreResult<i64> {
        self.run(|pool| async move {
            let client = pool.get().await?;
            let Some(uid) = find_uid(&**client, scope).await? else {
                return Ok(0);
            };
            Ok(find_agent(&**client, uid, agent)
                .await?
                .map_or(0, |a| a.memory_epoch))
        })
    }

    fn set_agent_state(
        &self,
        scope: &UserScope,
        agent: &str,
        system: Option<(&str, i64)>,
        pressure_alerted: bool,
    ) -> StoreResult<()> {
        let (text, epoch) = system.map_or((None, -1), |(text, epoch)| (Some(text), epoch));
        self.run(|pool| async move {
            let client = pool.get().await?;
            let uid = ensure_uid(&**client, scope).await?;
            client
                .execute(
                    "UPDATE agents SET system_message = CASE WHEN memory_epoch = $4 THEN $3 END,
                         pressure_alerted = $5, updated_at = $6
                     WHERE uid = $1 AND name = $2",
                    &[&uid, &agent, &text, &epoch, &pressure_alerted, &now_ms()],
                )
                .await?;
            Ok(())
        })
    }

    fn reset_agent(&self, scope: &UserScope, agent: &str) -> StoreResult<bool> {
        in_transaction!(self, |tx| reset(tx, scope, agent).await?)
    }

    fn paused_turn(&self, scope: &UserScope, agent: &str) -> StoreResult<Option<String>> {
        self.run(|pool| async move {
            let client = pool.get().await?;
            let Some(uid) = find_uid(&**client, scope).await? else {
                return Ok(None);
            };
            Ok(client
                .query_opt(
                    "SELECT state FROM agent_pauses WHERE uid = $1 AND agent = $2",
                    &[&uid, &agent],
                )
                .await?
                .map(|row| row.get(0)))
        })
    }

    fn set_paused_turn(
        &self,
        scope: &UserScope,
        agent: &str,
        paused: Option<(&str, &str)>,
    ) -> StoreResult<()> {
        in_transaction!(self, |tx| agent_log::set_pause(tx, scope, agent, paused)
            .await?)
    }

    fn delete_agent_message(
        &self,
        scope: &UserScope,
        agent: &str,
        position: i64,
    ) -> StoreResult<(Vec<(i64, i64)>, u64)> {
        in_transaction!(self, |tx| agent_log::delete_message(
            tx, scope, agent, position
        )
        .await?)
    }

    fn append_agent_messages(
        &self,
        scope: &UserScope,
        agent: &str,
        messages: &[(AgentMessage, Option<Embedding>)],
        end_pause: bool,
    ) -> StoreResult<(Vec<StoredMessage>, Option<(i64, u64)>)> {
        in_transaction!(self, |tx| agent_log::append(
            tx, scope, agent, messages, end_pause
        )
        .await?)
    }

    fn set_agent_tags(&self, scope: &UserScope, agent: &str, tags: &[String]) -> StoreResult<bool> {
        let text = serde_json::to_string(tags).map_err(|e| StoreError::Invalid(e.to_string()))?;
        self.run(|pool| async move {
            let client = pool.get().await?;
            let Some(uid) = find_uid(&**client, scope).await? else {
                return Ok(false);
            };
            Ok(client
                .execute(
                    "UPDATE agents SET tags = $3, updated_at = $4 WHERE uid = $1 AND name = $2",
                    &[&uid, &agent, &text, &now_ms()],
                )
                .await?
                > 0)
        })
    }

    fn agent_context(
        &self,
        scope: &UserScope,
        agent: &str,
    ) -> StoreResult<(Option<Summary>, Vec<StoredMessage>)> {
        // One snapshot: the summary and the messages after it agree.
        in_transaction!(self, |tx| agent_log::context(tx, scope, agent).await?)
    }

    fn agent_counts(&self, scope: &UserScope, agent: &str) -> StoreResult<AgentCounts> {
        self.run(|pool| async move { agent_log::counts(&**pool.get().await?, scope, agent).await })
    }

    fn messages_between(
        &self,
        scope: &UserScope,
        conversation: &str,
        from_ms: i64,
        to_ms: i64,
        page: Page,
    ) -> StoreResult<(usize, Vec<StoredMessage>)> {
        self.run(|pool| async move {
            let client = pool.get().await?;
            agent_log::between(&**client, scope, conversation, (from_ms, to_ms), page).await
        })
    }

    fn record_steps(
        &self,
        scope: &UserScope,
        agent: &str,
        steps: &[StepRecord],
        keep_turns: usize,
    ) -> StoreResult<()> {
        in_transaction!(self, |tx| agent_log::record_steps(
            tx, scope, agent, steps, keep_turns
        )
        .await?)
    }

    fn hold_turn_lock(&self, scope: &UserScope, agent: &str) -> StoreResult<Option<TurnLock>> {
        self.turn_lock(scope, agent)
    }

    fn agent_steps(
        &self,
        scope: &UserScope,
        agent: &str,
        turns: usize,
    ) -> StoreResult<Vec<StepRecord>> {
        self.run(
            |pool| async move { agent_log::steps(&**pool.get().await?, scope, agent, turns).await },
        )
    }
}
