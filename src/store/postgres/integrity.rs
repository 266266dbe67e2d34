//! The consistency check on PostgreSQL: the same questions as SQLite's, in its SQL. PostgreSQL
//! checks its own pages and enforces every foreign key, so there is no storage or orphan-row scan.

use super::PostgresStore;
use crate::store::{Integrity, StoreResult};

/// Conversations whose progress is past their last turn (a branch's own turns start at its fork).
const PAST_END: &str = "FROM conversations c WHERE c.extracted_through > COALESCE(
    (SELECT MAX(m.position) FROM messages m WHERE m.conversation_id = c.id), c.fork_position - 1)";

impl Integrity for PostgresStore {
    fn storage_problems(&self) -> StoreResult<Vec<String>> {
        Ok(Vec::new())
    }

    fn orphan_rows(&self, _repair: bool) -> StoreResult<Vec<(String, u64)>> {
        Ok(Vec::new())
    }

    fn progress_past_end(&self, repair: bool) -> StoreResult<u64> {
        self.run(|pool| async move {
            let client = pool.get().await?;
            let found: i64 = client
                .query_one(&format!("SELECT COUNT(*) {PAST_END}"), &[])
                .await?
                .get(0);
            if repair && found > 0 {
                client
                    .execute(
                        &format!(
                            "UPDATE conversations SET extracted_through = COALESCE(
                                (SELECT MAX(m.position) FROM messages m
                                 WHERE m.conversation_id = conversations.id),
                                fork_position - 1)
                             WHERE id IN (SELECT c.id {PAST_END})"
                        ),
                        &[],
                    )
                    .await?;
            }
            Ok(found as u64)
        })
    }

    fn blank_memories(&self) -> StoreResult<u64> {
        self.run(|pool| async move {
            let row = pool
                .get()
                .await?
                .query_one(
                    "SELECT COUNT(*) FROM memories WHERE valid_until IS NULL AND length(trim(text)) = 0",
                    &[],
                )
                .await?;
            Ok(row.get::<_, i64>(0) as u64)
        })
    }

    fn stalled_jobs(&self, before_ms: i64) -> StoreResult<Vec<i64>> {
        self.run(|pool| async move {
            let rows = pool
                .get()
                .await?
                .query(
                    "SELECT id FROM jobs WHERE state = 'running' AND updated_at <= $1 ORDER BY id",
                    &[&before_ms],
                )
                .await?;
            Ok(rows.iter().map(|row| row.get(0)).collect())
        })
    }

    fn job_states(&self) -> StoreResult<Vec<(String, u64)>> {
        self.run(|pool| async move {
            let rows = pool
                .get()
                .await?
                .query(
                    "SELECT state, COUNT(*) FROM jobs GROUP BY state ORDER BY state",
                    &[],
                )
                .await?;
            Ok(rows
                .iter()
                .map(|row| (row.get(0), row.get::<_, i64>(1) as u64))
                .collect())
        })
    }
}
