//! A step that answered with tool calls: each call is checked against what the step offered and
//! run from the turn's registry; the results go in the buffer, and the step ends in a reply
//! (`send_message`), a pause (client tool calls, whose results the client sends), or another step
//! (with the heartbeat notice that says why).

use super::lenient;
use super::model::ChatModel;
use super::state::{system_notice, Turn};
use super::step::{fill, Asked, Next, Phase, Progress};
use super::tools::{ClientCall, Effect, Messaging, ToolOutcome, ToolScope, SEND_MESSAGE};
use super::turn_types::{Ending, Stop, TurnError};
use super::Agents;
use crate::openai::{FunctionCall, ToolCall};
use crate::store::AgentMessage;

/// How a call's result is traced for a client tool (its result comes later, from the client).
pub const CLIENT_STATUS: &str = "client";

/// Steps of memory writes that succeeded one turn may take before its reply is asked for plainly
/// (a refused write retried does not count). A small
/// model can call `core_memory_replace` again and again, each with a heartbeat, until the steps
/// run out (minutes for one turn); saving a fact or two takes one or two.
pub const WRITE_STEPS: usize = 3;

impl Agents {
    /// The answer's tool calls; a call written as text counts, but only of a tool offered in
    /// this step.
    pub(super) fn calls_of(&self, turn: &Turn, asked: &Asked) -> Vec<ToolCall> {
        let mut calls = asked.answer.tool_calls.clone();
        if calls.is_empty() {
            if let Some((name, arguments)) = lenient::call_in_text(&asked.answer.content)
                .filter(|(n, _)| turn.offered.registry.get(n).is_some() && asked.offer.includes(n))
            {
                calls.push(ToolCall {
                    id: String::new(),
                    kind: "function".to_owned(),
                    function: FunctionCall { name, arguments },
                });
            }
        }
        calls
    }

    pub(super) async fn on_calls(
        &self,
        model: &dyn ChatModel,
        turn: &mut Turn,
        progress: &mut Progress,
        mut calls: Vec<ToolCall>,
        asked: &Asked,
    ) -> Result<Next, TurnError> {
        let step = progress.step;
        // Our own ids: upstreams send empty or repeating ones, and a result must name its call.
        for (index, call) in calls.iter_mut().enumerate() {
            call.id = format!("call_{}_{step}_{index}", &turn.id[..8]);
            call.kind = "function".to_owned();
        }
        if !asked.answer.content.trim().is_empty() {
            progress.thoughts = asked.answer.content.trim().to_owned();
        }
        let assistant_index = turn.buffer.len();
        turn.buffer.push(AgentMessage {
            role: "assistant".to_owned(),
            content: asked.answer.content.clone(),
            tool_calls: serde_json::to_string(&calls).ok(),
            tool_call_id: None,
            search_text: String::new(),
            created_at_ms: turn.now(),
        });
        // A step that calls the client's tools pauses: its reply waits for their results.
        let pausing = calls.iter().any(|c| {
            turn.offered.client.offers(&c.function.name) && asked.offer.includes(&c.function.name)
        });
        let mut outcomes = Vec::new();
        let mut client_calls: Vec<ClientCall> = Vec::new();
        let unusable_before = progress.unusable;
        for call in &calls {
            let outcome = self
                .run_call(model, turn, progress, call, asked, pausing, &client_calls)
                .await;
            let signature = signature(call);
            if progress.last_call.as_deref() == Some(signature.as_str())
                && call.function.name != SEND_MESSAGE
            {
                // Small models repeat a call forever once its result is in view (architecture §3).
                progress.narrow(Phase::MustReply);
            }
            progress.last_call = Some(signature);
            if let (Effect::Client(client), true) = (&outcome.0.effect, outcome.0.ok) {
                client_calls.push(ClientCall {
                    id: call.id.clone(),
                    ..client.clone()
                });
                progress.client_called = true;
            }
            outcomes.push(outcome);
        }
        let mut heartbeat = false;
        let mut failed = false;
        let mut reply = None;
        for (index, (call, (outcome, wants))) in calls.iter().zip(outcomes).enumerate() {
            heartbeat |= wants;
            failed |= !outcome.ok;
            let client = matches!(outcome.effect, Effect::Client(_)) && outcome.ok;
            let status = match (&outcome.effect, outcome.ok) {
                (_, false) => "failed",
                (Effect::Reply(_), true) => "reply",
                (Effect::Client(_), true) => CLIENT_STATUS,
                _ => "ok",
            };
            match &outcome.effect {
                Effect::MemoryChanged => turn.view.system = None,
                Effect::Reply(text) => reply = Some(text.clone()),
                _ => {}
            }
            // A client call's result is the client's to send.
            if !client {
                let now = turn.now();
                turn.buffer.push(AgentMessage {
                    role: "tool".to_owned(),
                    content: outcome.result_json(now),
                    tool_calls: None,
                    tool_call_id: Some(call.id.clone()),
                    search_text: String::new(),
                    created_at_ms: now,
                });
            }
            let record = turn.step(
                step,
                &call.function.name,
                call.function.arguments.clone(),
                status,
                outcome.message.clone(),
            );
            // One upstream call per step: its tokens and time go on its first call only.
            if index == 0 {
                fill(record, &asked.answer, asked.latency);
            }
            record.heartbeat = wants;
        }
        if !client_calls.is_empty() {
            return Ok(Next::End(Ending::ToolCalls(client_calls)));
        }
        if let Some(text) = reply {
            turn.buffer[assistant_index].search_text = text.clone();
            return Ok(Next::End(Ending::Reply {
                text,
                stop: Stop::Replied,
            }));
        }
        // The agent saved and yielded without a heartbeat (MemGPT's end of a turn): the reply is
        // one plain request with the memory just written, not another agent step (a small model
        // asked for a reply after a write may answer nothing, then say the user's message back).
        // Not when the app's functions or other agents may still be called.
        let only_memory = turn.offered.client.is_empty()
            && turn.agents.peers.is_empty()
            && calls.iter().all(|c| super::tools::writes(&c.function.name));
        let write_steps = turn
            .steps
            .iter()
            .filter(|r| super::tools::writes(&r.tool) && r.status == "ok")
            .map(|r| r.step)
            .collect::<std::collections::HashSet<_>>()
            .len();
        let yielded = only_memory && (!failed && !heartbeat || write_steps >= WRITE_STEPS);
        // A refused reply, asked again as often as configured: the plain reply answers.
        if asked.last_step
            || progress.unusable > unusable_before && self.replies_spent(turn, progress)
        {
            return Ok(Next::GiveUp);
        }
        let reason = if failed {
            "[This is an automated system message hidden from the user] Function call failed, returning control.".to_owned()
        } else if heartbeat {
            "[This is an automated system message hidden from the user] Function called using request_heartbeat=true, returning control.".to_owned()
        } else {
            // Quoted, so that a small model answers the user and not this notice.
            format!("[This is an automated system message hidden from the user] The function ran, but the user has not received a reply yet: answer their message (\"{}\") with send_message.", turn.newest_said())
        };
        let now = turn.now();
        // Stored before the reply in either case: a log where a function result is followed
        // directly by the reply teaches a small model to answer later turns with a copy of the
        // result (`<tool_response>{"status":"OK",…}`).
        turn.buffer.push(system_notice("heartbeat", &reason, now));
        if yielded {
            return Ok(Next::GiveUp);
        }
        Ok(Next::Step)
    }

