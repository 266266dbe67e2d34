//! What an agent's next turn would send upstream, without running it (the console's
//! simulator): the turn opened read-only as a real one is, its recall, core memory and room
//! (the pressure alert, eviction) made as its first step makes them, and that step's request
//! body. Nothing is stored and no model is
//! called; the layout is the turn's own, so what the console shows is what the agent gets.

use serde_json::Value;

use super::context;
use super::step::{alert, Offer, Progress, Room};
use super::turn_types::{TurnError, TurnInput};
use super::{Agents, CoreMemoryAt};
use crate::tokens;

/// The next turn's first request, and its tokens by part.
pub struct Preview {
    /// The request body (model, messages, tools) of the turn's first step.
    pub body: Value,
    /// Tokens per part of the prompt: instructions, core memory, tools, summary, recalled,
    /// history, new message.
    pub sections: Vec<(&'static str, usize)>,
}

impl Agents {
    /// The first request of the turn `input` would start (read-only, whatever `input.record`).
    pub async fn preview(&self, mut input: TurnInput) -> Result<Preview, TurnError> {
        input.record = false;
        let mut turn = self.load_turn(&input).await?;
        // Read-only, but with the agent's own pressure state, so the room is made as the turn
        // will make it.
        let (scope, agent) = (input.scope.clone(), input.agent.clone());
        turn.view.alerted = self
            .memory
            .blocking(move |store, _| {
                Ok(store
                    .list_agents(&scope)?
                    .into_iter()
                    .any(|a| a.name == agent && a.pressure_alerted))
            })
            .await?;
        turn.recall.candidates = self.recall_before(&turn).await?;
        turn.recall.never_mentioned = self.never_mentioned(&turn).await?;
        let window = self.config.context_window(&input.model);
        self.ensure_system(&mut turn).await?;
        self.fit_recall(&mut turn, window);
        // Where the turn would evict, its view is trimmed to what it keeps (the turn would also
        // summarise what leaves, with the model: the summary shown is the one stored).
        match self.room(&turn, window, true)? {
            Room::Shrink(target) => {
                self.trim_view(&mut turn, target, 0);
            }
            Room::Alert => alert(&mut turn),
            Room::Fits => {}
        }
        let body = self.request_body(&input, &turn, &Progress::default(), Offer::All);
        let memory = turn.view.system.as_deref().unwrap_or_default();
        let memory_tokens = tokens::count(memory);
        let messages = turn.messages();
        let system_tokens = messages.first().map_or(0, context::message_tokens);
        let instructions = match turn.view.memory_at {
            CoreMemoryAt::System => system_tokens.saturating_sub(memory_tokens),
            CoreMemoryAt::Turn => system_tokens,
        };
        let summary = turn.view.summary.as_ref().map_or(0, |s| {
            context::message_tokens(&context::summary_message(s, memory))
        });
        let history = turn
            .view
            .queue
            .iter()
            .map(|m| context::message_tokens(&context::wire_message(m)))
            .sum();
        let new = turn
            .buffer
            .iter()
            .map(|m| tokens::count_message(&m.role, &m.content))
            .sum();
        let sections = vec![
            ("instructions", instructions),
            ("core memory", memory_tokens),
            ("tools", turn.offered.tokens),
            ("summary", summary),
            (
                "recalled",
                turn.recall.shown.as_deref().map_or(0, tokens::count),
            ),
            ("history", history),
            ("new message", new),
        ];
        Ok(Preview { body, sections })
    }
}
