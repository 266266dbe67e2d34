//! The step loop of architecture §3 as a state machine. Each step makes room in the context
//! (memory pressure, eviction), asks the model, and reads its answer: tool calls are run
//! ([`super::calls`]), a plain text is the reply, an unusable answer moves the loop to a narrower
//! [`Phase`]. A step ends in a [`Next`]: another step, the end of the turn (a reply, or client
//! tool calls that pause it), or giving up to the plain reply ([`super::fallback`]).

use std::time::Instant;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::context;
use super::lenient::{self, PlainAnswer};
use super::model::{ChatModel, ModelAnswer, ModelError};
use super::state::{raw_measure, system_notice, Turn};
use super::tools::{Tools, SEND_MESSAGE};
use super::turn_types::{Ending, Stop, TurnError, TurnInput};
use super::Agents;
use crate::openai::Usage;
use crate::store::StepRecord;
use crate::text::clip;

/// What the loop offers the model, narrowing as answers fail.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub(super) enum Phase {
    /// Every tool of the turn's registry.
    #[default]
    Open,
    /// Only `send_message` (after a repeated call, or an unusable answer).
    MustReply,
    /// No tools: a plain answer is the reply (the model failed to answer with a tool).
    PlainOnly,
}

/// Where the turn stands between steps (kept across a pause on client tool calls).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(super) struct Progress {
    /// Steps taken in the turn (trace numbering).
    pub step: usize,
    /// The step the current budget of `max_steps` started after (a client's results give the
    /// agent a new budget: a tool-using app may chain many calls in one turn).
    pub budget_from: usize,
    pub phase: Phase,
    /// The last call as `name\0arguments` (a repeat forces a reply).
    pub last_call: Option<String>,
    /// What the agent thought last (the reply when nothing else answers).
    pub thoughts: String,
    /// A client tool was called in this turn (`tool_choice: required` is satisfied).
    pub client_called: bool,
    /// Unusable replies in this turn (as text or as a refused `send_message`).
    #[serde(default)]
    pub unusable: usize,
    /// Of this request only.
    #[serde(skip)]
    pub usage: Usage,
    #[serde(skip)]
    pub model_calls: usize,
}

impl Progress {
    /// Narrows the phase (never widens it).
    pub fn narrow(&mut self, phase: Phase) {
        self.phase = self.phase.max(phase);
    }

    fn offer(&self, last_step: bool) -> Offer {
        match self.phase {
            Phase::PlainOnly => Offer::Nothing,
            Phase::MustReply => Offer::ReplyOnly,
            Phase::Open if last_step => Offer::ReplyOnly,
            Phase::Open => Offer::All,
        }
    }
}

/// What one step decided.
pub(super) enum Next {
    Step,
    End(Ending),
    /// No usable answer and nothing left to change: the plain reply answers.
    GiveUp,
}

/// What the prompt needs before a step ([`Agents::room`]).
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Room {
    Fits,
    /// The memory-pressure alert, once until the next eviction.
    Alert,
    /// Eviction down to this many tokens.
    Shrink(usize),
}

/// Puts the memory-pressure alert before this turn's user message, so the newest message is
/// still the user's (small models answer the last message they see).
pub(super) fn alert(turn: &mut Turn) {
    turn.buffer.insert(
        0,
        system_notice(
            "system_alert",
            match turn.view.tool_set {
                Tools::Full => "Memory pressure: the conversation is close to the context window limit. Older messages will soon leave your view (they stay searchable with conversation_search). Save anything important to core or archival memory now.",
                Tools::Compact => "Memory pressure: the conversation is close to the context window limit. Older messages will soon leave your view (they stay searchable with conversation_search). Save anything important to core memory now.",
            },
            turn.now(),
        ),
    );
    turn.view.alerted = true;
}

/// Which tools a step offers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Offer {
    All,
    /// Only `send_message` (the whole list stays in the request when `tool_choice` names it).
    ReplyOnly,
    /// None: a plain answer is the reply.
    Nothing,
}

