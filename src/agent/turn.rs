//! One agent turn: the step loop of architecture §3 (heartbeats, failed calls, repeated calls,
//! memory pressure, overflow and retry, `max_steps`), then the turn's messages and trace are
//! written to the memory layer.

use std::time::Instant;

use serde_json::{json, Map, Value};

use super::context;
use super::lenient;
use super::lenient::PlainAnswer;
use super::model::{ChatModel, ModelAnswer, ModelError};
use super::state::{clip, raw_measure, system_notice, Turn};
use super::tools::{self, ToolOutcome, ToolScope, SEND_MESSAGE};
use super::Agents;
use crate::openai::{FunctionCall, ToolCall, Usage};
use crate::store::{AgentMessage, StepRecord, UserScope};

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
    /// Sampling parameters passed through to every step (temperature, max_tokens, ...).
    pub params: Map<String, Value>,
    /// When the user said it (`X-Memproxy-Time`); `None`: now.
    pub clock: Option<i64>,
    /// `false` (`X-Memproxy-Record: false`): a read-only turn. The agent may search its memory
    /// but not change it, and nothing of the turn is stored.
    pub record: bool,
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

#[derive(Clone, Debug)]
pub struct TurnOutcome {
    pub turn: String,
    pub reply: String,
    pub stop: Stop,
    pub steps: Vec<StepRecord>,
    /// Summed over the chat model's steps.
    pub usage: Usage,
    /// Upstream calls made (steps, retries included).
    pub model_calls: usize,
    /// Time spent waiting for LLMs (steps and summaries).
    pub llm_ms: f64,
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

impl Agents {
    /// Runs one turn to completion (call it from a task that outlives the client if need be).
    pub async fn run_turn(
        &self,
        model: &dyn ChatModel,
        input: TurnInput,
    ) -> Result<TurnOutcome, TurnError> {
        let _turn_guard = self.turn_lock(&input.scope, &input.agent).await;
        let mut turn = self.open_turn(&input).await?;
        let result = self.step_loop(model, &input, &mut turn).await;
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
        let (reply, stop, usage, calls) = result?;
        if !turn.read_only {
            let buffer = turn.take_buffer();
            self.memory
                .append_agent_messages(&turn.scope, &turn.agent, buffer)
                .await?;
            let (scope, agent, system, alerted) = (
                turn.scope.clone(),
                turn.agent.clone(),
                turn.system.clone(),
                turn.alerted,
            );
            self.memory
                .blocking(move |store, _| {
                    Ok(store.set_agent_state(&scope, &agent, system.as_deref(), alerted)?)
                })
                .await?;
        }
        for step in &steps {
            tracing::info!(
                turn = %step.turn, step = step.step, tool = %step.tool, status = %step.status,
                prompt_tokens = step.prompt_tokens, completion_tokens = step.completion_tokens,
                cached_tokens = step.cached_tokens,
                latency_ms = step.latency_ms, "agent step"
            );
        }
        if stop == Stop::MaxSteps {
            tracing::warn!(turn = %turn.id, max_steps = self.config.max_steps, "agent turn ended at max_steps without send_message");
        }
        Ok(TurnOutcome {
            turn: turn.id,
            reply,
            stop,
            steps,
            usage,
            model_calls: calls,
            llm_ms: turn.llm_ms,
        })
    }

