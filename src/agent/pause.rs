//! A turn paused on the client's tool calls. The pause is durable: the turn's unstored messages,
//! its progress and the calls it waits for are one row of the store ([`Paused`], written in one
//! transaction), so a restart between the client's two requests loses nothing. The client's next
//! request resumes it with one result per call (anything else is refused with what the turn
//! waits for); a request that goes on without them (a new user message, no results) closes the
//! pause first, each call answered "not run", so the agent's log never holds a call without its
//! result.

use serde::{Deserialize, Serialize};

use super::state::{system_notice, Turn};
use super::step::{Phase, Progress};
use super::tools::{ClientCall, ToolOutcome};
use super::turn_types::{ToolResult, TurnError, TurnInput};
use super::Agents;
use crate::memory::MemoryError;
use crate::store::{now_ms, AgentMessage, UserScope};
use crate::text::clip;

/// What a paused turn needs to go on.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct Paused {
    pub turn: String,
    /// What the user said in the turn so far.
    pub said: Vec<String>,
    /// The turn's messages, not stored yet (the assistant message with the calls last but for
    /// the results of its memory-tool calls).
    pub buffer: Vec<AgentMessage>,
    pub transient: Vec<String>,
    pub alerted: bool,
    pub read_only: bool,
    pub progress: Progress,
    /// The client calls waiting for results, in the order the agent made them.
    pub calls: Vec<ClientCall>,
    pub paused_at_ms: i64,
}

const NOT_RUN: &str =
    "The app did not run this function: the conversation went on without its result.";

impl Agents {
    /// Stores the turn's state until the client's results come (one write).
    pub(super) async fn pause(
        &self,
        turn: &mut Turn,
        progress: &Progress,
        calls: &[ClientCall],
    ) -> Result<(), TurnError> {
        let paused = Paused {
            turn: turn.id.clone(),
            said: turn.said.clone(),
            buffer: std::mem::take(&mut turn.buffer),
            transient: std::mem::take(&mut turn.transient),
            alerted: turn.view.alerted,
            read_only: turn.read_only,
            progress: progress.clone(),
            calls: calls.to_vec(),
            paused_at_ms: now_ms(),
        };
        let state = serde_json::to_string(&paused)
            .map_err(|e| MemoryError::Invalid(format!("pausing the turn: {e}")))?;
        let (scope, agent, id) = (turn.scope.clone(), turn.agent.clone(), turn.id.clone());
        self.memory
            .blocking(move |store, _| {
                Ok(store.set_paused_turn(&scope, &agent, Some((&id, &state)))?)
            })
            .await?;
        Ok(())
    }

    /// A read-only turn stores no messages; its finished pause is deleted on its own.
    pub(super) async fn end_read_only_pause(&self, turn: &Turn) -> Result<(), TurnError> {
        if turn.resumed {
            self.clear_pause(&turn.scope, &turn.agent).await?;
        }
        Ok(())
    }

    async fn clear_pause(&self, scope: &UserScope, agent: &str) -> Result<(), TurnError> {
        let (scope, agent) = (scope.clone(), agent.to_owned());
        self.memory
            .blocking(move |store, _| Ok(store.set_paused_turn(&scope, &agent, None)?))
            .await?;
        Ok(())
    }

    /// The agent's paused turn that this request resumes (its results checked against the
    /// calls it waits for), or `None` for a new turn (closing a pause the request goes on
    /// without).
    pub(super) async fn take_pause(&self, input: &TurnInput) -> Result<Option<Paused>, TurnError> {
        let (scope, agent) = (input.scope.clone(), input.agent.clone());
        let state = self
            .memory
            .blocking(move |store, _| Ok(store.paused_turn(&scope, &agent)?))
            .await?;
        let paused: Option<Paused> = match state {
            None => None,
            // A state this version cannot read is dropped, not allowed to block the agent.
            Some(text) => serde_json::from_str(&text)
                .map_err(|error| tracing::warn!(%error, agent = %input.agent, "unreadable paused turn dropped"))
                .ok(),
        };
        match paused {
            None if input.tool_results.is_empty() => Ok(None),
            None => Err(TurnError::ToolResults(format!(
                "The request carries tool results ({}), but agent '{}' is not waiting for any: the turn that made those calls has ended or never paused here.",
                ids(input.tool_results.iter().map(|r| r.call_id.as_str())),
                input.agent
            ))),
            Some(paused) if input.tool_results.is_empty() => {
                self.close_pause(input, paused).await?;
                Ok(None)
            }
            Some(paused) => {
                check_results(&paused.calls, &input.tool_results, &input.agent)?;
                Ok(Some(paused))
            }
        }
    }

    /// A pause the conversation went on without: its messages are stored with every call
    /// answered "not run".
    async fn close_pause(&self, input: &TurnInput, paused: Paused) -> Result<(), TurnError> {
        if paused.read_only {
            return self.clear_pause(&input.scope, &input.agent).await;
        }
        let now = input.clock.unwrap_or_else(now_ms);
        let mut messages: Vec<AgentMessage> = paused
            .buffer
            .into_iter()
            .filter(|m| !paused.transient.contains(&m.content))
            .collect();
        messages.extend(
            paused
                .calls
                .iter()
                .map(|call| result_message(&call.id, ToolOutcome::failed(NOT_RUN), now)),
        );
        // Appending ends the pause in the same transaction.
        self.memory
            .append_agent_messages(&input.scope, &input.agent, messages)
            .await?;
        Ok(())
    }