impl Offer {
    /// Whether a tool of the registry may be called in this step (read-only turns are checked
    /// by the registry).
    pub fn includes(self, name: &str) -> bool {
        self == Offer::All || name == SEND_MESSAGE
    }
}

/// One step's answer from the model, with its time.
pub(super) struct Asked {
    pub answer: ModelAnswer,
    pub latency: f64,
    pub offer: Offer,
    pub last_step: bool,
}

const SAMPLING_DENYLIST: [&str; 11] = [
    "model",
    "messages",
    "tools",
    "tool_choice",
    "functions",
    "function_call",
    "parallel_tool_calls",
    "response_format",
    "n",
    "stream",
    "stream_options",
];

/// Whether a client parameter goes to every step (sampling settings do; what shapes the request
/// itself does not).
pub fn passes_through(key: &str) -> bool {
    !SAMPLING_DENYLIST.contains(&key)
}

impl Agents {
    pub(super) async fn step_loop(
        &self,
        model: &dyn ChatModel,
        input: &TurnInput,
        turn: &mut Turn,
        progress: &mut Progress,
    ) -> Result<Ending, TurnError> {
        let mut retried_overflow = false;
        while progress.step - progress.budget_from < self.config.max_steps {
            progress.step += 1;
            let step = progress.step;
            self.make_room(input, turn, step).await?;
            let last_step = step - progress.budget_from == self.config.max_steps;
            let offer = progress.offer(last_step);
            let body = self.request_body(input, turn, progress, offer);
            let estimated = raw_measure(turn).0;
            let started = Instant::now();
            let answer = model.complete(body).await;
            let latency = started.elapsed().as_secs_f64() * 1e3;
            turn.llm_ms += latency;
            progress.model_calls += 1;
            let answer = match answer {
                Ok(answer) => answer,
                Err(ModelError::ContextLength(message)) if !retried_overflow => {
                    // Our count and the upstream's differ (another tokenizer, a smaller window):
                    // evict relative to what was sent, then retry the same step once.
                    retried_overflow = true;
                    let record =
                        turn.step(step, "(context_overflow)", String::new(), "retry", message);
                    record.latency_ms = latency;
                    let (total, _) = self.measure(turn);
                    let window = self.config.context_window(&input.model);
                    let target =
                        (total.min(window) as f64 * self.config.evict_target_ratio) as usize;
                    self.shrink(turn, target, step).await?;
                    progress.step -= 1;
                    continue;
                }
                Err(error) => {
                    let record = turn.step(
                        step,
                        "(upstream)",
                        String::new(),
                        "upstream_error",
                        error.to_string(),
                    );
                    record.latency_ms = latency;
                    return Err(error.into());
                }
            };
            retried_overflow = false;
            self.calibrate(&turn.model, estimated, answer.usage.prompt_tokens as usize);
            progress.usage.add(&answer.usage);
            let asked = Asked {
                answer,
                latency,
                offer,
                last_step,
            };
            let calls = self.calls_of(turn, &asked);
            let next = if calls.is_empty() {
                self.on_text(turn, progress, &asked)
            } else {
                self.on_calls(model, turn, progress, calls, &asked).await?
            };
            match next {
                Next::Step => {}
                Next::End(ending) => return Ok(ending),
                Next::GiveUp => break,
            }
        }
        // No usable answer from the loop: one plain request, then what the agent thought last.
        let (reply, answer) = self
            .plain_reply(model, input, turn, progress.step + 1)
            .await?;
        progress.model_calls += 1;
        progress.usage.add(&answer.usage);
        Ok(match reply {
            Some(text) => Ending::Reply {
                text,
                stop: Stop::PlainReply,
            },
            None => Ending::Reply {
                text: std::mem::take(&mut progress.thoughts),
                stop: Stop::MaxSteps,
            },
        })
    }

