//! The recall log: conversations and their turns.

use super::SqliteStore;
use crate::store::RecallLog;
use rusqlite::{params, Connection, OptionalExtension, Row, Transaction};

use super::{ensure_uid, find_uid, require_uid};
use crate::store::history;
use crate::store::{
    now_ms, Conversation, NewMessage, Page, PortableMessage, StoreError, StoreResult,
    StoredMessage, Summary, UserScope,
};

pub(super) const MESSAGE_COLUMNS: &str = "m.id, c.external_id, m.position, m.role, m.content, \
     m.name, m.tool_calls, m.tool_call_id, m.created_at, m.token_count, m.superseded, m.search_text";

pub(super) fn message_row(row: &Row) -> rusqlite::Result<StoredMessage> {
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
        superseded: row.get(10)?,
        search_text: row.get(11)?,
    })
}

fn turn_hash(message: &NewMessage) -> String {
    history::turn_hash(
        &message.role,
        &message.content,
        message.tool_calls.as_deref(),
    )
}

pub(super) fn conversation_id(
    tx: &Transaction,
    uid: i64,
    conversation: &str,
    agent: &str,
) -> StoreResult<i64> {
    Ok(conversation_row(tx, uid, conversation, agent, None)?.0)
}

/// The row of a conversation, created when new (a branch with its parent and fork position), in
/// one statement; returns its id and the position its own turns start at.
fn conversation_row(
    tx: &Transaction,
    uid: i64,
    conversation: &str,
    agent: &str,
    fork: Option<&(String, i64)>,
) -> StoreResult<(i64, i64)> {
    let (parent, fork_position) = match fork {
        Some((parent, position)) => (Some(parent.as_str()), *position),
        None => (None, 0),
    };
    Ok(tx.query_row(
        "INSERT INTO conversations (uid, external_id, agent, created_at, updated_at, parent, fork_position)
         VALUES (?1, ?2, ?3, ?4, ?4, ?5, ?6)
         ON CONFLICT (uid, external_id) DO UPDATE SET updated_at = excluded.updated_at
         RETURNING id, fork_position",
        params![uid, conversation, agent, now_ms(), parent, fork_position],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )?)
}

/// Stores turns at exactly the positions they carry, superseded or not (imports).
pub fn append(
    tx: &Transaction,
    scope: &UserScope,
    conversation: &str,
    agent: &str,
    messages: &[&PortableMessage],
) -> StoreResult<Vec<StoredMessage>> {
    let uid = ensure_uid(tx, scope)?;
    let conversation_id = conversation_id(tx, uid, conversation, agent)?;
    insert_at(
        tx,
        uid,
        conversation_id,
        conversation,
        messages.iter().map(|m| Placement {
            position: m.message.position,
            message: &m.message,
            search_text: m.search_text.as_deref(),
            superseded: m.superseded,
        }),
    )
}

/// Stores what a chat app sent, which is the whole history again, or only its newest part (apps
/// with a context limit), or a history that leaves the stored log somewhere: another chat that
/// opened with the same words, an edited message, a regenerated answer. Turns already stored are
/// skipped, new turns get the positions after the aligned ones, and where the history leaves the
/// log the rest goes to a branch (see [`history`]): nothing stored is replaced. Returns the
/// conversation or branch the history continues and the newly stored turns.
pub fn sync(
    tx: &Transaction,
    scope: &UserScope,
    conversation: &str,
    agent: &str,
    turns: &[NewMessage],
) -> StoreResult<(String, Vec<StoredMessage>)> {
    let uid = ensure_uid(tx, scope)?;
    let hashes: Vec<String> = turns.iter().map(turn_hash).collect();
    let mut current = conversation.to_owned();
    // Incoming turns before `skip` are in the ancestors of `current`.
    let mut skip = 0;
    let mut fork: Option<(String, i64)> = None;
    loop {
        let (conversation_id, start) = conversation_row(tx, uid, &current, agent, fork.as_ref())?;
        let mut statement = tx.prepare_cached(
            "SELECT position, content_hash FROM messages WHERE conversation_id = ?1 AND superseded = 0 ORDER BY position",
        )?;
        let live: Vec<(i64, String)> = statement
            .query_map([conversation_id], |row| Ok((row.get(0)?, row.get(1)?)))?
            .collect::<Result<_, _>>()?;
        match history::align(&hashes[skip..], &live, start) {
            history::Alignment::Diverges { at, position } => {
                let branch = history::branch_id(&current, position, &hashes[skip + at]);
                fork = Some((std::mem::replace(&mut current, branch), position));
                skip += at;
            }
            history::Alignment::Continues {
                first_new,
                mut position,
            } => {
                let mut placed = Vec::new();
                for message in &turns[(skip + first_new).min(turns.len())..] {
                    placed.push(Placement {
                        position,
                        message,
                        search_text: None,
                        superseded: false,
                    });
                    position += 1;
                }
                let stored = insert_at(tx, uid, conversation_id, &current, placed.into_iter())?;
                return Ok((current, stored));
            }
        }
    }
}

/// A turn and where it goes in the log.
struct Placement<'a> {
    position: i64,
    message: &'a NewMessage,
    search_text: Option<&'a str>,
    superseded: bool,
}

