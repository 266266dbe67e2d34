//! The recall log: conversations and their turns.

use rusqlite::{params, Connection, OptionalExtension, Row, Transaction};

use super::{ensure_uid, find_uid, require_uid};
use crate::store::{
    content_hash, now_ms, Conversation, NewMessage, Page, StoreResult, StoredMessage, UserScope,
};

const MESSAGE_COLUMNS: &str = "m.id, c.external_id, m.position, m.role, m.content, m.name, \
     m.tool_calls, m.tool_call_id, m.created_at, m.token_count";

fn message_row(row: &Row) -> rusqlite::Result<StoredMessage> {
    Ok(StoredMessage {
        id: row.get(0)?,
        conversation: row.get(1)?,
        position: row.get(2)?,
        role: row.get(3)?,
        content: row.get(4)?,
        name: row.get(5)?,
        tool_calls: row.get(6)?,
        tool_call_id: row.get(7)?,
        created_at_ms: row.get(8)?,
        token_count: row.get(9)?,
    })
}

pub fn append(
    tx: &Transaction,
    scope: &UserScope,
    conversation: &str,
    agent: &str,
    messages: &[NewMessage],
) -> StoreResult<Vec<StoredMessage>> {
    let uid = ensure_uid(tx, scope)?;
    let now = now_ms();
    tx.execute(
        "INSERT INTO conversations (uid, external_id, agent, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?4)
         ON CONFLICT (uid, external_id) DO UPDATE SET updated_at = excluded.updated_at",
        params![uid, conversation, agent, now],
    )?;
    let conversation_id: i64 = tx.query_row(
        "SELECT id FROM conversations WHERE uid = ?1 AND external_id = ?2",
        params![uid, conversation],
        |row| row.get(0),
    )?;
    let mut insert = tx.prepare_cached(
        "INSERT OR IGNORE INTO messages (uid, conversation_id, position, role, content, name,
             tool_calls, tool_call_id, created_at, token_count, content_hash)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
    )?;
    let mut stored = Vec::new();
    for message in messages {
        let hash = content_hash(&format!(
            "{}\u{0}{}\u{0}{}",
            message.role,
            message.content,
            message.tool_calls.as_deref().unwrap_or_default()
        ));
        let tokens = crate::tokens::count_message(&message.role, &message.content) as i64;
        let inserted = insert.execute(params![
            uid,
            conversation_id,
            message.position,
            message.role,
            message.content,
            message.name,
            message.tool_calls,
            message.tool_call_id,
            message.created_at_ms,
            tokens,
            hash
        ])?;
        if inserted == 1 {
            stored.push(StoredMessage {
                id: tx.last_insert_rowid(),
                conversation: conversation.to_owned(),
                position: message.position,
                role: message.role.clone(),
                content: message.content.clone(),
                name: message.name.clone(),
                tool_calls: message.tool_calls.clone(),
                tool_call_id: message.tool_call_id.clone(),
                created_at_ms: message.created_at_ms,
                token_count: tokens,
            });
        }
    }
    Ok(stored)
}

pub fn conversations(connection: &Connection, scope: &UserScope) -> StoreResult<Vec<Conversation>> {
    let Some(uid) = find_uid(connection, scope)? else {
        return Ok(Vec::new());
    };
    let mut statement = connection.prepare(
        "SELECT c.external_id, c.agent, COUNT(m.id), c.created_at, c.updated_at
         FROM conversations c LEFT JOIN messages m ON m.conversation_id = c.id
         WHERE c.uid = ?1 GROUP BY c.id ORDER BY c.updated_at DESC",
    )?;
    let rows = statement
        .query_map([uid], |row| {
            Ok(Conversation {
                id: row.get(0)?,
                agent: row.get(1)?,
                messages: row.get(2)?,
                created_at_ms: row.get(3)?,
                updated_at_ms: row.get(4)?,
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

pub fn messages(
    connection: &Connection,
    scope: &UserScope,
    conversation: &str,
    page: Page,
) -> StoreResult<Vec<StoredMessage>> {
    let uid = require_uid(connection, scope)?;
    let exists: Option<i64> = connection
        .query_row(
            "SELECT id FROM conversations WHERE uid = ?1 AND external_id = ?2",
            params![uid, conversation],
            |row| row.get(0),
        )
        .optional()?;
    let Some(conversation_id) = exists else {
        return Err(crate::store::StoreError::NotFound(format!(
            "conversation '{conversation}'"
        )));
    };
    let mut statement = connection.prepare(&format!(
        "SELECT {MESSAGE_COLUMNS} FROM messages m JOIN conversations c ON c.id = m.conversation_id
         WHERE m.uid = ?1 AND m.conversation_id = ?2 ORDER BY m.position, m.id LIMIT ?3 OFFSET ?4"
    ))?;
    let rows = statement
        .query_map(
            params![uid, conversation_id, page.limit as i64, page.offset as i64],
            message_row,
        )?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}
