//! The background save (Letta's sleep-time idea, for explicit mode): a small model often answers
//! without saving what the user told it, and once the conversation outgrows the window that fact
//! is gone from view. After a recorded turn in which the agent wrote nothing to memory although
//! the user said something, one memory LLM call, off the request path, extracts what is worth
//! keeping (the implicit-mode extraction prompt and gates). Each fact goes through core-memory
//! hygiene into `human` (a duplicate is skipped) and so into the user's facts, or into the user's
//! facts alone when the block is full (`archival_memory_search` finds them). The writes wait for the agent's turn lock, so they never interleave with a turn, and the step
//! appears in the trace as `(background_save)`.

use super::model::ChatModel;
use super::{hygiene, one_memory, tools, Agents, TurnInput, TurnOutcome};
use crate::memory::human_lines::HUMAN;
use crate::store::{now_ms, StepRecord};

/// Fewer words than this from the user in a turn: nothing to save ("hi", "thanks").
const MIN_WORDS: usize = 4;
pub const SAVE_STEP: &str = "(background_save)";

impl Agents {
    /// Whether a finished turn gets a background save: the turn was recorded and answered, the
    /// agent saved nothing, and the user stated something. A turn in which the user only asked
    /// ([`crate::text::only_asks`]: every clause ends in a question mark) gets none: the gates
    /// refuse a fact whose source is a question (`grounding`), so the save could keep nothing of
    /// the user's, and on a one-slot server its prompt would evict the agent's.
    pub fn needs_save(&self, input: &TurnInput, outcome: &TurnOutcome) -> bool {
        let saved = outcome
            .steps
            .iter()
            .any(|s| tools::writes(&s.tool) && s.status == "ok");
        let words: usize = outcome
            .said
            .iter()
            .map(|m| m.split_whitespace().count())
            .sum();
        self.config.background_save
            && input.record
            && outcome.reply().is_some()
            && !saved
            && words >= MIN_WORDS
            && !outcome.said.iter().all(|m| crate::text::only_asks(m))
    }

    /// Runs the background save of a turn; every problem is logged and traced, never raised.
    /// With `in_prompt`, the question is asked inside the agent's prompt ([`super::save_prompt`]),
    /// and of the memory LLM in its own prompt when that answer holds no facts. Returns whether
    /// it was answered inside the prompt: the server's cache then holds the agent's prompt as the
    /// next turn opens it.
    pub async fn save_after_turn(
        &self,
        input: TurnInput,
        outcome: TurnOutcome,
        in_prompt: Option<&dyn ChatModel>,
    ) -> bool {
        let started = std::time::Instant::now();
        let at = input.clock.unwrap_or_else(now_ms);
        // What the user answered (their "I'll do exactly that" is about it), then what they said.
        let mut said: Vec<(&str, &str)> = input
            .app_reply
            .iter()
            .map(|m| ("assistant", m.as_str()))
            .chain(outcome.said.iter().map(|m| ("user", m.as_str())))
            .collect();
        said.push(("assistant", outcome.reply().unwrap_or_default()));
        // The user's earlier messages, for who the names opening their sentences are.
        let earlier =
            crate::postprocess::turn_facts::earlier(&self.memory, &input.scope, &said).await;
        let found = match in_prompt {
            Some(model) => match self
                .extract_in_prompt(model, &input, &said, &earlier, at)
                .await
            {
                Ok(found) => Some(found),
                Err(error) => {
                    tracing::warn!(%error, "background save: no facts in the answer inside the agent's prompt; asking the memory LLM");
                    None
                }
            },
            None => None,
        };
        let warmed = found.is_some();
        let (prompt_tokens, cached_tokens) = found.as_ref().map_or((0, None), |found| {
            let cached = found.cached_tokens.map(|n| n as i64);
            (found.prompt_tokens as i64, cached)
        });
        let extracted = match found {
            Some(found) => Ok((found.facts, found.refused)),
            None => {
                crate::postprocess::turn_facts::extract(
                    &self.summarizer,
                    &self.extract_prompt,
                    &input.model,
                    &said,
                    &earlier,
                    at,
                )
                .await
            }
        };
        let _turn_guard = self.turn_lock(&input.scope, &input.agent).await;
        let (status, result) = match extracted {
            Ok((facts, refused)) => {
                let mut saved = Vec::new();
                for fact in facts {
                    match self.save_fact(&input, &outcome.said, &fact, at).await {
                        Ok(Some(place)) => saved.push(format!("{place}: {fact}")),
                        Ok(None) => {}
                        Err(error) => {
                            tracing::warn!(%error, "background save: a fact could not be written")
                        }
                    }
                }
                let result = format!(
                    "{} saved ({}), {refused} refused by the gates",
                    saved.len(),
                    saved.join("; ")
                );
                ("ok", result)
            }
            Err(error) => ("failed", error),
        };
        tracing::info!(turn = %outcome.turn, status, %result, "background save");
        let record = StepRecord {
            turn: outcome.turn.clone(),
            step: outcome.steps.len() as i64 + 1,
            tool: SAVE_STEP.to_owned(),
            arguments: String::new(),
            status: status.to_owned(),
            result,
            heartbeat: false,
            prompt_tokens,
            completion_tokens: 0,
            cached_tokens,
            latency_ms: started.elapsed().as_secs_f64() * 1e3,
            created_at_ms: now_ms(),
        };
        let (scope, agent, keep) = (
            input.scope.clone(),
            input.agent.clone(),
            self.config.trace_turns,
        );
        if let Err(error) = self
            .memory
            .blocking(move |store, _| Ok(store.record_steps(&scope, &agent, &[record], keep)?))
            .await
        {
            tracing::warn!(%error, "background save: the step could not be traced");
        }
        warmed
    }

