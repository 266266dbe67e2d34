//! Explicit-mode agents in SQLite: the agent row, its log (a conversation `agent:{name}` in the
//! recall log, so eviction never loses a message), its context (messages after the summary's
//! `through_position`), the step trace and the turn paused on the client's tool calls.

use crate::store::AGENT_CONVERSATION_PREFIX;
use rusqlite::{params, Connection, OptionalExtension, Transaction};

use super::agent_row::{agent_row, AGENT_COLUMNS};
use super::recall::{conversation_id, message_row, MESSAGE_COLUMNS};
use super::{bump_generation, ensure_uid, find_uid, to_blob};
use crate::store::{
    agent_conversation, now_ms, AgentCounts, AgentMessage, AgentRecord, Corpus, Embedding, Page,
    StepRecord, StoreError, StoreResult, StoredMessage, Summary, UserScope,
};

/// Replaces an agent's tags; `false` when the agent does not exist.
pub fn set_tags(
    tx: &Transaction,
    scope: &UserScope,
    agent: &str,
    tags: &[String],
) -> StoreResult<bool> {
    let Some(uid) = find_uid(tx, scope)? else {
        return Ok(false);
    };
    let text = serde_json::to_string(tags).map_err(|e| StoreError::Invalid(e.to_string()))?;
    Ok(tx.execute(
        "UPDATE agents SET tags = ?3, updated_at = ?4 WHERE uid = ?1 AND name = ?2",
        params![uid, agent, text, now_ms()],
    )? > 0)
}

pub fn list(connection: &Connection, scope: &UserScope) -> StoreResult<Vec<AgentRecord>> {
    let Some(uid) = find_uid(connection, scope)? else {
        return Ok(Vec::new());
    };
    let mut statement = connection.prepare(&format!(
        "SELECT {AGENT_COLUMNS} FROM agents WHERE uid = ?1 ORDER BY name"
    ))?;
    let rows = statement
        .query_map(params![uid], agent_row)?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

/// Stores the compiled system message only if it was compiled at the agent's current memory
/// epoch: a change since (another agent's edit of a shared block, an operator's edit) leaves it
/// to be compiled again.
pub fn set_state(
    tx: &Transaction,
    scope: &UserScope,
    agent: &str,
    system: Option<(&str, i64)>,
    pressure_alerted: bool,
) -> StoreResult<()> {
    let uid = ensure_uid(tx, scope)?;
    let (text, epoch) = system.map_or((None, -1), |(text, epoch)| (Some(text), epoch));
    tx.execute(
        "UPDATE agents SET system_message = CASE WHEN memory_epoch = ?4 THEN ?3 END,
             pressure_alerted = ?5, updated_at = ?6
         WHERE uid = ?1 AND name = ?2",
        params![uid, agent, text, epoch, pressure_alerted, now_ms()],
    )?;
    Ok(())
}

/// Deletes one message of an agent's log together with the results of the tool calls it made
/// (a result never stays without its call; a result alone is refused). The compiled system
/// message is dropped, since its counts changed. Returns the deleted `(id, position)`s and the
/// new message-vector generation.
pub fn delete_message(
    tx: &Transaction,
    scope: &UserScope,
    agent: &str,
    position: i64,
) -> StoreResult<(Vec<(i64, i64)>, u64)> {
    let missing = || StoreError::NotFound(format!("message {position} of agent '{agent}'"));
    let uid = find_uid(tx, scope)?.ok_or_else(missing)?;
    let found: Option<(i64, i64, String, Option<String>)> = tx
        .query_row(
            "SELECT m.id, m.conversation_id, m.role, m.tool_calls FROM messages m
             JOIN conversations c ON c.id = m.conversation_id
             WHERE c.uid = ?1 AND c.external_id = ?2 AND m.position = ?3",
            params![uid, agent_conversation(agent), position],
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?)),
        )
        .optional()?;
    let (id, conversation, role, tool_calls) = found.ok_or_else(missing)?;
    if role == "tool" {
        return Err(StoreError::Invalid(format!(
            "message {position} is a tool result; delete the assistant message that made the call (its results go with it)"
        )));
    }
    let mut deleted = vec![(id, position)];
    let calls: Vec<serde_json::Value> = tool_calls
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_default();
    let mut results = tx.prepare_cached(
        "SELECT id, position FROM messages
         WHERE conversation_id = ?1 AND role = 'tool' AND tool_call_id = ?2 AND position > ?3",
    )?;
    for call in calls.iter().filter_map(|c| c["id"].as_str()) {
        let rows = results.query_map(params![conversation, call, position], |row| {
            Ok((row.get(0)?, row.get(1)?))
        })?;
        for row in rows {
            deleted.push(row?);
        }
    }
    let mut delete = tx.prepare_cached("DELETE FROM messages WHERE id = ?1")?;
    for (id, _) in &deleted {
        delete.execute([id])?;
    }
    tx.execute(
        "UPDATE agents SET system_message = NULL, updated_at = ?3 WHERE uid = ?1 AND name = ?2",
        params![uid, agent, now_ms()],
    )?;
    Ok((deleted, bump_generation(tx, uid, Corpus::Message)?))
}

