//! Messages between the agents of one user (Letta's multi-agent tools): `send_message_to_agent_async`
//! (delivered by the durable job queue, the receiver's reply lands in the sender's log later),
//! `send_message_to_agent_and_wait_for_reply` (the receiver's turn runs now, its reply is the
//! result; bounded by `explicit.agent_reply_timeout`), and `send_message_to_agents_matching_tags`.
//! Offered only to an agent whose user has other agents; an agent of another user or tenant is
//! never found (every lookup is in the sender's own scope).
//!
//! An A→B→A chain cannot deadlock on the per-agent turn lock: a turn knows the agents waiting
//! for it up the chain, and waiting for one of them is refused (the async message is offered
//! instead).

use async_trait::async_trait;
use serde_json::{json, Map, Value};

use super::kit::{function, required, Tool, ToolOutcome, ToolScope};
use crate::agent::mail;
use crate::agent::turn_types::{Ending, TurnInput};
use crate::store::AgentRecord;

pub const SEND_ASYNC: &str = "send_message_to_agent_async";
pub const SEND_AND_WAIT: &str = "send_message_to_agent_and_wait_for_reply";
pub const SEND_TO_TAGS: &str = "send_message_to_agents_matching_tags";

/// The messaging tools name the user's other agents in their schemas (a small model does not
/// guess names it was never shown; a server that enforces schemas keeps it to real ones).
pub struct SendAsync(pub Peers);
pub struct SendAndWait(pub Peers);
pub struct SendToTags(pub Peers);

/// The other agents as the schemas show them: names, and each one's tags.
#[derive(Clone, Default)]
pub struct Peers {
    pub names: Vec<String>,
    pub tags: Vec<String>,
}

impl Peers {
    pub fn of(peers: &[AgentRecord]) -> Peers {
        let mut tags: Vec<String> = peers.iter().flat_map(|p| p.tags.clone()).collect();
        tags.sort();
        tags.dedup();
        Peers {
            names: peers.iter().map(|p| p.name.clone()).collect(),
            tags,
        }
    }

    fn agent_property(&self) -> Value {
        let mut property = json!({"type": "string", "description": format!(
            "Name of the other agent: {}.", self.names.join(", "))});
        if !self.names.is_empty() {
            property["enum"] = json!(self.names);
        }
        property
    }
}

fn message_property() -> Value {
    json!({"type": "string", "description": "The message, in your own voice."})
}

/// The other agent named by the call, among the sender's peers.
fn peer<'a>(tools: &'a ToolScope<'_>, name: &str) -> Result<&'a AgentRecord, ToolOutcome> {
    let messaging = tools
        .messaging
        .as_ref()
        .ok_or_else(|| ToolOutcome::failed("messaging other agents is not available here"))?;
    messaging
        .peers
        .iter()
        .find(|p| p.name == name)
        .ok_or_else(|| {
            let names: Vec<&str> = messaging.peers.iter().map(|p| p.name.as_str()).collect();
            ToolOutcome::failed(format!(
                "there is no other agent '{name}'; the agents are: {}",
                names.join(", ")
            ))
        })
}

#[async_trait]
impl Tool for SendAsync {
    fn name(&self) -> &str {
        SEND_ASYNC
    }

    fn schema(&self) -> Value {
        function(
            SEND_ASYNC,
            "Send a message to another agent without waiting. Its reply arrives in your conversation later.",
            json!({"agent": self.0.agent_property(), "message": message_property()}),
            &["agent", "message"],
        )
    }

    fn writes(&self) -> bool {
        true
    }

    async fn execute(&self, tools: &ToolScope<'_>, arguments: &Map<String, Value>) -> ToolOutcome {
        let run = async {
            let (to, message) = addressed(tools, arguments)?;
            spend(tools, 1)?;
            post(tools, &to, &message).await?;
            Ok(ToolOutcome::ok(format!(
                "Message sent to {to}. Its reply will arrive in your conversation later."
            )))
        };
        run.await.unwrap_or_else(|failed: ToolOutcome| failed)
    }
}

#[async_trait]
impl Tool for SendAndWait {
    fn name(&self) -> &str {
        SEND_AND_WAIT
    }

    fn schema(&self) -> Value {
        function(
            SEND_AND_WAIT,
            "Send a message to another agent and wait for its reply, which is this function's result.",
            json!({"agent": self.0.agent_property(), "message": message_property()}),
            &["agent", "message"],
        )
    }

    fn writes(&self) -> bool {
        true
    }

