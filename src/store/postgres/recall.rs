//! The recall log on PostgreSQL: conversations, their turns (aligned with what a chat app sends
//! by the same rule as SQLite, [`crate::store::history`]), extraction progress and summaries.
//!
//! Two replicas storing the same conversation at once are serialised by the conversation row:
//! the upsert that opens a sync locks it until the transaction ends, so the second sync aligns
//! with the turns the first one stored.

use tokio_postgres::{GenericClient, Row};

use super::search::set_embedding;
use super::{ensure_uid, find_uid, require_uid, PostgresStore};
use crate::store::history;
use crate::store::{
    now_ms, Conversation, Corpus, Embedding, NewMessage, Page, RecallLog, StoreError, StoreResult,
    StoredMessage, Summary, Synced, UserScope,
};

pub(super) const MESSAGE_COLUMNS: &str = "m.id, c.external_id, m.position, m.role, m.content, \
     m.name, m.tool_calls, m.tool_call_id, m.created_at, m.token_count, m.superseded, m.search_text";

pub(super) fn message_row(row: &Row) -> StoredMessage {
    StoredMessage {
        id: row.get(0),
        conversation: row.get(1),
        position: row.get(2),
        role: row.get(3),
        content: row.get(4),
        name: row.get(5),
        tool_calls: row.get(6),
        tool_call_id: row.get(7),
        created_at_ms: row.get(8),
        token_count: row.get(9),
        superseded: row.get(10),
        search_text: row.get(11),
    }
}

/// The row of a conversation, created when new (a branch with its parent and fork position), and
/// locked until the transaction ends; returns its id and the position its own turns start at.
async fn conversation_row(
    client: &impl GenericClient,
    uid: i64,
    conversation: &str,
    agent: &str,
    fork: Option<&(String, i64)>,
) -> StoreResult<(i64, i64)> {
    let (parent, fork_position) = match fork {
        Some((parent, position)) => (Some(parent.as_str()), *position),
        None => (None, 0),
    };
    let row = client
        .query_one(
            "INSERT INTO conversations (uid, external_id, agent, created_at, updated_at, parent,
                 fork_position)
             VALUES ($1, $2, $3, $4, $4, $5, $6)
             ON CONFLICT (uid, external_id) DO UPDATE SET updated_at = EXCLUDED.updated_at
             RETURNING id, fork_position",
            &[
                &uid,
                &conversation,
                &agent,
                &now_ms(),
                &parent,
                &fork_position,
            ],
        )
        .await?;
    Ok((row.get(0), row.get(1)))
}

/// As SQLite's `recall::sync`: stores the new turns of a history, branching where it leaves the
/// log; returns the conversation the history continues and the turns stored now.
async fn sync(
    client: &impl GenericClient,
    scope: &UserScope,
    conversation: &str,
    agent: &str,
    turns: &[NewMessage],
) -> StoreResult<(String, Vec<StoredMessage>)> {
    let uid = ensure_uid(client, scope).await?;
    let hashes: Vec<String> = turns
        .iter()
        .map(|m| history::turn_hash(&m.role, &m.content, m.tool_calls.as_deref()))
        .collect();
    let mut current = conversation.to_owned();
    let mut skip = 0;
    let mut fork: Option<(String, i64)> = None;
    loop {
        let (conversation_id, start) =
            conversation_row(client, uid, &current, agent, fork.as_ref()).await?;
        let live: Vec<(i64, String)> = client
            .query(
                "SELECT position, content_hash FROM messages
                 WHERE conversation_id = $1 AND NOT superseded ORDER BY position",
                &[&conversation_id],
            )
            .await?
            .iter()
            .map(|row| (row.get(0), row.get(1)))
            .collect();
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
                let mut stored = Vec::new();
                let first = (skip + first_new).min(turns.len());
                for (message, hash) in turns[first..].iter().zip(&hashes[first..]) {
                    if let Some(message) = insert(
                        client,
                        uid,
                        conversation_id,
                        &current,
                        position,
                        message,
                        hash,
                    )
                    .await?
                    {
                        stored.push(message);
                    }
                    position += 1;
                }
                return Ok((current, stored));
            }
        }
    }
}

