//! The durable job queue on PostgreSQL, with the SQLite queue's rules (see
//! `store::sqlite::jobs`) made safe for several replicas: claims are serialised by an advisory
//! lock (so two replicas never run two jobs of one user at once, nor one job twice), the claimed
//! row is locked `FOR UPDATE SKIP LOCKED`, and a job whose replica died is claimed again once its
//! lease has run out. Start-up requeues nothing: another replica may be running those jobs.

use tokio_postgres::{GenericClient, Row};

use super::{ensure_uid, find_uid, PostgresStore};
use crate::store::{now_ms, Job, Jobs, NewJob, Page, StoreResult, UserScope};

/// Arbitrary, fixed: the advisory lock key of claims.
const CLAIM_LOCK: i64 = 0x6d65_6d70_0002;
/// The longest a debounced job is pushed back past its creation.
const MAX_POSTPONE_MS: i64 = 60_000;

const JOB_COLUMNS: &str = "j.id, j.kind, u.tenant, u.name, j.payload, j.state, j.attempts, \
     j.run_after, j.last_error, j.report";

fn job_row(row: &Row) -> Job {
    let tenant: Option<String> = row.get(2);
    let user: Option<String> = row.get(3);
    let payload: String = row.get(4);
    Job {
        id: row.get(0),
        kind: row.get(1),
        scope: tenant
            .zip(user)
            .map(|(tenant, user)| UserScope { tenant, user }),
        payload: serde_json::from_str(&payload).unwrap_or(serde_json::Value::Null),
        state: row.get(5),
        attempts: row.get(6),
        run_after_ms: row.get(7),
        last_error: row.get(8),
        report: row.get(9),
    }
}

/// Puts a job back in the queue (or merges it into the queued job of its key), as SQLite does.
async fn requeue(
    client: &impl GenericClient,
    id: i64,
    error: Option<&str>,
    run_after: Option<i64>,
) -> StoreResult<()> {
    let now = now_ms();
    let waiting = client
        .query_opt(
            "SELECT q.id FROM jobs j JOIN jobs q ON q.dedupe_key = j.dedupe_key
             WHERE j.id = $1 AND q.state = 'queued' AND q.id != j.id",
            &[&id],
        )
        .await?;
    match waiting.map(|row| row.get::<_, i64>(0)) {
        Some(into) => {
            client
                .execute(
                    "UPDATE jobs q SET
                         attempts = GREATEST(q.attempts, j.attempts),
                         last_error = COALESCE($2, j.last_error, q.last_error),
                         run_after = GREATEST(q.run_after, COALESCE($3, j.run_after)),
                         updated_at = $4
                     FROM jobs j WHERE j.id = $1 AND q.id = $5",
                    &[&id, &error, &run_after, &now, &into],
                )
                .await?;
            let note = match error {
                Some(error) => format!("merged into job {into}; last error: {error}"),
                None => format!("merged into job {into}"),
            };
            client
                .execute(
                    "UPDATE jobs SET state = 'merged', last_error = $1, updated_at = $2 WHERE id = $3",
                    &[&note, &now, &id],
                )
                .await?;
        }
        None => {
            client
                .execute(
                    "UPDATE jobs SET state = 'queued', last_error = COALESCE($1, last_error),
                         run_after = COALESCE($2, run_after), updated_at = $3 WHERE id = $4",
                    &[&error, &run_after, &now, &id],
                )
                .await?;
        }
    }
    Ok(())
}

