//! LoCoMo's data as the eval reads it: a question with its evidence turns, and a turn of a
//! session (its speaker, id, text and the photo it shares).

use serde::Deserialize;

/// A LoCoMo question.
#[derive(Deserialize)]
pub(super) struct Question {
    pub question: String,
    #[serde(default)]
    pub evidence: Vec<String>,
    pub category: u8,
}

/// A LoCoMo turn.
#[derive(Deserialize)]
pub(super) struct Turn {
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
