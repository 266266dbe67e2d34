//! The durable job queue: post-processing work that must survive restarts.
//!
//! A job is claimed by flipping it to `running` inside the write transaction, so two workers never
//! take the same job; jobs found `running` at start-up were interrupted and go back to the queue,
//! and a job `running` past its lease is claimed again. A job is never claimed while another job
//! of its user runs (within its lease): one user's memory writes are serialised, whatever the
//! number of workers. At most one job per dedupe key is queued: a job that goes back to the queue
//! while a newer one with its key waits merges into that one (which covers the newer turns).

use super::SqliteStore;
use crate::store::Jobs;
use rusqlite::{params, Connection, OptionalExtension, Row, Transaction};

use super::ensure_uid;
use crate::store::{now_ms, Job, NewJob, Page, StoreResult, UserScope};

const JOB_COLUMNS: &str = "j.id, j.kind, u.tenant, u.name, j.payload, j.state, j.attempts, \
     j.run_after, j.last_error, j.report";

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
        report: row.get(9)?,
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
                 WHERE ((j.state = 'queued' AND j.run_after <= ?1)
                        OR (j.state = 'running' AND j.updated_at <= ?1 - ?2))
                   AND (j.uid IS NULL OR NOT EXISTS (
                        SELECT 1 FROM jobs r WHERE r.uid = j.uid AND r.state = 'running'
                           AND r.id != j.id AND r.updated_at > ?1 - ?2))
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

pub fn complete(tx: &Transaction, id: i64, report: &str) -> StoreResult<()> {
    tx.execute(
        "UPDATE jobs SET state = 'done', last_error = NULL, report = ?3, updated_at = ?1 WHERE id = ?2",
        params![now_ms(), id, report],
    )?;
    Ok(())
}

pub fn fail(tx: &Transaction, id: i64, error: &str, retry_at: Option<i64>) -> StoreResult<()> {
    match retry_at {
        Some(at) => requeue(tx, id, Some(error), Some(at)),
        None => {
            tx.execute(
                "UPDATE jobs SET state = 'failed', last_error = ?1, updated_at = ?2 WHERE id = ?3",
                params![error, now_ms(), id],
            )?;
            Ok(())
        }
    }
}

/// Puts a job back in the queue to run at `run_after` (`None`: when it was due). When a job with the same key is queued
/// already, the two merge: the queued one (it covers the newer turns) keeps the larger attempt
/// count, the latest error and the later start; this one becomes `merged`, naming it.
fn requeue(
    tx: &Transaction,
    id: i64,
    error: Option<&str>,
    run_after: Option<i64>,
) -> StoreResult<()> {
    let now = now_ms();
    let waiting: Option<i64> = tx
        .query_row(
            "SELECT q.id FROM jobs j JOIN jobs q ON q.dedupe_key = j.dedupe_key
             WHERE j.id = ?1 AND q.state = 'queued' AND q.id != j.id",
            [id],
            |row| row.get(0),
        )
        .optional()?;
    match waiting {
        Some(into) => {
            tx.execute(
                "UPDATE jobs SET
                     attempts = MAX(attempts, (SELECT attempts FROM jobs WHERE id = ?1)),
                     last_error = COALESCE(?2, (SELECT last_error FROM jobs WHERE id = ?1), last_error),
                     run_after = MAX(run_after, COALESCE(?3, (SELECT run_after FROM jobs WHERE id = ?1))),
                     updated_at = ?4
                 WHERE id = ?5",
                params![id, error, run_after, now, into],
            )?;
            let note = match error {
                Some(error) => format!("merged into job {into}; last error: {error}"),
                None => format!("merged into job {into}"),
            };
            tx.execute(
                "UPDATE jobs SET state = 'merged', last_error = ?1, updated_at = ?2 WHERE id = ?3",
                params![note, now, id],
            )?;
        }
        None => {
            tx.execute(
                "UPDATE jobs SET state = 'queued', last_error = COALESCE(?1, last_error),
                     run_after = COALESCE(?2, run_after), updated_at = ?3 WHERE id = ?4",
                params![error, run_after, now, id],
            )?;
        }
    }
    Ok(())
}

/// Start-up: every job a stop left `running` goes back to the queue (or merges, as in [`fail`]).
pub fn requeue_interrupted(tx: &Transaction) -> StoreResult<usize> {
    let running: Vec<i64> = tx
        .prepare("SELECT id FROM jobs WHERE state = 'running' ORDER BY id")?
        .query_map([], |row| row.get(0))?
        .collect::<Result<_, _>>()?;
    for id in &running {
        requeue(tx, *id, None, None)?;
    }
    Ok(running.len())
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

impl Jobs for SqliteStore {
    fn enqueue_job(&self, job: &crate::store::NewJob) -> StoreResult<i64> {
        self.write(|tx| enqueue(tx, job))
    }

    fn claim_job(&self, now_ms: i64, lease_ms: i64) -> StoreResult<Option<crate::store::Job>> {
        self.write(|tx| claim(tx, now_ms, lease_ms))
    }

    fn complete_job(&self, id: i64, report: &str) -> StoreResult<()> {
        self.write(|tx| complete(tx, id, report))
    }

    fn fail_job(&self, id: i64, error: &str, retry_at_ms: Option<i64>) -> StoreResult<()> {
        self.write(|tx| fail(tx, id, error, retry_at_ms))
    }

    fn requeue_interrupted_jobs(&self) -> StoreResult<usize> {
        self.write(requeue_interrupted)
    }

    fn list_jobs(
        &self,
        state: Option<&str>,
        page: crate::store::Page,
    ) -> StoreResult<Vec<crate::store::Job>> {
        self.read(|c| list(c, state, page))
    }

    fn count_done_jobs(&self, scope: &UserScope, kind: &str, since_ms: i64) -> StoreResult<u64> {
        self.read(|c| {
            let Some(uid) = super::find_uid(c, scope)? else {
                return Ok(0);
            };
            let count: i64 = c.query_row(
                "SELECT COUNT(*) FROM jobs
                 WHERE uid = ?1 AND kind = ?2 AND state = 'done' AND updated_at >= ?3",
                params![uid, kind, since_ms],
                |row| row.get(0),
            )?;
            Ok(count as u64)
        })
    }
}
