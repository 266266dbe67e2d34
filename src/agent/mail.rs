//! Delivery of messages between agents through the durable job queue: [`post`] enqueues an
//! `agent_message` job (it survives a crash: an interrupted job runs again at the next start);
//! [`AgentMail::deliver`] runs the receiver's turn on the message and puts its reply in the
//! sender's log as an `agent_reply` note (between the sender's turns, never starting one, so
//! two agents cannot ping-pong forever).

use std::sync::Arc;

use axum::http::HeaderMap;
use serde_json::json;

use super::turn_types::{Ending, TurnInput};
use super::{Agents, UpstreamModel};
use crate::memory::{MemoryResult, MemoryService};
use crate::store::{now_ms, AgentMessage, Job, NewJob, UserScope};
use crate::upstream::{request_headers, Upstream};

/// The job kind.
pub const AGENT_MESSAGE: &str = "agent_message";

/// One message between two agents of a user.
pub struct Letter<'a> {
    pub from: &'a str,
    pub to: &'a str,
    pub message: &'a str,
    /// The chat model the receiver's turn runs on.
    pub model: &'a str,
    pub clock: Option<i64>,
    /// How many messages between agents led to the receiver's turn (see `TurnInput::depth`).
    pub depth: usize,
}

/// Queues a letter between agents of `scope`'s user.
pub async fn post(
    memory: &MemoryService,
    scope: &UserScope,
    letter: Letter<'_>,
) -> MemoryResult<()> {
    let Letter {
        from,
        to,
        message,
        model,
        clock,
        depth,
    } = letter;
    let job = NewJob {
        kind: AGENT_MESSAGE.to_owned(),
        scope: Some(scope.clone()),
        dedupe_key: None,
        payload: json!({"from": from, "to": to, "message": message, "model": model, "clock": clock,
            "depth": depth}),
        run_after_ms: now_ms(),
    };
    memory
        .blocking(move |store, _| Ok(store.enqueue_job(&job)?))
        .await?;
    Ok(())
}

/// What delivering needs: the agents and the chat upstream (with its configured key only: a
/// client's key is never kept for later).
pub struct AgentMail {
    pub agents: Arc<Agents>,
    pub upstream: Arc<Upstream>,
}

#[async_trait::async_trait]
impl crate::postprocess::JobHandler for AgentMail {
    async fn run(&self, job: &Job, scope: &UserScope) -> Result<String, String> {
        self.deliver(job, scope).await
    }
}

impl AgentMail {
    /// Runs the receiver's turn on one queued message; its reply goes to the sender's log.
    pub async fn deliver(&self, job: &Job, scope: &UserScope) -> Result<String, String> {
        let field = |name: &str| job.payload[name].as_str().unwrap_or_default().to_owned();
        let (from, to, message) = (field("from"), field("to"), field("message"));
        if from.is_empty() || to.is_empty() || message.is_empty() {
            return Err("an agent message needs 'from', 'to' and 'message'".to_owned());
        }
        let model = UpstreamModel {
            upstream: Arc::clone(&self.upstream),
            headers: request_headers(
                &HeaderMap::new(),
                self.upstream.authorization(None, true),
                false,
            ),
        };
        let input = TurnInput {
            scope: scope.clone(),
            agent: to.clone(),
            model: field("model"),
            client_system: None,
            user_messages: vec![message],
            app_reply: None,
            tool_results: Vec::new(),
            params: serde_json::Map::new(),
            client_tools: Default::default(),
            clock: job.payload["clock"].as_i64(),
            record: true,
            from_agent: Some(from.clone()),
            chain: Vec::new(),
            depth: job.payload["depth"].as_u64().map_or(1, |d| d as usize),
        };
        let outcome = self
            .agents
            .run_turn(&model, input)
            .await
            .map_err(|e| format!("{to} could not answer {from}: {e}"))?;
        let Ending::Reply { text, .. } = outcome.ending else {
            return Ok(format!("{to} answered {from} with no reply"));
        };
        let now = job.payload["clock"].as_i64().unwrap_or_else(now_ms);
        let note = AgentMessage {
            role: "user".to_owned(),
            content: json!({"type": "agent_reply", "from": to, "message": text,
                "time": crate::dates::timestamp(now)})
            .to_string(),
            tool_calls: None,
            tool_call_id: None,
            search_text: format!("{to}: {text}"),
            created_at_ms: now,
        };
        let memory = Arc::clone(self.agents.memory());
        self.agents
            .between_turns(scope, &from, async {
                memory.append_agent_notes(scope, &from, vec![note]).await
            })
            .await
            .map_err(|e| e.to_string())?;
        Ok(format!(
            "{to} answered {from} ({} characters)",
            text.chars().count()
        ))
    }
}
