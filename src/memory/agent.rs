//! The memory layer's side of explicit-mode agents: writes that carry embeddings (the agent's
//! log, archival passages) and resets, each keeping SQLite and the vector indexes in step.

use serde::Serialize;

use super::{MemoryResult, MemoryService};
use crate::store::{
    agent_conversation, now_ms, AgentCounts, AgentMessage, AgentRecord, CoreBlock, Corpus,
    Embedding, StoredMessage, Summary, UserScope,
};
use crate::vector::Change;

impl MemoryService {
    /// Appends to an agent's log, embedding the messages that are searchable.
    /// Appends a finished turn's messages (ending the agent's pause, if it had one).
    pub async fn append_agent_messages(
        &self,
        scope: &UserScope,
        agent: &str,
        messages: Vec<AgentMessage>,
    ) -> MemoryResult<Vec<StoredMessage>> {
        self.append_to_agent_log(scope, agent, messages, true).await
    }

    /// Appends notes between turns (another agent's reply) without ending a pause.
    pub async fn append_agent_notes(
        &self,
        scope: &UserScope,
        agent: &str,
        messages: Vec<AgentMessage>,
    ) -> MemoryResult<Vec<StoredMessage>> {
        self.append_to_agent_log(scope, agent, messages, false)
            .await
    }

    async fn append_to_agent_log(
        &self,
        scope: &UserScope,
        agent: &str,
        messages: Vec<AgentMessage>,
        end_pause: bool,
    ) -> MemoryResult<Vec<StoredMessage>> {
        let searchable: Vec<String> = messages
            .iter()
            .filter(|m| !m.search_text.trim().is_empty())
            .map(|m| m.search_text.clone())
            .collect();
        let mut embeddings = self.embed(searchable).await?.into_iter();
        let rows: Vec<(AgentMessage, Option<Embedding>)> = messages
            .into_iter()
            .map(|message| {
                let embedding = if message.search_text.trim().is_empty() {
                    None
                } else {
                    embeddings.next()
                };
                (message, embedding)
            })
            .collect();
        let (scope, agent) = (scope.clone(), agent.to_owned());
        self.blocking(move |store, vectors| {
            let (stored, written) =
                store.append_agent_messages(&scope, &agent, &rows, end_pause)?;
            if let Some((uid, generation)) = written {
                let changes: Vec<(u64, Change)> = stored
                    .iter()
                    .zip(&rows)
                    .filter_map(|(message, (_, embedding))| {
                        let embedding = embedding.as_ref()?;
                        Some((generation, Change::Add(message.id, &embedding.vector)))
                    })
                    .collect();
                vectors.apply(uid, Corpus::Message, &changes)?;
            }
            Ok(stored)
        })
        .await
    }

    /// Adds a passage to an agent's archival memory; returns its id.
    pub async fn insert_passage(
        &self,
        scope: &UserScope,
        agent: &str,
        text: &str,
    ) -> MemoryResult<i64> {
        self.check_text(text)?;
        let embedding = self.embed(vec![text.to_owned()]).await?.pop();
        let (scope, agent, text) = (scope.clone(), agent.to_owned(), text.to_owned());
        self.blocking(move |store, vectors| {
            let (id, generation) =
                store.insert_passage(&scope, &agent, &text, now_ms(), embedding.as_ref())?;
            if let Some(embedding) = &embedding {
                let uid = store.ensure_user(&scope)?;
                vectors.apply(
                    uid,
                    Corpus::Passage,
                    &[(generation, Change::Add(id, &embedding.vector))],
                )?;
            }
            Ok(id)
        })
        .await
    }

    pub async fn delete_passage(
        &self,
        scope: &UserScope,
        agent: &str,
        id: i64,
    ) -> MemoryResult<()> {
        let (scope, agent) = (scope.clone(), agent.to_owned());
        self.blocking(move |store, vectors| {
            let generation = store.delete_passage(&scope, &agent, id)?;
            let uid = store.ensure_user(&scope)?;
            vectors.apply(uid, Corpus::Passage, &[(generation, Change::Remove(id))])?;
            Ok(())
        })
        .await
    }

    /// Deletes one message of an agent's log (with the results of its tool calls) and its
    /// vectors; returns the deleted positions. Callers hold the agent's turn lock.
    pub async fn delete_agent_message(
        &self,
        scope: &UserScope,
        agent: &str,
        position: i64,
    ) -> MemoryResult<Vec<i64>> {
        let (scope, agent) = (scope.clone(), agent.to_owned());
        self.blocking(move |store, vectors| {
            let (deleted, generation) = store.delete_agent_message(&scope, &agent, position)?;
            let uid = store.ensure_user(&scope)?;
            let changes: Vec<_> = deleted
                .iter()
                .map(|(id, _)| (generation, Change::Remove(*id)))
                .collect();
            vectors.apply(uid, Corpus::Message, &changes)?;
            Ok(deleted.into_iter().map(|(_, position)| position).collect())
        })
        .await
    }

