//! Export and import of one user's whole memory on PostgreSQL, by SQLite's rules
//! (`store::sqlite::transfer`): portable (conversations by id, turns by position, no row ids),
//! the export one snapshot (a read-only repeatable-read transaction), the import all or nothing. Vectors
//! travel with the rows in memory (`memproxy migrate`), never into a file.

use std::collections::HashMap;

use tokio_postgres::{GenericClient, IsolationLevel};

use super::recall::{message_row, summary_of, MESSAGE_COLUMNS};

use super::{agents, bump_generation, ensure_uid, find_uid, shared, PostgresStore};
use crate::store::{
    content_hash, history, CoreBlock, Corpus, Embedding, ImportCounts, PortableConversation,
    PortableMemory, PortableMessage, StoreError, StoreResult, Transfer, UserBundle, UserScope,
};

/// Stored vectors of a user by table and row id.
async fn vectors(
    client: &impl GenericClient,
    uid: i64,
) -> StoreResult<HashMap<(&'static str, i64), Embedding>> {
    let mut vectors = HashMap::new();
    for table in ["messages", "memories", "archival_passages"] {
        for row in client
            .query(
                &format!(
                    "SELECT id, embedding_model, embedding::REAL[] FROM {table}
                     WHERE uid = $1 AND embedding IS NOT NULL"
                ),
                &[&uid],
            )
            .await?
        {
            vectors.insert(
                (table, row.get(0)),
                Embedding {
                    model: row.get(1),
                    vector: row.get(2),
                },
            );
        }
    }
    Ok(vectors)
}

async fn export(client: &impl GenericClient, scope: &UserScope) -> StoreResult<Option<UserBundle>> {
    let Some(uid) = find_uid(client, scope).await? else {
        return Ok(None);
    };
    let vectors = vectors(client, uid).await?;
    let of = |table: &'static str, id: i64| vectors.get(&(table, id)).cloned();
    let mut bundle = UserBundle::default();
    let mut conversations: Vec<PortableConversation> = client
        .query(
            "SELECT external_id, agent, parent, fork_position, extracted_through
             FROM conversations WHERE uid = $1 ORDER BY external_id",
            &[&uid],
        )
        .await?
        .iter()
        .map(|row| {
            let progress: i64 = row.get(4);
            PortableConversation {
                id: row.get(0),
                agent: row.get(1),
                parent: row.get(2),
                fork_position: row.get(3),
                extracted_through: (progress >= 0).then_some(progress),
            }
        })
        .collect();
    conversations = history::parents_first(conversations);
    for conversation in &conversations {
        let rows = client
            .query(
                &format!(
                    "SELECT {MESSAGE_COLUMNS} FROM messages m
                     JOIN conversations c ON c.id = m.conversation_id
                     WHERE m.uid = $1 AND c.external_id = $2 ORDER BY m.position, m.id"
                ),
                &[&uid, &conversation.id],
            )
            .await?;
        for stored in rows.iter().map(message_row) {
            let embedding = of("messages", stored.id);
            bundle
                .messages
                .push(PortableMessage::exported(stored, embedding));
        }
        if let Some(summary) = summary_of(client, uid, &conversation.id).await? {
            bundle.summaries.push(summary);
        }
    }
    bundle.conversations = conversations;
    bundle.shared_blocks = shared::list(client, uid).await?;
    for row in client
        .query(
            "SELECT text, kind, sources, created_at, updated_at, valid_until, id, subject
             FROM memories WHERE uid = $1 ORDER BY created_at, id",
            &[&uid],
        )
        .await?
    {
        let sources: String = row.get(2);
        bundle.memories.push((
            PortableMemory {
                text: row.get(0),
                kind: row.get(1),
                sources: serde_json::from_str(&sources).unwrap_or_default(),
                created_at_ms: row.get(3),
                updated_at_ms: row.get(4),
                valid_until_ms: row.get(5),
                subject: row.get(7),
            },
            of("memories", row.get(6)),
        ));
    }
    for row in client
        .query(
            "SELECT agent, label, value, char_limit, read_only, updated_at FROM core_blocks
             WHERE uid = $1 ORDER BY agent, label",
            &[&uid],
        )
        .await?
    {
        bundle.blocks.push((
            row.get(0),
            CoreBlock {
                label: row.get(1),
                value: row.get(2),
                char_limit: row.get(3),
                read_only: row.get(4),
                updated_at_ms: row.get(5),
                shared: None,
            },
        ));
    }
    for row in client
        .query(
            "SELECT agent, text, created_at, id FROM archival_passages WHERE uid = $1
             ORDER BY created_at, id",
            &[&uid],
        )
        .await?
    {
        bundle.passages.push((
            row.get(0),
            row.get(1),
            row.get(2),
            of("archival_passages", row.get(3)),
        ));
    }
    Ok(Some(bundle))
}