pub fn reset(tx: &Transaction, scope: &UserScope, agent: &str) -> StoreResult<bool> {
    let Some(uid) = find_uid(tx, scope)? else {
        return Ok(false);
    };
    let mut changed = tx.execute(
        "DELETE FROM agents WHERE uid = ?1 AND name = ?2",
        params![uid, agent],
    )?;
    changed += tx.execute(
        "DELETE FROM core_blocks WHERE uid = ?1 AND agent = ?2",
        params![uid, agent],
    )?;
    changed += super::shared::detach_all(tx, uid, agent)?;
    let passages = tx.execute(
        "DELETE FROM archival_passages WHERE uid = ?1 AND agent = ?2",
        params![uid, agent],
    )?;
    if passages > 0 {
        bump_generation(tx, uid, Corpus::Passage)?;
    }
    // Messages and the summary go with the conversation (ON DELETE CASCADE).
    let log = tx.execute(
        "DELETE FROM conversations WHERE uid = ?1 AND external_id = ?2",
        params![uid, agent_conversation(agent)],
    )?;
    if log > 0 {
        bump_generation(tx, uid, Corpus::Message)?;
    }
    changed += tx.execute(
        "DELETE FROM agent_steps WHERE uid = ?1 AND agent = ?2",
        params![uid, agent],
    )?;
    changed += clear_pause(tx, uid, agent)?;
    Ok(changed + passages + log > 0)
}

#[allow(clippy::type_complexity)]
pub fn append(
    tx: &Transaction,
    scope: &UserScope,
    agent: &str,
    messages: &[(AgentMessage, Option<Embedding>)],
    end_pause: bool,
) -> StoreResult<(Vec<StoredMessage>, Option<(i64, u64)>)> {
    let uid = ensure_uid(tx, scope)?;
    // A finished turn's messages end any pause of the agent, in the same transaction.
    if end_pause {
        clear_pause(tx, uid, agent)?;
    }
    let conversation = agent_conversation(agent);
    let conversation_id = conversation_id(tx, uid, &conversation, agent)?;
    let mut position: i64 = tx.query_row(
        "SELECT COALESCE(MAX(position), -1) FROM messages WHERE conversation_id = ?1",
        params![conversation_id],
        |row| row.get(0),
    )?;
    let mut insert = tx.prepare_cached(
        "INSERT INTO messages (uid, conversation_id, position, role, content, tool_calls,
             tool_call_id, created_at, token_count, content_hash, search_text, embedding_model,
             embedding)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
    )?;
    let mut stored = Vec::with_capacity(messages.len());
    for (message, embedding) in messages {
        position += 1;
        let tokens = message.token_count();
        insert.execute(params![
            uid,
            conversation_id,
            position,
            message.role,
            message.content,
            message.tool_calls,
            message.tool_call_id,
            message.created_at_ms,
            tokens,
            message.log_hash(),
            message.search_text,
            embedding.as_ref().map(|e| e.model.as_str()),
            embedding.as_ref().map(|e| to_blob(&e.vector)),
        ])?;
        stored.push(message.stored(tx.last_insert_rowid(), &conversation, position));
    }
    let vectors = if messages.iter().any(|(_, e)| e.is_some()) {
        Some((uid, bump_generation(tx, uid, Corpus::Message)?))
    } else {
        None
    };
    Ok((stored, vectors))
}

