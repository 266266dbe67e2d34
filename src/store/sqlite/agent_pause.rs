//! An agent turn paused on the client's tool calls, in SQLite: one row per agent holding the
//! turn's state (opaque JSON here) until the client's results resume it. Appending the agent's
//! messages (a finished turn) and resetting the agent delete it.

use rusqlite::{params, Connection, OptionalExtension, Transaction};

use super::{ensure_uid, find_uid};
use crate::store::{now_ms, StoreResult, UserScope};

pub fn get(connection: &Connection, scope: &UserScope, agent: &str) -> StoreResult<Option<String>> {
    let Some(uid) = find_uid(connection, scope)? else {
        return Ok(None);
    };
    Ok(connection
        .query_row(
            "SELECT state FROM agent_pauses WHERE uid = ?1 AND agent = ?2",
            params![uid, agent],
            |row| row.get(0),
        )
        .optional()?)
}

pub fn set(
    tx: &Transaction,
    scope: &UserScope,
    agent: &str,
    paused: Option<(&str, &str)>,
) -> StoreResult<()> {
    match paused {
        Some((turn, state)) => {
            let uid = ensure_uid(tx, scope)?;
            tx.execute(
                "INSERT INTO agent_pauses (uid, agent, turn, state, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (uid, agent) DO UPDATE SET turn = ?3, state = ?4, created_at = ?5",
                params![uid, agent, turn, state, now_ms()],
            )?;
        }
        None => {
            if let Some(uid) = find_uid(tx, scope)? {
                clear(tx, uid, agent)?;
            }
        }
    }
    Ok(())
}

pub fn clear(tx: &Transaction, uid: i64, agent: &str) -> StoreResult<usize> {
    Ok(tx.execute(
        "DELETE FROM agent_pauses WHERE uid = ?1 AND agent = ?2",
        params![uid, agent],
    )?)
}