    /// Puts a paused turn back in place: its messages, then the client's results (in the order
    /// of the calls), then what the user added. The agent gets a new budget of steps.
    pub(super) fn resume(
        &self,
        turn: &mut Turn,
        progress: &mut Progress,
        paused: Paused,
        results: &[ToolResult],
    ) {
        let now = turn.now();
        let added = std::mem::take(&mut turn.buffer);
        turn.id = paused.turn;
        turn.resumed = true;
        turn.view.alerted |= paused.alerted;
        turn.transient = paused.transient;
        turn.buffer = paused.buffer;
        let new_said = std::mem::take(&mut turn.said);
        turn.said = paused.said.into_iter().chain(new_said).collect();
        *progress = paused.progress;
        progress.budget_from = progress.step;
        progress.phase = Phase::Open;
        // `progress.last_call` stays the paused call: the same call again, right after its
        // result, is not sent to the app a second time (`calls::run_call`). Unless the user said
        // more meanwhile ("check again"): then it may be asked for.
        if !added.is_empty() {
            progress.last_call = None;
        }
        for call in &paused.calls {
            let Some(result) = results.iter().find(|r| r.call_id == call.id) else {
                continue;
            };
            turn.buffer.push(result_message(
                &call.id,
                ToolOutcome::ok(result.content.clone()),
                now,
            ));
            let step = progress.step;
            turn.step(
                step,
                &call.name,
                call.arguments.clone(),
                "client_result",
                clip(&result.content, 300),
            );
        }
        // As after any call that returns control: say what to do with the result (a small model
        // given a bare function result tends to restate the question instead of answering).
        if added.is_empty() {
            let names: Vec<&str> = paused.calls.iter().map(|c| c.name.as_str()).collect();
            turn.buffer.push(system_notice(
                "heartbeat",
                &format!(
                    "[This is an automated system message hidden from the user] The app ran {} and the result is above. Use it to answer the user with send_message, or call another function.",
                    names.join(", ")
                ),
                now,
            ));
        }
        turn.buffer.extend(added);
    }
}

fn result_message(call_id: &str, outcome: ToolOutcome, now: i64) -> AgentMessage {
    AgentMessage {
        role: "tool".to_owned(),
        content: outcome.result_json(now),
        tool_calls: None,
        tool_call_id: Some(call_id.to_owned()),
        search_text: String::new(),
        created_at_ms: now,
    }
}

fn ids<'a>(ids: impl Iterator<Item = &'a str>) -> String {
    ids.map(|id| format!("'{id}'"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// One result per waiting call, no other.
fn check_results(
    calls: &[ClientCall],
    results: &[ToolResult],
    agent: &str,
) -> Result<(), TurnError> {
    let waiting = || {
        calls
            .iter()
            .map(|c| format!("'{}' ({})", c.id, c.name))
            .collect::<Vec<_>>()
            .join(", ")
    };
    for (index, result) in results.iter().enumerate() {
        if !calls.iter().any(|c| c.id == result.call_id) {
            return Err(TurnError::ToolResults(format!(
                "The tool result for '{}' answers no call of agent '{agent}'; it waits for results of {}.",
                result.call_id,
                waiting()
            )));
        }
        if results[..index].iter().any(|r| r.call_id == result.call_id) {
            return Err(TurnError::ToolResults(format!(
                "Call '{}' has more than one tool result.",
                result.call_id
            )));
        }
    }
    let missing: Vec<&ClientCall> = calls
        .iter()
        .filter(|c| !results.iter().any(|r| r.call_id == c.id))
        .collect();
    if !missing.is_empty() {
        return Err(TurnError::ToolResults(format!(
            "Agent '{agent}' waits for the results of {}; missing: {}. Send one tool message per call.",
            waiting(),
            ids(missing.iter().map(|c| c.id.as_str()))
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(id: &str) -> ClientCall {
        ClientCall {
            id: id.to_owned(),
            name: "get_weather".to_owned(),
            arguments: "{}".to_owned(),
        }
    }

    fn result(id: &str) -> ToolResult {
        ToolResult {
            call_id: id.to_owned(),
            content: "sunny".to_owned(),
        }
    }

    #[test]
    fn results_must_answer_each_waiting_call_once() {
        let calls = [call("a"), call("b")];
        assert!(check_results(&calls, &[result("b"), result("a")], "x").is_ok());
        let missing = check_results(&calls, &[result("a")], "x")
            .unwrap_err()
            .to_string();
        assert!(missing.contains("missing: 'b'"), "{missing}");
        let stranger = check_results(&calls, &[result("a"), result("b"), result("c")], "x")
            .unwrap_err()
            .to_string();
        assert!(stranger.contains("'c' answers no call"), "{stranger}");
        let twice = check_results(&calls, &[result("a"), result("a"), result("b")], "x")
            .unwrap_err()
            .to_string();
        assert!(twice.contains("more than one"), "{twice}");
    }
}