/// Stores one turn at `position`; `None` when that turn is already there (it is made live again).
async fn insert(
    client: &impl GenericClient,
    uid: i64,
    conversation_id: i64,
    conversation: &str,
    position: i64,
    message: &NewMessage,
    hash: &str,
) -> StoreResult<Option<StoredMessage>> {
    let tokens = message.token_count();
    let row = client
        .query_opt(
            "INSERT INTO messages (uid, conversation_id, position, role, content, name,
                 tool_calls, tool_call_id, created_at, token_count, content_hash)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
             ON CONFLICT (conversation_id, position, content_hash) DO NOTHING
             RETURNING id",
            &[
                &uid,
                &conversation_id,
                &position,
                &message.role,
                &message.content,
                &message.name,
                &message.tool_calls,
                &message.tool_call_id,
                &message.created_at_ms,
                &tokens,
                &hash,
            ],
        )
        .await?;
    let Some(row) = row else {
        client
            .execute(
                "UPDATE messages SET superseded = FALSE
                 WHERE conversation_id = $1 AND position = $2 AND content_hash = $3",
                &[&conversation_id, &position, &hash],
            )
            .await?;
        return Ok(None);
    };
    Ok(Some(message.stored(
        row.get(0),
        conversation,
        position,
        false,
        None,
    )))
}

async fn conversation_id(
    client: &impl GenericClient,
    uid: i64,
    conversation: &str,
) -> StoreResult<Option<i64>> {
    Ok(client
        .query_opt(
            "SELECT id FROM conversations WHERE uid = $1 AND external_id = $2",
            &[&uid, &conversation],
        )
        .await?
        .map(|row| row.get(0)))
}

/// The summary of one of the user's conversations, if it has one.
pub(super) async fn summary_of(
    client: &impl GenericClient,
    uid: i64,
    conversation: &str,
) -> StoreResult<Option<Summary>> {
    let row = client
        .query_opt(
            "SELECT c.external_id, s.text, s.through_position, s.updated_at
             FROM summaries s JOIN conversations c ON c.id = s.conversation_id
             WHERE s.uid = $1 AND c.external_id = $2",
            &[&uid, &conversation],
        )
        .await?;
    Ok(row.map(|row| Summary {
        conversation: row.get(0),
        text: row.get(1),
        through_position: row.get(2),
        updated_at_ms: row.get(3),
    }))
}

impl RecallLog for PostgresStore {
    fn sync_messages_embedded(
        &self,
        scope: &UserScope,
        conversation: &str,
        agent: &str,
        turns: &[NewMessage],
        known: &[(String, Embedding)],
    ) -> StoreResult<Synced> {
        self.run(|pool| async move {
            let mut client = pool.get().await?;
            let tx = client.transaction().await?;
            let (conversation, stored) = sync(&*tx, scope, conversation, agent, turns).await?;
            let mut embedded = Vec::new();
            for message in &stored {
                if let Some((_, embedding)) = known.iter().find(|(t, _)| *t == message.content) {
                    let (uid, generation) =
                        set_embedding(&*tx, Corpus::Message, message.id, embedding).await?;
                    embedded.push((message.id, uid, generation));
                }
            }
            tx.commit().await?;
            Ok(Synced {
                conversation,
                stored,
                embedded,
            })
        })
    }