impl Jobs for PostgresStore {
    fn enqueue_job(&self, job: &NewJob) -> StoreResult<i64> {
        self.run(|pool| async move {
            let client = pool.get().await?;
            let uid = match &job.scope {
                Some(scope) => Some(ensure_uid(&**client, scope).await?),
                None => None,
            };
            let now = now_ms();
            let payload = job.payload.to_string();
            // One queued job per key: enqueueing again pushes its start back (debounce), never
            // more than MAX_POSTPONE_MS past its creation.
            let row = client
                .query_one(
                    "INSERT INTO jobs (uid, kind, dedupe_key, payload, state, attempts, run_after,
                                       created_at, updated_at)
                     VALUES ($1, $2, $3, $4, 'queued', 0, $5, $6, $6)
                     ON CONFLICT (dedupe_key) WHERE state = 'queued' DO UPDATE SET
                         payload = EXCLUDED.payload, updated_at = EXCLUDED.updated_at,
                         run_after = LEAST(GREATEST(jobs.run_after, EXCLUDED.run_after),
                                           jobs.created_at + $7)
                     RETURNING id",
                    &[
                        &uid,
                        &job.kind,
                        &job.dedupe_key,
                        &payload,
                        &job.run_after_ms,
                        &now,
                        &MAX_POSTPONE_MS,
                    ],
                )
                .await?;
            Ok(row.get(0))
        })
    }

    fn claim_job(&self, now: i64, lease_ms: i64) -> StoreResult<Option<Job>> {
        self.run(|pool| async move {
            let mut client = pool.get().await?;
            let tx = client.transaction().await?;
            tx.execute("SELECT pg_advisory_xact_lock($1)", &[&CLAIM_LOCK])
                .await?;
            let row = tx
                .query_opt(
                    &format!(
                        "SELECT {JOB_COLUMNS} FROM jobs j LEFT JOIN users u ON u.id = j.uid
                         WHERE ((j.state = 'queued' AND j.run_after <= $1)
                                OR (j.state = 'running' AND j.updated_at <= $1 - $2))
                           AND (j.uid IS NULL OR NOT EXISTS (
                                SELECT 1 FROM jobs r WHERE r.uid = j.uid AND r.state = 'running'
                                   AND r.id != j.id AND r.updated_at > $1 - $2))
                         ORDER BY j.run_after, j.id LIMIT 1
                         FOR UPDATE OF j SKIP LOCKED"
                    ),
                    &[&now, &lease_ms],
                )
                .await?;
            let Some(row) = row else {
                tx.commit().await?;
                return Ok(None);
            };
            let mut job = job_row(&row);
            tx.execute(
                "UPDATE jobs SET state = 'running', attempts = attempts + 1, updated_at = $1
                 WHERE id = $2",
                &[&now_ms(), &job.id],
            )
            .await?;
            tx.commit().await?;
            job.state = "running".to_owned();
            job.attempts += 1;
            Ok(Some(job))
        })
    }

    fn complete_job(&self, id: i64, report: &str) -> StoreResult<()> {
        self.run(|pool| async move {
            pool.get()
                .await?
                .execute(
                    "UPDATE jobs SET state = 'done', last_error = NULL, report = $3,
                         updated_at = $1 WHERE id = $2",
                    &[&now_ms(), &id, &report],
                )
                .await?;
            Ok(())
        })
    }

    fn fail_job(&self, id: i64, error: &str, retry_at_ms: Option<i64>) -> StoreResult<()> {
        self.run(|pool| async move {
            let mut client = pool.get().await?;
            let tx = client.transaction().await?;
            match retry_at_ms {
                Some(at) => requeue(&*tx, id, Some(error), Some(at)).await?,
                None => {
                    tx.execute(
                        "UPDATE jobs SET state = 'failed', last_error = $1, updated_at = $2
                         WHERE id = $3",
                        &[&error, &now_ms(), &id],
                    )
                    .await?;
                }
            }
            tx.commit().await?;
            Ok(())
        })
    }

    /// Nothing at start-up: with several replicas a `running` job may be running elsewhere; a
    /// dead replica's job is claimed again when its lease runs out.
    fn requeue_interrupted_jobs(&self) -> StoreResult<usize> {
        Ok(0)
    }

    fn list_jobs(&self, state: Option<&str>, page: Page) -> StoreResult<Vec<Job>> {
        self.run(|pool| async move {
            let rows = pool
                .get()
                .await?
                .query(
                    &format!(
                        "SELECT {JOB_COLUMNS} FROM jobs j LEFT JOIN users u ON u.id = j.uid
                         WHERE ($1::TEXT IS NULL OR j.state = $1) ORDER BY j.id
                         LIMIT $2 OFFSET $3"
                    ),
                    &[&state, &(page.limit as i64), &(page.offset as i64)],
                )
                .await?;
            Ok(rows.iter().map(job_row).collect())
        })
    }

    fn count_done_jobs(&self, scope: &UserScope, kind: &str, since_ms: i64) -> StoreResult<u64> {
        self.run(|pool| async move {
            let client = pool.get().await?;
            let Some(uid) = find_uid(&**client, scope).await? else {
                return Ok(0);
            };
            let row = client
                .query_one(
                    "SELECT count(*) FROM jobs WHERE uid = $1 AND kind = $2 AND state = 'done'
                         AND updated_at >= $3",
                    &[&uid, &kind, &since_ms],
                )
                .await?;
            Ok(row.get::<_, i64>(0) as u64)
        })
    }
}
