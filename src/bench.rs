//! Benchmarks (placeholder while the proxy core lands).
#[derive(clap::Subcommand)]
pub enum BenchCommand {}
pub async fn run(command: BenchCommand) -> anyhow::Result<()> {
    match command {}
}