    async fn execute(&self, tools: &ToolScope<'_>, arguments: &Map<String, Value>) -> ToolOutcome {
        let run = async {
            let (to, message) = addressed(tools, arguments)?;
            let Some(messaging) = tools.messaging.as_ref() else {
                return Err(ToolOutcome::failed(
                    "messaging other agents is not available here",
                ));
            };
            if messaging.chain.contains(&to) {
                return Err(ToolOutcome::failed(format!(
                    "{to} is waiting for your reply in this exchange: answer with send_message, or use {SEND_ASYNC}"
                )));
            }
            spend(tools, 1)?;
            let mut chain = messaging.chain.to_vec();
            chain.push(tools.agent.to_owned());
            let input = TurnInput {
                scope: tools.scope.clone(),
                agent: to.clone(),
                model: messaging.model_name.to_owned(),
                client_system: None,
                user_messages: vec![message],
                app_reply: None,
                tool_results: Vec::new(),
                params: Map::new(),
                client_tools: Default::default(),
                clock: tools.clock,
                record: true,
                from_agent: Some(tools.agent.to_owned()),
                chain,
                depth: messaging.depth + 1,
            };
            let limit = messaging.agents.config().agent_reply_timeout;
            let turn = messaging.agents.run_turn(messaging.model, input);
            let outcome = tokio::time::timeout(limit, Box::pin(turn))
                .await
                .map_err(|_| {
                    ToolOutcome::failed(format!("{to} did not reply within {} s", limit.as_secs()))
                })?
                .map_err(|e| ToolOutcome::failed(format!("{to} could not answer: {e}")))?;
            match outcome.ending {
                Ending::Reply { text, .. } => Ok(ToolOutcome::ok(format!("{to} replied: {text}"))),
                Ending::ToolCalls(_) => Err(ToolOutcome::failed(format!("{to} did not reply"))),
            }
        };
        run.await.unwrap_or_else(|failed| failed)
    }
}

#[async_trait]
impl Tool for SendToTags {
    fn name(&self) -> &str {
        SEND_TO_TAGS
    }

    fn schema(&self) -> Value {
        function(
            SEND_TO_TAGS,
            "Send a message to every other agent that has all of the given tags, without waiting. Their replies arrive in your conversation later.",
            json!({
                "tags": {"type": "array", "items": {"type": "string"}, "description": format!(
                    "Tags an agent must all have (the tags in use: {}).", self.0.tags.join(", "))},
                "message": message_property(),
            }),
            &["tags", "message"],
        )
    }

    fn writes(&self) -> bool {
        true
    }

    async fn execute(&self, tools: &ToolScope<'_>, arguments: &Map<String, Value>) -> ToolOutcome {
        let run = async {
            let message = required(arguments, "message")?;
            let tags: Vec<String> = match arguments.get("tags") {
                Some(Value::Array(items)) => items
                    .iter()
                    .filter_map(|t| t.as_str().map(str::to_owned))
                    .collect(),
                Some(Value::String(one)) => vec![one.clone()],
                _ => Vec::new(),
            };
            if tags.is_empty() {
                return Err(ToolOutcome::failed("'tags' must name at least one tag"));
            }
            let peers = tools.messaging.as_ref().map_or(&[][..], |m| m.peers);
            let targets = matching(peers, &tags);
            if targets.is_empty() {
                return Err(ToolOutcome::failed(format!(
                    "no other agent has the tags {tags:?}"
                )));
            }
            spend(tools, targets.len())?;
            for to in &targets {
                post(tools, to, &message).await?;
            }
            Ok(ToolOutcome::ok(format!(
                "Message sent to {}. Their replies will arrive in your conversation later.",
                targets.join(", ")
            )))
        };
        run.await.unwrap_or_else(|failed| failed)
    }
}

/// The call's `agent` (one of the peers) and `message`.
fn addressed(
    tools: &ToolScope<'_>,
    arguments: &Map<String, Value>,
) -> Result<(String, String), ToolOutcome> {
    let target = required(arguments, "agent")?;
    let message = required(arguments, "message")?;
    Ok((peer(tools, &target)?.name.clone(), message))
}

/// Takes `count` messages from what this turn may send: each one runs another agent's turn
/// upstream, so one request's messages are bounded in number per turn
/// (`limits.max_agent_messages_per_turn`) and in how far they pass on
/// (`limits.max_agent_message_depth`).
fn spend(tools: &ToolScope<'_>, count: usize) -> Result<(), ToolOutcome> {
    use std::sync::atomic::Ordering;
    let Some(messaging) = tools.messaging.as_ref() else {
        return Err(ToolOutcome::failed(
            "messaging other agents is not available here",
        ));
    };
    let limits = tools.memory.limits();
    if messaging.depth >= limits.max_agent_message_depth {
        return Err(ToolOutcome::failed(format!(
            "this turn answers a message that came through {} agents, the most a message may pass through (limits.max_agent_message_depth): answer with send_message",
            messaging.depth
        )));
    }
    let sent = messaging.sent.load(Ordering::Relaxed);
    if sent + count > limits.max_agent_messages_per_turn {
        return Err(ToolOutcome::failed(format!(
            "that is {count} more messages to other agents after {sent}; one turn may send at most {} (limits.max_agent_messages_per_turn)",
            limits.max_agent_messages_per_turn
        )));
    }
    messaging.sent.fetch_add(count, Ordering::Relaxed);
    Ok(())
}

/// Queues one message from the calling agent.
async fn post(tools: &ToolScope<'_>, to: &str, message: &str) -> Result<(), ToolOutcome> {
    let model = tools.messaging.as_ref().map_or("", |m| m.model_name);
    let depth = tools.messaging.as_ref().map_or(0, |m| m.depth);
    let letter = mail::Letter {
        from: tools.agent,
        to,
        message,
        model,
        clock: tools.clock,
        depth: depth + 1,
    };
    mail::post(tools.memory, tools.scope, letter)
        .await
        .map_err(|e| ToolOutcome::failed(e.to_string()))
}

/// The peers that have every one of `tags`.
pub fn matching(peers: &[AgentRecord], tags: &[String]) -> Vec<String> {
    peers
        .iter()
        .filter(|p| tags.iter().all(|t| p.tags.contains(t)))
        .map(|p| p.name.clone())
        .collect()
}
