//! An explicit-mode agent's log on PostgreSQL, by SQLite's rules (`store::sqlite::agent_log`):
//! the log is the conversation `agent:{name}` of the recall log, its context the messages after
//! the summary's `through_position`; the step trace; the turn paused on client tool calls.

use crate::store::AGENT_CONVERSATION_PREFIX;
use tokio_postgres::GenericClient;

use super::recall::{message_row, summary_of, MESSAGE_COLUMNS};
use super::{bump_generation, ensure_uid, find_uid};
use crate::store::{
    agent_conversation, now_ms, AgentCounts, AgentMessage, Corpus, Embedding, Page, StepRecord,
    StoreError, StoreResult, StoredMessage, Summary, UserScope,
};

pub(super) async fn clear_pause(
    client: &impl GenericClient,
    uid: i64,
    agent: &str,
) -> StoreResult<u64> {
    Ok(client
        .execute(
            "DELETE FROM agent_pauses WHERE uid = $1 AND agent = $2",
            &[&uid, &agent],
        )
        .await?)
}

pub(super) async fn set_pause(
    client: &impl GenericClient,
    scope: &UserScope,
    agent: &str,
    paused: Option<(&str, &str)>,
) -> StoreResult<()> {
    match paused {
        Some((turn, state)) => {
            let uid = ensure_uid(client, scope).await?;
            client
                .execute(
                    "INSERT INTO agent_pauses (uid, agent, turn, state, created_at)
                     VALUES ($1, $2, $3, $4, $5)
                     ON CONFLICT (uid, agent) DO UPDATE SET turn = EXCLUDED.turn,
                         state = EXCLUDED.state, created_at = EXCLUDED.created_at",
                    &[&uid, &agent, &turn, &state, &now_ms()],
                )
                .await?;
        }
        None => {
            if let Some(uid) = find_uid(client, scope).await? {
                clear_pause(client, uid, agent).await?;
            }
        }
    }
    Ok(())
}

/// Appends messages to the agent's log (ending its pause when `end_pause`).
#[allow(clippy::type_complexity)]
pub(super) async fn append(
    client: &impl GenericClient,
    scope: &UserScope,
    agent: &str,
    messages: &[(AgentMessage, Option<Embedding>)],
    end_pause: bool,
) -> StoreResult<(Vec<StoredMessage>, Option<(i64, u64)>)> {
    let uid = ensure_uid(client, scope).await?;
    if end_pause {
        clear_pause(client, uid, agent).await?;
    }
    let conversation = agent_conversation(agent);
    // Locks the log's row: appends of one agent never interleave.
    let conversation_id: i64 = client
        .query_one(
            "INSERT INTO conversations (uid, external_id, agent, created_at, updated_at)
             VALUES ($1, $2, $3, $4, $4)
             ON CONFLICT (uid, external_id) DO UPDATE SET updated_at = EXCLUDED.updated_at
             RETURNING id",
            &[&uid, &conversation, &agent, &now_ms()],
        )
        .await?
        .get(0);
    let mut position: i64 = client
        .query_one(
            "SELECT COALESCE(MAX(position), -1) FROM messages WHERE conversation_id = $1",
            &[&conversation_id],
        )
        .await?
        .get(0);
    let mut stored = Vec::with_capacity(messages.len());
    for (message, embedding) in messages {
        position += 1;
        let tokens = message.token_count();
        let id: i64 = client
            .query_one(
                "INSERT INTO messages (uid, conversation_id, position, role, content, tool_calls,
                     tool_call_id, created_at, token_count, content_hash, search_text,
                     embedding_model, embedding)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13::REAL[]::vector)
                 RETURNING id",
                &[
                    &uid,
                    &conversation_id,
                    &position,
                    &message.role,
                    &message.content,
                    &message.tool_calls,
                    &message.tool_call_id,
                    &message.created_at_ms,
                    &tokens,
                    &message.log_hash(),
                    &message.search_text,
                    &embedding.as_ref().map(|e| e.model.as_str()),
                    &embedding.as_ref().map(|e| e.vector.as_slice()),
                ],
            )
            .await?
            .get(0);
        stored.push(message.stored(id, &conversation, position));
    }
    let vectors = if messages.iter().any(|(_, e)| e.is_some()) {
        Some((uid, bump_generation(client, uid, Corpus::Message).await?))
    } else {
        None
    };
    Ok((stored, vectors))
}