/// Stores turns at exactly the positions they carry (an import), with their vectors.
async fn import_conversation(
    client: &impl GenericClient,
    uid: i64,
    portable: &PortableConversation,
    messages: &[&PortableMessage],
) -> StoreResult<usize> {
    let conversation_id: i64 = client
        .query_one(
            "INSERT INTO conversations (uid, external_id, agent, created_at, updated_at, parent,
                 fork_position, extracted_through)
             VALUES ($1, $2, $3, $4, $4, $5, $6, COALESCE($7::BIGINT, -1))
             ON CONFLICT (uid, external_id) DO UPDATE SET
                 parent = COALESCE(EXCLUDED.parent, conversations.parent),
                 fork_position = CASE WHEN EXCLUDED.parent IS NULL
                     THEN conversations.fork_position ELSE EXCLUDED.fork_position END,
                 extracted_through = GREATEST(conversations.extracted_through,
                                              EXCLUDED.extracted_through)
             RETURNING id",
            &[
                &uid,
                &portable.id,
                &portable.agent,
                &crate::store::now_ms(),
                &portable.parent,
                &portable.fork_position,
                &portable.extracted_through,
            ],
        )
        .await?
        .get(0);
    let mut stored = 0;
    for m in messages {
        let message = &m.message;
        let hash = history::turn_hash(
            &message.role,
            &message.content,
            message.tool_calls.as_deref(),
        );
        let tokens = message.token_count();
        let inserted = client
            .execute(
                "INSERT INTO messages (uid, conversation_id, position, role, content, name,
                     tool_calls, tool_call_id, created_at, token_count, content_hash, search_text,
                     superseded, embedding_model, embedding)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14,
                         $15::REAL[]::vector)
                 ON CONFLICT (conversation_id, position, content_hash) DO NOTHING",
                &[
                    &uid,
                    &conversation_id,
                    &message.position,
                    &message.role,
                    &message.content,
                    &message.name,
                    &message.tool_calls,
                    &message.tool_call_id,
                    &message.created_at_ms,
                    &tokens,
                    &hash,
                    &m.search_text,
                    &m.superseded,
                    &m.embedding.as_ref().map(|e| e.model.as_str()),
                    &m.embedding.as_ref().map(|e| e.vector.as_slice()),
                ],
            )
            .await?;
        if inserted == 0 {
            // Already there: it takes the state the file gives it.
            client
                .execute(
                    "UPDATE messages SET superseded = $4
                     WHERE conversation_id = $1 AND position = $2 AND content_hash = $3",
                    &[&conversation_id, &message.position, &hash, &m.superseded],
                )
                .await?;
        }
        stored += inserted as usize;
    }
    Ok(stored)
}

