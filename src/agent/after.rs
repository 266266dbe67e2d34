//! A client's turn and what it sets off ([`Agents::start_turn`]). What a finished turn sets off
//! runs off the request path and in this order: the background save,
//! eviction ahead of the next turn, then the re-warming of a local upstream's prompt cache (after
//! both: each changes what the server last processed). A save asked inside the agent's prompt
//! ([`super::save_prompt`]) comes after eviction instead and is the re-warm. On a local upstream
//! each gives way to turns ([`super::foreground`]).

use std::sync::Arc;

use tokio::task::JoinHandle;
use tokio_util::task::TaskTracker;

use super::foreground::Ran;
use super::model::{ChatModel, UpstreamModel};
use super::{Agents, Rewarm, TurnError, TurnInput, TurnOutcome};

/// Where a client's turn runs and where what it sets off runs, both drained on shutdown.
pub struct TurnTasks<'a> {
    /// The turn itself: it changes memory, so it runs to completion even if the client goes away.
    pub turns: &'a TaskTracker,
    /// What a finished turn sets off ([`Agents::after_turn`]), drained first on shutdown.
    pub after: &'a TaskTracker,
}

impl Agents {
    /// Starts a client's turn in a task of its own; once it has finished, what it sets off runs
    /// in another, never delaying the answer. The handle gives the turn's outcome.
    pub fn start_turn(
        self: &Arc<Self>,
        model: UpstreamModel,
        input: TurnInput,
        tasks: TurnTasks<'_>,
    ) -> JoinHandle<Result<TurnOutcome, TurnError>> {
        let (agents, after) = (Arc::clone(self), tasks.after.clone());
        tasks.turns.spawn(async move {
            let outcome = agents.run_turn(&model, input.clone()).await;
            if let Ok(done) = &outcome {
                let (agents, done) = (Arc::clone(&agents), done.clone());
                after.spawn(async move { agents.after_turn(&model, input, done).await });
            }
            outcome
        })
    }

    /// Whether background calls on the chat upstream give way to turns
    /// (`explicit.yield_to_turns`; `auto` where it is local with one prompt cache).
    pub fn yields_on(&self, one_local_cache: bool) -> bool {
        match self.config.yield_to_turns {
            Rewarm::Always => true,
            Rewarm::Never => false,
            Rewarm::Auto => one_local_cache,
        }
    }

    /// Runs the work a finished turn sets off; every problem is logged, never raised.
    pub async fn after_turn(&self, model: &UpstreamModel, input: TurnInput, done: TurnOutcome) {
        let url = model.upstream.base_url().to_owned();
        let one_cache = self.one_local_cache(model).await;
        let yields = self.yields_on(one_cache);
        // Turns started up to now, this one included: a re-warm is for the state it left.
        let since = self.foreground.turns_started();
        let save = self.needs_save(&input, &done);
        let in_prompt = save && self.saves_in_prompt(&input, &url, one_cache);
        if save && !in_prompt {
            // The memory LLM on a server of its own takes no turn's time.
            let gives_way = yields && self.memory_llm_on(&url);
            self.save_giving_way(gives_way, &input, &done, None).await;
        }
        // Eviction a turn overtook is left to that turn's own steps (they evict if need be).
        let evicted = if yields {
            let ran = self
                .foreground
                .background(self.compact_after_turn(&input, &done))
                .await;
            matches!(ran, Ran::Done(true))
        } else {
            self.compact_after_turn(&input, &done).await
        };
        if in_prompt {
            // After eviction: the question then follows the prompt the next turn opens with, and
            // answered, it leaves that prompt cached (no re-warm).
            let chat: &dyn ChatModel = model;
            let warmed = self
                .save_giving_way(yields, &input, &done, Some(chat))
                .await;
            if warmed {
                return;
            }
        }
        let changed = (save && self.memory_llm_on(&url)) || evicted;
        if !self.needs_rewarm(&input, &done, one_cache, changed) {
            return;
        }
        if !yields {
            self.rewarm(model, input).await;
            return;
        }
        let agent = input.agent.clone();
        let ran = self
            .foreground
            .background_since(Some(since), self.rewarm(model, input))
            .await;
        if ran == Ran::Overtaken {
            tracing::info!(%agent, "prompt cache re-warm dropped: a turn overtook it");
        }
    }

    /// The background save, giving way to turns when `gives_way` (redone after a turn that
    /// overtook it); returns whether it was answered inside the agent's prompt.
    async fn save_giving_way(
        &self,
        gives_way: bool,
        input: &TurnInput,
        done: &TurnOutcome,
        in_prompt: Option<&dyn ChatModel>,
    ) -> bool {
        let attempt = || self.save_after_turn(input.clone(), done.clone(), in_prompt);
        if gives_way {
            self.foreground.background_until_done(attempt).await
        } else {
            attempt().await
        }
    }
}
