//! Recording a chat's turns and embedding them. New turns are stored at once; the newest few are
//! embedded on the request path (bounded: no request waits for a backlog), and a background
//! embedder works through whatever is left, in small batches, so that a long chat seen for the
//! first time (or an import) is found by keyword search at once and by vector search soon after.

use std::sync::Arc;
use std::time::Duration;

use super::{MemoryResult, MemoryService};
use crate::store::{Corpus, Embedding, NewMessage, StoredMessage, Synced, UserScope};
use crate::vector::Change;

/// New turns embedded at once when turns are recorded off the request path (the post-processor
/// storing a reply), the newest first; more are left to the background embedder. On the request
/// path only the query is embedded (stored with its turn): the other new turns are in the
/// request's own window, so this request would not search for them anyway.
pub const INLINE_EMBED_TURNS: usize = 4;
/// Rows the background embedder embeds at once (a request needing the single embedding model
/// waits for at most one batch: ~15 ms), and its pause between batches.
const BACKLOG_BATCH: usize = 4;
const BACKLOG_PAUSE: Duration = Duration::from_millis(10);
/// How often the background embedder looks for work nobody woke it for (e.g. a failed batch).
const BACKLOG_RETRY: Duration = Duration::from_secs(30);

/// What recording a chat app's turns did.
#[derive(Clone, Debug, Default)]
pub struct Recorded {
    /// The conversation, or the branch of it, that the turns continue.
    pub conversation: String,
    /// The turns stored now.
    pub stored: Vec<StoredMessage>,
    /// The query's vectors, when one was asked for.
    pub query: Option<super::QueryVectors>,
}

impl MemoryService {
    /// Stores the turns not seen before (aligned by content, see `Store::sync_messages`) and
    /// embeds only those: chat apps resend the whole history every turn, and embedding it again
    /// each time would cost O(turns).
    pub async fn record_messages(
        &self,
        scope: &UserScope,
        conversation: &str,
        agent: &str,
        messages: Vec<NewMessage>,
    ) -> MemoryResult<Recorded> {
        self.record_messages_and_embed(scope, conversation, agent, messages, None)
            .await
    }

    /// As [`Self::record_messages`], also embedding `query`: the pre-processor's query is the
    /// newest user turn, usually the only new text, so it is embedded once, before the write, and
    /// stored with the turn in the same transaction.
    ///
    /// With a query (the request path) no other turn is embedded here; without one at most
    /// [`INLINE_EMBED_TURNS`] (the newest). The rest (a long chat seen for the first time) is left
    /// to the background embedder, and is found by keyword search meanwhile: no request waits
    /// for a backlog.
    pub async fn record_messages_and_embed(
        &self,
        scope: &UserScope,
        conversation: &str,
        agent: &str,
        messages: Vec<NewMessage>,
        query: Option<String>,
    ) -> MemoryResult<Recorded> {
        let query = query.filter(|q| !q.trim().is_empty());
        // The question as asked is also the new turn's vector (stored with it).
        let (known, query_vectors): (Vec<(String, Embedding)>, _) = match &query {
            Some(query) => {
                let vectors = self.query_vectors(query, true).await?;
                let known = vectors
                    .asked
                    .clone()
                    .map(|vector| Embedding {
                        model: self.embedder.model_id().to_owned(),
                        vector,
                    })
                    .map(|e| (query.clone(), e))
                    .into_iter()
                    .collect();
                (known, Some(vectors))
            }
            None => (Vec::new(), None),
        };
        let query_vector = known.first().map(|(_, e)| e.vector.clone());
        let (synced, missing) = self
            .sync_embedded(scope, conversation, agent, messages, known)
            .await?;
        let inline_limit = if query_vector.is_some() {
            0
        } else {
            INLINE_EMBED_TURNS
        };
        let inline = &missing[missing.len().saturating_sub(inline_limit)..];
        if inline.len() < missing.len() {
            self.backlog.notify_one();
        }
        if !inline.is_empty() {
            let embeddings = self
                .embed(inline.iter().map(|m| m.content.clone()).collect())
                .await?;
            let rows: Vec<(i64, Embedding)> = inline.iter().map(|m| m.id).zip(embeddings).collect();
            self.store_embeddings(Corpus::Message, rows).await?;
        }
        Ok(Recorded {
            conversation: synced.conversation,
            stored: synced.stored,
            query: query_vectors,
        })
    }

