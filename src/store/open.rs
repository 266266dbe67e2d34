//! Which store a deployment uses (`[store]` in the config) and opening it: SQLite in the data
//! directory (the embedded default), or PostgreSQL with pgvector, shared by several replicas.

use std::path::Path;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::{Store, StoreError, StoreResult};
use crate::secret::Secret;

/// What a store opened read-only means for its users (logged at start-up, shown on `/readyz`).
pub const READ_ONLY: &str = "the data directory cannot be written: memory is served read-only, every write is refused with 503 memory_unavailable";

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// `{data_dir}/memproxy.db` and vector index files beside it: one machine, no server.
    #[default]
    Sqlite,
    /// A PostgreSQL database with pgvector: nothing of memory stays on local disk, so several
    /// replicas can serve from one database.
    Postgres,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StoreConfig {
    pub backend: Backend,
    /// `postgres://user:password@host:port/database` (backend `postgres`). Env:
    /// `MEMPROXY_DATABASE_URL`. Never shown: it may hold a password.
    pub url: Option<Secret>,
    /// Connections this replica keeps to PostgreSQL, at most.
    pub pool_size: usize,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            backend: Backend::Sqlite,
            url: None,
            pool_size: 16,
        }
    }
}

impl StoreConfig {
    /// What is wrong with this configuration, if anything.
    pub fn problem(&self) -> Option<String> {
        match (self.backend, &self.url) {
            (Backend::Postgres, None) => Some(
                "backend \"postgres\" needs store.url (or MEMPROXY_DATABASE_URL), \
                 postgres://user:password@host:port/database"
                    .to_owned(),
            ),
            (Backend::Postgres, Some(url))
                if !(url.expose().starts_with("postgres://")
                    || url.expose().starts_with("postgresql://")) =>
            {
                Some("store.url must start with postgres:// or postgresql://".to_owned())
            }
            _ if self.pool_size == 0 => Some("store.pool_size must be at least 1".to_owned()),
            _ => None,
        }
    }

    /// Opens the configured store (blocking: migrations run now).
    pub fn open(&self, data_dir: &Path) -> StoreResult<Arc<dyn Store>> {
        if let Some(problem) = self.problem() {
            return Err(StoreError::Invalid(problem));
        }
        Ok(match (self.backend, &self.url) {
            (Backend::Postgres, Some(url)) => Arc::new(super::postgres::PostgresStore::connect(
                url.expose(),
                self.pool_size,
            )?),
            _ => {
                let path = data_dir.join("memproxy.db");
                let (store, read_only) = super::sqlite::SqliteStore::open_or_read_only(&path)?;
                if read_only {
                    tracing::warn!(path = %path.display(), "{READ_ONLY}");
                }
                Arc::new(store)
            }
        })
    }
}
