//! `memproxy bench proxy`: what memproxy adds to a request, measured side by side.
//!
//! Starts the scripted upstream (answers instantly) and a passthrough memproxy in front of it, then
//! sends the same requests directly and through memproxy, alternating rounds so that noise on this
//! shared machine falls on both sides alike. Prints p50/p99 latency, throughput and the difference
//! (the overhead) per concurrency level, non-streaming and streaming. Figures, never assertions.
//! `--api messages,responses` measures the Anthropic Messages and Responses surfaces too: the same
//! question asked in their shape through memproxy (translated to Chat Completions and back, and a
//! Responses answer logged for `previous_response_id`), against the same direct chat request.
//! `messages-native` and `responses-native` ask a second memproxy configured with an upstream per
//! API (`[upstream.messages]`, `[upstream.responses]`, the mock speaking both), against the same
//! request sent to the mock directly: the same-API relay. `ollama` asks Ollama's `/api/chat`
//! (translated, NDJSON streams), `ollama-native` the same relayed to `[upstream.ollama]`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use futures_util::StreamExt;
use serde_json::{json, Value};
use tokio::net::TcpListener;

use crate::config::Config;
use crate::hooks::LogExchanges;
use crate::mock::MockUpstream;

#[derive(Args, Clone)]
pub struct ProxyBench {
    /// Requests per target, kind and concurrency level (split over the rounds).
    #[arg(long, default_value_t = 4000)]
    requests: usize,
    /// Concurrency levels, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,64")]
    concurrency: Vec<usize>,
    /// Alternating direct/proxy rounds per measurement.
    #[arg(long, default_value_t = 4)]
    rounds: usize,
    /// APIs asked through memproxy: chat, messages, responses (translated to the chat upstream),
    /// ollama (translated to the chat upstream), messages-native, responses-native,
    /// ollama-native (relayed to an upstream of that API); comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "chat")]
    api: Vec<String>,
}

#[derive(Clone, Copy, PartialEq)]
enum Target {
    Direct,
    Proxy,
}

struct Sample {
    latencies: Vec<Duration>,
    wall: Duration,
}

