//! The PostgreSQL backend (several memproxy replicas on one database), area by area: users, the
//! job queue (leased across replicas), the recall log, facts, search (pgvector HNSW + `tsvector`)
//! and the response log, each proven by the same conformance suite as SQLite. Vectors live in
//! the database, so a replica keeps no memory state on local disk; explicit-mode agents (with
//! their turns serialised across replicas), shared blocks, export and import too.
//!
//! The store traits are synchronous (callers run them on the blocking pool, see
//! [`crate::memory::MemoryService`]); this backend drives tokio-postgres (with a deadpool pool)
//! on a small runtime of its own and waits for each call with [`tokio::runtime::Handle::block_on`],
//! so it must not be called from an async task, exactly like the SQLite backend.

/// Runs `$body` in one transaction (`$tx`) on the store's runtime, committed if it succeeds.
macro_rules! in_transaction {
    ($store:expr, |$tx:ident| $body:expr) => {
        $store.run(|pool| async move {
            let mut client = pool.get().await?;
            let transaction = client.transaction().await?;
            let value = {
                let $tx: &tokio_postgres::Transaction = &transaction;
                $body
            };
            transaction.commit().await?;
            Ok(value)
        })
    };
}

mod agent_log;
mod agent_row;
mod agents;
mod facts;
mod integrity;
mod jobs;
mod recall;
mod responses;
mod schema;
mod search;
mod shared;
mod transfer;
mod turn_lock;
mod users;

use std::future::Future;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio_postgres::NoTls;

use super::{Corpus, StoreError, StoreResult, UserScope};

/// The driver's errors become the store's backend-neutral one.
impl From<tokio_postgres::Error> for StoreError {
    fn from(error: tokio_postgres::Error) -> Self {
        // The server's own message (constraint, syntax) says more than the driver's summary.
        match error.as_db_error() {
            // disk_full, read_only_sql_transaction (a standby, or a read-only database).
            Some(db) if matches!(db.code().code(), "53100" | "25006") => {
                StoreError::CannotWrite(format!("{}: {}", db.code().code(), db.message()))
            }
            Some(db) => StoreError::Database(format!("{}: {}", db.code().code(), db.message())),
            None => StoreError::Database(error.to_string()),
        }
    }
}

impl From<deadpool_postgres::PoolError> for StoreError {
    fn from(error: deadpool_postgres::PoolError) -> Self {
        StoreError::Database(format!("connection pool: {error}"))
    }
}

pub struct PostgresStore {
    pool: Pool,
    /// Connections that hold agents' turn locks (apart, so that turns holding locks never take
    /// every connection their own queries need).
    locks: Pool,
    indexes: search::KnownIndexes,
    common_terms: super::keywords::CommonTerms,
    /// Drives the connections; `None` only while dropping.
    runtime: Option<tokio::runtime::Runtime>,
}

impl PostgresStore {
    /// Connects to `url` (`postgres://user@host:port/db`) with at most `pool_size` connections
    /// and brings its schema up to date (one replica at a time, under an advisory lock).
    pub fn connect(url: &str, pool_size: usize) -> StoreResult<PostgresStore> {
        let mut config: tokio_postgres::Config = url
            .parse()
            .map_err(|error| StoreError::Invalid(format!("database URL: {error}")))?;
        // A vector search filtered by user keeps scanning the shared HNSW index until it has
        // its k rows (pgvector 0.8's iterative scan), on every connection.
        let options = config.get_options().unwrap_or_default().to_owned();
        config.options(format!("{options} -c hnsw.iterative_scan=strict_order").trim());
        let manager = |config| {
            Manager::from_config(
                config,
                NoTls,
                // A connection is checked with a round trip before it is handed out again: one
                // the server closed (a restart, a failover) is replaced instead of failing the
                // request that gets it (the fast check missed a close not yet noticed).
                ManagerConfig {
                    recycling_method: RecyclingMethod::Verified,
                },
            )
        };
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("memproxy-postgres")
            .enable_all()
            .build()?;
        let pool = |size: usize, config| {
            Pool::builder(manager(config))
                .max_size(size)
                .runtime(deadpool_postgres::Runtime::Tokio1)
                .build()
                .map_err(|error| StoreError::Invalid(format!("connection pool: {error}")))
        };
        let store = PostgresStore {
            pool: pool(pool_size.max(1), config.clone())?,
            locks: pool(4 * pool_size.max(2), config)?,
            indexes: search::KnownIndexes::default(),
            common_terms: super::keywords::CommonTerms::default(),
            runtime: Some(runtime),
        };
        store.run(|pool| async move {
            let mut client = pool.get().await?;
            schema::migrate(&mut client).await
        })?;
        Ok(store)
    }

    fn handle(&self) -> StoreResult<tokio::runtime::Handle> {
        self.runtime
            .as_ref()
            .map(|runtime| runtime.handle().clone())
            .ok_or_else(|| StoreError::Database("the store is closed".to_owned()))
    }

    /// Runs `work` on this store's runtime and waits for it.
    fn run<T, F>(&self, work: impl FnOnce(Pool) -> F) -> StoreResult<T>
    where
        F: Future<Output = StoreResult<T>>,
    {
        let runtime = self
            .runtime
            .as_ref()
            .ok_or_else(|| StoreError::Database("the store is closed".to_owned()))?;
        runtime.handle().block_on(work(self.pool.clone()))
    }
}

impl Drop for PostgresStore {
    fn drop(&mut self) {
        // Dropping a runtime blocks; a store may be dropped on an async task.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// The user's id, if they have been seen.
async fn find_uid(
    client: &impl tokio_postgres::GenericClient,
    scope: &UserScope,
) -> StoreResult<Option<i64>> {
    let row = client
        .query_opt(
            "SELECT id FROM users WHERE tenant = $1 AND name = $2",
            &[&scope.tenant, &scope.user],
        )
        .await?;
    Ok(row.map(|row| row.get(0)))
}

/// The user's id, created on first use (concurrent replicas agree on one row).
async fn ensure_uid(
    client: &impl tokio_postgres::GenericClient,
    scope: &UserScope,
) -> StoreResult<i64> {
    let row = client
        .query_one(
            "INSERT INTO users (tenant, name, created_at) VALUES ($1, $2, $3)
             ON CONFLICT (tenant, name) DO UPDATE SET name = EXCLUDED.name
             RETURNING id",
            &[&scope.tenant, &scope.user, &super::now_ms()],
        )
        .await?;
    Ok(row.get(0))
}

/// The user's id; `NotFound` when they have never been seen.
async fn require_uid(
    client: &impl tokio_postgres::GenericClient,
    scope: &UserScope,
) -> StoreResult<i64> {
    find_uid(client, scope).await?.ok_or_else(|| {
        StoreError::NotFound(format!(
            "user '{}' of tenant '{}'",
            scope.user, scope.tenant
        ))
    })
}

/// Bumps and returns the vector generation of one user and corpus (callers' caches compare it).
async fn bump_generation(
    client: &impl tokio_postgres::GenericClient,
    uid: i64,
    corpus: Corpus,
) -> StoreResult<u64> {
    let row = client
        .query_one(
            "INSERT INTO vector_generations (uid, corpus, generation) VALUES ($1, $2, 1)
             ON CONFLICT (uid, corpus) DO UPDATE SET generation = vector_generations.generation + 1
             RETURNING generation",
            &[&uid, &corpus.as_str()],
        )
        .await?;
    Ok(row.get::<_, i64>(0) as u64)
}
