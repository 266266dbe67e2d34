//! `memproxy eval …`: measure memory quality on benchmark data (figures, not assertions).

mod locomo;

use clap::Subcommand;

#[derive(Subcommand)]
pub enum EvalCommand {
    /// Retrieval recall@k on LoCoMo: does the retrieved context contain the evidence turns?
    Retrieval(locomo::RetrievalEval),
}

pub async fn run(command: EvalCommand) -> anyhow::Result<()> {
    match command {
        EvalCommand::Retrieval(options) => locomo::run(options).await,
    }
}
