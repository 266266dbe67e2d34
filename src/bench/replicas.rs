//! `memproxy bench replicas`: implicit-mode requests per second through one memproxy and through
//! two on one PostgreSQL, side by side in one run, on the scripted upstream with the real local
//! embedding model.
//!
//! Both replicas run in this process (each with its own store, pool and runtime, as two processes
//! would have) and share this machine's cores with the database and the load generator: the
//! figure shows what a second replica adds here, not on a machine per replica.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use clap::Args;
use serde_json::json;
use tokio::net::TcpListener;

use super::quantile_ms;
use super::retrieval::{sentence, synthetic_memory, BenchDatabase, Rng};
use crate::config::Config;
use crate::hooks::LogExchanges;
use crate::mock::MockUpstream;
use crate::server::RunningServer;
use crate::store::UserScope;

#[derive(Args, Clone)]
pub struct ReplicasBench {
    /// A PostgreSQL server URL whose user may create databases.
    #[arg(long, env = "MEMPROXY_BENCH_DATABASE_URL", hide_env_values = true)]
    postgres: String,
    /// Users (each with `memories` memories); requests pick one at random.
    #[arg(long, default_value_t = 20)]
    users: usize,
    #[arg(long, default_value_t = 500)]
    memories: usize,
    /// Requests measured per layout.
    #[arg(long, default_value_t = 600)]
    requests: usize,
    /// Requests in flight at once.
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    /// Where the local model is installed (scripts/fetch-model).
    #[arg(long, default_value = "./.memproxy")]
    model_data_dir: PathBuf,
}

async fn replica(config: &Config) -> anyhow::Result<RunningServer> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    crate::server::start_on(listener, config.clone(), Arc::new(LogExchanges)).await
}

pub async fn run(options: ReplicasBench) -> anyhow::Result<()> {
    let mock = MockUpstream::start().await?;
    let database = BenchDatabase::create(&options.postgres).await?;
    let data = tempfile::tempdir()?;
    let mut config = super::implicit::bench_config(&mock, data.path(), &options.model_data_dir);
    config.store.backend = crate::store::Backend::Postgres;
    config.store.url = Some(crate::secret::Secret::new(database.url.clone()));
    let first = replica(&config).await?;
    let memory = Arc::clone(&first.state.memory);
    let model = memory.embedder().model_id().to_owned();
    let mut rng = Rng(0xA076_1D64_78BD_642F);
    let pool_texts: Vec<String> = (0..500).map(|_| sentence(&mut rng)).collect();
    let pool_vectors = memory.embedder().embed(pool_texts.clone()).await?;
    for user in 0..options.users {
        let batch = (0..options.memories)
            .map(|i| {
                let n = user * options.memories + i;
                synthetic_memory(n, &pool_texts, &pool_vectors, &model, &mut rng)
            })
            .collect();
        memory
            .insert_embedded(
                &UserScope::new("default", format!("user-{user}")),
                batch,
                "bench",
            )
            .await?;
    }
    drop(memory);
    let second = replica(&config).await?;
    println!(
        "memproxy bench replicas: implicit mode on PostgreSQL, {} users x {} memories, {} requests, {} in flight, {} cores",
        options.users,
        options.memories,
        options.requests,
        options.concurrency,
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    println!(
        "{:>9} {:>10} {:>9} {:>9} {:>7}",
        "replicas", "requests/s", "p50 ms", "p99 ms", "errors"
    );
    let urls = [first.url(), second.url()];
    for count in [1, 2, 1, 2] {
        let (rate, p50, p99, errors) =
            load(&urls[..count], &pool_texts, &options, &mut rng).await?;
        println!("{count:>9} {rate:>10.1} {p50:>9.1} {p99:>9.1} {errors:>7}");
    }
    println!("(each layout measured twice, alternating; requests spread round-robin)");
    first.shutdown().await;
    second.shutdown().await;
    database.drop().await?;
    Ok(())
}

/// Sends `options.requests` implicit chats spread over `urls`; returns requests/s, p50, p99 and
/// the failed requests.
async fn load(
    urls: &[String],
    pool: &[String],
    options: &ReplicasBench,
    rng: &mut Rng,
) -> anyhow::Result<(f64, f64, f64, usize)> {
    let client = reqwest::Client::new();
    let requests: Vec<(String, serde_json::Value, String)> = (0..options.requests)
        .map(|i| {
            let user = format!("user-{}", rng.next() % options.users.max(1) as u64);
            let source = &pool[(rng.next() % pool.len() as u64) as usize];
            let words: Vec<&str> = source.split_whitespace().collect();
            let body = json!({"model": "mock-model", "messages": [
                {"role": "user", "content": format!("What do you remember about {}?", words[..words.len().min(5)].join(" "))},
            ]});
            (
                format!("{}/v1/chat/completions", urls[i % urls.len()]),
                body,
                user,
            )
        })
        .collect();
    let queue = Arc::new(tokio::sync::Mutex::new(requests.into_iter()));
    let started = Instant::now();
    let mut workers = Vec::new();
    for _ in 0..options.concurrency.max(1) {
        let (queue, client) = (Arc::clone(&queue), client.clone());
        workers.push(tokio::spawn(async move {
            let (mut times, mut errors) = (Vec::new(), 0);
            loop {
                let next = queue.lock().await.next();
                let Some((url, body, user)) = next else {
                    break;
                };
                let sent = Instant::now();
                let ok = match client
                    .post(&url)
                    .header("x-memproxy-user", &user)
                    .json(&body)
                    .send()
                    .await
                {
                    Ok(response) => {
                        response.status().is_success() && response.bytes().await.is_ok()
                    }
                    Err(_) => false,
                };
                times.push(sent.elapsed());
                errors += usize::from(!ok);
            }
            (times, errors)
        }));
    }
    let (mut times, mut errors) = (Vec::new(), 0);
    for worker in workers {
        let (t, e) = worker.await?;
        times.extend(t);
        errors += e;
    }
    let elapsed = started.elapsed().as_secs_f64();
    times.sort_unstable();
    Ok((
        times.len() as f64 / elapsed,
        quantile_ms(&times, 0.5),
        quantile_ms(&times, 0.99),
        errors,
    ))
}
