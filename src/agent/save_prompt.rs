//! The background save asked inside the agent's own prompt. A one-slot local server keeps the
//! prompt cache of the last request only: a save in a prompt of its own (the memory LLM's, about
//! 500 tokens) evicts the agent's prompt, and the re-warm after it processes all of it again
//! (the longest call of a turn on a local server: docs/eval-history.md). Asked instead at the end of the agent's prompt
//! as the next turn opens it (the re-warm's request plus one message), the save reuses what the
//! server holds up to this turn's messages and leaves the whole prompt cached for the next turn:
//! no re-warm follows. The question is the extraction prompt itself and its answer passes the
//! same gates as the memory LLM's ([`crate::postprocess::turn_facts`]); the tools stay offered
//! (another tool list would change the prompt's start), so the answer is asked for in words, not
//! by `response_format`, which servers do not combine with tools. An answer with no list of facts
//! in it is asked again of the memory LLM in its own prompt.

use serde_json::json;

use super::model::ChatModel;
use super::turn_types::TurnInput;
use super::{Agents, Rewarm};
use crate::postprocess::turn_facts;

/// Opens the question, so that the model answers it rather than the user.
const QUESTION: &str = "[A memory check from the system, not a message from the user. Do not \
answer the user and call no tool: answer only with the JSON object the instructions below ask for.]";

/// Answers are capped like the memory LLM's when it has no cap of its own.
const MAX_TOKENS: u32 = 512;

/// What the save inside the prompt found.
pub(super) struct Found {
    pub facts: Vec<String>,
    pub refused: usize,
    pub prompt_tokens: u64,
    pub cached_tokens: Option<u64>,
}

impl Agents {
    /// Whether this turn's background save is asked inside the agent's prompt
    /// (`explicit.save_in_prompt`): `auto` where a prompt of its own would evict the agent's
    /// from the cache the re-warm keeps, i.e. the memory LLM is the chat model on the chat
    /// upstream at `url` and the re-warm applies there (`one_local_cache`:
    /// [`Agents::one_local_cache`]).
    pub fn saves_in_prompt(&self, input: &TurnInput, url: &str, one_local_cache: bool) -> bool {
        match self.config.save_in_prompt {
            Rewarm::Always => true,
            Rewarm::Never => false,
            Rewarm::Auto => {
                let same_model = self
                    .summarizer
                    .model()
                    .is_none_or(|model| model == input.model);
                self.memory_llm_on(url) && same_model && self.rewarms_on(one_local_cache)
            }
        }
    }

    /// Asks `model`, at the end of the agent's prompt as the next turn opens it, for the facts of
    /// `said` (`(role, text)`, the turn) at `at_ms`, and reads them through the gates.
    pub(super) async fn extract_in_prompt(
        &self,
        model: &dyn ChatModel,
        input: &TurnInput,
        said: &[(&str, &str)],
        earlier: &[String],
        at_ms: i64,
    ) -> Result<Found, String> {
        let mut body = self.warm_body(input).await?;
        let question = format!(
            "{QUESTION}\n\n{}\n\n{}",
            self.extract_prompt.trim(),
            turn_facts::material(said, at_ms)
        );
        if let Some(messages) = body["messages"].as_array_mut() {
            messages.push(json!({"role": "user", "content": question}));
        }
        body["temperature"] = json!(0);
        body["max_tokens"] = json!(self.summarizer.max_tokens().unwrap_or(MAX_TOKENS));
        let answer = model.complete(body).await.map_err(|e| e.to_string())?;
        let (facts, refused) = turn_facts::read(&answer.content, said, earlier, at_ms)?;
        Ok(Found {
            facts,
            refused,
            prompt_tokens: answer.usage.prompt_tokens,
            cached_tokens: answer.cached_tokens,
        })
    }
}