    async fn step_loop(
        &self,
        model: &dyn ChatModel,
        input: &TurnInput,
        turn: &mut Turn,
    ) -> Result<(String, Stop, Usage, usize), TurnError> {
        let window = self.config.context_window(&input.model);
        let mut usage = Usage::default();
        let mut calls_made = 0;
        let mut force_reply = false;
        let mut plain_only = false;
        let mut last_call: Option<String> = None;
        let mut step = 0;
        let mut retried_overflow = false;
        let mut thoughts = String::new();
        while step < self.config.max_steps {
            step += 1;
            self.ensure_system(turn).await?;
            let (total, fixed) = self.measure(turn);
            if fixed as f64 >= window as f64 * self.config.evict_ratio {
                return Err(TurnError::ContextTooSmall {
                    needed: fixed,
                    window,
                    model: input.model.clone(),
                });
            }
            // Past the eviction threshold an agent that was not yet told gets the pressure
            // alert first, with one step to save what matters; eviction waits for that step
            // (unless the prompt no longer fits at all).
            let over = total as f64 > window as f64 * self.config.evict_ratio;
            let may_wait = !turn.alerted && !turn.read_only && total < window;
            if over && !may_wait {
                let target = (window as f64 * self.config.evict_target_ratio) as usize;
                if turn.read_only {
                    self.trim_view(turn, target, step);
                } else {
                    self.evict(turn, target, step).await?;
                    self.ensure_system(turn).await?;
                }
            } else if total as f64 > window as f64 * self.config.pressure_alert_ratio
                && !turn.alerted
            {
                // Before this turn's user message, so the newest message is still the user's
                // (small models answer the last message they see).
                turn.buffer.insert(0, system_notice(
                    "system_alert",
                    "Memory pressure: the conversation is close to the context window limit. Older messages will soon leave your view (they stay searchable with conversation_search). Save anything important to core or archival memory now.",
                    turn.now(),
                ));
                turn.alerted = true;
            }
            let last_step = step == self.config.max_steps;
            let offer = if plain_only {
                Offer::Nothing
            } else if force_reply || last_step {
                Offer::ReplyOnly
            } else {
                Offer::All
            };
            let body = self.request_body(input, turn, offer);
            let estimated = raw_measure(turn).0;
            let started = Instant::now();
            let answer = model.complete(body).await;
            let latency = started.elapsed().as_secs_f64() * 1e3;
            turn.llm_ms += latency;
            calls_made += 1;
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
                    let target =
                        (total.min(window) as f64 * self.config.evict_target_ratio) as usize;
                    if turn.read_only {
                        self.trim_view(turn, target, step);
                    } else {
                        self.evict(turn, target, step).await?;
                    }
                    step -= 1;
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
            usage.add(&answer.usage);
            let mut calls = answer.tool_calls.clone();
            if calls.is_empty() {
                // A call written as text counts, but only of a tool offered in this step.
                if let Some((name, arguments)) = lenient::call_in_text(&answer.content)
                    .filter(|(n, _)| tools::is_known(n) && offer.includes(n))
                {
                    calls.push(ToolCall {
                        id: String::new(),
                        kind: "function".to_owned(),
                        function: FunctionCall { name, arguments },
                    });
                }
            }
            if calls.is_empty() {
                let reply = match lenient::plain_answer(&answer.content, &input.user_messages) {
                    PlainAnswer::Reply(reply) => reply,
                    unusable => {
                        // Nothing, or the system's own envelope echoed back: not an answer. Ask
                        // again offering only send_message; if that fails too, offer no tools
                        // at all (greedy decoding repeats itself, so something must change).
                        let what = if unusable == PlainAnswer::Empty {
                            "(empty)"
                        } else {
                            "(echo)"
                        };
                        let record = turn.step(
                            step,
                            what,
                            String::new(),
                            "failed",
                            clip(&answer.content, 300),
                        );
                        fill(record, &answer, latency);
                        if plain_only || last_step {
                            // Nothing left to change: the same request would get the same answer.
                            break;
                        }
                        if force_reply {
                            plain_only = true;
                        } else if !last_step {
                            let nudge = system_notice(
                    "heartbeat", "[This is an automated system message hidden from the user] You did not answer the user. Answer them now with send_message.", turn.now());
                            turn.transient.push(nudge.content.clone());
                            turn.buffer.push(nudge);
                        }
                        force_reply = true;
                        continue;
                    }
                };
                // A plain answer is the reply: small models often skip send_message.
                turn.buffer.push(AgentMessage {
                    role: "assistant".to_owned(),
                    content: answer.content.clone(),
                    tool_calls: None,
                    tool_call_id: None,
                    search_text: reply.clone(),
                    created_at_ms: turn.now(),
                });
                let record = turn.step(step, "(text)", String::new(), "reply", reply.clone());
                fill(record, &answer, latency);
                return Ok((reply, Stop::PlainText, usage, calls_made));
            }
            // Our own ids: upstreams send empty or repeating ones, and a result must name its call.
            for (index, call) in calls.iter_mut().enumerate() {
                call.id = format!("call_{}_{step}_{index}", &turn.id[..8]);
                call.kind = "function".to_owned();
            }
            if !answer.content.trim().is_empty() {
                thoughts = answer.content.trim().to_owned();
            }
            let assistant_index = turn.buffer.len();
            turn.buffer.push(AgentMessage {
                role: "assistant".to_owned(),
                content: answer.content.clone(),
                tool_calls: serde_json::to_string(&calls).ok(),
                tool_call_id: None,
                search_text: String::new(),
                created_at_ms: turn.now(),
            });
            let mut heartbeat = false;
            let mut failed = false;
            let mut reply = None;
            let scope = ToolScope {
                read_only: turn.read_only,
                memory: &self.memory,
                scope: &turn.scope,
                agent: &turn.agent,
                config: &self.config,
                user_said: &input.user_messages,
            };
            let mut results = Vec::new();
            for call in &calls {
                let name = call.function.name.as_str();
                let (outcome, wants) = match lenient::arguments(&call.function.arguments) {
                    // Servers that do not enforce tool_choice let a model call what was not
                    // offered; it is refused, and the next step offers no tools at all.
                    Ok(_) if tools::is_known(name) && !offer.includes(name) => {
                        plain_only = true;
                        (
                            ToolOutcome::failed(format!(
                                "{name} is not available now: answer the user with send_message"
                            )),
                            false,
                        )
                    }
                    Ok(arguments) => (
                        tools::execute(&scope, name, &arguments).await,
                        tools::wants_heartbeat(&arguments),
                    ),
                    Err(problem) => (
                        ToolOutcome::failed(format!(
                            "could not read the arguments of {name}: {problem}"
                        )),
                        false,
                    ),
                };
                let signature = format!("{name}\u{0}{}", call.function.arguments.trim());
                if last_call.as_deref() == Some(signature.as_str()) && name != SEND_MESSAGE {
                    // Small models repeat a call forever once its result is in view (architecture §3).
                    force_reply = true;
                }
                last_call = Some(signature);
                heartbeat |= wants;
                failed |= !outcome.ok;
                results.push((call.clone(), outcome, wants));
            }
            for (index, (call, outcome, wants)) in results.into_iter().enumerate() {
                if outcome.memory_changed {
                    turn.system = None;
                }
                let now = turn.now();
                turn.buffer.push(AgentMessage {
                    role: "tool".to_owned(),
                    content: outcome.result_json(now),
                    tool_calls: None,
                    tool_call_id: Some(call.id.clone()),
                    search_text: String::new(),
                    created_at_ms: now,
                });
                let status = match (&outcome.reply, outcome.ok) {
                    (Some(_), _) => "reply",
                    (None, true) => "ok",
                    (None, false) => "failed",
                };
                let record = turn.step(
                    step,
                    &call.function.name,
                    call.function.arguments.clone(),
                    status,
                    outcome.message.clone(),
                );
                // One upstream call per step: its tokens and time go on its first call only.
                if index == 0 {
                    fill(record, &answer, latency);
                }
                record.heartbeat = wants;
                if let Some(text) = outcome.reply {
                    reply = Some(text);
                }
            }
            if let Some(text) = reply {
                turn.buffer[assistant_index].search_text = text.clone();
                return Ok((text, Stop::Replied, usage, calls_made));
            }
            if last_step {
                break;
            }
            let reason = if failed {
                "[This is an automated system message hidden from the user] Function call failed, returning control."
            } else if heartbeat {
                "[This is an automated system message hidden from the user] Function called using request_heartbeat=true, returning control."
            } else {
                "[This is an automated system message hidden from the user] The function ran, but the user has not received a reply yet: answer them with send_message."
            };
            let now = turn.now();
            turn.buffer.push(system_notice("heartbeat", reason, now));
        }
        // No usable answer from the loop: one plain request, then what the agent thought last.
        let (reply, answer) = self.plain_reply(model, input, turn, step + 1).await?;
        calls_made += 1;
        usage.add(&answer.usage);
        match reply {
            Some(reply) => Ok((reply, Stop::PlainReply, usage, calls_made)),
            None => Ok((thoughts, Stop::MaxSteps, usage, calls_made)),
        }
    }

