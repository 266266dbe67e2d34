//! `memproxy eval …`: measure memory quality on benchmark data (figures, not assertions).

mod locomo;
mod strategies;

use clap::Subcommand;

#[derive(Subcommand)]
pub enum EvalCommand {
    /// Retrieval recall@k on LoCoMo: does the retrieved context contain the evidence turns?
    Retrieval(locomo::RetrievalEval),
    /// Prompt tokens per strategy on a LoCoMo conversation replayed turn by turn, and whether
    /// implicit mode gets the evidence to the model.
    Strategies(strategies::StrategiesEval),
}

pub async fn run(command: EvalCommand) -> anyhow::Result<()> {
    match command {
        EvalCommand::Retrieval(options) => locomo::run(options).await,
        EvalCommand::Strategies(options) => strategies::run(options).await,
    }
}
