//! Eviction after the turn, off the request path. The step loop evicts when a step's prompt
//! passes `evict_ratio` of the window ([`super::step`]): the summary call then sits on the
//! request path (tens of seconds a turn with a small local model: docs/eval-history.md).
//! After a finished turn, in the tracked after-exchange task and under the agent's turn lock,
//! the agent's context is measured as the next turn will open it, plus as much again as this
//! turn's exchange added. When that would pass the threshold, and the agent has had its
//! memory-pressure step to save what matters, the oldest messages are evicted now, into the
//! recursive summary. The next turn then starts below the threshold; the step loop's own
//! eviction stays for what this cannot foresee (a long message, a paused turn).

use super::context;
use super::state::Turn;
use super::turn_types::{TurnInput, TurnOutcome};
use super::Agents;
use crate::store::StoredMessage;

impl Agents {
    /// Evicts after a finished, recorded turn when the next turn would evict first; whether
    /// it did. Every problem is logged, never raised.
    pub async fn compact_after_turn(&self, input: &TurnInput, outcome: &TurnOutcome) -> bool {
        if !self.config.evict_after_turn || !input.record || outcome.reply().is_none() {
            return false;
        }
        let _turn_guard = self.turn_lock(&input.scope, &input.agent).await;
        // A turn paused on the client's calls since (another request) keeps the context it
        // paused with; its own steps evict if need be.
        let (scope, agent) = (input.scope.clone(), input.agent.clone());
        let paused = self
            .memory
            .blocking(move |store, _| Ok(store.paused_turn(&scope, &agent)?))
            .await;
        if !matches!(paused, Ok(None)) {
            return false;
        }
        // The agent as it is now, without new messages (another turn may have run meanwhile).
        let mut quiet = input.clone();
        quiet.user_messages.clear();
        quiet.tool_results.clear();
        quiet.app_reply = None;
        let mut turn = match self.load_turn(&quiet).await {
            Ok(turn) => turn,
            Err(error) => {
                tracing::warn!(%error, agent = %input.agent, "eviction after the turn: agent not loaded");
                return false;
            }
        };
        turn.id = outcome.turn.clone();
        let step = outcome.steps.len() + 2;
        match self.compact(&mut turn, step).await {
            Ok(0) => false,
            Ok(count) => {
                tracing::info!(agent = %input.agent, turn = %outcome.turn, evicted = count, "evicted after the turn");
                true
            }
            Err(error) => {
                tracing::warn!(%error, agent = %input.agent, "eviction after the turn failed");
                false
            }
        }
    }

    /// Measures, evicts if due, and stores the agent's new state and the step's trace.
    async fn compact(
        &self,
        turn: &mut Turn,
        step: usize,
    ) -> Result<usize, super::turn_types::TurnError> {
        self.ensure_system(turn).await?;
        let window = self.config.context_window(&turn.model);
        let (total, _) = self.measure(turn);
        let next = self.scaled(&turn.model, last_exchange_tokens(&turn.view.queue));
        let due =
            turn.view.alerted && (total + next) as f64 > window as f64 * self.config.evict_ratio;
        if !due {
            return Ok(0);
        }
        let target = (window as f64 * self.config.evict_target_ratio) as usize;
        let count = self.evict(turn, target, step).await?;
        self.ensure_system(turn).await?;
        let steps = std::mem::take(&mut turn.steps);
        let (scope, agent, keep) = (
            turn.scope.clone(),
            turn.agent.clone(),
            self.config.trace_turns,
        );
        let (system, epoch, alerted) =
            (turn.view.system.clone(), turn.view.epoch, turn.view.alerted);
        self.memory
            .blocking(move |store, _| {
                store.record_steps(&scope, &agent, &steps, keep)?;
                let system = system.as_deref().map(|text| (text, epoch));
                Ok(store.set_agent_state(&scope, &agent, system, alerted)?)
            })
            .await?;
        Ok(count)
    }

    /// Our token count scaled by what the upstream reported so far.
    fn scaled(&self, model: &str, tokens: usize) -> usize {
        (tokens as f64 * self.token_scale(model)).ceil() as usize
    }
}

/// Tokens of the queue's last exchange (from its last user message on): about what the next
/// turn will add.
fn last_exchange_tokens(queue: &[StoredMessage]) -> usize {
    let from = queue.iter().rposition(|m| m.role == "user").unwrap_or(0);
    queue[from..]
        .iter()
        .map(|m| context::message_tokens(&context::wire_message(m)))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::super::material::stored_message as message;

    #[test]
    fn the_next_turn_is_estimated_from_the_last_exchange_only() {
        let long = "word ".repeat(200);
        let queue = [
            message("user", &long),
            message("assistant", &long),
            message("user", "Short question?"),
            message("assistant", "Short answer."),
        ];
        let last = last_exchange_tokens(&queue);
        let whole = last_exchange_tokens(&queue[..2]);
        assert!(last > 0 && last < 50, "{last}");
        assert!(whole > 400, "{whole}");
        assert_eq!(last_exchange_tokens(&[]), 0);
    }
}
