//! The PostgreSQL schema, as versioned migrations applied in order at connect time. Replicas
//! starting together take turns under an advisory lock; a version, once released, is never
//! edited (the backend is not released yet: version 1 grows with the areas until it is).

use tokio_postgres::Client;

use crate::store::StoreResult;

/// Arbitrary, fixed: the advisory lock key of schema migrations.
const MIGRATION_LOCK: i64 = 0x6d65_6d70_0001;

const MIGRATIONS: [(i32, &str); 1] = [(
    1,
    r#"
CREATE TABLE users (
    id          BIGSERIAL PRIMARY KEY,
    tenant      TEXT NOT NULL,
    name        TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    UNIQUE (tenant, name)
);

CREATE TABLE jobs (
    id          BIGSERIAL PRIMARY KEY,
    uid         BIGINT REFERENCES users(id) ON DELETE CASCADE,
    kind        TEXT NOT NULL,
    dedupe_key  TEXT,
    payload     TEXT NOT NULL,
    state       TEXT NOT NULL CHECK (state IN ('queued', 'running', 'done', 'failed', 'merged')),
    attempts    BIGINT NOT NULL DEFAULT 0,
    run_after   BIGINT NOT NULL,
    last_error  TEXT,
    report      TEXT,
    created_at  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL
);
CREATE INDEX jobs_ready ON jobs(state, run_after);
CREATE UNIQUE INDEX jobs_pending_dedupe ON jobs(dedupe_key) WHERE state = 'queued';
CREATE INDEX jobs_running_by_user ON jobs(uid) WHERE state = 'running';
"#,
)];

pub async fn migrate(client: &mut Client) -> StoreResult<()> {
    let tx = client.transaction().await?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations (
             version     INTEGER PRIMARY KEY,
             applied_at  TIMESTAMPTZ NOT NULL DEFAULT now())",
    )
    .await?;
    let current: Option<i32> = tx
        .query_one("SELECT max(version) FROM schema_migrations", &[])
        .await?
        .get(0);
    for (version, sql) in MIGRATIONS {
        if current.is_some_and(|current| version <= current) {
            continue;
        }
        tx.batch_execute(sql).await?;
        tx.execute(
            "INSERT INTO schema_migrations (version) VALUES ($1)",
            &[&version],
        )
        .await?;
    }
    tx.commit().await?;
    Ok(())
}