    /// Stores turns with the vectors already known for some of them (`known`: text and its
    /// embedding) in one transaction, adds those vectors to the user's index, and returns what
    /// was stored and the stored turns still without a vector. No model is called.
    pub(crate) async fn sync_embedded(
        &self,
        scope: &UserScope,
        conversation: &str,
        agent: &str,
        messages: Vec<NewMessage>,
        known: Vec<(String, Embedding)>,
    ) -> MemoryResult<(Synced, Vec<StoredMessage>)> {
        let (scope_for_sync, conversation, agent) =
            (scope.clone(), conversation.to_owned(), agent.to_owned());
        self.blocking(move |store, vectors| {
            let synced = store.sync_messages_embedded(
                &scope_for_sync,
                &conversation,
                &agent,
                &messages,
                &known,
            )?;
            if let Some((_, uid, _)) = synced.embedded.first() {
                let changes: Vec<(u64, Change)> = synced
                    .embedded
                    .iter()
                    .filter_map(|(id, _, generation)| {
                        let message = synced.stored.iter().find(|m| m.id == *id)?;
                        let (_, e) = known.iter().find(|(t, _)| *t == message.content)?;
                        Some((*generation, Change::Add(*id, &e.vector)))
                    })
                    .collect();
                vectors.apply(*uid, Corpus::Message, &changes)?;
            }
            let missing: Vec<StoredMessage> = synced
                .stored
                .iter()
                .filter(|m| !m.content.trim().is_empty())
                .filter(|m| !synced.embedded.iter().any(|(id, _, _)| *id == m.id))
                .cloned()
                .collect();
            Ok((synced, missing))
        })
        .await
    }

    /// Writes vectors of rows and adds them to their users' indexes.
    async fn store_embeddings(
        &self,
        corpus: Corpus,
        rows: Vec<(i64, Embedding)>,
    ) -> MemoryResult<()> {
        self.blocking(move |store, vectors| {
            let written = store.set_embeddings(corpus, &rows)?;
            let mut by_user: std::collections::BTreeMap<i64, Vec<(u64, Change)>> =
                std::collections::BTreeMap::new();
            for ((id, uid, generation), (_, e)) in written.iter().zip(&rows) {
                by_user
                    .entry(*uid)
                    .or_default()
                    .push((*generation, Change::Add(*id, &e.vector)));
            }
            for (uid, changes) in by_user {
                vectors.apply(uid, corpus, &changes)?;
            }
            Ok(())
        })
        .await
    }

    /// Embeds up to `limit` rows of `corpus` that lack a vector of the current model (a backlog of
    /// turns, an import, a model change); returns how many.
    pub async fn embed_pending(&self, corpus: Corpus, limit: usize) -> MemoryResult<usize> {
        let model = self.embedder.model_id().to_owned();
        let rows = self
            .blocking(move |store, _| Ok(store.rows_to_embed(corpus, &model, limit)?))
            .await?;
        if rows.is_empty() {
            return Ok(0);
        }
        let embeddings = self
            .embed(rows.iter().map(|(_, _, t)| t.clone()).collect())
            .await?;
        let updates: Vec<(i64, Embedding)> =
            rows.iter().map(|(id, _, _)| *id).zip(embeddings).collect();
        let count = updates.len();
        self.store_embeddings(corpus, updates).await?;
        Ok(count)
    }

    /// Wakes the backlog embedder: rows were written without vectors.
    pub fn embed_backlog(&self) {
        self.backlog.notify_one();
    }

    /// Embeds, in small batches off the request path, every row left without a vector, whenever
    /// woken by a request that left a backlog (and once at start-up), until `stop`.
    pub fn spawn_backlog_embedder(
        self: &Arc<Self>,
        tasks: &tokio_util::task::TaskTracker,
        stop: tokio_util::sync::CancellationToken,
    ) {
        let this = Arc::clone(self);
        tasks.spawn(async move {
            // The first inference of a model session and the tokenizer's first use are slow
            // (about 0.1 s): paid here at start-up rather than by the first request.
            crate::tokens::count_message("user", "warm up");
            if let Err(error) = this.embedder.warm_up().await {
                tracing::warn!(%error, "the embedding model does not answer");
            }
            loop {
                for corpus in Corpus::ALL {
                    while !stop.is_cancelled() {
                        match this.embed_pending(corpus, BACKLOG_BATCH).await {
                            Ok(0) => break,
                            Ok(count) => {
                                tracing::debug!(count, corpus = corpus.as_str(), "embedded a backlog batch");
                                // Leaves the embedder to requests between batches.
                                tokio::time::sleep(BACKLOG_PAUSE).await;
                            }
                            Err(error) => {
                                tracing::warn!(%error, "embedding the backlog failed; retried later");
                                break;
                            }
                        }
                    }
                }
                tokio::select! {
                    _ = stop.cancelled() => break,
                    _ = this.backlog.notified() => {}
                    _ = tokio::time::sleep(BACKLOG_RETRY) => {}
                }
            }
        });
    }

    /// Embeds every row that lacks a vector of the current model (after a model change).
    pub async fn reindex(&self) -> MemoryResult<usize> {
        let mut total = 0;
        for corpus in Corpus::ALL {
            loop {
                let count = self.embed_pending(corpus, 256).await?;
                if count == 0 {
                    break;
                }
                total += count;
            }
        }
        self.flush().await?;
        Ok(total)
    }
}
