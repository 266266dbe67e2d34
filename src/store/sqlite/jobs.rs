//! The durable job queue: post-processing work that must survive restarts.
//!
//! A job is claimed by flipping it to `running` inside the write transaction, so two workers never
//! take the same job; jobs found `running` at start-up were interrupted and go back to the queue,
//! and a job `running` past its lease is claimed again.

use rusqlite::{params, Connection, OptionalExtension, Row, Transaction};

use super::ensure_uid;
use crate::store::{now_ms, Job, NewJob, Page, StoreResult, UserScope};

const JOB_COLUMNS: &str = "j.id, j.kind, u.tenant, u.name, j.payload, j.state, j.attempts, \
     j.run_after, j.last_error";

fn job_row(row: &Row) -> rusqlite::Result<Job> {
    let tenant: Option<String> = row.get(2)?;
    let user: Option<String> = row.get(3)?;
    let payload: String = row.get(4)?;
    Ok(Job {
        id: row.get(0)?,
        kind: row.get(1)?,
        scope: tenant
            .zip(user)
            .map(|(tenant, user)| UserScope { tenant, user }),
        payload: serde_json::from_str(&payload).unwrap_or(serde_json::Value::Null),
        state: row.get(5)?,
        attempts: row.get(6)?,
        run_after_ms: row.get(7)?,
        last_error: row.get(8)?,
    })
}

const MAX_POSTPONE_MS: i64 = 60_000;

pub fn enqueue(tx: &Transaction, job: &NewJob) -> StoreResult<i64> {
    let uid = match &job.scope {
        Some(scope) => Some(ensure_uid(tx, scope)?),
        None => None,
    };
    let now = now_ms();
    if let Some(key) = &job.dedupe_key {
        let pending: Option<i64> = tx
            .query_row(
                "SELECT id FROM jobs WHERE dedupe_key = ?1 AND state = 'queued'",
                [key],
                |row| row.get(0),
            )
            .optional()?;
        if let Some(id) = pending {
            // Debounce: one pending job per key, started after the latest request for it, but
            // never postponed more than MAX_POSTPONE past its creation (a busy conversation must
            // still be processed).
            tx.execute(
                "UPDATE jobs SET payload = ?1, updated_at = ?3,
                     run_after = MIN(MAX(run_after, ?2), created_at + ?5) WHERE id = ?4",
                params![
                    job.payload.to_string(),
                    job.run_after_ms,
                    now,
                    id,
                    MAX_POSTPONE_MS
                ],
            )?;
            return Ok(id);
        }
    }
    tx.execute(
        "INSERT INTO jobs (uid, kind, dedupe_key, payload, state, attempts, run_after, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, 'queued', 0, ?5, ?6, ?6)",
        params![uid, job.kind, job.dedupe_key, job.payload.to_string(), job.run_after_ms, now],
    )?;
    Ok(tx.last_insert_rowid())
}

pub fn claim(tx: &Transaction, now: i64, lease_ms: i64) -> StoreResult<Option<Job>> {
    // A job `running` for longer than the lease lost its worker (a crashed replica, a run that
    // never reported back): it is taken again rather than waiting for a restart.
    let job = tx
        .query_row(
            &format!(
                "SELECT {JOB_COLUMNS} FROM jobs j LEFT JOIN users u ON u.id = j.uid
                 WHERE (j.state = 'queued' AND j.run_after <= ?1)
                    OR (j.state = 'running' AND j.updated_at <= ?1 - ?2)
                 ORDER BY j.run_after, j.id LIMIT 1"
            ),
            params![now, lease_ms],
            job_row,
        )
        .optional()?;
    let Some(mut job) = job else {
        return Ok(None);
    };
    tx.execute(
        "UPDATE jobs SET state = 'running', attempts = attempts + 1, updated_at = ?1 WHERE id = ?2",
        params![now_ms(), job.id],
    )?;
    job.state = "running".to_owned();
    job.attempts += 1;
    Ok(Some(job))
}

pub fn complete(tx: &Transaction, id: i64) -> StoreResult<()> {
    tx.execute(
        "UPDATE jobs SET state = 'done', last_error = NULL, updated_at = ?1 WHERE id = ?2",
        params![now_ms(), id],
    )?;
    Ok(())
}

pub fn fail(tx: &Transaction, id: i64, error: &str, retry_at: Option<i64>) -> StoreResult<()> {
    match retry_at {
        Some(at) => tx.execute(
            "UPDATE jobs SET state = 'queued', last_error = ?1, run_after = ?2, updated_at = ?3 WHERE id = ?4",
            params![error, at, now_ms(), id],
        )?,
        None => tx.execute(
            "UPDATE jobs SET state = 'failed', last_error = ?1, updated_at = ?2 WHERE id = ?3",
            params![error, now_ms(), id],
        )?,
    };
    Ok(())
}

pub fn requeue_interrupted(tx: &Transaction) -> StoreResult<usize> {
    Ok(tx.execute(
        "UPDATE jobs SET state = 'queued', updated_at = ?1 WHERE state = 'running'",
        [now_ms()],
    )?)
}

pub fn list(connection: &Connection, state: Option<&str>, page: Page) -> StoreResult<Vec<Job>> {
    let mut statement = connection.prepare(&format!(
        "SELECT {JOB_COLUMNS} FROM jobs j LEFT JOIN users u ON u.id = j.uid
         WHERE (?1 IS NULL OR j.state = ?1) ORDER BY j.id LIMIT ?2 OFFSET ?3"
    ))?;
    let rows = statement
        .query_map(
            params![state, page.limit as i64, page.offset as i64],
            job_row,
        )?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}
