//! `memproxy bench soak`: mixed traffic for a long time (implicit and passthrough chats, streamed
//! and whole; explicit turns that write; memory added, listed, searched and exported; the jobs
//! all this queues), with resident memory and open files sampled as it goes. Memory that grows
//! with every request shows as a curve that keeps rising; the report prints the curve and the
//! growth over the second half.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::load::{open_files, SoakBench};
use super::rss_mib;
use crate::mock::MockUpstream;

/// One request of the mix, chosen by `n` (with `reads_only`, one that stores nothing new); whether
/// it succeeded.
async fn one(client: &reqwest::Client, base: &str, n: u64, reads_only: bool) -> bool {
    // Every user gets every kind of request in turn (the kind is n % 10).
    let user = format!("soak-{}", (n / 10) % 50);
    let said = format!("Note {n}: I keep {} hives near the river.", n % 97);
    let chat = |mode: &str, stream: bool, model: &str| {
        client
            .post(format!("{base}/{mode}/v1/chat/completions"))
            .header("x-memproxy-user", &user)
            .header("x-memproxy-record", if reads_only { "false" } else { "true" })
            .json(&json!({"model": model, "stream": stream, "messages": [{"role": "user", "content": said}]}))
    };
    let kind = match (reads_only, n % 10) {
        (true, 6 | 7) => 8,
        (true, 9) => 9,
        (_, kind) => kind,
    };
    let request = match kind {
        0..=2 => chat("implicit", false, "mock-model"),
        3 | 4 => chat("implicit", true, "mock-model"),
        5 => chat("passthrough", true, "mock-model"),
        6 => chat("explicit", false, "mock-archivist"),
        7 => client
            .post(format!("{base}/memproxy/v1/users/{user}/memories"))
            .json(&json!({"text": format!("The user noted {n} things about hives.")})),
        8 => client
            .post(format!("{base}/memproxy/v1/users/{user}/memories/search"))
            .json(&json!({"query": "hives river"})),
        _ => client.get(format!("{base}/memproxy/v1/users/{user}/export")),
    };
    match request.send().await {
        Ok(response) if response.status().is_success() => response.bytes().await.is_ok(),
        _ => false,
    }
}

pub async fn soak(options: SoakBench) -> anyhow::Result<()> {
    let mock = MockUpstream::start().await?;
    mock.forget();
    let data = tempfile::tempdir()?;
    let mut config = super::implicit::bench_config(&mock, data.path(), &options.model_data_dir);
    config.memory.extraction_debounce = Duration::from_secs(1);
    config.explicit.context_window_tokens = 3_000;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let proxy =
        crate::server::start_on(listener, config, Arc::new(crate::hooks::LogExchanges)).await?;
    let base = proxy.url();
    if options.reads_only {
        // Every user's memory first (the first round of the full mix, 20 requests per user).
        let client = reqwest::Client::new();
        for round in 0..(1_000 / options.concurrency.max(1) as u64 + 1) {
            let batch = (0..options.concurrency.max(1) as u64).map(|i| {
                one(
                    &client,
                    &base,
                    round * options.concurrency.max(1) as u64 + i,
                    false,
                )
            });
            futures_util::future::join_all(batch).await;
        }
    }
    let reads_only = options.reads_only;
    let until = Instant::now() + Duration::from_secs(options.minutes * 60);
    let (done, failed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let next = Arc::new(AtomicU64::new(0));
    println!(
        "memproxy bench soak: {} min of {}, {} in flight, sampled every {} s (RSS and open files of this process: load generator + memproxy + scripted upstream)",
        options.minutes,
        if options.reads_only { "traffic that stores nothing new (after 1,000 requests that do)" } else { "mixed traffic" },
        options.concurrency,
        options.sample_secs
    );
    println!(
        "{:>8} {:>9} {:>7} {:>8} {:>6} {:>11}",
        "minute", "requests", "errors", "RSS MiB", "fds", "jobs queued"
    );
    let workers: Vec<_> = (0..options.concurrency.max(1))
        .map(|_| {
            let (client, base) = (reqwest::Client::new(), base.clone());
            let (done, failed, next) = (Arc::clone(&done), Arc::clone(&failed), Arc::clone(&next));
            tokio::spawn(async move {
                while Instant::now() < until {
                    let n = next.fetch_add(1, Ordering::Relaxed);
                    if !one(&client, &base, n, reads_only).await {
                        failed.fetch_add(1, Ordering::Relaxed);
                    }
                    done.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    let started = Instant::now();
    let client = reqwest::Client::new();
    let mut samples: Vec<f64> = Vec::new();
    let mut files: Vec<usize> = Vec::new();
    loop {
        let queued = client
            .get(format!("{base}/memproxy/v1/jobs?state=queued&limit=1000"))
            .send()
            .await
            .ok();
        let queued = match queued {
            Some(response) => response
                .json::<Value>()
                .await
                .ok()
                .and_then(|v| v["data"].as_array().map(Vec::len))
                .unwrap_or(0),
            None => 0,
        };
        let (rss, fds) = (rss_mib(), open_files());
        samples.push(rss);
        files.push(fds);
        println!(
            "{:>8.1} {:>9} {:>7} {:>8.0} {:>6} {:>11}",
            started.elapsed().as_secs_f64() / 60.0,
            done.load(Ordering::Relaxed),
            failed.load(Ordering::Relaxed),
            rss,
            fds,
            queued
        );
        if Instant::now() >= until {
            break;
        }
        tokio::time::sleep(
            Duration::from_secs(options.sample_secs)
                .min(until - Instant::now() + Duration::from_millis(10)),
        )
        .await;
    }
    for worker in workers {
        let _ = worker.await;
    }
    let half = samples.len() / 2;
    let (middle, last) = (
        samples.get(half).copied().unwrap_or(0.0),
        samples.last().copied().unwrap_or(0.0),
    );
    let (files_middle, files_last) = (
        files.get(half).copied().unwrap_or(0),
        files.last().copied().unwrap_or(0),
    );
    println!(
        "RSS: start {:.0} MiB, half-way {middle:.0} MiB, end {last:.0} MiB ({:+.1}% over the second half); open files: half-way {files_middle}, end {files_last}; {} requests, {} errors",
        samples.first().copied().unwrap_or(0.0),
        if middle > 0.0 { (last - middle) / middle * 100.0 } else { 0.0 },
        done.load(Ordering::Relaxed),
        failed.load(Ordering::Relaxed)
    );
    proxy.shutdown().await;
    Ok(())
}
