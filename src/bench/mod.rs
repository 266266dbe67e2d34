//! Benchmarks that print figures (never assertions): `memproxy bench proxy|retrieval|implicit|
//! replicas|load|soak`.

mod cold;
mod implicit;
mod load;
mod measure;
mod proxy;
mod replicas;
mod retrieval;
mod soak;

pub use measure::{header_number, quantile_ms, rss_mib};

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
