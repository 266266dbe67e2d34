//! The consistency check on SQLite: `PRAGMA integrity_check`, `PRAGMA foreign_key_check` for rows
//! whose parent is gone, and the queries the check shares in meaning with PostgreSQL's.

use rusqlite::params;

use super::SqliteStore;
use crate::store::{Integrity, StoreResult};

/// Conversations whose progress is past their last turn (a branch's own turns start at its fork).
const PAST_END: &str = "FROM conversations c WHERE c.extracted_through > COALESCE(
    (SELECT MAX(m.position) FROM messages m WHERE m.conversation_id = c.id), c.fork_position - 1)";

impl Integrity for SqliteStore {
    fn read_only(&self) -> bool {
        self.read_only
    }

    fn storage_problems(&self) -> StoreResult<Vec<String>> {
        self.read(|c| {
            // FTS5 keeps the shape of its index (which segments exist) cached on the connection
            // and refreshes it when a cursor opens, but its integrity check does not. Checked on
            // a reader whose cache predates the writer's merges, segments merged away since
            // look missing: "corruption" that is not there. So one read transaction: a cursor on
            // each FTS table first (refreshing the cache to this snapshot), then the check.
            let snapshot = c.unchecked_transaction()?;
            let mut tables = c.prepare(
                "SELECT name FROM sqlite_schema
                 WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL TABLE % USING fts5%'",
            )?;
            let tables = tables
                .query_map([], |row| row.get::<_, String>(0))?
                .collect::<Result<Vec<_>, _>>()?;
            for table in tables {
                let mut cursor = c.prepare(&format!("SELECT rowid FROM \"{table}\" LIMIT 1"))?;
                cursor.query([])?.next()?;
            }
            let mut statement = c.prepare("PRAGMA integrity_check")?;
            let lines = statement
                .query_map([], |row| row.get::<_, String>(0))?
                .collect::<Result<Vec<_>, _>>()?;
            let problems = lines.into_iter().filter(|line| line != "ok").collect();
            snapshot.commit()?;
            Ok(problems)
        })
    }

    fn orphan_rows(&self, repair: bool) -> StoreResult<Vec<(String, u64)>> {
        // (table, rowid): the rowid is null only for a table without rowids (memproxy has none).
        let find = |c: &rusqlite::Connection| -> StoreResult<Vec<(String, Option<i64>)>> {
            let mut statement = c.prepare("PRAGMA foreign_key_check")?;
            let rows = statement
                .query_map([], |row| {
                    Ok((row.get::<_, String>(0)?, row.get::<_, Option<i64>>(1)?))
                })?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(rows)
        };
        let orphans = if repair {
            self.write(|tx| {
                let orphans = find(tx)?;
                for (table, rowid) in orphans.iter().filter_map(|(t, r)| Some((t, (*r)?))) {
                    tx.execute(
                        &format!("DELETE FROM \"{table}\" WHERE rowid = ?1"),
                        params![rowid],
                    )?;
                }
                Ok(orphans)
            })?
        } else {
            self.read(find)?
        };
        let mut counts: Vec<(String, u64)> = Vec::new();
        for (table, _) in orphans {
            match counts.iter_mut().find(|(t, _)| *t == table) {
                Some((_, count)) => *count += 1,
                None => counts.push((table, 1)),
            }
        }
        Ok(counts)
    }

    fn progress_past_end(&self, repair: bool) -> StoreResult<u64> {
        let count = |c: &rusqlite::Connection| -> StoreResult<u64> {
            let n: i64 =
                c.query_row(&format!("SELECT COUNT(*) {PAST_END}"), [], |row| row.get(0))?;
            Ok(n as u64)
        };
        if !repair {
            return self.read(count);
        }
        self.write(|tx| {
            let found = count(tx)?;
            tx.execute(
                &format!(
                    "UPDATE conversations SET extracted_through = COALESCE(
                        (SELECT MAX(m.position) FROM messages m WHERE m.conversation_id = conversations.id),
                        fork_position - 1)
                     WHERE id IN (SELECT c.id {PAST_END})"
                ),
                [],
            )?;
            Ok(found)
        })
    }

    fn blank_memories(&self) -> StoreResult<u64> {
        self.read(|c| {
            let n: i64 = c.query_row(
                "SELECT COUNT(*) FROM memories WHERE valid_until IS NULL AND length(trim(text)) = 0",
                [],
                |row| row.get(0),
            )?;
            Ok(n as u64)
        })
    }

    fn stalled_jobs(&self, before_ms: i64) -> StoreResult<Vec<i64>> {
        self.read(|c| {
            let mut statement = c.prepare(
                "SELECT id FROM jobs WHERE state = 'running' AND updated_at <= ?1 ORDER BY id",
            )?;
            let ids = statement
                .query_map(params![before_ms], |row| row.get(0))?
                .collect::<Result<Vec<i64>, _>>()?;
            Ok(ids)
        })
    }

    fn job_states(&self) -> StoreResult<Vec<(String, u64)>> {
        self.read(|c| {
            let mut statement =
                c.prepare("SELECT state, COUNT(*) FROM jobs GROUP BY state ORDER BY state")?;
            let states = statement
                .query_map([], |row| {
                    Ok((row.get::<_, String>(0)?, row.get::<_, i64>(1)? as u64))
                })?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(states)
        })
    }
}
