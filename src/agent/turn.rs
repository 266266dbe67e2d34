//! One agent turn: [`Agents::run_turn`] opens the turn (or resumes a paused one), runs the step
//! loop ([`super::step`]) and writes what the turn did to the memory layer. What it takes and
//! gives is [`super::turn_types`].

use super::model::ChatModel;
use super::turn_types::{Ending, Stop, TurnError, TurnInput, TurnOutcome};
use super::Agents;

impl Agents {
    /// Runs one turn to completion or to its pause on client tool calls (call it from a task
    /// that outlives the client if need be).
    pub async fn run_turn(
        &self,
        model: &dyn ChatModel,
        input: TurnInput,
    ) -> Result<TurnOutcome, TurnError> {
        // Before the lock: a background call holding it (a save's writes, eviction) gives way.
        let _foreground = self.foreground.turn();
        let _turn_guard = self.turn_lock(&input.scope, &input.agent).await;
        let (mut turn, mut progress) = self.open_turn(&input).await?;
        let result = self
            .step_loop(model, &input, &mut turn, &mut progress)
            .await;
        // The trace is kept even for a failed turn; the messages only for a finished one
        // (a client retrying after an upstream error must not find its message twice).
        let steps = std::mem::take(&mut turn.steps);
        let (scope, agent, keep) = (
            turn.scope.clone(),
            turn.agent.clone(),
            self.config.trace_turns,
        );
        let trace = steps.clone();
        if !turn.read_only {
            self.memory
                .blocking(move |store, _| Ok(store.record_steps(&scope, &agent, &trace, keep)?))
                .await?;
        }
        let ending = result?;
        match &ending {
            Ending::ToolCalls(calls) => self.pause(&mut turn, &progress, calls).await?,
            Ending::Reply { .. } if turn.read_only => self.end_read_only_pause(&turn).await?,
            Ending::Reply { .. } => self.finish(&mut turn).await?,
        }
        for step in &steps {
            tracing::info!(
                turn = %step.turn, step = step.step, tool = %step.tool, status = %step.status,
                prompt_tokens = step.prompt_tokens, completion_tokens = step.completion_tokens,
                cached_tokens = step.cached_tokens,
                latency_ms = step.latency_ms, "agent step"
            );
        }
        if matches!(
            ending,
            Ending::Reply {
                stop: Stop::MaxSteps,
                ..
            }
        ) {
            tracing::warn!(turn = %turn.id, max_steps = self.config.max_steps, "agent turn ended at max_steps without send_message");
        }
        Ok(TurnOutcome {
            turn: turn.id,
            ending,
            said: turn.said,
            steps,
            usage: progress.usage,
            model_calls: progress.model_calls,
            llm_ms: turn.llm_ms,
        })
    }

    /// Stores a finished turn's messages (ending any pause) and the agent's state.
    async fn finish(&self, turn: &mut super::state::Turn) -> Result<(), TurnError> {
        let buffer = turn.take_buffer();
        self.memory
            .append_agent_messages(&turn.scope, &turn.agent, buffer)
            .await?;
        let (scope, agent, system, epoch, alerted) = (
            turn.scope.clone(),
            turn.agent.clone(),
            turn.view.system.clone(),
            turn.view.epoch,
            turn.view.alerted,
        );
        self.memory
            .blocking(move |store, _| {
                let system = system.as_deref().map(|text| (text, epoch));
                Ok(store.set_agent_state(&scope, &agent, system, alerted)?)
            })
            .await?;
        Ok(())
    }
}
