//! One agent turn: what the client asked ([`TurnInput`]), how the turn ended ([`Ending`]: a reply,
//! or the client's tool calls that pause it), and [`Agents::run_turn`], which opens the turn (or
//! resumes a paused one), runs the step loop ([`super::step`]) and writes what the turn did to
//! the memory layer.

use serde_json::{Map, Value};

use super::model::{ChatModel, ModelError};
use super::tools::ClientCall;
use super::Agents;
use crate::openai::Usage;
use crate::store::{StepRecord, UserScope};

/// What the client asked, reduced to what the agent needs.
#[derive(Clone, Debug)]
pub struct TurnInput {
    pub scope: UserScope,
    pub agent: String,
    pub model: String,
    /// The chat app's own system prompt (a read-only block).
    pub client_system: Option<String>,
    /// The new user messages (after the client's last assistant message).
    pub user_messages: Vec<String>,
    /// The text of the client's last assistant message (one without tool calls): what the user
    /// saw before writing. When it is not a reply the agent gave (the app edited it, or put it
    /// there), the agent records it as said ([`super::open`]).
    pub app_reply: Option<String>,
    /// The results of the client tool calls a paused turn waits for (resuming it).
    pub tool_results: Vec<ToolResult>,
    /// Sampling parameters passed through to every step (temperature, max_tokens, ...), and the
    /// client's `tools`, `tool_choice`, `parallel_tool_calls`.
    pub params: Map<String, Value>,
    /// When the user said it (`X-Memproxy-Time`); `None`: now.
    pub clock: Option<i64>,
    /// `false` (`X-Memproxy-Record: false`): a read-only turn. The agent may search its memory
    /// but not change it, and nothing of the turn is stored.
    pub record: bool,
    /// The agent the message is from (a message between agents), `None`: from the user.
    pub from_agent: Option<String>,
    /// The agents waiting for this turn's reply (send_message_to_agent_and_wait_for_reply).
    pub chain: Vec<String>,
    /// How many messages between agents led to this turn (0: the user's own request); bounds
    /// how far one request's messages can spread (`limits.max_agent_message_depth`).
    pub depth: usize,
}

/// The client's result of one of its tool calls.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolResult {
    pub call_id: String,
    pub content: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// The agent called `send_message`.
    Replied,
    /// The agent answered in plain text (taken as the reply).
    PlainText,
    /// The loop could not get a usable answer (or ran out of steps) and the plain reply
    /// (see [`super::fallback`]) answered.
    PlainReply,
    /// `max_steps` ran out first and not even the plain reply answered.
    MaxSteps,
}

impl Stop {
    pub fn as_str(self) -> &'static str {
        match self {
            Stop::Replied => "send_message",
            Stop::PlainText => "plain_text",
            Stop::PlainReply => "plain_reply",
            Stop::MaxSteps => "max_steps",
        }
    }
}

/// How a turn ended.
#[derive(Clone, Debug, PartialEq)]
pub enum Ending {
    /// The answer to the user.
    Reply { text: String, stop: Stop },
    /// The agent called the client's tools: the turn is paused until their results come.
    ToolCalls(Vec<ClientCall>),
}

impl Ending {
    /// `x-memproxy-stop`.
    pub fn stop_name(&self) -> &'static str {
        match self {
            Ending::Reply { stop, .. } => stop.as_str(),
            Ending::ToolCalls(_) => "client_tool_calls",
        }
    }
}

#[derive(Clone, Debug)]
pub struct TurnOutcome {
    pub turn: String,
    pub ending: Ending,
    /// What the user said in the whole turn (before a pause too).
    pub said: Vec<String>,
    pub steps: Vec<StepRecord>,
    /// Summed over the chat model's steps (of this request).
    pub usage: Usage,
    /// Upstream calls made (steps, retries included).
    pub model_calls: usize,
    /// Time spent waiting for LLMs (steps and summaries).
    pub llm_ms: f64,
}

impl TurnOutcome {
    /// The reply, when the turn answered.
    pub fn reply(&self) -> Option<&str> {
        match &self.ending {
            Ending::Reply { text, .. } => Some(text),
            Ending::ToolCalls(_) => None,
        }
    }
}

/// Why a turn failed.
#[derive(Debug, thiserror::Error)]
pub enum TurnError {
    #[error(transparent)]
    Model(#[from] ModelError),
    #[error(transparent)]
    Memory(#[from] crate::memory::MemoryError),
    /// The system message (instructions + core memory) alone leaves no room.
    #[error("The agent's system message and tools take {needed} tokens, more than the {window}-token context window of model '{model}' allows; shorten its core memory or raise explicit.context_window_tokens.")]
    ContextTooSmall {
        needed: usize,
        window: usize,
        model: String,
    },
    /// The request's tool results do not answer the calls the agent's turn waits for.
    #[error("{0}")]
    ToolResults(String),
}

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
            turn.system.clone(),
            turn.epoch,
            turn.alerted,
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
