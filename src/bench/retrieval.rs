//! `memproxy bench retrieval`: the memory layer at N memories, on this machine, with the real
//! local model.
//!
//! Embedding every one of 100k synthetic memories with the model would take ~10 minutes on two
//! cores and measure the model, not retrieval; so a pool of real sentences is embedded for real
//! (that throughput is reported), and each stored memory gets a pool sentence plus a unique detail
//! as text and a mix of two pool embeddings as vector. Queries are embedded for real every time:
//! the hybrid figures include the query embedding.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;

use super::{quantile_ms, rss_mib};
use crate::embed::{normalize, Embedder, EmbeddingConfig, LocalEmbedder};
use crate::memory::{MemoryService, RetrievalRequest};
use crate::store::{Corpus, Embedding, NewMemory, NewMessage, UserScope};

#[derive(Args, Clone)]
pub struct RetrievalBench {
    /// Memory counts to measure, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "10000,100000")]
    sizes: Vec<usize>,
    /// Users the memories are spread over, per layout, comma-separated (1 = one big user).
    #[arg(long, value_delimiter = ',', default_value = "1,1000")]
    users: Vec<usize>,
    /// Queries per measurement.
    #[arg(long, default_value_t = 200)]
    queries: usize,
    /// Real sentences embedded for the pool.
    #[arg(long, default_value_t = 2000)]
    pool: usize,
    /// Where the local model is installed (scripts/fetch-model).
    #[arg(long, default_value = "./.memproxy")]
    model_data_dir: PathBuf,
    /// Also measure PostgreSQL, beside SQLite: a server URL whose user may create databases
    /// (each measurement gets a fresh one, dropped after).
    #[arg(long, env = "MEMPROXY_BENCH_DATABASE_URL", hide_env_values = true)]
    postgres: Option<String>,
    /// What is stored and searched: facts (`memories`) or past turns (`turns`: conversations of
    /// 20 turns, searched with the turn rules of `memory::neighbours` and the keyword context).
    #[arg(long, value_enum, default_value = "memories")]
    corpus: BenchCorpus,
}

#[derive(clap::ValueEnum, Clone, Copy, PartialEq, Eq)]
enum BenchCorpus {
    Memories,
    Turns,
}

impl BenchCorpus {
    fn corpus(self) -> Corpus {
        match self {
            BenchCorpus::Memories => Corpus::Memory,
            BenchCorpus::Turns => Corpus::Message,
        }
    }
}

/// Turns per synthetic conversation (`--corpus turns`).
const TURNS_PER_CONVERSATION: usize = 20;

/// A small deterministic PRNG (xorshift64*): reproducible data without a dependency.
pub(crate) struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[(self.next() % items.len() as u64) as usize]
    }
}

const SUBJECTS: &[&str] = &[
    "My sister",
    "The user",
    "Her manager",
    "My neighbour",
    "Our team lead",
    "His grandfather",
    "The landlord",
    "My best friend",
    "The dentist",
    "Their coach",
];
const VERBS: &[&str] = &[
    "prefers",
    "recently bought",
    "is allergic to",
    "wants to learn",
    "often talks about",
    "collects",
    "is afraid of",
    "booked",
    "recommended",
    "sold",
];
const OBJECTS: &[&str] = &[
    "vintage cameras",
    "a trip to Lisbon",
    "spicy Thai food",
    "jazz piano lessons",
    "an electric bike",
    "oak furniture",
    "rock climbing",
    "the opera season tickets",
    "a golden retriever puppy",
    "Japanese woodblock prints",
    "sourdough baking",
    "a sailing course",
    "board games",
    "running shoes",
    "a vegetable garden",
];
const WHEN: &[&str] = &[
    "last spring",
    "every weekend",
    "since college",
    "for her birthday",
    "after the move",
    "during the holidays",
    "this month",
    "in 2019",
    "on Tuesdays",
    "before the wedding",
];

pub(crate) fn sentence(rng: &mut Rng) -> String {
    format!(
        "{} {} {} {}.",
        rng.pick(SUBJECTS),
        rng.pick(VERBS),
        rng.pick(OBJECTS),
        rng.pick(WHEN)
    )
}

struct Stats {
    p50: f64,
    p99: f64,
}

fn stats(mut samples: Vec<Duration>) -> Stats {
    samples.sort_unstable();
    Stats {
        p50: quantile_ms(&samples, 0.5),
        p99: quantile_ms(&samples, 0.99),
    }
}

