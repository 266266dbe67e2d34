//! The SQLite store, area by area: each method runs one read or one write transaction through
//! the functions of its area's module.

use rusqlite::{params, OptionalExtension};

use super::{
    agent, agent_log, agent_pause, ensure_uid, find_uid, jobs, lock, memories, recall, search,
    transfer, SqliteStore,
};
use crate::store::{Agents, Facts, Jobs, RecallLog, Search, Transfer, Users};
use crate::store::{Corpus, StoreResult, UserScope, Within};

impl Users for SqliteStore {
    fn ensure_user(&self, scope: &UserScope) -> StoreResult<i64> {
        if let Some(uid) = self.find_user(scope)? {
            return Ok(uid);
        }
        self.write(|tx| ensure_uid(tx, scope))
    }

    fn find_user(&self, scope: &UserScope) -> StoreResult<Option<i64>> {
        self.read(|c| find_uid(c, scope))
    }

    fn list_users(&self, tenant: &str) -> StoreResult<Vec<String>> {
        self.read(|c| {
            let mut statement =
                c.prepare("SELECT name FROM users WHERE tenant = ?1 ORDER BY name")?;
            let names = statement
                .query_map([tenant], |row| row.get(0))?
                .collect::<Result<Vec<String>, _>>()?;
            Ok(names)
        })
    }

    fn list_tenants(&self) -> StoreResult<Vec<String>> {
        self.read(|c| {
            let mut statement = c.prepare("SELECT DISTINCT tenant FROM users ORDER BY tenant")?;
            let tenants = statement
                .query_map([], |row| row.get(0))?
                .collect::<Result<Vec<String>, _>>()?;
            Ok(tenants)
        })
    }

    fn delete_user(&self, scope: &UserScope) -> StoreResult<bool> {
        self.erase(|tx| {
            let Some(uid) = find_uid(tx, scope)? else {
                return Ok(false);
            };
            // Cascades to every table that holds the user's memory (FTS rows via triggers).
            tx.execute("DELETE FROM users WHERE id = ?1", [uid])?;
            Ok(true)
        })
    }
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
            let (conversation, stored) = recall::sync(tx, scope, conversation, agent, turns)?;
            let mut embedded = Vec::new();
            for message in &stored {
                if let Some((_, embedding)) =
                    known.iter().find(|(text, _)| *text == message.content)
                {
                    let (uid, generation) =
                        search::set_embedding(tx, Corpus::Message, message.id, embedding)?;
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
        self.read(|c| recall::extraction_progress(c, scope, conversation))
    }

    fn set_extraction_progress(
        &self,
        scope: &UserScope,
        conversation: &str,
        position: i64,
    ) -> StoreResult<()> {
        self.write(|tx| recall::set_extraction_progress(tx, scope, conversation, position))
    }

    fn list_conversations(
        &self,
        scope: &UserScope,
    ) -> StoreResult<Vec<crate::store::Conversation>> {
        self.read(|c| recall::conversations(c, scope))
    }

    fn list_messages(
        &self,
        scope: &UserScope,
        conversation: &str,
        page: crate::store::Page,
    ) -> StoreResult<Vec<crate::store::StoredMessage>> {
        self.read(|c| recall::messages(c, scope, conversation, page))
    }

    fn summary(
        &self,
        scope: &UserScope,
        conversation: &str,
    ) -> StoreResult<Option<crate::store::Summary>> {
        self.read(|c| agent::summary(c, scope, conversation))
    }

    fn put_summary(&self, scope: &UserScope, summary: &crate::store::Summary) -> StoreResult<()> {
        self.write(|tx| agent::put_summary(tx, scope, summary))
    }
}

impl Facts for SqliteStore {
    fn insert_memory(
        &self,
        scope: &UserScope,
        memory: &crate::store::NewMemory,
        cause: &str,
    ) -> StoreResult<crate::store::Inserted> {
        self.write(|tx| memories::insert(tx, scope, memory, cause))
    }

    fn update_memory(
        &self,
        scope: &UserScope,
        id: i64,
        text: &str,
        embedding: Option<&crate::store::Embedding>,
        new_sources: &[crate::store::Source],
        cause: &str,
    ) -> StoreResult<u64> {
        self.write(|tx| memories::update(tx, scope, id, text, embedding, new_sources, cause))
    }