    fn list_conversations(&self, scope: &UserScope) -> StoreResult<Vec<Conversation>> {
        self.run(|pool| async move {
            let client = pool.get().await?;
            let Some(uid) = find_uid(&**client, scope).await? else {
                return Ok(Vec::new());
            };
            let rows = client
                .query(
                    "SELECT c.external_id, c.agent, COUNT(m.id), c.created_at, c.updated_at,
                            c.parent, c.fork_position
                     FROM conversations c LEFT JOIN messages m ON m.conversation_id = c.id
                     WHERE c.uid = $1 GROUP BY c.id ORDER BY c.updated_at DESC, c.id DESC",
                    &[&uid],
                )
                .await?;
            Ok(rows
                .iter()
                .map(|row| Conversation {
                    id: row.get(0),
                    agent: row.get(1),
                    messages: row.get(2),
                    created_at_ms: row.get(3),
                    updated_at_ms: row.get(4),
                    parent: row.get(5),
                    fork_position: row.get(6),
                })
                .collect())
        })
    }

    fn extraction_progress(&self, scope: &UserScope, conversation: &str) -> StoreResult<i64> {
        self.run(|pool| async move {
            let client = pool.get().await?;
            let Some(uid) = find_uid(&**client, scope).await? else {
                return Ok(-1);
            };
            let row = client
                .query_opt(
                    "SELECT extracted_through FROM conversations
                     WHERE uid = $1 AND external_id = $2",
                    &[&uid, &conversation],
                )
                .await?;
            Ok(row.map_or(-1, |row| row.get(0)))
        })
    }

    fn set_extraction_progress(
        &self,
        scope: &UserScope,
        conversation: &str,
        position: i64,
    ) -> StoreResult<()> {
        self.run(|pool| async move {
            let client = pool.get().await?;
            let uid = require_uid(&**client, scope).await?;
            client
                .execute(
                    "UPDATE conversations SET extracted_through = GREATEST(extracted_through, $1)
                     WHERE uid = $2 AND external_id = $3",
                    &[&position, &uid, &conversation],
                )
                .await?;
            Ok(())
        })
    }

    fn list_messages(
        &self,
        scope: &UserScope,
        conversation: &str,
        page: Page,
    ) -> StoreResult<Vec<StoredMessage>> {
        self.run(|pool| async move {
            let client = pool.get().await?;
            let uid = require_uid(&**client, scope).await?;
            let Some(id) = conversation_id(&**client, uid, conversation).await? else {
                return Err(StoreError::NotFound(format!(
                    "conversation '{conversation}'"
                )));
            };
            let rows = client
                .query(
                    &format!(
                        "SELECT {MESSAGE_COLUMNS} FROM messages m
                         JOIN conversations c ON c.id = m.conversation_id
                         WHERE m.uid = $1 AND m.conversation_id = $2 ORDER BY m.position, m.id
                         LIMIT $3 OFFSET $4"
                    ),
                    &[&uid, &id, &(page.limit as i64), &(page.offset as i64)],
                )
                .await?;
            Ok(rows.iter().map(message_row).collect())
        })
    }

    fn summary(&self, scope: &UserScope, conversation: &str) -> StoreResult<Option<Summary>> {
        self.run(|pool| async move {
            let client = pool.get().await?;
            match find_uid(&**client, scope).await? {
                Some(uid) => summary_of(&**client, uid, conversation).await,
                None => Ok(None),
            }
        })
    }

    fn put_summary(&self, scope: &UserScope, summary: &Summary) -> StoreResult<()> {
        self.run(|pool| async move {
            let client = pool.get().await?;
            let uid = ensure_uid(&**client, scope).await?;
            let id = conversation_id(&**client, uid, &summary.conversation)
                .await?
                .ok_or_else(|| {
                    StoreError::NotFound(format!("conversation '{}'", summary.conversation))
                })?;
            client
                .execute(
                    "INSERT INTO summaries (conversation_id, uid, text, through_position,
                         updated_at)
                     VALUES ($1, $2, $3, $4, $5)
                     ON CONFLICT (conversation_id) DO UPDATE SET text = EXCLUDED.text,
                         through_position = EXCLUDED.through_position,
                         updated_at = EXCLUDED.updated_at",
                    &[
                        &id,
                        &uid,
                        &summary.text,
                        &summary.through_position,
                        &summary.updated_at_ms,
                    ],
                )
                .await?;
            Ok(())
        })
    }
}
