//! Explicit-mode state: core memory blocks, archival passages, and conversation summaries.

use super::SqliteStore;
use crate::store::Agents;
use rusqlite::{params, Connection, Transaction};

use super::{bump_generation, ensure_uid, find_uid, to_blob};
use crate::store::{
    blocks, CoreBlock, Corpus, Embedding, Page, Passage, StoreError, StoreResult, UserScope,
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
    super::agent_row::insert_own(
        tx,
        uid,
        agent,
        block,
        "DO UPDATE SET value = excluded.value, char_limit = excluded.char_limit,
             read_only = excluded.read_only, updated_at = excluded.updated_at",
    )
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
        super::agent_row::invalidate_system(tx, uid, agent)?;
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

impl Agents for SqliteStore {
    fn core_blocks(
        &self,
        scope: &UserScope,
        agent: &str,
    ) -> StoreResult<Vec<crate::store::CoreBlock>> {
        self.read(|c| blocks(c, scope, agent))
    }

    fn put_core_block(
        &self,
        scope: &UserScope,
        agent: &str,
        block: &crate::store::CoreBlock,
    ) -> StoreResult<()> {
        self.write(|tx| put_block(tx, scope, agent, block))
    }

    fn edit_core_block(
        &self,
        scope: &UserScope,
        agent: &str,
        label: &str,
        edit: &mut dyn FnMut(&crate::store::CoreBlock) -> Result<String, String>,
    ) -> StoreResult<Result<Result<crate::store::CoreBlock, String>, Vec<String>>> {
        self.write(|tx| {
            let blocks = blocks(tx, scope, agent)?;
            let labels: Vec<String> = blocks.iter().map(|b| b.label.clone()).collect();
            let Some(mut block) = blocks.into_iter().find(|b| b.label == label) else {
                return Ok(Err(labels));
            };
            match edit(&block) {
                Ok(value) => {
                    block.value = value;
                    put_block(tx, scope, agent, &block)?;
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
        embedding: Option<&crate::store::Embedding>,
    ) -> StoreResult<(i64, u64)> {
        self.write(|tx| insert_passage(tx, scope, agent, text, created_at_ms, embedding))
    }

    fn list_passages(
        &self,
        scope: &UserScope,
        agent: Option<&str>,
        page: crate::store::Page,
    ) -> StoreResult<Vec<crate::store::Passage>> {
        self.read(|c| passages(c, scope, agent, page))
    }

    fn delete_passage(&self, scope: &UserScope, agent: &str, id: i64) -> StoreResult<u64> {
        self.erase(|tx| delete_passage(tx, scope, agent, id))
    }

    fn delete_core_block(&self, scope: &UserScope, agent: &str, label: &str) -> StoreResult<bool> {
        self.erase(|tx| delete_block(tx, scope, agent, label))
    }

    fn ensure_agent(
        &self,
        scope: &UserScope,
        agent: &str,
        blocks: &[crate::store::CoreBlock],
    ) -> StoreResult<crate::store::AgentRecord> {
        if let Some(found) = self.read(|c| super::agent_row::find(c, scope, agent))? {
            return Ok(found);
        }
        self.write(|tx| super::agent_row::ensure(tx, scope, agent, blocks))
    }

    fn list_agents(&self, scope: &UserScope) -> StoreResult<Vec<crate::store::AgentRecord>> {
        self.read(|c| super::agent_log::list(c, scope))
    }

    fn agent_memory_epoch(&self, scope: &UserScope, agent: &str) -> StoreResult<i64> {
        self.read(|c| Ok(super::agent_row::find(c, scope, agent)?.map_or(0, |a| a.memory_epoch)))
    }

    fn set_agent_state(
        &self,
        scope: &UserScope,
        agent: &str,
        system: Option<(&str, i64)>,
        pressure_alerted: bool,
    ) -> StoreResult<()> {
        self.write(|tx| super::agent_log::set_state(tx, scope, agent, system, pressure_alerted))
    }

    fn reset_agent(&self, scope: &UserScope, agent: &str) -> StoreResult<bool> {
        self.erase(|tx| super::agent_log::reset(tx, scope, agent))
    }

    fn paused_turn(&self, scope: &UserScope, agent: &str) -> StoreResult<Option<String>> {
        self.read(|c| super::agent_log::pause(c, scope, agent))
    }

    fn set_paused_turn(
        &self,
        scope: &UserScope,
        agent: &str,
        paused: Option<(&str, &str)>,
    ) -> StoreResult<()> {
        self.write(|tx| super::agent_log::set_pause(tx, scope, agent, paused))
    }

    fn delete_agent_message(
        &self,
        scope: &UserScope,
        agent: &str,
        position: i64,
    ) -> StoreResult<(Vec<(i64, i64)>, u64)> {
        self.erase(|tx| super::agent_log::delete_message(tx, scope, agent, position))
    }

    fn append_agent_messages(
        &self,
        scope: &UserScope,
        agent: &str,
        messages: &[(crate::store::AgentMessage, Option<crate::store::Embedding>)],
        end_pause: bool,
    ) -> StoreResult<(Vec<crate::store::StoredMessage>, Option<(i64, u64)>)> {
        self.write(|tx| super::agent_log::append(tx, scope, agent, messages, end_pause))
    }

    fn set_agent_tags(&self, scope: &UserScope, agent: &str, tags: &[String]) -> StoreResult<bool> {
        self.write(|tx| super::agent_log::set_tags(tx, scope, agent, tags))
    }

    fn agent_context(
        &self,
        scope: &UserScope,
        agent: &str,
    ) -> StoreResult<(
        Option<crate::store::Summary>,
        Vec<crate::store::StoredMessage>,
    )> {
        self.read(|c| super::agent_log::context(c, scope, agent))
    }

    fn agent_counts(
        &self,
        scope: &UserScope,
        agent: &str,
    ) -> StoreResult<crate::store::AgentCounts> {
        self.read(|c| super::agent_log::counts(c, scope, agent))
    }

    fn messages_between(
        &self,
        scope: &UserScope,
        conversation: &str,
        from_ms: i64,
        to_ms: i64,
        page: crate::store::Page,
    ) -> StoreResult<(usize, Vec<crate::store::StoredMessage>)> {
        self.read(|c| super::agent_log::between(c, scope, conversation, from_ms, to_ms, page))
    }

    fn record_steps(
        &self,
        scope: &UserScope,
        agent: &str,
        steps: &[crate::store::StepRecord],
        keep_turns: usize,
    ) -> StoreResult<()> {
        self.write(|tx| super::agent_log::record_steps(tx, scope, agent, steps, keep_turns))
    }

    fn agent_steps(
        &self,
        scope: &UserScope,
        agent: &str,
        turns: usize,
    ) -> StoreResult<Vec<crate::store::StepRecord>> {
        self.read(|c| super::agent_log::steps(c, scope, agent, turns))
    }
}
