//! `memproxy bench load` and `memproxy bench soak` (issue 14): many concurrent streams through one
//! memproxy, and hours of mixed traffic with resident memory and open files sampled over time.
//!
//! Both run memproxy in this process in front of the scripted upstream (streams paced like a
//! model's), so the resident memory and open files reported are the load generator's and the
//! proxy's together; the load generator's share is measured before the proxy starts. Loopback
//! only, bounded in count and time.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use serde_json::{json, Value};
use tokio::net::TcpListener;

use super::{quantile_ms, rss_mib};
use crate::hooks::LogExchanges;
use crate::mock::{MockUpstream, Reply};
use crate::server::RunningServer;

#[derive(Args, Clone)]
pub struct LoadBench {
    /// Streams opened at once, per mode.
    #[arg(long, default_value_t = 1000)]
    streams: usize,
    /// Pieces each upstream stream sends, one every `piece_ms`.
    #[arg(long, default_value_t = 20)]
    pieces: usize,
    #[arg(long, default_value_t = 50)]
    piece_ms: u64,
    /// Where the local embedding model is installed (scripts/fetch-model).
    #[arg(long, default_value = "./.memproxy")]
    model_data_dir: PathBuf,
}

#[derive(Args, Clone)]
pub struct SoakBench {
    #[arg(long, default_value_t = 20)]
    pub minutes: u64,
    /// Seconds between samples of resident memory and open files.
    #[arg(long, default_value_t = 30)]
    pub sample_secs: u64,
    /// Requests in flight at once.
    #[arg(long, default_value_t = 32)]
    pub concurrency: usize,
    #[arg(long, default_value = "./.memproxy")]
    pub model_data_dir: PathBuf,
    /// After a first round that stores memory for every user, only traffic that stores nothing
    /// new (chats with `x-memproxy-record: false`, passthrough, searches, exports): memory that
    /// still grows then is not data.
    #[arg(long)]
    pub reads_only: bool,
}

/// Open file descriptors of this process (Linux).
pub fn open_files() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, |dir| dir.count())
}

/// Raises this process's open-file limit to its hard limit (a thousand streams need three
/// thousand sockets here: the client's, the proxy's and the upstream's).
fn raise_open_file_limit() -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit only read and write the struct passed to them.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_cur < limit.rlim_max
        {
            limit.rlim_cur = limit.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit);
    }
    limit.rlim_cur
}

async fn start(
    mock: &MockUpstream,
    data: &std::path::Path,
    model_data_dir: &std::path::Path,
) -> anyhow::Result<RunningServer> {
    let mut config = super::implicit::bench_config(mock, data, model_data_dir);
    config.memory.extraction_debounce = Duration::from_secs(2);
    config.memory.consolidation_delay = None;
    config.explicit.background_save = false;
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    crate::server::start_on(listener, config, Arc::new(LogExchanges)).await
}

/// One streamed chat: `Ok((time to first byte, total, served without memory))` when the whole
/// answer arrived as sent.
async fn one_stream(
    client: &reqwest::Client,
    url: &str,
    user: &str,
    expected: &str,
) -> Result<(Duration, Duration, bool), String> {
    let started = Instant::now();
    let body = json!({"model": "mock-model", "stream": true,
        "messages": [{"role": "user", "content": format!("Stream {user}: tell me about bees.")}]});
    let mut response = client
        .post(url)
        .header("x-memproxy-user", user)
        .json(&body)
        .send()
        .await
        .map_err(|e| format!("no answer: {e}"))?;
    if response.status() != 200 {
        return Err(format!("status {}", response.status()));
    }
    let degraded = response.headers().contains_key("x-memproxy-degraded");
    let mut first = None;
    let mut text = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| format!("broken: {e}"))? {
        first.get_or_insert_with(|| started.elapsed());
        text.extend_from_slice(&chunk);
    }
    let text = String::from_utf8_lossy(&text);
    let content: String = text
        .split("\n\n")
        .filter_map(|event| event.strip_prefix("data: "))
        .filter_map(|data| serde_json::from_str::<Value>(data).ok())
        .filter_map(|chunk| {
            chunk["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_owned)
        })
        .collect();
    if content != expected || !text.trim_end().ends_with("data: [DONE]") {
        return Err(format!("an incomplete answer: {content:?}"));
    }
    Ok((first.unwrap_or_default(), started.elapsed(), degraded))
}