async fn import(
    client: &impl GenericClient,
    scope: &UserScope,
    bundle: &UserBundle,
) -> StoreResult<ImportCounts> {
    let uid = ensure_uid(client, scope).await?;
    let mut counts = ImportCounts::default();
    for portable in &bundle.conversations {
        let messages: Vec<&PortableMessage> = bundle
            .messages
            .iter()
            .filter(|m| m.conversation == portable.id)
            .collect();
        counts.messages += import_conversation(client, uid, portable, &messages).await?;
        counts.conversations += 1;
    }
    if counts.messages > 0 {
        bump_generation(client, uid, Corpus::Message).await?;
    }
    for (memory, embedding) in &bundle.memories {
        let sources = serde_json::to_string(&memory.sources)
            .map_err(|error| StoreError::Invalid(error.to_string()))?;
        counts.memories += client
            .execute(
                "INSERT INTO memories (uid, text, kind, sources, created_at, updated_at,
                     valid_until, content_hash, embedding_model, embedding, subject)
                 SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10::REAL[]::vector, $11
                 WHERE NOT EXISTS (SELECT 1 FROM memories WHERE uid = $1 AND content_hash = $8
                     AND (valid_until IS NULL OR valid_until IS NOT DISTINCT FROM $7))
                 ON CONFLICT DO NOTHING",
                &[
                    &uid,
                    &memory.text,
                    &memory.kind,
                    &sources,
                    &memory.created_at_ms,
                    &memory.updated_at_ms,
                    &memory.valid_until_ms,
                    &content_hash(&memory.text),
                    &embedding.as_ref().map(|e| e.model.as_str()),
                    &embedding.as_ref().map(|e| e.vector.as_slice()),
                    &memory.subject,
                ],
            )
            .await? as usize;
    }
    if counts.memories > 0 {
        bump_generation(client, uid, Corpus::Memory).await?;
    }
    for (agent, block) in &bundle.blocks {
        agents::put_block(client, uid, agent, block).await?;
        client
            .execute(
                "UPDATE core_blocks SET updated_at = $1
                 WHERE uid = $2 AND agent = $3 AND label = $4",
                &[&block.updated_at_ms, &uid, &agent, &block.label],
            )
            .await?;
        counts.blocks += 1;
    }
    for block in &bundle.shared_blocks {
        shared::import(client, uid, block).await?;
        counts.blocks += 1;
    }
    for (agent, text, created_at_ms, embedding) in &bundle.passages {
        client
            .execute(
                "INSERT INTO archival_passages (uid, agent, text, created_at, embedding_model,
                     embedding)
                 VALUES ($1, $2, $3, $4, $5, $6::REAL[]::vector)",
                &[
                    &uid,
                    &agent,
                    &text,
                    &created_at_ms,
                    &embedding.as_ref().map(|e| e.model.as_str()),
                    &embedding.as_ref().map(|e| e.vector.as_slice()),
                ],
            )
            .await?;
        counts.passages += 1;
    }
    if counts.passages > 0 {
        bump_generation(client, uid, Corpus::Passage).await?;
    }
    for summary in &bundle.summaries {
        let written = client
            .execute(
                "INSERT INTO summaries (conversation_id, uid, text, through_position, updated_at)
                 SELECT id, uid, $3, $4, $5 FROM conversations
                 WHERE uid = $1 AND external_id = $2
                 ON CONFLICT (conversation_id) DO UPDATE SET text = EXCLUDED.text,
                     through_position = EXCLUDED.through_position,
                     updated_at = EXCLUDED.updated_at",
                &[
                    &uid,
                    &summary.conversation,
                    &summary.text,
                    &summary.through_position,
                    &summary.updated_at_ms,
                ],
            )
            .await?;
        if written == 0 {
            return Err(StoreError::NotFound(format!(
                "conversation '{}'",
                summary.conversation
            )));
        }
        counts.summaries += 1;
    }
    Ok(counts)
}

impl Transfer for PostgresStore {
    fn export_user(&self, scope: &UserScope) -> StoreResult<Option<UserBundle>> {
        self.run(|pool| async move {
            let mut client = pool.get().await?;
            // One snapshot while other replicas keep writing.
            let tx = client
                .build_transaction()
                .isolation_level(IsolationLevel::RepeatableRead)
                .read_only(true)
                .start()
                .await?;
            let bundle = export(&*tx, scope).await?;
            tx.commit().await?;
            Ok(bundle)
        })
    }

    fn import_user(&self, scope: &UserScope, bundle: &UserBundle) -> StoreResult<ImportCounts> {
        in_transaction!(self, |tx| import(tx, scope, bundle).await?)
    }
}
