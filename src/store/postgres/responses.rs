//! The response log (see [`crate::store::responses`]) on PostgreSQL.

use super::{ensure_uid, find_uid, PostgresStore};
use crate::store::responses::{ResponseLog, StoredResponse};
use crate::store::{StoreResult, UserScope};

fn stored(row: &tokio_postgres::Row) -> StoredResponse {
    StoredResponse {
        id: row.get(0),
        previous: row.get(1),
        messages: row.get(2),
        body: row.get(3),
        created_at_ms: row.get(4),
    }
}

impl ResponseLog for PostgresStore {
    fn put_responses(&self, batch: &[(&UserScope, &StoredResponse)]) -> StoreResult<()> {
        in_transaction!(self, |tx| {
            for (scope, response) in batch {
                let uid = ensure_uid(tx, scope).await?;
                tx.execute(
                    "INSERT INTO responses (uid, response_id, previous, messages, body, created_at)
                     VALUES ($1, $2, $3, $4, $5, $6)
                     ON CONFLICT (uid, response_id) DO UPDATE SET previous = EXCLUDED.previous,
                         messages = EXCLUDED.messages, body = EXCLUDED.body",
                    &[
                        &uid,
                        &response.id,
                        &response.previous,
                        &response.messages,
                        &response.body,
                        &response.created_at_ms,
                    ],
                )
                .await?;
            }
        })
    }

    fn response(&self, scope: &UserScope, id: &str) -> StoreResult<Option<StoredResponse>> {
        Ok(self.response_chain(scope, id, 1)?.into_iter().next())
    }

    fn delete_response(&self, scope: &UserScope, id: &str) -> StoreResult<bool> {
        self.run(|pool| async move {
            let client = pool.get().await?;
            let Some(uid) = find_uid(&**client, scope).await? else {
                return Ok(false);
            };
            let deleted = client
                .execute(
                    "DELETE FROM responses WHERE uid = $1 AND response_id = $2",
                    &[&uid, &id],
                )
                .await?;
            Ok(deleted > 0)
        })
    }

    fn prune_responses(&self, before_ms: i64, keep_per_user: usize) -> StoreResult<u64> {
        let statement = crate::store::responses::PRUNE
            .replace("{1}", "$1")
            .replace("{2}", "$2");
        let keep = i64::try_from(keep_per_user).unwrap_or(i64::MAX);
        self.run(|pool| async move {
            let client = pool.get().await?;
            Ok(client.execute(&statement, &[&before_ms, &keep]).await?)
        })
    }

    /// The chain from `id` back through `previous` links (newest first), in one recursive query.
    fn response_chain(
        &self,
        scope: &UserScope,
        id: &str,
        limit: usize,
    ) -> StoreResult<Vec<StoredResponse>> {
        self.run(|pool| async move {
            let client = pool.get().await?;
            let Some(uid) = find_uid(&**client, scope).await? else {
                return Ok(Vec::new());
            };
            let rows = client
                .query(
                    "WITH RECURSIVE chain(response_id, previous, messages, body, created_at,
                                          depth) AS (
                         SELECT response_id, previous, messages, body, created_at, 0
                         FROM responses WHERE uid = $1 AND response_id = $2
                         UNION ALL
                         SELECT r.response_id, r.previous, r.messages, r.body, r.created_at,
                                chain.depth + 1
                         FROM responses r JOIN chain
                           ON r.uid = $1 AND r.response_id = chain.previous
                         WHERE chain.depth + 1 < $3::BIGINT)
                     SELECT response_id, previous, messages, body, created_at FROM chain
                     ORDER BY depth",
                    &[&uid, &id, &(limit as i64)],
                )
                .await?;
            Ok(rows.iter().map(stored).collect())
        })
    }
}
