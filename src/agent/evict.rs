//! Overflow handling (architecture §3): evict the oldest messages from the agent's context, fold them
//! into the recursive summary, keep them searchable in recall memory.
//!
//! The summarizer gets the material in chunks that fit half the window, so the summary call
//! itself cannot overflow; if it fails anyway the messages are still evicted (they stay
//! searchable) and the summary says so, because a turn that cannot fit is worse than a gap.

use super::context;
use super::notes;
use super::state::Turn;
use super::turn_types::TurnError;
use super::Agents;
use crate::postprocess::llm::Answer;
use crate::store::{agent_conversation, now_ms, StoredMessage, Summary};
use crate::text::clip;
use crate::tokens;

impl Agents {
    /// Evicts until the prompt is at most `target` tokens; returns how many messages left.
    pub(super) async fn evict(
        &self,
        turn: &mut Turn,
        target: usize,
        step: usize,
    ) -> Result<usize, TurnError> {
        // Evict from one stored list: this turn's messages so far are written first.
        if !turn.buffer.is_empty() {
            let buffer = turn.take_buffer();
            let stored = self
                .memory
                .append_agent_messages(&turn.scope, &turn.agent, buffer)
                .await?;
            turn.view.queue.extend(stored);
        }
        let count = self.evictable(turn, target);
        if count == 0 {
            return Ok(0);
        }
        let evicted: Vec<StoredMessage> = turn.view.queue.drain(..count).collect();
        turn.view.earlier -= count;
        let through = evicted.last().map_or(-1, |m| m.position);
        let previous = turn
            .view
            .summary
            .as_ref()
            .map(|s| s.text.clone())
            .unwrap_or_default();
        let started = std::time::Instant::now();
        let window = self.config.context_window(&turn.model);
        let (text, status, note) = match self
            .summarize(&turn.model, &previous, &evicted, window)
            .await
        {
            Ok(text) => (text, "ok", String::new()),
            Err(error) => {
                tracing::warn!(%error, agent = %turn.agent, "agent summary failed; evicting without it");
                (
                    super::material::unsummarised(&previous, count),
                    "failed",
                    format!(" (summary failed: {error})"),
                )
            }
        };
        let latency = started.elapsed().as_secs_f64() * 1e3;
        turn.llm_ms += latency;
        let summary = Summary {
            conversation: agent_conversation(&turn.agent),
            text,
            through_position: through,
            updated_at_ms: now_ms(),
        };
        let (scope, saved) = (turn.scope.clone(), summary.clone());
        self.memory
            .blocking(move |store, _| Ok(store.put_summary(&scope, &saved)?))
            .await?;
        turn.view.summary = Some(summary);
        // The counts in the system message changed; the alert may be given again later.
        turn.view.system = None;
        turn.view.alerted = false;
        let record = turn.step(
            step,
            "(evict)",
            format!("{{\"target_tokens\":{target}}}"),
            status,
            format!("evicted {count} messages (through position {through}) into the summary{note}"),
        );
        record.latency_ms = latency;
        Ok(count)
    }

    /// A private (read-only) turn may not write a summary: it only leaves the oldest messages
    /// out of its own view, down to `target` tokens. They stay in the agent's queue, in the
    /// stored summary's care next time a recorded turn evicts, and searchable meanwhile.
    pub(super) fn trim_view(&self, turn: &mut Turn, target: usize, step: usize) -> usize {
        let count = self.evictable(turn, target);
        if count > 0 {
            turn.view.queue.drain(..count);
            turn.view.earlier -= count;
            turn.step(
                step,
                "(trim_view)",
                format!("{{\"target_tokens\":{target}}}"),
                "ok",
                format!("left the {count} oldest messages out of this private turn's view (nothing stored)"),
            );
        }
        count
    }

    /// How many of the oldest queued messages must go for the prompt to fit `target` tokens:
    /// never a tool result without its call, never this turn's messages (they start at a user
    /// message, a clean cut for tool pairs).
    fn evictable(&self, turn: &Turn, target: usize) -> usize {
        let (total, _) = self.measure(turn);
        let sizes: Vec<(String, usize)> = turn
            .view
            .queue
            .iter()
            .map(|m| {
                let size = context::message_tokens(&context::wire_message(m));
                (m.role.clone(), size)
            })
            .collect();
        context::eviction_count(&sizes, total, target).min(turn.view.earlier)
    }

    /// Folds `evicted` into `previous`, chunk by chunk, with the memory LLM: each chunk adds its
    /// notes, and past the summary's budget the notes are merged into fewer (`agent::notes`).
    async fn summarize(
        &self,
        model: &str,
        previous: &str,
        evicted: &[StoredMessage],
        window: usize,
    ) -> Result<String, String> {
        let chunk_budget = (window / 2).max(256);
        let (mut notes, tail) = notes::split(previous);
        let mut chunk = String::new();
        let mut chunk_tokens = 0;
        let lines = super::material::material(evicted);
        for (index, line) in lines.iter().enumerate() {
            // A single huge message is cut to fit on its own.
            let line = clip(line, chunk_budget * 3);
            let size = tokens::count(&line);
            if chunk_tokens + size > chunk_budget && !chunk.is_empty() {
                notes.extend(self.notes_of(model, &chunk).await?);
                chunk.clear();
                chunk_tokens = 0;
            }
            chunk.push_str(&line);
            chunk.push('\n');
            chunk_tokens += size;
            if index + 1 == lines.len() {
                notes.extend(self.notes_of(model, &chunk).await?);
            }
        }
        let budget = notes::budget(window);
        if notes::size(&notes) > budget {
            notes = self.merge(model, notes, budget).await;
        }
        Ok(notes::join(&notes, tail.as_deref()))
    }

    /// The notes of one chunk of evicted messages; none that reads as a note is an error.
    async fn notes_of(&self, model: &str, chunk: &str) -> Result<Vec<String>, String> {
        let material = format!("Messages leaving the window:\n{chunk}\n");
        let answer = self.ask_notes(model, &material, notes::MAX_NOTES).await?;
        let notes = notes::parse(&answer, chunk)?;
        if notes.is_empty() {
            return Err("no note of the summary answer reads as one".to_owned());
        }
        Ok(notes)
    }

    /// The memory LLM's answer of at most `most` notes for `material`.
    async fn ask_notes(&self, model: &str, material: &str, most: usize) -> Result<String, String> {
        let schema = notes::schema(most);
        self.summarizer
            .complete(
                model,
                &self.summary_prompt,
                material,
                Answer::Json(notes::SCHEMA_NAME, &schema),
            )
            .await
            .map_err(|e| e.to_string())
    }

    /// The notes merged by the memory LLM into half as many, or, where that fails or is still
    /// too long, the newest that fit `budget` tokens (the older ones' messages stay searchable).
    async fn merge(&self, model: &str, notes: Vec<String>, budget: usize) -> Vec<String> {
        let most = (notes.len() / 2).max(2);
        let material = format!(
            "Notes to merge into at most {most}:\n{}\n",
            notes.join("\n")
        );
        let merged = self
            .ask_notes(model, &material, most)
            .await
            .and_then(|answer| notes::parse(&answer, ""));
        let notes = match merged {
            Ok(merged) if !merged.is_empty() => merged,
            Ok(_) => notes,
            Err(error) => {
                tracing::warn!(%error, "merging the summary's notes failed; keeping the newest");
                notes
            }
        };
        let (kept, dropped) = notes::newest(&notes, budget);
        if dropped > 0 {
            tracing::info!(dropped, "the summary's oldest notes left it");
        }
        kept
    }
}
