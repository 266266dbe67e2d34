//! `memproxy bench implicit`: the implicit pre-processor's added latency when the user already has
//! N memories (design target: p50 under 15 ms, p99 under 30 ms with 10k, embedding included).
//!
//! A memproxy with the real local model runs in front of the scripted upstream; the user gets N
//! synthetic memories (as in `bench retrieval`), then each request opens a new chat with a question
//! and the pre-processor stores the turn, embeds it, retrieves, and injects. Post-processing is
//! deferred (long debounce) so it does not compete for the two cores during the measurement.
//! Then the "cold long chat" case ([`super::cold`]): long existing chats sent for the first time.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use serde_json::json;
use tokio::net::TcpListener;

use super::quantile_ms;
use super::retrieval::{sentence, synthetic_memory, Backend, BenchDatabase, Rng};
use crate::config::Config;
use crate::hooks::LogExchanges;
use crate::mock::MockUpstream;
use crate::mode::Mode;
use crate::store::UserScope;

#[derive(Args, Clone)]
pub struct ImplicitBench {
    /// Memories the user already has.
    #[arg(long, default_value_t = 10_000)]
    memories: usize,
    /// Requests measured.
    #[arg(long, default_value_t = 200)]
    requests: usize,
    /// Exchanges of each cold long chat (an existing chat sent to memproxy for the first time).
    #[arg(long, default_value_t = 300)]
    cold_exchanges: usize,
    /// Cold long chats measured (0: skip the case).
    #[arg(long, default_value_t = 5)]
    cold_chats: usize,
    /// Where the local model is installed (scripts/fetch-model).
    #[arg(long, default_value = "./.memproxy")]
    model_data_dir: PathBuf,
    /// Ask in the first person ("What did I tell you about …?"): the question is then embedded
    /// twice in one batch, also asked about "the user" for facts (`memory::perspective`).
    #[arg(long)]
    first_person: bool,
    /// Also measure on PostgreSQL, after SQLite: a server URL whose user may create databases.
    #[arg(long, env = "MEMPROXY_BENCH_DATABASE_URL", hide_env_values = true)]
    postgres: Option<String>,
}

pub async fn run(options: ImplicitBench) -> anyhow::Result<()> {
    measure(&options, &Backend::Sqlite).await?;
    if let Some(server) = &options.postgres {
        println!();
        measure(&options, &Backend::Postgres(server.clone())).await?;
    }
    Ok(())
}

/// An implicit-mode memproxy's config in front of `mock`, with the local model installed in
/// `model_data_dir` and post-processing deferred (the measurement is the request path).
pub(crate) fn bench_config(
    mock: &MockUpstream,
    data_dir: &std::path::Path,
    model_data_dir: &std::path::Path,
) -> Config {
    let mut config = Config {
        data_dir: data_dir.to_owned(),
        mode: Mode::Implicit,
        ..Config::default()
    };
    config.upstream.url = mock.base_url();
    config.upstream.api_key = None;
    config.embedding.model_dir = Some(model_data_dir.join("models/all-MiniLM-L6-v2"));
    config.embedding.onnxruntime = Some(model_data_dir.join("lib/libonnxruntime.so.1.24.4"));
    config.memory.extraction_debounce = Duration::from_secs(3600);
    config
}