    fn invalidate_memory(&self, scope: &UserScope, id: i64, cause: &str) -> StoreResult<u64> {
        self.write(|tx| memories::invalidate(tx, scope, id, cause))
    }

    fn delete_memory(&self, scope: &UserScope, id: i64, cause: &str) -> StoreResult<u64> {
        self.erase(|tx| memories::delete(tx, scope, id, cause))
    }

    fn restore_memory(&self, scope: &UserScope, id: i64, cause: &str) -> StoreResult<u64> {
        self.write(|tx| memories::restore(tx, scope, id, cause))
    }

    fn list_memories(
        &self,
        scope: &UserScope,
        include_invalid: bool,
        page: crate::store::Page,
    ) -> StoreResult<Vec<crate::store::Memory>> {
        self.read(|c| memories::list(c, scope, include_invalid, page))
    }

    fn memory_events(&self, scope: &UserScope) -> StoreResult<Vec<crate::store::MemoryEvent>> {
        self.read(|c| memories::events(c, scope))
    }

    fn live_memory_id(&self, scope: &UserScope, text: &str) -> StoreResult<Option<i64>> {
        self.read(|c| memories::live_id(c, scope, text))
    }

    fn former_facts(
        &self,
        scope: &UserScope,
        limit: usize,
    ) -> StoreResult<Vec<crate::store::FormerFact>> {
        self.read(|c| memories::former(c, scope, limit))
    }
}

impl Agents for SqliteStore {
    fn core_blocks(
        &self,
        scope: &UserScope,
        agent: &str,
    ) -> StoreResult<Vec<crate::store::CoreBlock>> {
        self.read(|c| agent::blocks(c, scope, agent))
    }

    fn put_core_block(
        &self,
        scope: &UserScope,
        agent: &str,
        block: &crate::store::CoreBlock,
    ) -> StoreResult<()> {
        self.write(|tx| agent::put_block(tx, scope, agent, block))
    }

