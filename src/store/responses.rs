//! The response log of the OpenAI Responses API surface, one small area of the store: what each
//! stored response added to its conversation, so that a client sending only
//! `previous_response_id` and its new items gets the whole history rebuilt, and `GET` / `DELETE
//! /v1/responses/{id}` work on an upstream that keeps no state. Scoped per user like everything.

use serde::{Deserialize, Serialize};

use super::{StoreResult, UserScope};

/// Longest chain of `previous_response_id` links followed when rebuilding a history.
pub const MAX_CHAIN: usize = 1000;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StoredResponse {
    /// `resp_…`.
    pub id: String,
    pub previous: Option<String>,
    /// The Chat Completions messages this response added after its predecessor's (its new input
    /// items, then its output), as a JSON array. `instructions` are not part of it: they do not
    /// carry over to the next response.
    pub messages: String,
    /// The response object as the client got it (for `GET`).
    pub body: String,
    pub created_at_ms: i64,
}

pub trait ResponseLog {
    /// Stores (or replaces) responses, each of its user, in one transaction: the log is written
    /// in batches behind the answers, since a commit per response costs more than its row.
    fn put_responses(&self, batch: &[(&UserScope, &StoredResponse)]) -> StoreResult<()>;
    /// Stores (or replaces) a response of this user.
    fn put_response(&self, scope: &UserScope, response: &StoredResponse) -> StoreResult<()> {
        self.put_responses(&[(scope, response)])
    }
    /// This user's response with this id, if any (another user's never).
    fn response(&self, scope: &UserScope, id: &str) -> StoreResult<Option<StoredResponse>>;
    /// Returns whether it existed.
    fn delete_response(&self, scope: &UserScope, id: &str) -> StoreResult<bool>;
    /// The chain ending at `id`, newest first, following `previous` links through this user's
    /// responses, at most `limit` long (one round trip, however long the chain).
    fn response_chain(
        &self,
        scope: &UserScope,
        id: &str,
        limit: usize,
    ) -> StoreResult<Vec<StoredResponse>>;
    /// Retention: deletes every user's responses created before `before_ms`, and beyond each
    /// user's newest `keep_per_user`; returns how many went. A chain that loses a link can no
    /// longer be continued with `previous_response_id` (the client gets 400, as for any unknown
    /// response).
    fn prune_responses(&self, before_ms: i64, keep_per_user: usize) -> StoreResult<u64>;
}

/// The statement of [`ResponseLog::prune_responses`], the same on both backends (`?1`/`$1`: the
/// cut-off time, `?2`/`$2`: how many a user keeps).
pub const PRUNE: &str = "DELETE FROM responses WHERE created_at < {1} OR id IN (
    SELECT id FROM (SELECT id, ROW_NUMBER() OVER (PARTITION BY uid ORDER BY created_at DESC, id DESC)
        AS newest FROM responses) AS ranked WHERE newest > {2})";

/// The messages of the chain ending at `id`, oldest first: `Ok(None)` if a link is missing
/// (the response is unknown to this user, was deleted, or was not stored).
pub fn chain_messages(
    log: &dyn ResponseLog,
    scope: &UserScope,
    id: &str,
) -> StoreResult<Option<Vec<serde_json::Value>>> {
    let chain = log.response_chain(scope, id, MAX_CHAIN + 1)?;
    if chain.len() > MAX_CHAIN {
        return Err(super::StoreError::Invalid(format!(
            "the chain of previous responses is longer than {MAX_CHAIN}"
        )));
    }
    // Complete only if it starts at `id` and ends at a response with no predecessor.
    let complete = chain.first().is_some_and(|first| first.id == id)
        && chain.last().is_some_and(|last| last.previous.is_none());
    if !complete {
        return Ok(None);
    }
    messages_of(&chain).map(Some)
}

/// The messages of a chain given newest first, oldest first.
pub fn messages_of<R: std::borrow::Borrow<StoredResponse>>(
    newest_first: &[R],
) -> StoreResult<Vec<serde_json::Value>> {
    let mut messages = Vec::new();
    for stored in newest_first.iter().rev() {
        let stored = stored.borrow();
        let part: Vec<serde_json::Value> = serde_json::from_str(&stored.messages).map_err(|e| {
            super::StoreError::Invalid(format!("stored response {}: {e}", stored.id))
        })?;
        messages.extend(part);
    }
    Ok(messages)
}