fn dir_size(path: &std::path::Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(path) else {
        return 0;
    };
    entries
        .flatten()
        .map(|entry| match entry.metadata() {
            Ok(meta) if meta.is_dir() => dir_size(&entry.path()),
            Ok(meta) => meta.len(),
            Err(_) => 0,
        })
        .sum()
}

pub async fn run(options: RetrievalBench) -> anyhow::Result<()> {
    let config = EmbeddingConfig::default();
    let data_dir = options.model_data_dir.clone();
    let embedder: Arc<dyn Embedder> = Arc::new(
        tokio::task::spawn_blocking(move || LocalEmbedder::load(&config, &data_dir)).await??,
    );
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    println!(
        "memproxy bench retrieval: local all-MiniLM-L6-v2 (int8 ONNX), {} cores",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );

    // Embedding latency, one short query and a batch of 32.
    let mut single = Vec::new();
    for _ in 0..50 {
        let text = sentence(&mut rng);
        let started = Instant::now();
        embedder.embed(vec![text]).await?;
        single.push(started.elapsed());
    }
    let mut batch = Vec::new();
    for _ in 0..10 {
        let texts: Vec<String> = (0..32).map(|_| sentence(&mut rng)).collect();
        let started = Instant::now();
        embedder.embed(texts).await?;
        batch.push(started.elapsed());
    }
    let (single, batch) = (stats(single), stats(batch));
    println!(
        "embed one query:   p50 {:.2} ms  p99 {:.2} ms",
        single.p50, single.p99
    );
    println!(
        "embed batch of 32: p50 {:.1} ms  ({:.0} sentences/s)",
        batch.p50,
        32.0 / (batch.p50 / 1e3)
    );

    // The pool of real sentence embeddings.
    let pool_texts: Vec<String> = (0..options.pool).map(|_| sentence(&mut rng)).collect();
    let started = Instant::now();
    let pool_vectors = embedder.embed(pool_texts.clone()).await?;
    println!(
        "pool: {} sentences embedded in {:.1} s\n",
        options.pool,
        started.elapsed().as_secs_f64()
    );

    let mut stores = vec![Backend::Sqlite];
    if let Some(url) = &options.postgres {
        stores.push(Backend::Postgres(url.clone()));
    }
    println!(
        "{:>8} {:>8} {:>6} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8}",
        "store",
        "memories",
        "users",
        "insert/s",
        "vec p50",
        "vec p99",
        "hyb p50",
        "hyb p99",
        "disk MiB",
        "RSS MiB",
        "found"
    );
    for &size in &options.sizes {
        for &users in &options.users {
            for store in &stores {
                let users = users.clamp(1, size.max(1));
                // The same memories and queries for every store.
                let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ size as u64 ^ (users as u64) << 32);
                let row = measure(
                    store,
                    options.corpus,
                    &embedder,
                    &pool_texts,
                    &pool_vectors,
                    size,
                    users,
                    options.queries,
                    &mut rng,
                )
                .await?;
                println!(
                "{:>8} {:>8} {:>6} {:>10.0} {:>9.2} {:>9.2} {:>9.2} {:>9.2} {:>9.1} {:>9.0} {:>7.0}%",
                store.name(),
                size,
                users,
                row.insert_rate,
                row.vector.p50,
                row.vector.p99,
                row.hybrid.p50,
                row.hybrid.p99,
                row.disk_mib,
                row.rss_mib,
                row.found * 100.0
            );
            }
        }
    }
    println!(
        "\nvec = vector search only (top 40); hyb = hybrid retrieval incl. query embedding, FTS5,"
    );
    println!("fusion and re-reading rows from the store (top 10); found = queries whose source memory was returned.");
    println!("sqlite: usearch index files + FTS5; postgres: pgvector HNSW + tsvector/GIN on a local server");
    println!("(its disk is the database's size; RSS is memproxy's own, the database server's is not counted).");
    Ok(())
}

/// Memory `n`: a pool sentence plus a unique note as text, a mix of two pool embeddings as vector.
pub(crate) fn synthetic_memory(
    n: usize,
    pool_texts: &[String],
    pool_vectors: &[Vec<f32>],
    model: &str,
    rng: &mut Rng,
) -> NewMemory {
    let (a, b) = (n % pool_texts.len(), (n * 7919 + 13) % pool_texts.len());
    let mut vector: Vec<f32> = pool_vectors[a]
        .iter()
        .zip(&pool_vectors[b])
        .map(|(x, y)| x + 0.35 * y)
        .collect();
    normalize(&mut vector);
    NewMemory {
        text: format!(
            "{} (note {n}, tag t{})",
            pool_texts[a],
            rng.next() % 100_000
        ),
        kind: "fact".into(),
        sources: vec![],
        subject: None,
        created_at_ms: 1_700_000_000_000 + n as i64,
        embedding: Some(Embedding {
            model: model.to_owned(),
            vector,
        }),
    }
}

