//! Benchmarks that print figures (never assertions): `memproxy bench proxy|retrieval|implicit|
//! replicas|load|soak`.

mod cold;
mod implicit;
mod load;
mod proxy;
mod replicas;
mod retrieval;
mod soak;

use clap::Subcommand;

#[derive(Subcommand)]
pub enum BenchCommand {
    /// Added latency of the passthrough proxy vs calling the upstream directly.
    Proxy(proxy::ProxyBench),
    /// Embedding, vector search, hybrid retrieval and insert throughput at N memories.
    Retrieval(retrieval::RetrievalBench),
    /// The implicit pre-processor's added latency for a user with N memories.
    Implicit(implicit::ImplicitBench),
    /// Implicit-mode requests per second through one replica vs two on one PostgreSQL.
    Replicas(replicas::ReplicasBench),
    /// Many concurrent streams (1,000 by default) through passthrough and implicit mode.
    Load(load::LoadBench),
    /// Mixed traffic for a long time, resident memory and open files sampled as it goes.
    Soak(load::SoakBench),
}

pub async fn run(command: BenchCommand) -> anyhow::Result<()> {
    match command {
        BenchCommand::Proxy(options) => proxy::run(options).await,
        BenchCommand::Retrieval(options) => retrieval::run(options).await,
        BenchCommand::Implicit(options) => implicit::run(options).await,
        BenchCommand::Replicas(options) => replicas::run(options).await,
        BenchCommand::Load(options) => load::load(options).await,
        BenchCommand::Soak(options) => soak::soak(options).await,
    }
}

/// p-quantile of sorted durations, in milliseconds.
pub fn quantile_ms(sorted: &[std::time::Duration], q: f64) -> f64 {
    let index = ((sorted.len().max(1) as f64 - 1.0) * q).round() as usize;
    sorted.get(index).map_or(0.0, |d| d.as_secs_f64() * 1e3)
}

/// Resident memory of this process in MiB (Linux), for the reports.
pub fn rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|line| line.starts_with("VmRSS:"))
                .and_then(|line| line.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map_or(0.0, |kib| kib / 1024.0)
}

/// A numeric memproxy answer header (`x-memproxy-*`), 0 when absent.
pub fn header_number(response: &reqwest::Response, name: &str) -> f64 {
    response
        .headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(0.0)
}
