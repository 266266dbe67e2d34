//! The response log (see [`crate::store::responses`]) in SQLite.

use rusqlite::{params, Connection, OptionalExtension, Transaction};

use super::{ensure_uid, find_uid};
use crate::store::responses::StoredResponse;
use crate::store::{StoreResult, UserScope};

pub fn put(tx: &Transaction, scope: &UserScope, response: &StoredResponse) -> StoreResult<()> {
    let uid = ensure_uid(tx, scope)?;
    tx.prepare_cached(
        "INSERT INTO responses (uid, response_id, previous, messages, body, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT (uid, response_id) DO UPDATE SET previous = excluded.previous,
             messages = excluded.messages, body = excluded.body",
    )?
    .execute(params![
        uid,
        response.id,
        response.previous,
        response.messages,
        response.body,
        response.created_at_ms
    ])?;
    Ok(())
}

/// A row of `response_id, previous, messages, body, created_at`.
fn stored(row: &rusqlite::Row) -> rusqlite::Result<StoredResponse> {
    Ok(StoredResponse {
        id: row.get(0)?,
        previous: row.get(1)?,
        messages: row.get(2)?,
        body: row.get(3)?,
        created_at_ms: row.get(4)?,
    })
}

pub fn get(
    connection: &Connection,
    scope: &UserScope,
    id: &str,
) -> StoreResult<Option<StoredResponse>> {
    let Some(uid) = find_uid(connection, scope)? else {
        return Ok(None);
    };
    Ok(connection
        .query_row(
            "SELECT response_id, previous, messages, body, created_at FROM responses
             WHERE uid = ?1 AND response_id = ?2",
            params![uid, id],
            stored,
        )
        .optional()?)
}

/// The chain from `id` back through `previous` links (newest first), in one recursive query.
pub fn chain(
    connection: &Connection,
    scope: &UserScope,
    id: &str,
    limit: usize,
) -> StoreResult<Vec<StoredResponse>> {
    let Some(uid) = find_uid(connection, scope)? else {
        return Ok(Vec::new());
    };
    let mut statement = connection.prepare_cached(
        "WITH RECURSIVE chain(response_id, previous, messages, body, created_at, depth) AS (
             SELECT response_id, previous, messages, body, created_at, 0 FROM responses
             WHERE uid = ?1 AND response_id = ?2
             UNION ALL
             SELECT r.response_id, r.previous, r.messages, r.body, r.created_at, chain.depth + 1
             FROM responses r JOIN chain ON r.uid = ?1 AND r.response_id = chain.previous
             WHERE chain.depth + 1 < ?3)
         SELECT response_id, previous, messages, body, created_at FROM chain ORDER BY depth",
    )?;
    let rows = statement
        .query_map(params![uid, id, limit as i64], stored)?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

pub fn delete(tx: &Transaction, scope: &UserScope, id: &str) -> StoreResult<bool> {
    let Some(uid) = find_uid(tx, scope)? else {
        return Ok(false);
    };
    let deleted = tx.execute(
        "DELETE FROM responses WHERE uid = ?1 AND response_id = ?2",
        params![uid, id],
    )?;
    Ok(deleted > 0)
}

impl crate::store::responses::ResponseLog for super::SqliteStore {
    fn put_responses(&self, batch: &[(&UserScope, &StoredResponse)]) -> StoreResult<()> {
        self.write(|tx| {
            for (scope, response) in batch {
                put(tx, scope, response)?;
            }
            Ok(())
        })
    }

    fn response(&self, scope: &UserScope, id: &str) -> StoreResult<Option<StoredResponse>> {
        self.read(|connection| get(connection, scope, id))
    }

    fn delete_response(&self, scope: &UserScope, id: &str) -> StoreResult<bool> {
        self.erase(|tx| delete(tx, scope, id))
    }

    fn prune_responses(&self, before_ms: i64, keep_per_user: usize) -> StoreResult<u64> {
        let statement = crate::store::responses::PRUNE
            .replace("{1}", "?1")
            .replace("{2}", "?2");
        let keep = i64::try_from(keep_per_user).unwrap_or(i64::MAX);
        self.erase(|tx| Ok(tx.execute(&statement, params![before_ms, keep])? as u64))
    }

    fn response_chain(
        &self,
        scope: &UserScope,
        id: &str,
        limit: usize,
    ) -> StoreResult<Vec<StoredResponse>> {
        self.read(|connection| chain(connection, scope, id, limit))
    }
}