/// Turns `first..first + count` as conversations of [`TURNS_PER_CONVERSATION`] alternating user
/// and assistant turns, each with its synthetic memory's text and vector.
#[allow(clippy::too_many_arguments)]
async fn insert_turns(
    memory: &MemoryService,
    scope: &UserScope,
    first: usize,
    count: usize,
    pool_texts: &[String],
    pool_vectors: &[Vec<f32>],
    model: &str,
    rng: &mut Rng,
) -> anyhow::Result<()> {
    let numbers: Vec<usize> = (first..first + count).collect();
    for (c, chunk) in numbers.chunks(TURNS_PER_CONVERSATION).enumerate() {
        let mut turns = Vec::with_capacity(chunk.len());
        let mut known = Vec::with_capacity(chunk.len());
        for (position, &n) in chunk.iter().enumerate() {
            let fact = synthetic_memory(n, pool_texts, pool_vectors, model, rng);
            turns.push(NewMessage {
                position: position as i64,
                role: if position % 2 == 0 {
                    "user"
                } else {
                    "assistant"
                }
                .to_owned(),
                content: fact.text.clone(),
                name: None,
                tool_calls: None,
                tool_call_id: None,
                created_at_ms: fact.created_at_ms,
            });
            if let Some(embedding) = fact.embedding {
                known.push((fact.text, embedding));
            }
        }
        memory
            .sync_embedded(scope, &format!("c{c}"), "default", turns, known)
            .await?;
    }
    Ok(())
}

struct Row {
    insert_rate: f64,
    vector: Stats,
    hybrid: Stats,
    disk_mib: f64,
    rss_mib: f64,
    found: f64,
}

/// A store to measure.
pub(crate) enum Backend {
    Sqlite,
    /// A server URL on which fresh databases are made.
    Postgres(String),
}

impl Backend {
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Backend::Sqlite => "sqlite",
            Backend::Postgres(_) => "postgres",
        }
    }

    /// A memory layer on a fresh store of this kind (in `dir` for SQLite), and the database
    /// made for it.
    pub(crate) async fn open(
        &self,
        dir: &std::path::Path,
        embedder: &Arc<dyn Embedder>,
    ) -> anyhow::Result<(MemoryService, Option<BenchDatabase>)> {
        match self {
            Backend::Sqlite => Ok((MemoryService::open(dir, Arc::clone(embedder))?, None)),
            Backend::Postgres(server) => {
                let database = BenchDatabase::create(server).await?;
                let (url, dir, embedder) =
                    (database.url.clone(), dir.to_owned(), Arc::clone(embedder));
                let memory = tokio::task::spawn_blocking(move || -> anyhow::Result<_> {
                    let store = crate::store::postgres::PostgresStore::connect(&url, 8)?;
                    Ok(MemoryService::with_store(Arc::new(store), &dir, embedder)?)
                })
                .await??;
                Ok((memory, Some(database)))
            }
        }
    }
}

/// A database made for one measurement on a PostgreSQL server.
pub(crate) struct BenchDatabase {
    server: String,
    name: String,
    pub(crate) url: String,
}

async fn admin(server: &str) -> anyhow::Result<tokio_postgres::Client> {
    let (client, connection) = tokio_postgres::connect(server, tokio_postgres::NoTls).await?;
    tokio::spawn(connection);
    Ok(client)
}

impl BenchDatabase {
    pub(crate) async fn create(server: &str) -> anyhow::Result<BenchDatabase> {
        let name = format!("memproxy_bench_{}", uuid::Uuid::new_v4().simple());
        admin(server)
            .await?
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .await?;
        let (base, _) = server
            .rsplit_once('/')
            .ok_or_else(|| anyhow::anyhow!("the server URL names no database"))?;
        Ok(BenchDatabase {
            server: server.to_owned(),
            url: format!("{base}/{name}"),
            name,
        })
    }

    pub(crate) async fn size_mib(&self) -> anyhow::Result<f64> {
        let row = admin(&self.server)
            .await?
            .query_one("SELECT pg_database_size($1)", &[&self.name])
            .await?;
        Ok(row.get::<_, i64>(0) as f64 / (1024.0 * 1024.0))
    }