    /// Compiles the system message if memory changed since it was last built.
    async fn ensure_system(&self, turn: &mut Turn) -> Result<(), TurnError> {
        if turn.system.is_some() {
            return Ok(());
        }
        let (scope, agent) = (turn.scope.clone(), turn.agent.clone());
        let (blocks, counts) = self
            .memory
            .blocking(move |store, _| {
                Ok((
                    store.core_blocks(&scope, &agent)?,
                    store.agent_counts(&scope, &agent)?,
                ))
            })
            .await?;
        turn.system = Some(context::compile_memory(&blocks, &counts, turn.now()));
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

    fn request_body(&self, input: &TurnInput, turn: &Turn, offer: Offer) -> Value {
        let mut body = json!({"model": input.model, "messages": turn.messages()});
        if input.model.is_empty() {
            body.as_object_mut().map(|b| b.remove("model"));
        }
        let tools: Vec<Value> = match offer {
            Offer::Nothing => Vec::new(),
            // With tool_choice naming send_message, the tool list stays the one of every other
            // step: a different list would change the prompt's start and miss the upstream's
            // prompt cache.
            Offer::ReplyOnly if self.config.require_tool_choice => tools::schemas(),
            Offer::ReplyOnly => tools::schemas()
                .into_iter()
                .filter(|t| t["function"]["name"] == SEND_MESSAGE)
                .collect(),
            // A read-only turn is offered the same list (its writes are refused when called):
            // a list of its own would miss the prompt cache of the agent's other turns.
            Offer::All => tools::schemas(),
        };
        if !tools.is_empty() {
            body["tools"] = Value::Array(tools);
            if self.config.require_tool_choice {
                body["tool_choice"] = match offer {
                    Offer::ReplyOnly => {
                        json!({"type": "function", "function": {"name": SEND_MESSAGE}})
                    }
                    _ => json!("required"),
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

/// Whether a client parameter goes to every step (sampling settings do; what shapes the request
/// itself does not).
pub(super) fn passes_through(key: &str) -> bool {
    !SAMPLING_DENYLIST.contains(&key)
}

/// Which tools a step offers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Offer {
    All,
    /// Only `send_message` (after a repeated call, on the last step, after an empty answer).
    ReplyOnly,
    /// None: a plain answer is the reply (after the model failed to answer with a tool).
    Nothing,
}

impl Offer {
    /// Whether a tool may be called in this step (read-only turns are checked by the tools).
    fn includes(self, name: &str) -> bool {
        match self {
            Offer::All => true,
            Offer::ReplyOnly => name == SEND_MESSAGE,
            Offer::Nothing => name == SEND_MESSAGE,
        }
    }
}

pub(super) fn fill(record: &mut StepRecord, answer: &ModelAnswer, latency: f64) {
    record.prompt_tokens = answer.usage.prompt_tokens as i64;
    record.completion_tokens = answer.usage.completion_tokens as i64;
    record.cached_tokens = answer.cached_tokens.map(|n| n as i64);
    record.latency_ms = latency;
}
