//! `memproxy eval …`: compare memory strategies on conversations with probe questions (answer
//! scores, tokens, latency), and narrower measurements on benchmark data (figures, not assertions).

pub mod audit;
mod audit_calibrate;
mod audit_gates;
mod audit_judge;
mod audit_run;
pub mod ceiling;
mod client;
pub mod dataset;
mod locomo;
mod locomo_data;
pub mod pair;
mod report;
pub mod run;
pub mod score;
pub mod store_stats;
mod strategies;
pub mod tap;
pub mod work;

use clap::{Args, Subcommand};

#[derive(Subcommand)]
pub enum EvalCommand {
    /// Retrieval recall@k on LoCoMo: does the retrieved context contain the evidence turns?
    Retrieval(locomo::RetrievalEval),
    /// Prompt tokens per strategy on a LoCoMo conversation replayed turn by turn, and whether
    /// implicit mode gets the evidence to the model.
    Strategies(strategies::StrategiesEval),
    /// Labels the memories a finished run left (correct, misattributed, wrong subject, stale,
    /// duplicate, not a fact) with a judge model, and its agreement with a person's labels.
    Audit(audit_run::AuditArgs),
    /// Puts every hand-labelled memory of a dataset to the gates (no model): how many of each
    /// label they would refuse.
    Gates(audit_gates::GatesArgs),
    /// Puts the audit's judge to every hand-labelled memory of a dataset (no run): its
    /// agreement with a person.
    Judge(audit_calibrate::JudgeArgs),
}

/// `memproxy eval --dataset …` compares strategies; the subcommands are narrower measurements.
#[derive(Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct EvalArgs {
    #[command(subcommand)]
    pub command: Option<EvalCommand>,
    #[command(flatten)]
    pub run: pair::RunArgs,
}

pub async fn run(args: EvalArgs) -> anyhow::Result<()> {
    match args.command {
        Some(EvalCommand::Retrieval(options)) => locomo::run(options).await,
        Some(EvalCommand::Strategies(options)) => strategies::run(options).await,
        Some(EvalCommand::Audit(options)) => audit_run::run(options).await,
        Some(EvalCommand::Gates(options)) => audit_gates::run(options),
        Some(EvalCommand::Judge(options)) => audit_calibrate::run(options).await,
        None => run::run(args.run).await,
    }
}