/// Deletes one message of an agent's log with the results of the tool calls it made.
pub(super) async fn delete_message(
    client: &impl GenericClient,
    scope: &UserScope,
    agent: &str,
    position: i64,
) -> StoreResult<(Vec<(i64, i64)>, u64)> {
    let missing = || StoreError::NotFound(format!("message {position} of agent '{agent}'"));
    let uid = find_uid(client, scope).await?.ok_or_else(missing)?;
    let row = client
        .query_opt(
            "SELECT m.id, m.conversation_id, m.role, m.tool_calls FROM messages m
             JOIN conversations c ON c.id = m.conversation_id
             WHERE c.uid = $1 AND c.external_id = $2 AND m.position = $3",
            &[&uid, &agent_conversation(agent), &position],
        )
        .await?
        .ok_or_else(missing)?;
    let (id, conversation, role, tool_calls): (i64, i64, String, Option<String>) =
        (row.get(0), row.get(1), row.get(2), row.get(3));
    if role == "tool" {
        return Err(StoreError::Invalid(format!(
            "message {position} is a tool result; delete the assistant message that made the call (its results go with it)"
        )));
    }
    let mut deleted = vec![(id, position)];
    let calls: Vec<serde_json::Value> = tool_calls
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_default();
    for call in calls.iter().filter_map(|c| c["id"].as_str()) {
        for row in client
            .query(
                "SELECT id, position FROM messages WHERE conversation_id = $1 AND role = 'tool'
                     AND tool_call_id = $2 AND position > $3",
                &[&conversation, &call, &position],
            )
            .await?
        {
            deleted.push((row.get(0), row.get(1)));
        }
    }
    let ids: Vec<i64> = deleted.iter().map(|(id, _)| *id).collect();
    client
        .execute("DELETE FROM messages WHERE id = ANY($1)", &[&ids])
        .await?;
    client
        .execute(
            "UPDATE agents SET system_message = NULL, updated_at = $3 WHERE uid = $1 AND name = $2",
            &[&uid, &agent, &now_ms()],
        )
        .await?;
    Ok((
        deleted,
        bump_generation(client, uid, Corpus::Message).await?,
    ))
}

pub(super) async fn context(
    client: &impl GenericClient,
    scope: &UserScope,
    agent: &str,
) -> StoreResult<(Option<Summary>, Vec<StoredMessage>)> {
    let Some(uid) = find_uid(client, scope).await? else {
        return Ok((None, Vec::new()));
    };
    let conversation = agent_conversation(agent);
    let summary = summary_of(client, uid, &conversation).await?;
    let after = summary.as_ref().map_or(-1, |s| s.through_position);
    let rows = client
        .query(
            &format!(
                "SELECT {MESSAGE_COLUMNS} FROM messages m
                 JOIN conversations c ON c.id = m.conversation_id
                 WHERE m.uid = $1 AND c.external_id = $2 AND m.position > $3
                 ORDER BY m.position"
            ),
            &[&uid, &conversation, &after],
        )
        .await?;
    Ok((summary, rows.iter().map(message_row).collect()))
}

pub(super) async fn counts(
    client: &impl GenericClient,
    scope: &UserScope,
    agent: &str,
) -> StoreResult<AgentCounts> {
    let Some(uid) = find_uid(client, scope).await? else {
        return Ok(AgentCounts::default());
    };
    let conversation = agent_conversation(agent);
    let after = summary_of(client, uid, &conversation)
        .await?
        .map_or(-1, |s| s.through_position);
    let row = client
        .query_one(
            "SELECT COUNT(*), COUNT(*) FILTER (WHERE m.position > $3) FROM messages m
             JOIN conversations c ON c.id = m.conversation_id
             WHERE m.uid = $1 AND c.external_id = $2",
            &[&uid, &conversation, &after],
        )
        .await?;
    let passages: i64 = client
        .query_one(
            "SELECT COUNT(*) FROM archival_passages WHERE uid = $1 AND agent = $2",
            &[&uid, &agent],
        )
        .await?
        .get(0);
    Ok(AgentCounts {
        messages: row.get(0),
        in_context: row.get(1),
        passages,
    })
}