pub fn context(
    connection: &Connection,
    scope: &UserScope,
    agent: &str,
) -> StoreResult<(Option<Summary>, Vec<StoredMessage>)> {
    let Some(uid) = find_uid(connection, scope)? else {
        return Ok((None, Vec::new()));
    };
    let conversation = agent_conversation(agent);
    let summary = super::recall::summary(connection, scope, &conversation)?;
    let after = summary.as_ref().map_or(-1, |s| s.through_position);
    let mut statement = connection.prepare_cached(&format!(
        "SELECT {MESSAGE_COLUMNS} FROM messages m JOIN conversations c ON c.id = m.conversation_id
         WHERE m.uid = ?1 AND c.external_id = ?2 AND m.position > ?3 ORDER BY m.position"
    ))?;
    let messages = statement
        .query_map(params![uid, conversation, after], message_row)?
        .collect::<Result<Vec<_>, _>>()?;
    Ok((summary, messages))
}

pub fn counts(connection: &Connection, scope: &UserScope, agent: &str) -> StoreResult<AgentCounts> {
    let Some(uid) = find_uid(connection, scope)? else {
        return Ok(AgentCounts::default());
    };
    let conversation = agent_conversation(agent);
    let after = super::recall::summary(connection, scope, &conversation)?
        .map_or(-1, |s| s.through_position);
    let (messages, in_context): (i64, i64) = connection.query_row(
        "SELECT COUNT(*), COALESCE(SUM(m.position > ?3), 0) FROM messages m
         JOIN conversations c ON c.id = m.conversation_id
         WHERE m.uid = ?1 AND c.external_id = ?2",
        params![uid, conversation, after],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )?;
    let passages = connection.query_row(
        "SELECT COUNT(*) FROM archival_passages WHERE uid = ?1 AND agent = ?2",
        params![uid, agent],
        |row| row.get(0),
    )?;
    Ok(AgentCounts {
        messages,
        in_context,
        passages,
    })
}

pub fn between(
    connection: &Connection,
    scope: &UserScope,
    conversation: &str,
    from_ms: i64,
    to_ms: i64,
    page: Page,
) -> StoreResult<(usize, Vec<StoredMessage>)> {
    let Some(uid) = find_uid(connection, scope)? else {
        return Ok((0, Vec::new()));
    };
    // The agent's recall memory: its log and the user's chats, not other agents' logs.
    let filter = format!(
        "m.uid = ?1 AND (c.external_id = ?2 OR c.external_id NOT LIKE '{AGENT_CONVERSATION_PREFIX}%')
         AND m.created_at >= ?3 AND m.created_at < ?4
         AND m.superseded = 0 AND length(trim(COALESCE(m.search_text, m.content))) > 0"
    );
    let total: i64 = connection.query_row(
        &format!(
            "SELECT COUNT(*) FROM messages m JOIN conversations c ON c.id = m.conversation_id
             WHERE {filter}"
        ),
        params![uid, conversation, from_ms, to_ms],
        |row| row.get(0),
    )?;
    let mut statement = connection.prepare_cached(&format!(
        "SELECT {MESSAGE_COLUMNS} FROM messages m JOIN conversations c ON c.id = m.conversation_id
         WHERE {filter} ORDER BY m.created_at, m.position LIMIT ?5 OFFSET ?6"
    ))?;
    let rows = statement
        .query_map(
            params![
                uid,
                conversation,
                from_ms,
                to_ms,
                page.limit as i64,
                page.offset as i64
            ],
            message_row,
        )?
        .collect::<Result<Vec<_>, _>>()?;
    Ok((total as usize, rows))
}

