//! Agents' turn locks across replicas: a session-level advisory lock per (tenant, user, agent),
//! held on a connection of its own for the length of the turn (or management edit). The server
//! queues the waiters; if a replica dies, its connection closes and the lock is released.

use deadpool_postgres::Object;

use super::PostgresStore;
use crate::store::{content_hash, StoreResult, TurnLock, UserScope};

/// The advisory lock namespace of turn locks (the two-key form: apart from the one-key locks of
/// migrations and job claims).
const NAMESPACE: i32 = 0x6d65_6d70;

fn key(scope: &UserScope, agent: &str) -> i32 {
    let digest = content_hash(&format!("{}\u{0}{}\u{0}{agent}", scope.tenant, scope.user));
    // 32 bits of the digest: two agents sharing a key only wait for each other.
    u32::from_str_radix(&digest[..8], 16).map_or(0, |k| k as i32)
}

struct Held {
    client: Option<Object>,
    key: i32,
    runtime: tokio::runtime::Handle,
}

impl Drop for Held {
    fn drop(&mut self) {
        let Some(client) = self.client.take() else {
            return;
        };
        let key = self.key;
        self.runtime.spawn(async move {
            let unlocked = client
                .query_one("SELECT pg_advisory_unlock($1, $2)", &[&NAMESPACE, &key])
                .await
                .is_ok_and(|row| row.get::<_, bool>(0));
            if !unlocked {
                // Never hand a connection that may still hold the lock back to the pool: closing
                // it releases the lock.
                drop(Object::take(client));
            }
        });
    }
}

impl PostgresStore {
    pub(super) fn turn_lock(
        &self,
        scope: &UserScope,
        agent: &str,
    ) -> StoreResult<Option<TurnLock>> {
        let key = key(scope, agent);
        let locks = self.locks.clone();
        let client = self.run(|_| async move {
            let client = locks.get().await?;
            client
                .execute("SELECT pg_advisory_lock($1, $2)", &[&NAMESPACE, &key])
                .await?;
            Ok(client)
        })?;
        let runtime = self.handle()?;
        Ok(Some(TurnLock(Box::new(Held {
            client: Some(client),
            key,
            runtime,
        }))))
    }
}
