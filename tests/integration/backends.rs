//! The store backends the conformance suite runs over. Each opens a fresh, empty store (and more
//! handles on its database, as replicas do); every area's check runs on each through
//! [`on_every_backend`]. A new backend is its folder under src/store plus one line in
//! [`BACKENDS`].

use std::path::Path;
use std::sync::Arc;

use memproxy::store::postgres::PostgresStore;
use memproxy::store::sqlite::SqliteStore;
use memproxy::store::Store;
use memproxy::vector::VectorIndexes;

/// A fresh store of one backend.
pub(crate) struct Opened {
    /// Its backend's name.
    pub name: &'static str,
    pub store: Arc<dyn Store>,
    /// Another handle on the same database: a second replica (or process) of memproxy.
    pub replica: Box<dyn Fn() -> Arc<dyn Store>>,
    /// A directory of the test's own, kept while the store is.
    pub scratch: tempfile::TempDir,
}

impl Opened {
    /// The vector indexes memproxy keeps for this store: in the store when it keeps vectors
    /// itself (pgvector), else files in the scratch directory.
    pub fn vectors(&self, model: &str, dimensions: usize) -> VectorIndexes {
        let store = Arc::clone(&self.store);
        if store.keeps_vectors() {
            VectorIndexes::in_store(model, dimensions, store)
        } else {
            VectorIndexes::new(
                &self.scratch.path().join("vectors"),
                model,
                dimensions,
                store,
            )
            .expect("index files")
        }
    }
}

/// A backend: how to open a fresh store of it (`None`: not available here), and how to point a
/// proxy's configuration at one (`MEMPROXY_TEST_STORE=<name>` runs every proxy test so).
pub(crate) struct Backend {
    pub name: &'static str,
    pub open: fn() -> Option<Opened>,
    pub configure: fn(&mut memproxy::config::Config),
}

/// Every backend the suite runs over.
pub(crate) const BACKENDS: &[Backend] = &[
    Backend {
        name: "sqlite",
        open: open_sqlite,
        // The harness's data directory holds the database already.
        configure: |_| {},
    },
    Backend {
        name: "postgres",
        open: open_postgres,
        configure: configure_postgres,
    },
];

/// The backend `MEMPROXY_TEST_STORE` names for the proxy tests (SQLite when unset).
pub(crate) fn selected() -> &'static Backend {
    let name = std::env::var("MEMPROXY_TEST_STORE").unwrap_or_default();
    BACKENDS
        .iter()
        .find(|b| b.name == name)
        .unwrap_or(&BACKENDS[0])
}

/// Runs `check` on a fresh store of every backend. PostgreSQL is skipped locally without its test
/// server (`scripts/test` starts one), and fails under CI.
pub(crate) fn on_every_backend(check: impl Fn(&Opened)) {
    for backend in BACKENDS {
        if let Some(opened) = (backend.open)() {
            eprintln!("on {}", backend.name);
            check(&opened);
        }
    }
}

fn open_sqlite() -> Option<Opened> {
    let scratch = tempfile::tempdir().expect("temp dir");
    let path = scratch.path().join("memproxy.db");
    let open = move |path: &Path| -> Arc<dyn Store> {
        Arc::new(SqliteStore::open(path).expect("open SQLite"))
    };
    let store = open(&path);
    Some(Opened {
        name: "sqlite",
        store,
        replica: Box::new(move || open(&path)),
        scratch,
    })
}

fn open_postgres() -> Option<Opened> {
    let url = postgres_url()?;
    let store: Arc<dyn Store> = Arc::new(postgres(&url));
    Some(Opened {
        name: "postgres",
        store,
        // Another store, another pool: another replica on the same database.
        replica: Box::new(move || Arc::new(postgres(&url))),
        scratch: tempfile::tempdir().expect("temp dir"),
    })
}

fn configure_postgres(config: &mut memproxy::config::Config) {
    // (On a thread of its own: the harness may already be inside a runtime.)
    if let Some(url) = std::thread::spawn(postgres_url)
        .join()
        .expect("a test database")
    {
        config.store.backend = memproxy::store::Backend::Postgres;
        config.store.url = Some(memproxy::secret::Secret::new(url));
    }
}

/// A URL of a fresh, empty database on the test server (`None`: no server, outside CI).
pub(crate) fn postgres_url() -> Option<String> {
    let Ok(admin) = std::env::var("MEMPROXY_TEST_DATABASE_URL") else {
        assert!(
            std::env::var_os("CI").is_none(),
            "MEMPROXY_TEST_DATABASE_URL is not set: scripts/test starts PostgreSQL (scripts/setup-postgres)"
        );
        eprintln!("PostgreSQL half skipped: run through scripts/test or scripts/setup-postgres run -- cargo test");
        return None;
    };
    let name = format!("conformance_{}", uuid::Uuid::new_v4().simple());
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let (client, connection) = tokio_postgres::connect(&admin, tokio_postgres::NoTls)
            .await
            .expect("connect to the test server");
        tokio::spawn(connection);
        client
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .await
            .expect("create a database");
    });
    let (base, _) = admin.rsplit_once('/').expect("a database in the URL");
    Some(format!("{base}/{name}"))
}

pub(crate) fn postgres(url: &str) -> PostgresStore {
    PostgresStore::connect(url, 8).expect("connect PostgreSQL")
}