pub fn record_steps(
    tx: &Transaction,
    scope: &UserScope,
    agent: &str,
    steps: &[StepRecord],
    keep_turns: usize,
) -> StoreResult<()> {
    let uid = ensure_uid(tx, scope)?;
    let mut insert = tx.prepare_cached(
        "INSERT INTO agent_steps (uid, agent, turn, step, tool, arguments, status, result,
             heartbeat, prompt_tokens, completion_tokens, latency_ms, created_at, cached_tokens)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
    )?;
    for step in steps {
        insert.execute(params![
            uid,
            agent,
            step.turn,
            step.step,
            step.tool,
            step.arguments,
            step.status,
            step.result,
            step.heartbeat,
            step.prompt_tokens,
            step.completion_tokens,
            step.latency_ms,
            step.created_at_ms,
            step.cached_tokens
        ])?;
    }
    // Keep the newest turns only: the trace is for looking at, not an archive.
    tx.execute(
        "DELETE FROM agent_steps WHERE uid = ?1 AND agent = ?2 AND turn NOT IN (
             SELECT turn FROM agent_steps WHERE uid = ?1 AND agent = ?2
             GROUP BY turn ORDER BY MAX(id) DESC LIMIT ?3)",
        params![uid, agent, keep_turns as i64],
    )?;
    Ok(())
}

pub fn steps(
    connection: &Connection,
    scope: &UserScope,
    agent: &str,
    turns: usize,
) -> StoreResult<Vec<StepRecord>> {
    let Some(uid) = find_uid(connection, scope)? else {
        return Ok(Vec::new());
    };
    let mut statement = connection.prepare_cached(
        "SELECT turn, step, tool, arguments, status, result, heartbeat, prompt_tokens,
             completion_tokens, latency_ms, created_at, cached_tokens
         FROM agent_steps WHERE uid = ?1 AND agent = ?2 AND turn IN (
             SELECT turn FROM agent_steps WHERE uid = ?1 AND agent = ?2
             GROUP BY turn ORDER BY MAX(id) DESC LIMIT ?3)
         ORDER BY id",
    )?;
    let rows = statement
        .query_map(params![uid, agent, turns as i64], |row| {
            Ok(StepRecord {
                turn: row.get(0)?,
                step: row.get(1)?,
                tool: row.get(2)?,
                arguments: row.get(3)?,
                status: row.get(4)?,
                result: row.get(5)?,
                heartbeat: row.get(6)?,
                prompt_tokens: row.get(7)?,
                completion_tokens: row.get(8)?,
                latency_ms: row.get(9)?,
                created_at_ms: row.get(10)?,
                cached_tokens: row.get(11)?,
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

/// The state of the agent's turn paused on the client's tool calls (opaque JSON here), until
/// the client's results resume it.
pub fn pause(
    connection: &Connection,
    scope: &UserScope,
    agent: &str,
) -> StoreResult<Option<String>> {
    let Some(uid) = find_uid(connection, scope)? else {
        return Ok(None);
    };
    Ok(connection
        .query_row(
            "SELECT state FROM agent_pauses WHERE uid = ?1 AND agent = ?2",
            params![uid, agent],
            |row| row.get(0),
        )
        .optional()?)
}

/// Pauses the agent's turn (`Some((turn, state))`) or ends its pause.
pub fn set_pause(
    tx: &Transaction,
    scope: &UserScope,
    agent: &str,
    paused: Option<(&str, &str)>,
) -> StoreResult<()> {
    match paused {
        Some((turn, state)) => {
            let uid = ensure_uid(tx, scope)?;
            tx.execute(
                "INSERT INTO agent_pauses (uid, agent, turn, state, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (uid, agent) DO UPDATE SET turn = ?3, state = ?4, created_at = ?5",
                params![uid, agent, turn, state, now_ms()],
            )?;
        }
        None => {
            if let Some(uid) = find_uid(tx, scope)? {
                clear_pause(tx, uid, agent)?;
            }
        }
    }
    Ok(())
}

/// Ends the pause; appending the agent's messages (a finished turn) and resetting the agent do.
pub fn clear_pause(tx: &Transaction, uid: i64, agent: &str) -> StoreResult<usize> {
    Ok(tx.execute(
        "DELETE FROM agent_pauses WHERE uid = ?1 AND agent = ?2",
        params![uid, agent],
    )?)
}