    /// Runs one call; returns its outcome and whether it asked for a heartbeat.
    #[allow(clippy::too_many_arguments)]
    async fn run_call(
        &self,
        model: &dyn ChatModel,
        turn: &Turn,
        progress: &mut Progress,
        call: &ToolCall,
        asked: &Asked,
        pausing: bool,
        client_calls: &[ClientCall],
    ) -> (ToolOutcome, bool) {
        let name = call.function.name.as_str();
        let arguments = match lenient::arguments(&call.function.arguments) {
            Ok(arguments) => arguments,
            Err(problem) => {
                return (
                    ToolOutcome::failed(format!(
                        "could not read the arguments of {name}: {problem}"
                    )),
                    false,
                )
            }
        };
        let known = turn.offered.registry.get(name).is_some();
        if known && !asked.offer.includes(name) {
            // Servers that do not enforce tool_choice let a model call what was not offered; it
            // is refused, and the next step offers no tools at all.
            progress.narrow(Phase::PlainOnly);
            return (
                ToolOutcome::failed(format!(
                    "{name} is not available now: answer the user with send_message"
                )),
                false,
            );
        }
        let client = turn.offered.client.offers(name);
        // The app's function called again with the same arguments right after its result (a
        // small model's habit): the app would run it again, and the turn go round. Not run; the
        // next step must reply.
        if client && progress.last_call.as_deref() == Some(signature(call).as_str()) {
            progress.narrow(Phase::MustReply);
            return (
                ToolOutcome::failed(format!(
                    "{name} was not run again: it ran with these same arguments, and its result is above. Answer the user with send_message."
                )),
                false,
            );
        }
        if client && turn.offered.client.one_at_a_time && !client_calls.is_empty() {
            return (
                ToolOutcome::failed(format!(
                    "{name} was not run: the app takes one function call at a time; call it again after {}'s result",
                    client_calls[0].name
                )),
                false,
            );
        }
        let message = (name == SEND_MESSAGE)
            .then(|| arguments.get("message").and_then(serde_json::Value::as_str))
            .flatten();
        if let Some(message) = message {
            if let Some(why) = turn
                .unusable(message)
                .map(super::unusable::Unusable::feedback)
            {
                progress.unusable += 1;
                return (
                    ToolOutcome::failed(format!(
                        "not sent. {why}. Answer the user's newest message (\"{}\").",
                        turn.newest_said()
                    )),
                    false,
                );
            }
        }
        if name == SEND_MESSAGE && pausing {
            return (
                ToolOutcome::failed(
                    "not sent: answer after the results of the app's functions come back",
                ),
                false,
            );
        }
        if name == SEND_MESSAGE
            && turn.offered.client.must_call
            && !progress.client_called
            && asked.offer == super::step::Offer::All
        {
            return (
                ToolOutcome::failed(format!(
                    "not sent: the app asks for one of its functions to be called first ({})",
                    turn.offered.client.exposed_names().join(", ")
                )),
                false,
            );
        }
        let scope = ToolScope {
            read_only: turn.read_only,
            memory: &self.memory,
            scope: &turn.scope,
            agent: &turn.agent,
            config: &self.config,
            user_said: &turn.said,
            clock: turn.clock,
            tool_set: turn.view.tool_set,
            messaging: (!turn.agents.peers.is_empty()).then(|| Messaging {
                agents: self,
                model,
                model_name: &turn.model,
                chain: &turn.agents.chain,
                depth: turn.agents.depth,
                sent: &turn.agents.sent,
                peers: &turn.agents.peers,
            }),
        };
        let outcome = turn
            .offered
            .registry
            .execute(&scope, name, &arguments)
            .await;
        (outcome, super::tools::wants_heartbeat(&arguments))
    }
}

/// A call as `name\0arguments`: two calls with the same signature do the same thing.
fn signature(call: &ToolCall) -> String {
    format!(
        "{}\u{0}{}",
        call.function.name,
        call.function.arguments.trim()
    )
}