pub(super) async fn between(
    client: &impl GenericClient,
    scope: &UserScope,
    conversation: &str,
    (from_ms, to_ms): (i64, i64),
    page: Page,
) -> StoreResult<(usize, Vec<StoredMessage>)> {
    let Some(uid) = find_uid(client, scope).await? else {
        return Ok((0, Vec::new()));
    };
    // The agent's recall memory: its log and the user's chats, not other agents' logs.
    let filter = format!(
        "m.uid = $1 AND (c.external_id = $2 OR c.external_id NOT LIKE '{AGENT_CONVERSATION_PREFIX}%')
         AND m.created_at >= $3 AND m.created_at < $4
         AND NOT m.superseded AND length(trim(COALESCE(m.search_text, m.content))) > 0"
    );
    let total: i64 = client
        .query_one(
            &format!(
                "SELECT COUNT(*) FROM messages m JOIN conversations c ON c.id = m.conversation_id
                 WHERE {filter}"
            ),
            &[&uid, &conversation, &from_ms, &to_ms],
        )
        .await?
        .get(0);
    let rows = client
        .query(
            &format!(
                "SELECT {MESSAGE_COLUMNS} FROM messages m
                 JOIN conversations c ON c.id = m.conversation_id
                 WHERE {filter} ORDER BY m.created_at, m.position LIMIT $5 OFFSET $6"
            ),
            &[
                &uid,
                &conversation,
                &from_ms,
                &to_ms,
                &(page.limit as i64),
                &(page.offset as i64),
            ],
        )
        .await?;
    Ok((total as usize, rows.iter().map(message_row).collect()))
}

pub(super) async fn record_steps(
    client: &impl GenericClient,
    scope: &UserScope,
    agent: &str,
    steps: &[StepRecord],
    keep_turns: usize,
) -> StoreResult<()> {
    let uid = ensure_uid(client, scope).await?;
    for step in steps {
        client
            .execute(
                "INSERT INTO agent_steps (uid, agent, turn, step, tool, arguments, status, result,
                     heartbeat, prompt_tokens, completion_tokens, latency_ms, created_at,
                     cached_tokens)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)",
                &[
                    &uid,
                    &agent,
                    &step.turn,
                    &step.step,
                    &step.tool,
                    &step.arguments,
                    &step.status,
                    &step.result,
                    &step.heartbeat,
                    &step.prompt_tokens,
                    &step.completion_tokens,
                    &step.latency_ms,
                    &step.created_at_ms,
                    &step.cached_tokens,
                ],
            )
            .await?;
    }
    // Keep the newest turns only: the trace is for looking at, not an archive.
    client
        .execute(
            "DELETE FROM agent_steps WHERE uid = $1 AND agent = $2 AND turn NOT IN (
                 SELECT turn FROM agent_steps WHERE uid = $1 AND agent = $2
                 GROUP BY turn ORDER BY MAX(id) DESC LIMIT $3)",
            &[&uid, &agent, &(keep_turns as i64)],
        )
        .await?;
    Ok(())
}

pub(super) async fn steps(
    client: &impl GenericClient,
    scope: &UserScope,
    agent: &str,
    turns: usize,
) -> StoreResult<Vec<StepRecord>> {
    let Some(uid) = find_uid(client, scope).await? else {
        return Ok(Vec::new());
    };
    let rows = client
        .query(
            "SELECT turn, step, tool, arguments, status, result, heartbeat, prompt_tokens,
                 completion_tokens, latency_ms, created_at, cached_tokens
             FROM agent_steps WHERE uid = $1 AND agent = $2 AND turn IN (
                 SELECT turn FROM agent_steps WHERE uid = $1 AND agent = $2
                 GROUP BY turn ORDER BY MAX(id) DESC LIMIT $3)
             ORDER BY id",
            &[&uid, &agent, &(turns as i64)],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|row| StepRecord {
            turn: row.get(0),
            step: row.get(1),
            tool: row.get(2),
            arguments: row.get(3),
            status: row.get(4),
            result: row.get(5),
            heartbeat: row.get(6),
            prompt_tokens: row.get(7),
            completion_tokens: row.get(8),
            latency_ms: row.get(9),
            created_at_ms: row.get(10),
            cached_tokens: row.get(11),
        })
        .collect())
}