    fn edit_core_block(
        &self,
        scope: &UserScope,
        agent: &str,
        label: &str,
        edit: &mut dyn FnMut(&crate::store::CoreBlock) -> Result<String, String>,
    ) -> StoreResult<Result<Result<crate::store::CoreBlock, String>, Vec<String>>> {
        self.write(|tx| {
            let blocks = agent::blocks(tx, scope, agent)?;
            let labels: Vec<String> = blocks.iter().map(|b| b.label.clone()).collect();
            let Some(mut block) = blocks.into_iter().find(|b| b.label == label) else {
                return Ok(Err(labels));
            };
            match edit(&block) {
                Ok(value) => {
                    block.value = value;
                    agent::put_block(tx, scope, agent, &block)?;
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
        self.write(|tx| agent::insert_passage(tx, scope, agent, text, created_at_ms, embedding))
    }

    fn list_passages(
        &self,
        scope: &UserScope,
        agent: Option<&str>,
        page: crate::store::Page,
    ) -> StoreResult<Vec<crate::store::Passage>> {
        self.read(|c| agent::passages(c, scope, agent, page))
    }

    fn delete_passage(&self, scope: &UserScope, agent: &str, id: i64) -> StoreResult<u64> {
        self.erase(|tx| agent::delete_passage(tx, scope, agent, id))
    }

    fn delete_core_block(&self, scope: &UserScope, agent: &str, label: &str) -> StoreResult<bool> {
        self.erase(|tx| agent::delete_block(tx, scope, agent, label))
    }

    fn ensure_agent(
        &self,
        scope: &UserScope,
        agent: &str,
        blocks: &[crate::store::CoreBlock],
    ) -> StoreResult<crate::store::AgentRecord> {
        if let Some(found) = self.read(|c| agent_log::find(c, scope, agent))? {
            return Ok(found);
        }
        self.write(|tx| agent_log::ensure(tx, scope, agent, blocks))
    }

    fn list_agents(&self, scope: &UserScope) -> StoreResult<Vec<crate::store::AgentRecord>> {
        self.read(|c| agent_log::list(c, scope))
    }

    fn agent_memory_epoch(&self, scope: &UserScope, agent: &str) -> StoreResult<i64> {
        self.read(|c| Ok(agent_log::find(c, scope, agent)?.map_or(0, |a| a.memory_epoch)))
    }

    fn set_agent_state(
        &self,
        scope: &UserScope,
        agent: &str,
        system: Option<(&str, i64)>,
        pressure_alerted: bool,
    ) -> StoreResult<()> {
        self.write(|tx| agent_log::set_state(tx, scope, agent, system, pressure_alerted))
    }

    fn reset_agent(&self, scope: &UserScope, agent: &str) -> StoreResult<bool> {
        self.erase(|tx| agent_log::reset(tx, scope, agent))
    }

    fn paused_turn(&self, scope: &UserScope, agent: &str) -> StoreResult<Option<String>> {
        self.read(|c| agent_pause::get(c, scope, agent))
    }

    fn set_paused_turn(
        &self,
        scope: &UserScope,
        agent: &str,
        paused: Option<(&str, &str)>,
    ) -> StoreResult<()> {
        self.write(|tx| agent_pause::set(tx, scope, agent, paused))
    }

    fn delete_agent_message(
        &self,
        scope: &UserScope,
        agent: &str,
        position: i64,
    ) -> StoreResult<(Vec<(i64, i64)>, u64)> {
        self.erase(|tx| agent_log::delete_message(tx, scope, agent, position))
    }

    fn append_agent_messages(
        &self,
        scope: &UserScope,
        agent: &str,
        messages: &[(crate::store::AgentMessage, Option<crate::store::Embedding>)],
        end_pause: bool,
    ) -> StoreResult<(Vec<crate::store::StoredMessage>, Option<(i64, u64)>)> {
        self.write(|tx| agent_log::append(tx, scope, agent, messages, end_pause))
    }

    fn set_agent_tags(&self, scope: &UserScope, agent: &str, tags: &[String]) -> StoreResult<bool> {
        self.write(|tx| agent_log::set_tags(tx, scope, agent, tags))
    }

    fn agent_context(
        &self,
        scope: &UserScope,
        agent: &str,
    ) -> StoreResult<(
        Option<crate::store::Summary>,
        Vec<crate::store::StoredMessage>,
    )> {
        self.read(|c| agent_log::context(c, scope, agent))
    }

    fn agent_counts(
        &self,
        scope: &UserScope,
        agent: &str,
    ) -> StoreResult<crate::store::AgentCounts> {
        self.read(|c| agent_log::counts(c, scope, agent))
    }

    fn messages_between(
        &self,
        scope: &UserScope,
        conversation: &str,
        from_ms: i64,
        to_ms: i64,
        page: crate::store::Page,
    ) -> StoreResult<(usize, Vec<crate::store::StoredMessage>)> {
        self.read(|c| agent_log::between(c, scope, conversation, from_ms, to_ms, page))
    }

    fn record_steps(
        &self,
        scope: &UserScope,
        agent: &str,
        steps: &[crate::store::StepRecord],
        keep_turns: usize,
    ) -> StoreResult<()> {
        self.write(|tx| agent_log::record_steps(tx, scope, agent, steps, keep_turns))
    }

    fn agent_steps(
        &self,
        scope: &UserScope,
        agent: &str,
        turns: usize,
    ) -> StoreResult<Vec<crate::store::StepRecord>> {
        self.read(|c| agent_log::steps(c, scope, agent, turns))
    }
}

impl Search for SqliteStore {
    fn keyword_search(
        &self,
        scope: &UserScope,
        corpus: Corpus,
        query: &str,
        limit: usize,
        within: Option<&Within>,
    ) -> StoreResult<Vec<(i64, f64)>> {
        self.read(|c| {
            search::keyword_search(c, &self.common_terms, scope, corpus, query, limit, within)
        })
    }

    fn texts_with(
        &self,
        scope: &UserScope,
        corpus: Corpus,
        words: &[String],
        limit: usize,
    ) -> StoreResult<Vec<String>> {
        self.read(|c| search::texts_with(c, scope, corpus, words, limit))
    }

    fn ids_within(
        &self,
        scope: &UserScope,
        corpus: Corpus,
        within: &Within,
    ) -> StoreResult<Vec<i64>> {
        self.read(|c| search::ids_within(c, scope, corpus, within))
    }

    fn documents(
        &self,
        scope: &UserScope,
        corpus: Corpus,
        ids: &[i64],
    ) -> StoreResult<Vec<crate::store::Document>> {
        self.read(|c| search::documents(c, scope, corpus, ids))
    }

    fn embeddings(
        &self,
        uid: i64,
        corpus: Corpus,
        model: &str,
    ) -> StoreResult<Vec<(i64, Vec<f32>)>> {
        self.read(|c| search::embeddings(c, uid, corpus, model))
    }

    fn vector_generation(&self, uid: i64, corpus: Corpus) -> StoreResult<u64> {
        self.read(|c| {
            let generation: Option<i64> = c
                .query_row(
                    "SELECT generation FROM vector_generations WHERE uid = ?1 AND corpus = ?2",
                    params![uid, corpus.as_str()],
                    |row| row.get(0),
                )
                .optional()?;
            Ok(generation.unwrap_or(0) as u64)
        })
    }

    fn indexed_users(&self) -> StoreResult<Vec<i64>> {
        self.read(|c| {
            let mut statement =
                c.prepare("SELECT DISTINCT uid FROM vector_generations ORDER BY uid")?;
            let uids = statement
                .query_map([], |row| row.get(0))?
                .collect::<Result<Vec<i64>, _>>()?;
            Ok(uids)
        })
    }

    fn rows_to_embed(
        &self,
        corpus: Corpus,
        model: &str,
        limit: usize,
    ) -> StoreResult<Vec<(i64, i64, String)>> {
        self.read(|c| search::rows_to_embed(c, corpus, model, limit))
    }

    fn set_embeddings(
        &self,
        corpus: Corpus,
        rows: &[(i64, crate::store::Embedding)],
    ) -> StoreResult<Vec<(i64, i64, u64)>> {
        self.write(|tx| {
            rows.iter()
                .map(|(id, embedding)| {
                    let (uid, generation) = search::set_embedding(tx, corpus, *id, embedding)?;
                    Ok((*id, uid, generation))
                })
                .collect()
        })
    }
}

impl Transfer for SqliteStore {
    fn export_user(&self, scope: &UserScope) -> StoreResult<Option<crate::store::UserBundle>> {
        // One read transaction: a snapshot even while the proxy keeps writing.
        let mut connection = lock(&self.readers[0]);
        let snapshot = connection.transaction()?;
        transfer::export(&snapshot, scope)
    }

    fn import_user(
        &self,
        scope: &UserScope,
        bundle: &crate::store::UserBundle,
    ) -> StoreResult<crate::store::ImportCounts> {
        self.write(|tx| transfer::import(tx, scope, bundle))
    }
}

impl Jobs for SqliteStore {
    fn enqueue_job(&self, job: &crate::store::NewJob) -> StoreResult<i64> {
        self.write(|tx| jobs::enqueue(tx, job))
    }

    fn claim_job(&self, now_ms: i64, lease_ms: i64) -> StoreResult<Option<crate::store::Job>> {
        self.write(|tx| jobs::claim(tx, now_ms, lease_ms))
    }

    fn complete_job(&self, id: i64, report: &str) -> StoreResult<()> {
        self.write(|tx| jobs::complete(tx, id, report))
    }

    fn fail_job(&self, id: i64, error: &str, retry_at_ms: Option<i64>) -> StoreResult<()> {
        self.write(|tx| jobs::fail(tx, id, error, retry_at_ms))
    }

    fn requeue_interrupted_jobs(&self) -> StoreResult<usize> {
        self.write(jobs::requeue_interrupted)
    }

    fn list_jobs(
        &self,
        state: Option<&str>,
        page: crate::store::Page,
    ) -> StoreResult<Vec<crate::store::Job>> {
        self.read(|c| jobs::list(c, state, page))
    }

    fn count_done_jobs(&self, scope: &UserScope, kind: &str, since_ms: i64) -> StoreResult<u64> {
        self.read(|c| {
            let Some(uid) = find_uid(c, scope)? else {
                return Ok(0);
            };
            let count: i64 = c.query_row(
                "SELECT COUNT(*) FROM jobs
                 WHERE uid = ?1 AND kind = ?2 AND state = 'done' AND updated_at >= ?3",
                params![uid, kind, since_ms],
                |row| row.get(0),
            )?;
            Ok(count as u64)
        })
    }
}