pub async fn run(options: ProxyBench) -> anyhow::Result<()> {
    let mock = MockUpstream::start().await?;
    mock.forget();
    let data = tempfile::tempdir()?;
    let mut config = Config {
        data_dir: data.path().to_owned(),
        ..Config::default()
    };
    config.upstream.url = mock.base_url();
    config.upstream.api_key = None;
    // Passthrough never embeds; the mock's endpoint spares loading the local model.
    config.embedding.provider = crate::embed::EmbeddingProvider::Openai;
    config.embedding.url = mock.base_url();
    config.embedding.dimensions = 64;
    let mut native_config = config.clone();
    let api_upstream = crate::upstream::ApiUpstream {
        url: mock.base_url(),
        ..Default::default()
    };
    native_config.upstream.messages = Some(api_upstream.clone());
    native_config.upstream.responses = Some(api_upstream);
    native_config.upstream.ollama = Some(crate::upstream::ApiUpstream {
        url: mock.addr_url(),
        ..Default::default()
    });
    native_config.data_dir = data.path().join("native");
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let server = crate::server::start_on(listener, config, Arc::new(LogExchanges)).await?;
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let native_server =
        crate::server::start_on(listener, native_config, Arc::new(LogExchanges)).await?;
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(256)
        .tcp_nodelay(true)
        .build()?;

    println!("memproxy bench proxy: scripted upstream answering instantly, passthrough mode,");
    println!(
        "{} requests per row, {} alternating rounds, {} cores; latencies in microseconds.\n",
        options.requests,
        options.rounds,
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    println!(
        "{:<24} {:>5}  {:<8} {:>9} {:>9} {:>10}",
        "kind", "conc", "target", "p50", "p99", "req/s"
    );
    for (api, stream) in options
        .api
        .iter()
        .flat_map(|api| [(api.as_str(), false), (api.as_str(), true)])
    {
        let body = request_body(api, stream)?;
        let (proxy_url, direct_url, direct_body) = match api.strip_suffix("-native") {
            Some(native) => (
                format!("{}{}", native_server.url(), path_of(native)?),
                format!("{}{}", mock.addr_url(), path_of(native)?),
                body.clone(),
            ),
            None => (
                format!("{}{}", server.url(), path_of(api)?),
                format!("{}/chat/completions", mock.base_url()),
                request_body("chat", stream)?,
            ),
        };
        // Warm both paths (connections, allocator, lazy statics) before measuring.
        measure(&client, &direct_url, &direct_body, stream, 200, 8).await?;
        measure(&client, &proxy_url, &body, stream, 200, 8).await?;
        for &concurrency in &options.concurrency {
            let per_round = (options.requests / options.rounds.max(1)).max(concurrency);
            let mut direct = Vec::new();
            let mut proxied = Vec::new();
            let (mut direct_wall, mut proxy_wall) = (Duration::ZERO, Duration::ZERO);
            for round in 0..options.rounds.max(1) {
                let order = if round % 2 == 0 {
                    [Target::Direct, Target::Proxy]
                } else {
                    [Target::Proxy, Target::Direct]
                };
                for target in order {
                    let (url, body) = if target == Target::Direct {
                        (&direct_url, &direct_body)
                    } else {
                        (&proxy_url, &body)
                    };
                    let sample =
                        measure(&client, url, body, stream, per_round, concurrency).await?;
                    let (all, wall) = if target == Target::Direct {
                        (&mut direct, &mut direct_wall)
                    } else {
                        (&mut proxied, &mut proxy_wall)
                    };
                    all.extend(sample.latencies);
                    *wall += sample.wall;
                }
            }
            let kind = format!("{api} {}", if stream { "stream" } else { "whole" });
            let direct_row = summarize(&mut direct, direct_wall);
            let proxy_row = summarize(&mut proxied, proxy_wall);
            for (target, row) in [("direct", direct_row), ("memproxy", proxy_row)] {
                println!(
                    "{kind:<24} {concurrency:>5}  {target:<8} {:>9.0} {:>9.0} {:>10.0}",
                    row.p50, row.p99, row.throughput
                );
            }
            println!(
                "{kind:<24} {concurrency:>5}  {:<8} {:>+9.0} {:>+9.0} {:>+9.1}%",
                "overhead",
                proxy_row.p50 - direct_row.p50,
                proxy_row.p99 - direct_row.p99,
                (proxy_row.throughput / direct_row.throughput - 1.0) * 100.0
            );
        }
    }
    let (count, seconds) = server.state.metrics.overhead_totals();
    if count > 0 {
        println!(
            "\nmemproxy's own overhead histogram: {count} chat requests, mean {:.0} us in memproxy code",
            seconds / count as f64 * 1e6
        );
    }
    server.shutdown().await;
    native_server.shutdown().await;
    Ok(())
}

const SYSTEM: &str = "You are a helpful assistant.";
const QUESTION: &str = "Say something short about benchmarks, please.";

/// The same question in each API's shape.
fn request_body(api: &str, stream: bool) -> anyhow::Result<Value> {
    Ok(match api.trim_end_matches("-native") {
        "chat" => json!({"model": "mock-model", "stream": stream, "messages": [
            {"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]}),
        "messages" => json!({"model": "mock-model", "stream": stream, "max_tokens": 64,
            "system": SYSTEM, "messages": [{"role": "user", "content": QUESTION}]}),
        "responses" => json!({"model": "mock-model", "stream": stream,
            "instructions": SYSTEM, "input": QUESTION}),
        "ollama" => json!({"model": "mock-model", "stream": stream, "messages": [
            {"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]}),
        other => anyhow::bail!(
            "unknown API '{other}' (chat, messages, responses, ollama, and each -native)"
        ),
    })
}

fn path_of(api: &str) -> anyhow::Result<&'static str> {
    Ok(match api {
        "chat" => "/v1/chat/completions",
        "messages" => "/v1/messages",
        "responses" => "/v1/responses",
        "ollama" => "/api/chat",
        other => anyhow::bail!("unknown API '{other}' (chat, messages, responses, ollama)"),
    })
}

async fn measure(
    client: &reqwest::Client,
    url: &str,
    body: &Value,
    stream: bool,
    requests: usize,
    concurrency: usize,
) -> anyhow::Result<Sample> {
    let body = Arc::new(serde_json::to_vec(body)?);
    let started = Instant::now();
    let per_worker = requests.div_ceil(concurrency.max(1));
    let workers = (0..concurrency.max(1)).map(|_| {
        let client = client.clone();
        let url = url.to_owned();
        let body = Arc::clone(&body);
        tokio::spawn(async move {
            let mut latencies = Vec::with_capacity(per_worker);
            for _ in 0..per_worker {
                let began = Instant::now();
                one_request(&client, &url, &body, stream).await?;
                latencies.push(began.elapsed());
            }
            anyhow::Ok(latencies)
        })
    });
    let mut latencies = Vec::with_capacity(requests);
    for worker in futures_util::future::join_all(workers).await {
        latencies.extend(worker??);
    }
    Ok(Sample {
        latencies,
        wall: started.elapsed(),
    })
}

async fn one_request(
    client: &reqwest::Client,
    url: &str,
    body: &Arc<Vec<u8>>,
    stream: bool,
) -> anyhow::Result<()> {
    let response = client
        .post(url)
        .header("content-type", "application/json")
        .body(body.as_ref().clone())
        .send()
        .await?;
    anyhow::ensure!(
        response.status().is_success(),
        "status {}",
        response.status()
    );
    if stream {
        let mut chunks = response.bytes_stream();
        while let Some(chunk) = chunks.next().await {
            chunk?;
        }
    } else {
        response.bytes().await?;
    }
    Ok(())
}

#[derive(Clone, Copy)]
struct Row {
    p50: f64,
    p99: f64,
    throughput: f64,
}

fn summarize(latencies: &mut [Duration], wall: Duration) -> Row {
    latencies.sort_unstable();
    let at = |q: f64| {
        let index = ((latencies.len() as f64 - 1.0) * q).round() as usize;
        latencies.get(index).map_or(0.0, |d| d.as_secs_f64() * 1e6)
    };
    Row {
        p50: at(0.50),
        p99: at(0.99),
        throughput: latencies.len() as f64 / wall.as_secs_f64().max(1e-9),
    }
}