pub async fn load(options: LoadBench) -> anyhow::Result<()> {
    let limit = raise_open_file_limit();
    let (rss_alone, files_alone) = (rss_mib(), open_files());
    let mock = MockUpstream::start().await?;
    mock.forget();
    let data = tempfile::tempdir()?;
    let proxy = start(&mock, data.path(), &options.model_data_dir).await?;
    let pieces: Vec<String> = (0..options.pieces).map(|i| format!("piece{i} ")).collect();
    let expected = pieces.concat();
    println!(
        "memproxy bench load: {} concurrent streams per mode, each {} pieces {} ms apart from the scripted upstream; {} cores; open-file limit {limit}",
        options.streams, options.pieces, options.piece_ms,
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    println!("(RSS and open files are this process's: load generator + memproxy + scripted upstream; the generator alone: {rss_alone:.0} MiB, {files_alone} files)");
    println!(
        "{:<12} {:>7} {:>6} {:>8} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10} {:>10} {:>9}",
        "mode",
        "streams",
        "errors",
        "degraded",
        "in flight",
        "ttfb p50",
        "ttfb p99",
        "total p50",
        "total p99",
        "RSS MiB",
        "peak MiB",
        "peak fds"
    );
    for mode in ["passthrough", "implicit"] {
        for _ in 0..options.streams {
            mock.push(Reply::SlowStream {
                pieces: pieces.clone(),
                delay: Duration::from_millis(options.piece_ms),
            });
        }
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(options.streams)
            .build()?;
        let url = format!("{}/{mode}/v1/chat/completions", proxy.url());
        let in_flight = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(std::sync::Mutex::new((0.0f64, 0usize)));
        let sampling = {
            let peak = Arc::clone(&peak);
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    if let Ok(mut peak) = peak.lock() {
                        peak.0 = peak.0.max(rss_mib());
                        peak.1 = peak.1.max(open_files());
                    }
                }
            })
        };
        let tasks: Vec<_> = (0..options.streams)
            .map(|i| {
                let (client, url, expected) = (client.clone(), url.clone(), expected.clone());
                let (in_flight, most) = (Arc::clone(&in_flight), Arc::clone(&most));
                tokio::spawn(async move {
                    let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    let result =
                        one_stream(&client, &url, &format!("load-{}", i % 100), &expected).await;
                    in_flight.fetch_sub(1, Ordering::SeqCst);
                    result
                })
            })
            .collect();
        let (mut firsts, mut totals, mut errors) = (Vec::new(), Vec::new(), Vec::new());
        let mut degraded = 0;
        for task in tasks {
            match task.await {
                Ok(Ok((first, total, without_memory))) => {
                    degraded += usize::from(without_memory);
                    firsts.push(first);
                    totals.push(total);
                }
                Ok(Err(error)) => errors.push(error),
                Err(error) => errors.push(error.to_string()),
            }
        }
        sampling.abort();
        firsts.sort();
        totals.sort();
        let (peak_rss, peak_files) = peak.lock().map(|p| *p).unwrap_or_default();
        println!(
            "{mode:<12} {:>7} {:>6} {:>8} {:>9} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>10.0} {:>10.0} {:>9}",
            options.streams,
            errors.len(),
            degraded,
            most.load(Ordering::SeqCst),
            quantile_ms(&firsts, 0.5),
            quantile_ms(&firsts, 0.99),
            quantile_ms(&totals, 0.5),
            quantile_ms(&totals, 0.99),
            rss_mib(),
            peak_rss,
            peak_files
        );
        for error in errors.iter().take(5) {
            println!("  error: {error}");
        }
    }
    println!("(degraded: answered without memory, the pre-processor past its time limit; ttfb: time to the first byte)");
    proxy.shutdown().await;
    Ok(())
}
