//! The Responses API's response log on the request path, written behind the answer: a finished
//! response goes into an in-memory table of pending writes at once (before the client gets the
//! answer's end), and into the store in the background (`AppState::after_exchange`, drained on
//! shutdown). Every read looks at the pending table first, so a `previous_response_id` sent the
//! moment the answer arrives finds its response, without the store write on the answer's path.
//!
//! The table is this process's. With replicas on one PostgreSQL, the next request of a chain may
//! reach another replica before the write behind the answer is done there: a link (or a response
//! read or deleted by id) missing from the store is then looked up again for a moment
//! ([`SHARED_STORE_WAIT`]) before it is called unknown.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::Notify;

use crate::error::ProxyError;
use crate::store::responses::{chain_messages, messages_of, StoredResponse, MAX_CHAIN};
use crate::store::{now_ms, UserScope};

use super::SharedState;

type Key = (String, String, String);

/// How long a chain lookup on a store shared by replicas waits for a link another replica is
/// still writing.
pub const SHARED_STORE_WAIT: Duration = Duration::from_secs(2);

/// Responses answered but not yet in the store.
#[derive(Default)]
pub struct Pending {
    entries: Mutex<HashMap<Key, StoredResponse>>,
    written: Notify,
}

fn key(scope: &UserScope, id: &str) -> Key {
    (scope.tenant.clone(), scope.user.clone(), id.to_owned())
}

impl Pending {
    fn entries(&self) -> std::sync::MutexGuard<'_, HashMap<Key, StoredResponse>> {
        self.entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn get(&self, scope: &UserScope, id: &str) -> Option<StoredResponse> {
        self.entries().get(&key(scope, id)).cloned()
    }

    /// Waits (boundedly) until the response `id` is no longer waiting for its store write.
    async fn settled(&self, scope: &UserScope, id: &str) {
        let wait = async {
            loop {
                let written = self.written.notified();
                if self.get(scope, id).is_none() {
                    return;
                }
                written.await;
            }
        };
        let _ = tokio::time::timeout(Duration::from_secs(10), wait).await;
    }
}

/// Logs one finished response (unless `store: false`).
pub struct Logger {
    pub state: SharedState,
    pub scope: UserScope,
    pub store: bool,
    pub previous: Option<String>,
    pub new_messages: Vec<Value>,
}

impl Logger {
    /// Makes `response` visible to reads at once, and writes it to the store in the background.
    pub fn log(self, response: Value) {
        if !self.store || response["status"] == "failed" {
            return;
        }
        let mut messages = self.new_messages;
        messages.push(crate::responses::reply::assistant_message(&response));
        let stored = StoredResponse {
            id: response["id"].as_str().unwrap_or_default().to_owned(),
            previous: self.previous,
            messages: Value::Array(messages).to_string(),
            body: response.to_string(),
            created_at_ms: now_ms(),
        };
        let (state, scope) = (self.state, self.scope);
        let entry = key(&scope, &stored.id);
        state
            .pending_responses
            .entries()
            .insert(entry.clone(), stored.clone());
        let tasks = state.after_exchange.clone();
        tasks.spawn(async move {
            let written = state
                .memory
                .blocking(move |store, _| Ok(store.put_response(&scope, &stored)?))
                .await;
            if let Err(error) = written {
                tracing::warn!(%error, "a response could not be logged");
            }
            state.pending_responses.entries().remove(&entry);
            state.pending_responses.written.notify_waiters();
        });
    }
}

/// The messages of this user's logged chain ending in `id`, oldest first (`None`: a link is
/// not logged). Pending responses are the newest links; the store holds the rest.
pub async fn chain(
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
        return Ok(Some(pending));
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
