//! The memory layer as the rest of memproxy sees it: store + embedder + vector indexes.
//!
//! [`MemoryService`] keeps the three in step (write the row with its embedding in SQLite, then
//! update the index with the generation SQLite returned) and moves all blocking work (SQLite,
//! ONNX, HNSW) off the async runtime. Strategies, the management API and the CLI all use it.

mod agent;
pub use agent::{admit_agent, admit_block};
pub mod check;
pub mod cues;
pub mod history;
pub mod human_lines;
pub use agent::AgentDetail;
mod feedback;
mod neighbours;
mod open;
mod recording;
pub use recording::{Recorded, INLINE_EMBED_TURNS};
pub mod perspective;
pub mod retrieval;
pub mod transfer;
pub mod unmentioned;

use std::path::Path;
use std::sync::Arc;

use crate::embed::{EmbedError, SharedEmbedder};
use crate::store::sqlite::SqliteStore;
use crate::store::{
    now_ms, Corpus, Embedding, ImportCounts, Inserted, Memory, NewMemory, Page, PortableMessage,
    Source, Store, StoreError, UserScope,
};
use crate::vector::{Change, VectorIndexes};

pub use retrieval::{Hit, QueryVectors, RetrievalRequest};

/// A fact to store: what it says, its kind, where it came from, and whom it is about
/// ([`crate::store::Memory::subject`]).
#[derive(Clone, Debug, PartialEq)]
pub struct NewFact {
    pub text: String,
    pub kind: String,
    pub sources: Vec<Source>,
    pub subject: Option<String>,
}

impl NewFact {
    /// A fact whose subject no one gave.
    pub fn new(text: impl Into<String>, kind: impl Into<String>, sources: Vec<Source>) -> Self {
        NewFact {
            text: text.into(),
            kind: kind.into(),
            sources,
            subject: None,
        }
    }