    /// One fact into `human` (through hygiene), or archival memory when the block is full.
    /// `Ok(None)`: already there.
    async fn save_fact(
        &self,
        input: &TurnInput,
        said: &[String],
        fact: &str,
        at: i64,
    ) -> Result<Option<&'static str>, String> {
        let (scope, agent, text) = (input.scope.clone(), input.agent.clone(), fact.to_owned());
        let said = said.to_vec();
        let (edited, before) = self
            .memory
            .blocking(move |store, _| {
                let mut before = String::new();
                let edited = store.edit_core_block(&scope, &agent, HUMAN, &mut |block| {
                    before.clone_from(&block.value);
                    // The fact has passed the gates with the user's earlier names
                    // (`turn_facts::read`); hygiene reads the block's.
                    let value =
                        hygiene::append_at(HUMAN, &block.value, &text, &said, &[], Some(at))?;
                    if value.chars().count() as i64 > block.char_limit {
                        return Err(FULL.to_owned());
                    }
                    Ok(value)
                })?;
                Ok((edited, before))
            })
            .await
            .map_err(|e| e.to_string())?;
        // Either way the fact is one of the user's facts (one memory under every mode).
        match edited {
            Ok(Ok(block)) => {
                let edit = one_memory::edit_of(&before, &block.value);
                one_memory::human_edited(
                    &self.memory,
                    &input.scope,
                    &input.agent,
                    edit,
                    at,
                    SAVE_STEP,
                )
                .await
                .map_err(|e| e.to_string())?;
                Ok(Some("human"))
            }
            Ok(Err(refused)) if refused == FULL => {
                if self.memory.check_text(fact).is_ok() {
                    one_memory::fact_saved(
                        &self.memory,
                        &input.scope,
                        &input.agent,
                        fact,
                        at,
                        SAVE_STEP,
                    )
                    .await
                    .map_err(|e| e.to_string())?;
                } else {
                    self.memory
                        .insert_passage(&input.scope, &input.agent, fact)
                        .await
                        .map_err(|e| e.to_string())?;
                }
                Ok(Some("archival"))
            }
            // A duplicate, or a line hygiene refuses: the block keeps what it has.
            Ok(Err(_)) | Err(_) => Ok(None),
        }
    }
}

const FULL: &str = "full";