fn insert_at<'a>(
    tx: &Transaction,
    uid: i64,
    conversation_id: i64,
    conversation: &str,
    messages: impl Iterator<Item = Placement<'a>>,
) -> StoreResult<Vec<StoredMessage>> {
    let mut insert = tx.prepare_cached(
        "INSERT OR IGNORE INTO messages (uid, conversation_id, position, role, content, name,
             tool_calls, tool_call_id, created_at, token_count, content_hash, search_text, superseded)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
    )?;
    let mut stored = Vec::new();
    let mut set_superseded = tx.prepare_cached(
        "UPDATE messages SET superseded = ?4 WHERE conversation_id = ?1 AND position = ?2 AND content_hash = ?3",
    )?;
    for Placement {
        position,
        message,
        search_text,
        superseded,
    } in messages
    {
        let hash = turn_hash(message);
        let tokens = message.token_count();
        let inserted = insert.execute(params![
            uid,
            conversation_id,
            position,
            message.role,
            message.content,
            message.name,
            message.tool_calls,
            message.tool_call_id,
            message.created_at_ms,
            tokens,
            hash,
            search_text,
            superseded
        ])?;
        if inserted == 0 {
            // Already stored: a chat back at an earlier version of this turn makes it live again
            // (and it is not new); an import sets what its file says.
            set_superseded.execute(params![conversation_id, position, hash, superseded])?;
        } else {
            stored.push(message.stored(
                tx.last_insert_rowid(),
                conversation,
                position,
                superseded,
                search_text,
            ));
        }
    }
    Ok(stored)
}

pub fn conversations(connection: &Connection, scope: &UserScope) -> StoreResult<Vec<Conversation>> {
    let Some(uid) = find_uid(connection, scope)? else {
        return Ok(Vec::new());
    };
    let mut statement = connection.prepare(
        "SELECT c.external_id, c.agent, COUNT(m.id), c.created_at, c.updated_at, c.parent,
                c.fork_position
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
                parent: row.get(5)?,
                fork_position: row.get(6)?,
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

pub fn extraction_progress(
    connection: &Connection,
    scope: &UserScope,
    conversation: &str,
) -> StoreResult<i64> {
    let Some(uid) = find_uid(connection, scope)? else {
        return Ok(-1);
    };
    Ok(connection
        .query_row(
            "SELECT extracted_through FROM conversations WHERE uid = ?1 AND external_id = ?2",
            params![uid, conversation],
            |row| row.get(0),
        )
        .optional()?
        .unwrap_or(-1))
}

pub fn set_extraction_progress(
    tx: &Transaction,
    scope: &UserScope,
    conversation: &str,
    position: i64,
) -> StoreResult<()> {
    let uid = require_uid(tx, scope)?;
    tx.execute(
        "UPDATE conversations SET extracted_through = MAX(extracted_through, ?1) WHERE uid = ?2 AND external_id = ?3",
        params![position, uid, conversation],
    )?;
    Ok(())
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

impl RecallLog for SqliteStore {
    fn sync_messages_embedded(
        &self,
        scope: &UserScope,
        conversation: &str,
        agent: &str,
        turns: &[crate::store::NewMessage],
        known: &[(String, crate::store::Embedding)],
    ) -> StoreResult<crate::store::Synced> {
        self.write(|tx| {
            let (conversation, stored) = sync(tx, scope, conversation, agent, turns)?;
            let mut embedded = Vec::new();
            for message in &stored {
                if let Some((_, embedding)) =
                    known.iter().find(|(text, _)| *text == message.content)
                {
                    let (uid, generation) = super::search::set_embedding(
                        tx,
                        crate::store::Corpus::Message,
                        message.id,
                        embedding,
                    )?;
                    embedded.push((message.id, uid, generation));
                }
            }
            Ok(crate::store::Synced {
                conversation,
                stored,
                embedded,
            })
        })
    }

    fn extraction_progress(&self, scope: &UserScope, conversation: &str) -> StoreResult<i64> {
        self.read(|c| extraction_progress(c, scope, conversation))
    }

    fn set_extraction_progress(
        &self,
        scope: &UserScope,
        conversation: &str,
        position: i64,
    ) -> StoreResult<()> {
        self.write(|tx| set_extraction_progress(tx, scope, conversation, position))
    }

    fn list_conversations(
        &self,
        scope: &UserScope,
    ) -> StoreResult<Vec<crate::store::Conversation>> {
        self.read(|c| conversations(c, scope))
    }

    fn list_messages(
        &self,
        scope: &UserScope,
        conversation: &str,
        page: crate::store::Page,
    ) -> StoreResult<Vec<crate::store::StoredMessage>> {
        self.read(|c| messages(c, scope, conversation, page))
    }

    fn summary(
        &self,
        scope: &UserScope,
        conversation: &str,
    ) -> StoreResult<Option<crate::store::Summary>> {
        self.read(|c| summary(c, scope, conversation))
    }

    fn put_summary(&self, scope: &UserScope, summary: &crate::store::Summary) -> StoreResult<()> {
        self.write(|tx| put_summary(tx, scope, summary))
    }
}