    /// Refreshes the planner's statistics of the new database.
    pub(crate) async fn analyze(&self) -> anyhow::Result<()> {
        admin(&self.url).await?.batch_execute("ANALYZE").await?;
        Ok(())
    }

    /// Drops the database (after its store is closed).
    pub(crate) async fn drop(self) -> anyhow::Result<()> {
        admin(&self.server)
            .await?
            .batch_execute(&format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.name
            ))
            .await?;
        Ok(())
    }
}

#[allow(clippy::too_many_arguments)]
async fn measure(
    store: &Backend,
    corpus: BenchCorpus,
    embedder: &Arc<dyn Embedder>,
    pool_texts: &[String],
    pool_vectors: &[Vec<f32>],
    size: usize,
    users: usize,
    queries: usize,
    rng: &mut Rng,
) -> anyhow::Result<Row> {
    let dir = tempfile::tempdir()?;
    let (memory, database) = store.open(dir.path(), embedder).await?;
    let model = embedder.model_id().to_owned();
    let scope_of = |u: usize| UserScope::new("bench", format!("user-{u}"));
    let started = Instant::now();
    let per_user = size / users;
    for user in 0..users {
        if corpus == BenchCorpus::Turns {
            insert_turns(
                &memory,
                &scope_of(user),
                user * per_user,
                per_user,
                pool_texts,
                pool_vectors,
                &model,
                rng,
            )
            .await?;
            continue;
        }
        let mut batch = Vec::with_capacity(per_user);
        for i in 0..per_user {
            let n = user * per_user + i;
            batch.push(synthetic_memory(n, pool_texts, pool_vectors, &model, rng));
            if batch.len() == 5000 {
                memory
                    .insert_embedded(&scope_of(user), std::mem::take(&mut batch), "bench")
                    .await?;
            }
        }
        memory
            .insert_embedded(&scope_of(user), batch, "bench")
            .await?;
    }
    let insert_rate = (per_user * users) as f64 / started.elapsed().as_secs_f64();
    memory.flush().await?;
    if let Some(database) = &database {
        // As autovacuum would have by then in a running deployment (its naptime is a minute):
        // with the statistics of an empty table the planner sorts a user's rows exactly
        // instead of using the HNSW index.
        database.analyze().await?;
    }

    let mut vector_times = Vec::new();
    let mut hybrid_times = Vec::new();
    let mut found = 0;
    for _ in 0..queries {
        let user = (rng.next() % users as u64) as usize;
        let n = user * per_user + (rng.next() % per_user.max(1) as u64) as usize;
        let source = &pool_texts[n % pool_texts.len()];
        // A partial paraphrase: the sentence's last words dropped, the note number kept.
        let words: Vec<&str> = source.split_whitespace().collect();
        let query = format!(
            "{} note {n}",
            words[..words.len().saturating_sub(2).max(3)].join(" ")
        );
        let scope = scope_of(user);
        let vector = embedder.embed(vec![query.clone()]).await?.remove(0);
        let (store, who) = (Arc::clone(memory.store()), scope.clone());
        let vectors = Arc::clone(memory.vectors());
        let searched = tokio::task::spawn_blocking(move || {
            let uid = store.find_user(&who)?.unwrap_or_default();
            let started = Instant::now();
            vectors
                .search(uid, corpus.corpus(), &vector, 40)
                .map(|_| started.elapsed())
        })
        .await??;
        vector_times.push(searched);
        let started = Instant::now();
        let hits = memory
            .retrieve(
                &scope,
                RetrievalRequest {
                    query,
                    corpora: vec![corpus.corpus()],
                    top_k: 10,
                    ..RetrievalRequest::default()
                },
            )
            .await?;
        hybrid_times.push(started.elapsed());
        if hits.iter().any(|h| h.text.contains(&format!("(note {n},"))) {
            found += 1;
        }
    }
    let disk_mib = match &database {
        Some(database) => database.size_mib().await?,
        None => dir_size(dir.path()) as f64 / (1024.0 * 1024.0),
    };
    let row = Row {
        insert_rate,
        vector: stats(vector_times),
        hybrid: stats(hybrid_times),
        disk_mib,
        rss_mib: rss_mib(),
        found: found as f64 / queries.max(1) as f64,
    };
    drop(memory);
    if let Some(database) = database {
        database.drop().await?;
    }
    Ok(row)
}