    /// The same fact, about `subject`.
    pub fn about(self, subject: Option<String>) -> Self {
        NewFact { subject, ..self }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Embed(#[from] EmbedError),
    #[error("{0}")]
    Invalid(String),
    /// A configured limit (`[limits]`) the change would go over.
    #[error("{0}")]
    Limit(String),
    #[error("background task failed: {0}")]
    Task(String),
}

pub type MemoryResult<T> = Result<T, MemoryError>;

/// Memories written per transaction by an import.
const IMPORT_BATCH: usize = 50;

/// Texts embedded per call in bulk work (about 0.2 s of the local model on two cores).
const BULK_EMBED_BATCH: usize = 32;

pub struct MemoryService {
    store: Arc<dyn Store>,
    embedder: SharedEmbedder,
    vectors: Arc<VectorIndexes>,
    /// Wakes the background embedder (a request left turns without vectors).
    backlog: tokio::sync::Notify,
    /// The configured bounds (memory length, agents, blocks).
    limits: crate::limits::Limits,
}

/// A memory's index entry after a change: its vector, or none (the background embedder adds it).
fn vector_change(id: i64, embedding: &Option<Embedding>) -> Change<'_> {
    match embedding {
        Some(e) => Change::Add(id, &e.vector),
        None => Change::Remove(id),
    }
}

impl MemoryService {
    /// Opens `{data_dir}/memproxy.db` and the vector indexes of the embedder's model.
    pub fn open(data_dir: &Path, embedder: SharedEmbedder) -> MemoryResult<MemoryService> {
        let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&data_dir.join("memproxy.db"))?);
        Self::with_store(store, data_dir, embedder)
    }

    /// Opens the configured store (see [`crate::store::StoreConfig`]) and its vector search.
    pub fn open_configured(
        store: &crate::store::StoreConfig,
        data_dir: &Path,
        embedder: SharedEmbedder,
    ) -> MemoryResult<MemoryService> {
        Self::with_store(store.open(data_dir)?, data_dir, embedder)
    }

    pub fn with_store(
        store: Arc<dyn Store>,
        data_dir: &Path,
        embedder: SharedEmbedder,
    ) -> MemoryResult<MemoryService> {
        let model_dir: String = embedder
            .model_id()
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let vectors = if store.keeps_vectors() {
            VectorIndexes::in_store(
                embedder.model_id(),
                embedder.dimensions(),
                Arc::clone(&store),
            )
        } else {
            VectorIndexes::new(
                &data_dir.join("vectors").join(model_dir),
                embedder.model_id(),
                embedder.dimensions(),
                Arc::clone(&store),
            )?
        };
        Ok(MemoryService {
            store,
            embedder,
            vectors: Arc::new(vectors),
            backlog: tokio::sync::Notify::new(),
            limits: crate::limits::Limits::default(),
        })
    }

    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    pub fn vectors(&self) -> &Arc<VectorIndexes> {
        &self.vectors
    }

    pub fn embedder(&self) -> &SharedEmbedder {
        &self.embedder
    }

    /// Runs blocking store/index work on the blocking pool.
    pub async fn blocking<T: Send + 'static>(
        &self,
        work: impl FnOnce(&dyn Store, &VectorIndexes) -> MemoryResult<T> + Send + 'static,
    ) -> MemoryResult<T> {
        let store = Arc::clone(&self.store);
        let vectors = Arc::clone(&self.vectors);
        tokio::task::spawn_blocking(move || work(store.as_ref(), &vectors))
            .await
            .map_err(|error| MemoryError::Task(error.to_string()))?
    }

    pub(crate) async fn embed(&self, texts: Vec<String>) -> MemoryResult<Vec<Embedding>> {
        let model = self.embedder.model_id().to_owned();
        let vectors = self.embedder.embed(texts).await?;
        Ok(vectors
            .into_iter()
            .map(|vector| Embedding {
                model: model.clone(),
                vector,
            })
            .collect())
    }

    /// Embeds a bulk of texts (an import) a batch at a time: the embedder serves one call at a
    /// time, so every other user's request that needs it waits for at most one batch, not for
    /// the whole bulk.
    async fn embed_in_turns(&self, texts: Vec<String>) -> MemoryResult<Vec<Embedding>> {
        let mut embedded = Vec::with_capacity(texts.len());
        for batch in texts.chunks(BULK_EMBED_BATCH) {
            embedded.extend(self.embed(batch.to_vec()).await?);
        }
        Ok(embedded)
    }

    /// Adds facts (one transaction each); exact duplicates of live facts are reported, not added.
    pub async fn add_memories(
        &self,
        scope: &UserScope,
        items: Vec<NewFact>,
        cause: &str,
    ) -> MemoryResult<Vec<Inserted>> {
        self.add_memories_at(scope, items, cause, now_ms()).await
    }

    /// As [`Self::add_memories`], dated `at_ms` (when the facts were said, for replays).
    pub async fn add_memories_at(
        &self,
        scope: &UserScope,
        items: Vec<NewFact>,
        cause: &str,
        at_ms: i64,
    ) -> MemoryResult<Vec<Inserted>> {
        for item in &items {
            self.check_text(&item.text)?;
        }
        let embeddings = self
            .embed(items.iter().map(|item| item.text.clone()).collect())
            .await?;
        let memories = items
            .into_iter()
            .zip(embeddings)
            .map(|(item, embedding)| NewMemory {
                text: item.text,
                kind: item.kind,
                sources: item.sources,
                subject: item.subject,
                created_at_ms: at_ms,
                embedding: Some(embedding),
            })
            .collect();
        self.insert_embedded(scope, memories, cause).await
    }

    /// Adds facts whose embeddings are already computed (imports, benchmarks).
    pub async fn insert_embedded(
        &self,
        scope: &UserScope,
        memories: Vec<NewMemory>,
        cause: &str,
    ) -> MemoryResult<Vec<Inserted>> {
        let scope = scope.clone();
        let cause = cause.to_owned();
        self.blocking(move |store, vectors| {
            let uid = store.ensure_user(&scope)?;
            let mut results = Vec::with_capacity(memories.len());
            let mut added = Vec::new();
            for memory in &memories {
                let inserted = store.insert_memory(&scope, memory, &cause)?;
                if let (Inserted::New { id, generation }, Some(embedding)) =
                    (&inserted, &memory.embedding)
                {
                    added.push((*generation, Change::Add(*id, &embedding.vector)));
                }
                results.push(inserted);
            }
            vectors.apply(uid, Corpus::Memory, &added)?;
            Ok(results)
        })
        .await
    }

    pub async fn add_memory(
        &self,
        scope: &UserScope,
        text: &str,
        kind: &str,
        cause: &str,
    ) -> MemoryResult<Inserted> {
        let mut results = self
            .add_memories(scope, vec![NewFact::new(text, kind, Vec::new())], cause)
            .await?;
        results
            .pop()
            .ok_or_else(|| MemoryError::Task("no result".to_owned()))
    }

    pub async fn update_memory(
        &self,
        scope: &UserScope,
        id: i64,
        text: &str,
        sources: &[Source],
        cause: &str,
    ) -> MemoryResult<()> {
        self.check_text(text)?;
        let embedding = self.embed(vec![text.to_owned()]).await?.pop();
        let (scope, text, cause) = (scope.clone(), text.to_owned(), cause.to_owned());
        let sources = sources.to_vec();
        self.blocking(move |store, vectors| {
            let old = live_text(store, &scope, id)?;
            let generation =
                store.update_memory(&scope, id, &text, embedding.as_ref(), &sources, &cause)?;
            let uid = store.ensure_user(&scope)?;
            vectors.apply(
                uid,
                Corpus::Memory,
                &[(generation, vector_change(id, &embedding))],
            )?;
            // The agents' core memory says it anew too (one memory under every mode).
            if let Some(old) = old {
                human_lines::follow(store, &scope, &old, Some(&text))?;
            }
            Ok(())
        })
        .await
    }

    /// Invalidates (keeps, with `valid_until`) or deletes a memory.
    pub async fn retire_memory(
        &self,
        scope: &UserScope,
        id: i64,
        delete: bool,
        cause: &str,
    ) -> MemoryResult<()> {
        let (scope, cause) = (scope.clone(), cause.to_owned());
        self.blocking(move |store, vectors| {
            let old = live_text(store, &scope, id)?;
            let generation = if delete {
                store.delete_memory(&scope, id, &cause)?
            } else {
                store.invalidate_memory(&scope, id, &cause)?
            };
            let uid = store.ensure_user(&scope)?;
            vectors.apply(uid, Corpus::Memory, &[(generation, Change::Remove(id))])?;
            // Gone from the agents' core memory as well: a deleted or outdated fact is not shown.
            if let Some(old) = old {
                human_lines::follow(store, &scope, &old, None)?;
            }
            Ok(())
        })
        .await
    }

    /// Makes a retired memory live again (undoes an invalidation, e.g. by consolidation).
    pub async fn restore_memory(
        &self,
        scope: &UserScope,
        id: i64,
        cause: &str,
    ) -> MemoryResult<()> {
        let (scope, cause) = (scope.clone(), cause.to_owned());
        let model = self.embedder.model_id().to_owned();
        self.blocking(move |store, vectors| {
            let generation = store.restore_memory(&scope, id, &cause)?;
            let uid = store.ensure_user(&scope)?;
            let embedding = store
                .documents(&scope, Corpus::Memory, &[id])?
                .into_iter()
                .find_map(|d| d.embedding.filter(|e| e.model == model));
            vectors.apply(
                uid,
                Corpus::Memory,
                &[(generation, vector_change(id, &embedding))],
            )?;
            Ok(())
        })
        .await
    }

    pub async fn list_memories(
        &self,
        scope: &UserScope,
        include_invalid: bool,
        page: Page,
    ) -> MemoryResult<Vec<Memory>> {
        let scope = scope.clone();
        self.blocking(move |store, _| Ok(store.list_memories(&scope, include_invalid, page)?))
            .await
    }

    /// Hybrid retrieval for one user.
    pub async fn retrieve(
        &self,
        scope: &UserScope,
        request: RetrievalRequest,
    ) -> MemoryResult<Vec<Hit>> {
        self.retrieve_with(scope, request, None).await
    }

    /// Hybrid retrieval with the query's vectors when the caller already has them.
    pub async fn retrieve_with(
        &self,
        scope: &UserScope,
        request: RetrievalRequest,
        vectors: Option<QueryVectors>,
    ) -> MemoryResult<Vec<Hit>> {
        let query = request.query.trim().to_owned();
        if query.is_empty() {
            return Ok(Vec::new());
        }
        let vectors = match vectors {
            Some(vectors) => vectors,
            None => {
                let facts = request.corpora.iter().any(|c| *c != Corpus::Message);
                self.query_vectors(&query, facts).await?
            }
        };
        let scope = scope.clone();
        self.blocking(move |store, indexes| {
            Ok(retrieval::retrieve(
                store,
                indexes,
                &scope,
                &request,
                &vectors,
                now_ms(),
            )?)
        })
        .await
    }

    /// The query embedded as asked and, when `facts` are searched and it is in the first person,
    /// about "the user" too (one batch).
    pub async fn query_vectors(&self, query: &str, facts: bool) -> MemoryResult<QueryVectors> {
        let about = facts.then(|| perspective::about_the_user(query)).flatten();
        let mut texts = vec![query.to_owned()];
        texts.extend(about);
        let mut embedded = self.embed(texts).await?.into_iter().map(|e| e.vector);
        Ok(QueryVectors {
            asked: embedded.next(),
            about_user: embedded.next(),
        })
    }

    /// Right to be forgotten: every row and every vector file of the user.
    pub async fn delete_user(&self, scope: &UserScope) -> MemoryResult<bool> {
        let scope = scope.clone();
        self.blocking(move |store, vectors| {
            let Some(uid) = store.find_user(&scope)? else {
                return Ok(false);
            };
            let existed = store.delete_user(&scope)?;
            vectors.forget(uid)?;
            Ok(existed)
        })
        .await
    }

    pub async fn import(&self, scope: &UserScope, jsonl: &str) -> MemoryResult<ImportCounts> {
        let mut bundle = transfer::parse_jsonl(jsonl)?;
        let items = bundle.memories.len()
            + bundle.messages.len()
            + bundle.passages.len()
            + bundle.blocks.len()
            + bundle.shared_blocks.len()
            + bundle.summaries.len();
        if items > self.limits.max_import_items {
            return Err(MemoryError::Limit(format!(
                "The import has {items} items, more than the limit of {} (limits.max_import_items); split it into several imports.",
                self.limits.max_import_items
            )));
        }
        for (memory, _) in &bundle.memories {
            self.check_text(&memory.text)?;
        }
        // Embed everything first: the import itself is then one all-or-nothing transaction.
        let texts = bundle.memories.iter().map(|(m, _)| m.text.clone());
        let embeddings = self.embed_in_turns(texts.collect()).await?;
        for ((_, slot), embedding) in bundle.memories.iter_mut().zip(embeddings) {
            *slot = Some(embedding);
        }
        // Turns with nothing searchable (an agent's bare tool-call entries) get no vector.
        let searchable = |m: &PortableMessage| !m.searchable().trim().is_empty();
        let texts = bundle.messages.iter().filter(|m| searchable(m));
        let embeddings = self.embed_in_turns(texts.map(|m| m.searchable().to_owned()).collect());
        let mut embeddings = embeddings.await?.into_iter();
        for message in bundle.messages.iter_mut().filter(|m| searchable(m)) {
            message.embedding = embeddings.next();
        }
        let texts = bundle.passages.iter().map(|(_, t, _, _)| t.clone());
        let embeddings = self.embed_in_turns(texts.collect()).await?;
        for ((_, _, _, slot), embedding) in bundle.passages.iter_mut().zip(embeddings) {
            *slot = Some(embedding);
        }
        // Written in bounded transactions, so that another user's write waits for one batch,
        // not for the whole file: first everything but the memories, then the memories a batch
        // at a time. The whole file was checked above; a write that fails midway (a full disk)
        // leaves the batches before it, and importing the same file again adds only what is
        // missing (memories are kept once by their text, turns by their position).
        let memories = std::mem::take(&mut bundle.memories);
        let mut parts = vec![bundle];
        for batch in memories.chunks(IMPORT_BATCH) {
            parts.push(crate::store::UserBundle {
                memories: batch.to_vec(),
                ..Default::default()
            });
        }
        let mut counts = ImportCounts::default();
        for part in parts {
            let scope = scope.clone();
            let written = self
                .blocking(move |store, _| Ok(store.import_user(&scope, &part)?))
                .await?;
            counts.add(&written);
        }
        let scope = scope.clone();
        self.blocking(move |store, vectors| {
            let uid = store.ensure_user(&scope)?;
            // Many rows changed at once: let the indexes catch up from the database.
            vectors.verify(uid)?;
            Ok(counts)
        })
        .await
    }

    pub async fn export(&self, scope: &UserScope) -> MemoryResult<String> {
        let scope_for_read = scope.clone();
        let bundle = self
            .blocking(move |store, _| Ok(store.export_user(&scope_for_read)?))
            .await?
            .ok_or_else(|| {
                StoreError::NotFound(format!(
                    "user '{}' of tenant '{}'",
                    scope.user, scope.tenant
                ))
            })?;
        transfer::to_jsonl(scope, &bundle)
    }

    /// Start-up check: brings every user's vector indexes in step with the database (rebuilding
    /// missing or stale files) and requeues jobs a crash left running.
    pub async fn recover(&self) -> MemoryResult<(usize, usize)> {
        let model = self.embedder.model_id().to_owned();
        self.blocking(move |store, vectors| {
            let requeued = store.requeue_interrupted_jobs()?;
            for corpus in Corpus::ALL {
                if !store.rows_to_embed(corpus, &model, 1)?.is_empty() {
                    tracing::warn!(
                        corpus = corpus.as_str(),
                        model = %model,
                        "some rows have no vector of the configured embedding model and are found by keywords only; run `memproxy reindex`"
                    );
                }
            }
            let users = store.indexed_users()?;
            for uid in &users {
                vectors.verify(*uid)?;
            }
            Ok((users.len(), requeued))
        })
        .await
    }

    /// Saves changed vector indexes to disk.
    pub async fn flush(&self) -> MemoryResult<usize> {
        self.blocking(|_, vectors| Ok(vectors.flush()?)).await
    }
}

impl MemoryService {
    /// The configured bounds.
    pub fn limits(&self) -> &crate::limits::Limits {
        &self.limits
    }

    /// Sets the bounds (at start-up, before the service is shared).
    pub fn with_limits(mut self, limits: crate::limits::Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Whether `text` can be a memory: not blank, at most `limits.max_memory_chars` characters.
    pub fn check_text(&self, text: &str) -> MemoryResult<()> {
        use crate::limits::TextRefusal;
        self.limits
            .memory_text(text)
            .map_err(|refusal| match refusal {
                TextRefusal::Blank => MemoryError::Invalid("a memory needs text".to_owned()),
                TextRefusal::TooLong(message) => MemoryError::Limit(message),
            })
    }
}

/// The text of a live memory (`None`: retired, another user's, or no such memory).
fn live_text(store: &dyn Store, scope: &UserScope, id: i64) -> MemoryResult<Option<String>> {
    Ok(store
        .documents(scope, Corpus::Memory, &[id])?
        .into_iter()
        .next()
        .map(|document| document.text))
}
