//! The Responses log's table of responses answered but not yet in the store ([`Pending`]): what
//! reads look at first, and the queue the log's one writer empties in batches.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;

use crate::store::responses::StoredResponse;
use crate::store::UserScope;

pub(super) type Key = (String, String, String);

/// Responses answered but not yet in the store.
#[derive(Default)]
pub struct Pending {
    pub(super) entries: Mutex<HashMap<Key, Arc<StoredResponse>>>,
    /// Responses waiting for the writer, oldest first.
    pub(super) queue: Mutex<Vec<(UserScope, Arc<StoredResponse>)>>,
    /// Whether a writer is running (it empties the queue before it stops).
    pub(super) writing: AtomicBool,
    pub(super) written: Notify,
}

/// The most responses one transaction writes.
pub(super) const BATCH: usize = 256;

pub(super) fn key(scope: &UserScope, id: &str) -> Key {
    (scope.tenant.clone(), scope.user.clone(), id.to_owned())
}

impl Pending {
    pub(super) fn entries(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Arc<StoredResponse>>> {
        self.entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(super) fn queue(&self) -> std::sync::MutexGuard<'_, Vec<(UserScope, Arc<StoredResponse>)>> {
        self.queue
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The next batch for the writer; `None` (and the writer stops) when the queue is empty.
    /// A response queued while the writer stops either is taken here or starts a new writer.
    pub(super) fn next_batch(&self) -> Option<Vec<(UserScope, Arc<StoredResponse>)>> {
        loop {
            {
                let mut queue = self.queue();
                if !queue.is_empty() {
                    let take = queue.len().min(BATCH);
                    return Some(queue.drain(..take).collect());
                }
            }
            self.writing.store(false, Ordering::SeqCst);
            if self.queue().is_empty() || self.writing.swap(true, Ordering::SeqCst) {
                return None;
            }
        }
    }

    pub(super) fn get(&self, scope: &UserScope, id: &str) -> Option<Arc<StoredResponse>> {
        self.entries().get(&key(scope, id)).cloned()
    }

    /// Waits (boundedly) until the response `id` is no longer waiting for its store write.
    pub(super) async fn settled(&self, scope: &UserScope, id: &str) {
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