async fn measure(options: &ImplicitBench, store: &Backend) -> anyhow::Result<()> {
    let mock = MockUpstream::start().await?;
    let data = tempfile::tempdir()?;
    let mut config = bench_config(&mock, data.path(), &options.model_data_dir);
    let database = match store {
        Backend::Sqlite => None,
        Backend::Postgres(server) => {
            let database = BenchDatabase::create(server).await?;
            config.store.backend = crate::store::Backend::Postgres;
            config.store.url = Some(crate::secret::Secret::new(database.url.clone()));
            Some(database)
        }
    };
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let server = crate::server::start_on(listener, config, Arc::new(LogExchanges)).await?;
    let memory = Arc::clone(&server.state.memory);
    let model = memory.embedder().model_id().to_owned();

    let mut rng = Rng(0x5DEE_CE66_D1CE_4E5D);
    let pool_texts: Vec<String> = (0..1000).map(|_| sentence(&mut rng)).collect();
    let pool_vectors = memory.embedder().embed(pool_texts.clone()).await?;
    let scope = UserScope::new("default", "bench-user");
    let mut batch = Vec::new();
    for n in 0..options.memories {
        batch.push(synthetic_memory(
            n,
            &pool_texts,
            &pool_vectors,
            &model,
            &mut rng,
        ));
        if batch.len() == 5000 || n + 1 == options.memories {
            memory
                .insert_embedded(&scope, std::mem::take(&mut batch), "bench")
                .await?;
        }
    }
    memory.flush().await?;
    if let Some(database) = &database {
        // As autovacuum would have by then in a running deployment (see `bench retrieval`).
        database.analyze().await?;
    }

    let client = reqwest::Client::new();
    let (proxy_url, direct_url) = (
        format!("{}/v1/chat/completions", server.url()),
        format!("{}/chat/completions", mock.base_url()),
    );
    let (mut preprocess, mut through, mut direct, mut injected) =
        (Vec::new(), Vec::new(), Vec::new(), 0);
    for i in 0..options.requests + 10 {
        let source = &pool_texts[(rng.next() % pool_texts.len() as u64) as usize];
        let words: Vec<&str> = source.split_whitespace().collect();
        let opening = if options.first_person {
            "What did I tell you about this"
        } else {
            "What do you remember about this"
        };
        let question = format!("{opening}: {}?", words[..words.len().min(5)].join(" "));
        let body = json!({"model": "mock-model", "messages": [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": question},
        ]});
        let started = Instant::now();
        client
            .post(&direct_url)
            .json(&body)
            .send()
            .await?
            .bytes()
            .await?;
        let direct_time = started.elapsed();
        let started = Instant::now();
        let response = client
            .post(&proxy_url)
            .header("x-memproxy-user", "bench-user")
            .header("x-memproxy-conversation", format!("bench-{i}"))
            .json(&body)
            .send()
            .await?;
        let header = |name: &str| super::header_number(&response, name);
        let (overhead_ms, memories) = (
            header("x-memproxy-overhead-ms"),
            header("x-memproxy-memories"),
        );
        anyhow::ensure!(
            response.headers().get("x-memproxy-degraded").is_none(),
            "a request was degraded"
        );
        response.bytes().await?;
        if i >= 10 {
            // The first requests warm caches and are not counted.
            preprocess.push(Duration::from_secs_f64(overhead_ms / 1e3));
            through.push(started.elapsed());
            direct.push(direct_time);
            injected += memories as usize;
        }
    }
    for samples in [&mut preprocess, &mut through, &mut direct] {
        samples.sort_unstable();
    }
    println!(
        "memproxy bench implicit ({}): {} memories for the user, {} requests, local all-MiniLM-L6-v2",
        store.name(),
        options.memories,
        options.requests
    );
    println!(
        "pre-processor (store turn, embed, retrieve, inject): p50 {:.2} ms  p99 {:.2} ms",
        quantile_ms(&preprocess, 0.5),
        quantile_ms(&preprocess, 0.99)
    );
    println!(
        "end to end, direct to the upstream:                 p50 {:.2} ms  p99 {:.2} ms",
        quantile_ms(&direct, 0.5),
        quantile_ms(&direct, 0.99)
    );
    println!(
        "end to end, through memproxy (implicit):            p50 {:.2} ms  p99 {:.2} ms",
        quantile_ms(&through, 0.5),
        quantile_ms(&through, 0.99)
    );
    println!(
        "memories injected per request: {:.1} on average",
        injected as f64 / options.requests.max(1) as f64
    );
    if options.cold_chats > 0 {
        super::cold::ColdChat {
            client: &client,
            proxy_url: &proxy_url,
            memory: &memory,
            exchanges: options.cold_exchanges,
            chats: options.cold_chats,
        }
        .run(&mut rng)
        .await?;
    }
    server.shutdown().await;
    drop(memory);
    if let Some(database) = database {
        database.drop().await?;
    }
    Ok(())
}