    /// Forgets an agent entirely; returns whether it existed.
    pub async fn reset_agent(&self, scope: &UserScope, agent: &str) -> MemoryResult<bool> {
        let (scope, agent) = (scope.clone(), agent.to_owned());
        self.blocking(move |store, vectors| {
            let existed = store.reset_agent(&scope, &agent)?;
            if let Some(uid) = store.find_user(&scope)? {
                // Rows went away in bulk: let the indexes catch up from the database.
                vectors.verify(uid)?;
            }
            Ok(existed)
        })
        .await
    }
}

/// One agent with everything the management API and CLI show about it.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct AgentDetail {
    pub name: String,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
    pub pressure_alerted: bool,
    /// As last compiled (`None`: rebuilt at the next turn).
    pub system_message: Option<String>,
    pub blocks: Vec<CoreBlock>,
    pub summary: Option<Summary>,
    pub counts: AgentCounts,
}

impl MemoryService {
    /// A user's agents with their counts.
    pub async fn agent_overviews(
        &self,
        scope: &UserScope,
    ) -> MemoryResult<Vec<(AgentRecord, AgentCounts)>> {
        let scope = scope.clone();
        self.blocking(move |store, _| {
            let mut rows = Vec::new();
            for agent in store.list_agents(&scope)? {
                let counts = store.agent_counts(&scope, &agent.name)?;
                rows.push((agent, counts));
            }
            Ok(rows)
        })
        .await
    }

    /// `None` for an unknown agent.
    pub async fn agent_detail(
        &self,
        scope: &UserScope,
        agent: &str,
    ) -> MemoryResult<Option<AgentDetail>> {
        let (scope, name) = (scope.clone(), agent.to_owned());
        self.blocking(move |store, _| {
            let Some(record) = store
                .list_agents(&scope)?
                .into_iter()
                .find(|a| a.name == name)
            else {
                return Ok(None);
            };
            Ok(Some(AgentDetail {
                blocks: store.core_blocks(&scope, &name)?,
                summary: store.summary(&scope, &agent_conversation(&name))?,
                counts: store.agent_counts(&scope, &name)?,
                name: record.name,
                created_at_ms: record.created_at_ms,
                updated_at_ms: record.updated_at_ms,
                pressure_alerted: record.pressure_alerted,
                system_message: record.system_message,
            }))
        })
        .await
    }

    /// Replaces the text of an agent's summary (which messages it stands for stays); `None` for
    /// an unknown agent.
    pub async fn rewrite_agent_summary(
        &self,
        scope: &UserScope,
        agent: &str,
        text: &str,
    ) -> MemoryResult<Option<Summary>> {
        let (scope, name, text) = (scope.clone(), agent.to_owned(), text.to_owned());
        self.blocking(move |store, _| {
            if !store.list_agents(&scope)?.iter().any(|a| a.name == name) {
                return Ok(None);
            }
            let conversation = agent_conversation(&name);
            let through = store
                .summary(&scope, &conversation)?
                .map_or(-1, |s| s.through_position);
            let summary = Summary {
                conversation,
                text,
                through_position: through,
                updated_at_ms: now_ms(),
            };
            store.put_summary(&scope, &summary)?;
            Ok(Some(summary))
        })
        .await
    }
}

/// `[limits]` applied inside a store call, before an agent is created: an agent that exists may
/// always be used, a new one only below `max_agents_per_user`. Returns the user's agents as they
/// were (before `agent` is created).
pub fn admit_agent(
    store: &dyn crate::store::Store,
    limits: &crate::limits::Limits,
    scope: &UserScope,
    agent: &str,
) -> MemoryResult<Vec<AgentRecord>> {
    let agents = store.list_agents(scope)?;
    limits
        .agent(agent, agents.iter().map(|a| a.name.as_str()))
        .map_err(super::MemoryError::Limit)?;
    Ok(agents)
}

/// `[limits]` applied inside a store call, before a block labelled `label` is written to or
/// attached to an agent: a label it has may be replaced, a new one only below
/// `max_blocks_per_agent`.
pub fn admit_block(
    store: &dyn crate::store::Store,
    limits: &crate::limits::Limits,
    scope: &UserScope,
    agent: &str,
    label: &str,
) -> MemoryResult<()> {
    let blocks = store.core_blocks(scope, agent)?;
    limits
        .block(label, blocks.iter().map(|b| b.label.as_str()))
        .map_err(super::MemoryError::Limit)
}
