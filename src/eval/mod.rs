//! `memproxy eval …`: measure memory quality on benchmark data (figures, not assertions).

mod locomo;
mod strategies;

use clap::Subcommand;
use serde::Deserialize;

/// A LoCoMo question.
#[derive(Deserialize)]
pub(crate) struct Question {
    pub question: String,
    #[serde(default)]
    pub evidence: Vec<String>,
    pub category: u8,
}

/// A LoCoMo turn.
#[derive(Deserialize)]
pub(crate) struct Turn {
    pub speaker: String,
    pub dia_id: String,
    pub text: String,
    #[serde(default)]
    pub blip_caption: Option<String>,
}

impl Turn {
    /// The turn as a chat message: its text, and the photo it shares described in words.
    pub fn content(&self) -> String {
        match &self.blip_caption {
            Some(caption) => format!("{} [shares a photo of {caption}]", self.text),
            None => self.text.clone(),
        }
    }
}

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