    /// Before a step: the pressure alert, or eviction past the threshold.
    async fn make_room(
        &self,
        input: &TurnInput,
        turn: &mut Turn,
        step: usize,
    ) -> Result<(), TurnError> {
        let window = self.config.context_window(&input.model);
        self.ensure_system(turn).await?;
        self.fit_recall(turn, window);
        // A read-only turn cannot wait for the agent to save: it trims its view at once.
        match self.room(turn, window, !turn.read_only)? {
            Room::Shrink(target) => {
                self.shrink(turn, target, step).await?;
                self.ensure_system(turn).await?;
            }
            Room::Alert => alert(turn),
            Room::Fits => {}
        }
        Ok(())
    }

    /// What the prompt needs before a step at `window` tokens ([`Room`]). Past the eviction
    /// threshold an agent that was not yet told gets the pressure alert first, with one step to
    /// save what matters (when `waits_for_alert`); eviction waits for that step, unless the prompt
    /// no longer fits at all.
    pub(super) fn room(
        &self,
        turn: &Turn,
        window: usize,
        waits_for_alert: bool,
    ) -> Result<Room, TurnError> {
        let (total, fixed) = self.measure(turn);
        if fixed as f64 >= window as f64 * self.config.evict_ratio {
            return Err(TurnError::ContextTooSmall {
                needed: fixed,
                window,
                model: turn.model.clone(),
            });
        }
        let over = total as f64 > window as f64 * self.config.evict_ratio;
        let may_wait = !turn.view.alerted && waits_for_alert && total < window;
        Ok(if over && !may_wait {
            Room::Shrink((window as f64 * self.config.evict_target_ratio) as usize)
        } else if total as f64 > window as f64 * self.config.pressure_alert_ratio
            && !turn.view.alerted
        {
            Room::Alert
        } else {
            Room::Fits
        })
    }

    /// Evicts (or, in a read-only turn, trims the view) down to `target` tokens.
    async fn shrink(&self, turn: &mut Turn, target: usize, step: usize) -> Result<(), TurnError> {
        if turn.read_only {
            self.trim_view(turn, target, step);
        } else {
            self.evict(turn, target, step).await?;
        }
        Ok(())
    }

    /// A step answered without a tool call: the reply, or (empty, an echo of the system's own
    /// envelope) a narrower next step.
    fn on_text(&self, turn: &mut Turn, progress: &mut Progress, asked: &Asked) -> Next {
        let (answer, step) = (&asked.answer, progress.step);
        let (what, why) = match lenient::plain_answer(&answer.content, &turn.said) {
            PlainAnswer::Reply(reply) => match turn.unusable(&reply) {
                None => {
                    // A plain answer is the reply: small models often skip send_message.
                    turn.buffer.push(crate::store::AgentMessage {
                        role: "assistant".to_owned(),
                        content: answer.content.clone(),
                        tool_calls: None,
                        tool_call_id: None,
                        search_text: reply.clone(),
                        created_at_ms: turn.now(),
                    });
                    let record = turn.step(step, "(text)", String::new(), "reply", reply.clone());
                    fill(record, answer, asked.latency);
                    return Next::End(Ending::Reply {
                        text: reply,
                        stop: Stop::PlainText,
                    });
                }
                Some(why) => (why.label(), why.feedback()),
            },
            PlainAnswer::Empty => ("(empty)", "You did not answer the user"),
            PlainAnswer::Echo => ("(echo)", "You repeated a message instead of answering"),
        };
        let record = turn.step(
            step,
            what,
            String::new(),
            "failed",
            clip(&answer.content, 300),
        );
        fill(record, answer, asked.latency);
        progress.unusable += 1;
        if self.replies_spent(turn, progress) {
            return Next::GiveUp;
        }
        match progress.phase {
            // Nothing left to change: the same request would get the same answer.
            _ if asked.last_step => return Next::GiveUp,
            Phase::PlainOnly => return Next::GiveUp,
            // Greedy decoding repeats itself, so something must change: no tools at all.
            Phase::MustReply => progress.narrow(Phase::PlainOnly),
            Phase::Open => {
                let reason = format!("[This is an automated system message hidden from the user] {why}. Answer the user's newest message (\"{}\") now with send_message.", turn.newest_said());
                let nudge = system_notice("heartbeat", &reason, turn.now());
                turn.transient.push(nudge.content.clone());
                turn.buffer.push(nudge);
                progress.narrow(Phase::MustReply);
            }
        }
        Next::Step
    }

