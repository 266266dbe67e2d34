//! The PostgreSQL store's users: each row of memory belongs to one (tenant, name); erasing a user
//! removes every row of theirs and vacuums the tables that held them.

use super::{ensure_uid, find_uid, PostgresStore};
use crate::store::{StoreResult, UserScope, Users};

impl Users for PostgresStore {
    fn ensure_user(&self, scope: &UserScope) -> StoreResult<i64> {
        self.run(|pool| async move { ensure_uid(&**pool.get().await?, scope).await })
    }

    fn find_user(&self, scope: &UserScope) -> StoreResult<Option<i64>> {
        self.run(|pool| async move { find_uid(&**pool.get().await?, scope).await })
    }

    fn list_users(&self, tenant: &str) -> StoreResult<Vec<String>> {
        self.run(|pool| async move {
            let client = pool.get().await?;
            let rows = client
                .query(
                    "SELECT name FROM users WHERE tenant = $1 ORDER BY name",
                    &[&tenant],
                )
                .await?;
            Ok(rows.iter().map(|row| row.get(0)).collect())
        })
    }

    fn list_tenants(&self) -> StoreResult<Vec<String>> {
        self.run(|pool| async move {
            let client = pool.get().await?;
            let rows = client
                .query("SELECT DISTINCT tenant FROM users ORDER BY tenant", &[])
                .await?;
            Ok(rows.iter().map(|row| row.get(0)).collect())
        })
    }

    fn delete_user(&self, scope: &UserScope) -> StoreResult<bool> {
        self.run(|pool| async move {
            let client = pool.get().await?;
            // Cascades to every table that holds the user's memory.
            let deleted = client
                .execute(
                    "DELETE FROM users WHERE tenant = $1 AND name = $2",
                    &[&scope.tenant, &scope.user],
                )
                .await?;
            if deleted > 0 {
                // The deleted rows stay in the table files as dead tuples until vacuumed; VACUUM
                // prunes them so no query, dump or replica sees them again (docs/postgres.md
                // says what stays on disk until PostgreSQL reuses the space).
                client.batch_execute(USER_TABLES_VACUUM).await?;
            }
            Ok(deleted > 0)
        })
    }
}

/// Every table that holds a user's words, vacuumed after the user is deleted.
const USER_TABLES_VACUUM: &str = "VACUUM users, conversations, messages, memories, memory_events, \
     archival_passages, summaries, core_blocks, agents, agent_steps, agent_pauses, shared_blocks, \
     block_attachments, responses, jobs";
