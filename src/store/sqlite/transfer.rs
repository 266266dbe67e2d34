//! Export and import of one user's whole memory (portable: conversations by id, turns by
//! position, no database ids), each in a single transaction.

use super::SqliteStore;
use crate::store::Transfer;
use rusqlite::{params, Connection, Transaction};

use std::collections::HashMap;

use super::{agents, bump_generation, ensure_uid, find_uid, from_blob, recall, to_blob};
use crate::store::history;
use crate::store::{
    content_hash, CoreBlock, Corpus, Embedding, ImportCounts, Page, PortableConversation,
    PortableMemory, PortableMessage, StoreResult, UserBundle, UserScope,
};

const ALL: Page = Page {
    limit: i64::MAX as usize,
    offset: 0,
};

/// A user's stored vectors by table and row id, exported with the rows (an export to a file
/// leaves them out; `memproxy migrate` carries them, so nothing is embedded again).
struct Vectors(HashMap<(&'static str, i64), Embedding>);

impl Vectors {
    fn read(connection: &Connection, uid: i64) -> StoreResult<Vectors> {
        let mut vectors = HashMap::new();
        for table in ["messages", "memories", "archival_passages"] {
            let mut statement = connection.prepare(&format!(
                "SELECT id, embedding_model, embedding FROM {table}
                 WHERE uid = ?1 AND embedding IS NOT NULL"
            ))?;
            let rows = statement.query_map([uid], |row| {
                let blob: Vec<u8> = row.get(2)?;
                Ok((row.get::<_, i64>(0)?, row.get::<_, String>(1)?, blob))
            })?;
            for row in rows {
                let (id, model, blob) = row?;
                let vector = from_blob(&blob);
                vectors.insert((table, id), Embedding { model, vector });
            }
        }
        Ok(Vectors(vectors))
    }

    fn of(&self, table: &'static str, id: i64) -> Option<Embedding> {
        self.0.get(&(table, id)).cloned()
    }
}

pub fn export(connection: &Connection, scope: &UserScope) -> StoreResult<Option<UserBundle>> {
    let Some(uid) = find_uid(connection, scope)? else {
        return Ok(None);
    };
    let mut bundle = UserBundle::default();
    let conversations = recall::conversations(connection, scope)?;
    // Parents before their branches (an import checks that order).
    let mut ordered: Vec<PortableConversation> = conversations
        .iter()
        .map(|c| PortableConversation {
            id: c.id.clone(),
            agent: c.agent.clone(),
            parent: c.parent.clone(),
            fork_position: c.fork_position,
            extracted_through: None,
        })
        .collect();
    ordered.sort_by(|a, b| a.id.cmp(&b.id));
    let ordered = history::parents_first(ordered);
    let mut ordered = ordered;
    for portable in &mut ordered {
        let progress = recall::extraction_progress(connection, scope, &portable.id)?;
        portable.extracted_through = (progress >= 0).then_some(progress);
    }
    let vectors = Vectors::read(connection, uid)?;
    for PortableConversation {
        id: conversation, ..
    } in &ordered
    {
        for stored in recall::messages(connection, scope, conversation, ALL)? {
            let embedding = vectors.of("messages", stored.id);
            bundle
                .messages
                .push(PortableMessage::exported(stored, embedding));
        }
        if let Some(summary) = recall::summary(connection, scope, conversation)? {
            bundle.summaries.push(summary);
        }
    }
    bundle.conversations = ordered;

    let mut statement = connection.prepare(
        "SELECT text, kind, sources, created_at, updated_at, valid_until, id, subject
         FROM memories WHERE uid = ?1 ORDER BY created_at, id",
    )?;
    bundle.memories = statement
        .query_map([uid], |row| {
            let sources: String = row.get(2)?;
            Ok((
                PortableMemory {
                    text: row.get(0)?,
                    kind: row.get(1)?,
                    sources: serde_json::from_str(&sources).unwrap_or_default(),
                    created_at_ms: row.get(3)?,
                    updated_at_ms: row.get(4)?,
                    valid_until_ms: row.get(5)?,
                    subject: row.get(7)?,
                },
                vectors.of("memories", row.get(6)?),
            ))
        })?
        .collect::<Result<Vec<_>, _>>()?;

    let mut statement = connection.prepare(
        "SELECT agent, label, value, char_limit, read_only, updated_at FROM core_blocks
         WHERE uid = ?1 ORDER BY agent, label",
    )?;
    bundle.blocks = statement
        .query_map([uid], |row| {
            Ok((
                row.get(0)?,
                CoreBlock {
                    label: row.get(1)?,
                    value: row.get(2)?,
                    char_limit: row.get(3)?,
                    read_only: row.get(4)?,
                    updated_at_ms: row.get(5)?,
                    shared: None,
                },
            ))
        })?
        .collect::<Result<Vec<_>, _>>()?;

    bundle.shared_blocks = super::shared::list(connection, scope)?;

    let mut statement = connection.prepare(
        "SELECT agent, text, created_at, id FROM archival_passages WHERE uid = ?1
         ORDER BY created_at, id",
    )?;
    bundle.passages = statement
        .query_map([uid], |row| {
            Ok((
                row.get(0)?,
                row.get(1)?,
                row.get(2)?,
                vectors.of("archival_passages", row.get(3)?),
            ))
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Some(bundle))
}

pub fn import(
    tx: &Transaction,
    scope: &UserScope,
    bundle: &UserBundle,
) -> StoreResult<ImportCounts> {
    let uid = ensure_uid(tx, scope)?;
    let mut counts = ImportCounts::default();
    for portable in &bundle.conversations {
        let conversation = &portable.id;
        let messages: Vec<&PortableMessage> = bundle
            .messages
            .iter()
            .filter(|m| &m.conversation == conversation)
            .collect();
        let stored = recall::append(tx, scope, conversation, &portable.agent, &messages)?;
        if portable.parent.is_some() {
            tx.execute(
                "UPDATE conversations SET parent = ?1, fork_position = ?2
                 WHERE uid = ?3 AND external_id = ?4",
                params![portable.parent, portable.fork_position, uid, conversation],
            )?;
        }
        if let Some(position) = portable.extracted_through {
            recall::set_extraction_progress(tx, scope, conversation, position)?;
        }
        counts.conversations += 1;
        counts.messages += stored.len();
        for message in stored {
            let embedding = messages
                .iter()
                .find(|m| {
                    m.message.position == message.position && m.message.content == message.content
                })
                .and_then(|m| m.embedding.as_ref());
            if let Some(embedding) = embedding {
                super::search::set_embedding(tx, Corpus::Message, message.id, embedding)?;
            }
        }
    }
    let mut insert = tx.prepare_cached(
        "INSERT INTO memories (uid, text, kind, sources, created_at, updated_at, valid_until,
             content_hash, embedding_model, embedding, subject)
         SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11
         WHERE NOT EXISTS (SELECT 1 FROM memories WHERE uid = ?1 AND content_hash = ?8
                           AND (valid_until IS NULL OR valid_until IS ?7))
         ON CONFLICT DO NOTHING",
    )?;
    for (memory, embedding) in &bundle.memories {
        let sources = serde_json::to_string(&memory.sources)
            .map_err(|error| crate::store::StoreError::Invalid(error.to_string()))?;
        counts.memories += insert.execute(params![
            uid,
            memory.text,
            memory.kind,
            sources,
            memory.created_at_ms,
            memory.updated_at_ms,
            memory.valid_until_ms,
            content_hash(&memory.text),
            embedding.as_ref().map(|e| e.model.as_str()),
            embedding.as_ref().map(|e| to_blob(&e.vector)),
            memory.subject,
        ])?;
    }
    if counts.memories > 0 {
        bump_generation(tx, uid, Corpus::Memory)?;
    }
    for (agent_name, block) in &bundle.blocks {
        agents::put_block(tx, scope, agent_name, block)?;
        tx.execute(
            "UPDATE core_blocks SET updated_at = ?1 WHERE uid = ?2 AND agent = ?3 AND label = ?4",
            params![block.updated_at_ms, uid, agent_name, block.label],
        )?;
        counts.blocks += 1;
    }
    for block in &bundle.shared_blocks {
        super::shared::import(tx, scope, block)?;
        counts.blocks += 1;
    }
    for (agent_name, text, created_at_ms, embedding) in &bundle.passages {
        agents::insert_passage(
            tx,
            scope,
            agent_name,
            text,
            *created_at_ms,
            embedding.as_ref(),
        )?;
        counts.passages += 1;
    }
    for summary in &bundle.summaries {
        recall::put_summary(tx, scope, summary)?;
        counts.summaries += 1;
    }
    Ok(counts)
}

impl Transfer for SqliteStore {
    fn export_user(&self, scope: &UserScope) -> StoreResult<Option<crate::store::UserBundle>> {
        // One read transaction: a snapshot even while the proxy keeps writing.
        let mut connection = super::lock(&self.readers[0]);
        let snapshot = connection.transaction()?;
        export(&snapshot, scope)
    }

    fn import_user(
        &self,
        scope: &UserScope,
        bundle: &crate::store::UserBundle,
    ) -> StoreResult<crate::store::ImportCounts> {
        self.write(|tx| import(tx, scope, bundle))
    }
}