    /// Whether the turn has asked for a reply again as often as configured: the plain reply
    /// answers next. A turn with the app's functions or other agents always asks again (the
    /// plain reply could call neither).
    pub(super) fn replies_spent(&self, turn: &Turn, progress: &Progress) -> bool {
        turn.offered.client.is_empty()
            && turn.agents.peers.is_empty()
            && progress.unusable > self.config.reply_retries
    }

    /// Compiles the system message if memory changed since it was last built.
    pub(super) async fn ensure_system(&self, turn: &mut Turn) -> Result<(), TurnError> {
        if turn.view.system.is_some() {
            return Ok(());
        }
        let (scope, agent) = (turn.scope.clone(), turn.agent.clone());
        let (epoch, blocks, counts) = self
            .memory
            .blocking(move |store, _| {
                Ok((
                    store.agent_memory_epoch(&scope, &agent)?,
                    store.core_blocks(&scope, &agent)?,
                    store.agent_counts(&scope, &agent)?,
                ))
            })
            .await?;
        turn.view.system = Some(context::compile_memory(
            &blocks,
            &counts,
            turn.now(),
            turn.view.tool_set,
        ));
        turn.view.epoch = epoch;
        Ok(())
    }

    /// `(prompt tokens, tokens of system message + tools alone)`.
    /// Scaled by how the upstream's own counts compared with ours so far (its tokenizer and
    /// chat template differ from cl100k; a small model's template adds ~25%).
    pub(super) fn measure(&self, turn: &Turn) -> (usize, usize) {
        let (total, fixed) = raw_measure(turn);
        let scale = self.token_scale(&turn.model);
        (
            (total as f64 * scale).ceil() as usize,
            (fixed as f64 * scale).ceil() as usize,
        )
    }

    pub(super) fn request_body(
        &self,
        input: &TurnInput,
        turn: &Turn,
        progress: &Progress,
        offer: Offer,
    ) -> Value {
        let mut body = json!({"model": input.model, "messages": turn.messages()});
        if input.model.is_empty() {
            body.as_object_mut().map(|b| b.remove("model"));
        }
        let tools: Vec<Value> = match offer {
            Offer::Nothing => Vec::new(),
            // With tool_choice naming send_message, the tool list stays the one of every other
            // step: a different list would change the prompt's start and miss the upstream's
            // prompt cache.
            Offer::ReplyOnly if self.config.require_tool_choice => turn.offered.registry.schemas(),
            Offer::ReplyOnly => turn
                .offered
                .registry
                .schemas()
                .into_iter()
                .filter(|t| t["function"]["name"] == SEND_MESSAGE)
                .collect(),
            // A read-only turn is offered the same list (its writes are refused when called):
            // a list of its own would miss the prompt cache of the agent's other turns.
            Offer::All => turn.offered.registry.schemas(),
        };
        if !tools.is_empty() {
            body["tools"] = Value::Array(tools);
            if self.config.require_tool_choice {
                let named = |name: &str| json!({"type": "function", "function": {"name": name}});
                body["tool_choice"] = match offer {
                    Offer::ReplyOnly => named(SEND_MESSAGE),
                    // The app named the one function it wants called first.
                    _ => match turn.offered.client.only_choice() {
                        Some(name) if !progress.client_called => named(name),
                        _ => json!("required"),
                    },
                };
            }
        }
        for (key, value) in &input.params {
            if passes_through(key) {
                body[key] = value.clone();
            }
        }
        body
    }
}

pub(super) fn fill(record: &mut StepRecord, answer: &ModelAnswer, latency: f64) {
    record.prompt_tokens = answer.usage.prompt_tokens as i64;
    record.completion_tokens = answer.usage.completion_tokens as i64;
    record.cached_tokens = answer.cached_tokens.map(|n| n as i64);
    record.latency_ms = latency;
}
