//! The Responses API's response log on the request path, written behind the answer: a finished
//! response goes into an in-memory table of pending writes at once (before the client gets the
//! answer's end), and into the store in the background (`AppState::after_exchange`, drained on
//! shutdown), in batches: one writer at a time takes every response queued meanwhile and
//! writes them in one transaction, so under load a commit serves many responses. Every read
//! looks at the pending table first, so a `previous_response_id` sent the moment the answer
//! arrives finds its response, without the store write on the answer's path.
//!
//! The table is this process's. With replicas on one PostgreSQL, the next request of a chain may
//! reach another replica before the write behind the answer is done there: a link (or a response
//! read or deleted by id) missing from the store is then looked up again for a moment
//! ([`SHARED_STORE_WAIT`]) before it is called unknown.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::conversation::request::Message;
use crate::error::ProxyError;
use crate::store::responses::{chain_messages, messages_of, StoredResponse, MAX_CHAIN};
use crate::store::{now_ms, UserScope};

use crate::server::SharedState;

use super::pending::{key, Key, BATCH};

/// How long the writer waits for more responses before a commit; reads look at the pending
/// table, so nobody waits for it.
const LINGER: Duration = Duration::from_millis(10);

/// How long a chain lookup on a store shared by replicas waits for a link another replica is
/// still writing.
pub const SHARED_STORE_WAIT: Duration = Duration::from_secs(2);

/// Logs one finished response (unless `store: false`).
pub struct Logger {
    pub state: SharedState,
    pub scope: UserScope,
    pub store: bool,
    pub previous: Option<String>,
    pub new_messages: Vec<Message>,
    /// Whether the response's body is logged too (`GET /v1/responses/{id}` serves it), or only
    /// its conversation, when the upstream keeps the body.
    pub keep_body: bool,
}

impl Logger {
    /// Makes `response` visible to reads at once, and writes it to the store in the background.
    pub fn log(self, response: Value) {
        if !self.store || response["status"] == "failed" {
            return;
        }
        // Stored as Chat Completions messages, the form every logged response has had.
        let mut messages: Vec<Value> = self
            .new_messages
            .iter()
            .map(crate::openai::neutral::chat_message)
            .filter_map(|message| serde_json::to_value(message).ok())
            .collect();
        messages.push(crate::server::responses::reply::assistant_message(
            &response,
        ));
        let stored = Arc::new(StoredResponse {
            id: response["id"].as_str().unwrap_or_default().to_owned(),
            previous: self.previous,
            messages: Value::Array(messages).to_string(),
            body: if self.keep_body {
                response.to_string()
            } else {
                String::new()
            },
            created_at_ms: now_ms(),
        });
        let (state, scope) = (self.state, self.scope);
        let pending = &state.pending_responses;
        pending
            .entries()
            .insert(key(&scope, &stored.id), Arc::clone(&stored));
        pending.queue().push((scope, stored));
        if !pending.writing.swap(true, Ordering::SeqCst) {
            let tasks = state.after_exchange.clone();
            tasks.spawn(write_queued(state));
        }
    }
}

/// The writer: writes the queued responses, a batch per transaction, until none is left. Before
/// a batch it lingers a moment for more to arrive (a group commit): a commit costs a write of
/// every page it touches, whether it adds one row or a hundred, and a writer that took what was
/// there at once committed about two rows at a time under load (`memproxy bench proxy`).
async fn write_queued(state: SharedState) {
    loop {
        if state.pending_responses.queue().len() < BATCH {
            tokio::time::sleep(LINGER).await;
        }
        let Some(batch) = state.pending_responses.next_batch() else {
            break;
        };
        let keys: Vec<Key> = batch.iter().map(|(s, r)| key(s, &r.id)).collect();
        let written = state
            .memory
            .blocking(move |store, _| {
                let rows: Vec<_> = batch.iter().map(|(s, r)| (s, r.as_ref())).collect();
                Ok(store.put_responses(&rows)?)
            })
            .await;
        if let Err(error) = written {
            tracing::warn!(%error, responses = keys.len(), "responses could not be logged");
        }
        let mut entries = state.pending_responses.entries();
        for entry in &keys {
            entries.remove(entry);
        }
        drop(entries);
        state.pending_responses.written.notify_waiters();
    }
}

/// The messages of this user's logged chain ending in `id`, oldest first (`None`: a link is
/// not logged). Pending responses are the newest links; the store holds the rest.
pub async fn chain(
    state: &SharedState,
    scope: &UserScope,
    id: &str,
) -> Result<Option<Vec<Message>>, ProxyError> {
    let Some(stored) = stored_chain(state, scope, id).await? else {
        return Ok(None);
    };
    stored
        .into_iter()
        .map(|message| {
            serde_json::from_value::<crate::openai::ChatMessage>(message)
                .map(|message| message.neutral())
                .map_err(|error| ProxyError::Internal(format!("a logged response: {error}")))
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

/// The conversation of the chain ending at `id`, as logged (Chat Completions messages).
async fn stored_chain(
    state: &SharedState,
    scope: &UserScope,
    id: &str,
) -> Result<Option<Vec<Value>>, ProxyError> {
    let mut newer = Vec::new();
    let mut at = id.to_owned();
    while let Some(stored) = state.pending_responses.get(scope, &at) {
        if newer.len() >= MAX_CHAIN {
            return Err(ProxyError::invalid(
                format!("The chain of previous responses is longer than {MAX_CHAIN}."),
                Some("previous_response_id"),
            ));
        }
        let previous = stored.previous.clone();
        newer.push(stored);
        match previous {
            Some(previous) => at = previous,
            None => return Ok(Some(messages_of(&newer)?)),
        }
    }
    let shared = shared_store(state);
    let waited = std::time::Instant::now();
    let older = loop {
        let (lookup, link) = (scope.clone(), at.clone());
        let older = state
            .memory
            .blocking(move |store, _| Ok(chain_messages(store, &lookup, &link)?))
            .await?;
        if older.is_some() || !shared || waited.elapsed() >= SHARED_STORE_WAIT {
            break older;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let Some(mut messages) = older else {
        return Ok(None);
    };
    messages.extend(messages_of(&newer)?);
    Ok(Some(messages))
}

/// This user's logged response `id` (pending or stored), deleted too when `delete`.
pub async fn stored(
    state: &SharedState,
    scope: UserScope,
    id: &str,
    delete: bool,
) -> Result<Option<StoredResponse>, ProxyError> {
    if delete {
        // A delete must not be overtaken by the write still under way.
        state.pending_responses.settled(&scope, id).await;
    } else if let Some(pending) = state.pending_responses.get(&scope, id) {
        return Ok(Some(Arc::unwrap_or_clone(pending)));
    }
    let waited = std::time::Instant::now();
    loop {
        let (who, lookup) = (scope.clone(), id.to_owned());
        let found = state
            .memory
            .blocking(move |store, _| {
                let found = store.response(&who, &lookup)?;
                if delete && found.is_some() {
                    store.delete_response(&who, &lookup)?;
                }
                Ok(found)
            })
            .await?;
        // Another replica may still be writing it behind its answer.
        if found.is_some() || !shared_store(state) || waited.elapsed() >= SHARED_STORE_WAIT {
            return Ok(found);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Whether other replicas write to this store too.
fn shared_store(state: &SharedState) -> bool {
    state.config.store.backend == crate::store::Backend::Postgres
}
