//! The context simulator behind the web console: what memproxy *would* send upstream for a chat
//! request under a strategy, section by section, with the retrieved memories and their scores.
//! Read only: nothing is stored, no agent is created, the upstream is not called.

use axum::extract::State;
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::agent::context;
use crate::error::ProxyError;
use crate::identity::{Scope, DEFAULT_ID};
use crate::memory::RetrievalRequest;
use crate::mode::Mode;
use crate::openai::{ChatMessage, ChatRequest};
use crate::store::{agent_conversation, Corpus, Page, UserScope};
use crate::strategy::inject::strip_blocks;
use crate::tokens;

use super::admin::{scope, AdminTenant};
use super::extract::JsonBody;
use super::SharedState;

#[derive(Deserialize, schemars::JsonSchema)]
pub struct SimulateBody {
    /// A chat request as a client would send it; or `conversation` to take a stored one.
    request: Option<Value>,
    user: Option<String>,
    conversation: Option<String>,
    #[serde(default)]
    agent: Option<String>,
    strategy: Mode,
}

fn section(name: &str, tokens: usize) -> Value {
    json!({"name": name, "tokens": tokens})
}

fn message_tokens(messages: &[ChatMessage]) -> usize {
    messages
        .iter()
        .map(|m| tokens::count_message(&m.role, &m.text()))
        .sum()
}

/// The client's request: given, or rebuilt from a stored conversation of the user.
async fn client_request(
    state: &SharedState,
    body: &SimulateBody,
    user: &str,
    tenant: &AdminTenant,
) -> Result<ChatRequest, ProxyError> {
    if let Some(request) = &body.request {
        return ChatRequest::parse(
            &serde_json::to_vec(request).map_err(|e| ProxyError::Internal(e.to_string()))?,
        );
    }
    let conversation = body
        .conversation
        .clone()
        .ok_or_else(|| ProxyError::invalid("Give 'request' or 'conversation'.", Some("request")))?;
    let scope = scope(tenant, user);
    let stored = state
        .memory
        .blocking(move |store, _| {
            Ok(store.list_messages(
                &scope,
                &conversation,
                Page {
                    limit: 1000,
                    offset: 0,
                },
            )?)
        })
        .await?;
    let messages: Vec<Value> = stored
        .iter()
        .filter(|m| !m.superseded && (m.role == "user" || m.role == "assistant"))
        .map(|m| json!({"role": m.role, "content": m.content}))
        .collect();
    ChatRequest::parse(
        &serde_json::to_vec(&json!({"model": "simulated", "messages": messages}))
            .map_err(|e| ProxyError::Internal(e.to_string()))?,
    )
}

pub async fn simulate(
    State(state): State<SharedState>,
    Extension(tenant): Extension<AdminTenant>,
    JsonBody(body): JsonBody<SimulateBody>,
) -> Result<Json<Value>, ProxyError> {
    let user = body.user.clone().unwrap_or_else(|| DEFAULT_ID.to_owned());
    let request = client_request(&state, &body, &user, &tenant).await?;
    if body.strategy == Mode::Explicit {
        return explicit(
            &state,
            &tenant,
            &user,
            body.agent.as_deref().unwrap_or(DEFAULT_ID),
            &request,
        )
        .await;
    }
    let scope = Scope {
        tenant: tenant.0.clone(),
        user: user.clone(),
        agent: DEFAULT_ID.to_owned(),
        conversation: body
            .conversation
            .clone()
            .unwrap_or_else(|| "simulated".to_owned()),
        // Never store anything from a simulation.
        record: false,
        time_ms: None,
    };
    let rewrite = crate::strategy::prepare(
        &state.memory,
        &state.config.memory,
        body.strategy,
        &scope,
        &request,
    )
    .await;
    let sent = rewrite.request.clone().unwrap_or_else(|| request.clone());
    let newest = sent.messages.iter().rposition(|m| m.role == "user");
    let mut instructions = 0;
    let mut history = 0;
    let mut new_message = 0;
    for (index, message) in sent.messages.iter().enumerate() {
        let clean = tokens::count_message(&message.role, &strip_blocks(&message.text()));
        if message.role == "system" || message.role == "developer" {
            instructions += clean;
        } else if Some(index) == newest {
            new_message += clean;
        } else {
            history += clean;
        }
    }
    let total = message_tokens(&sent.messages);
    let memory_and_summary = total.saturating_sub(instructions + history + new_message);
    // The summary sits inside the memory block; count it apart.
    let summary_tokens = if memory_and_summary > 0 {
        let (summary_scope, conversation) = (UserScope::from(&scope), scope.conversation.clone());
        state
            .memory
            .blocking(move |store, _| Ok(store.summary(&summary_scope, &conversation)?))
            .await?
            .map_or(0, |s| tokens::count(&s.text).min(memory_and_summary))
    } else {
        0
    };
    let retrieved = if body.strategy == Mode::Implicit {
        let question = request
            .messages
            .iter()
            .rev()
            .find(|m| m.role == "user")
            .map(|m| strip_blocks(&m.text()))
            .unwrap_or_default();
        let request = RetrievalRequest {
            query: question,
            corpora: vec![Corpus::Memory, Corpus::Message],
            top_k: state.config.memory.max_memories,
            min_similarity: state.config.memory.min_similarity,
            ..RetrievalRequest::default()
        };
        json!(
            state
                .memory
                .retrieve(&UserScope::from(&scope), request)
                .await?
        )
    } else {
        json!([])
    };
    Ok(Json(json!({
        "strategy": body.strategy.as_str(),
        "payload": sent,
        "tokens_before": message_tokens(&request.messages),
        "tokens_after": total,
        "sections": [
            section("instructions", instructions),
            section("memory", memory_and_summary - summary_tokens),
            section("summary", summary_tokens),
            section("history", history),
            section("new message", new_message),
        ],
        "memories": rewrite.memories,
        "retrieved": retrieved,
        "degraded": rewrite.degraded,
    })))
}

/// The agent's next request: system message (instructions and core memory), tools, summary,
/// queue, and the client's new message wrapped as the agent would get it.
async fn explicit(
    state: &SharedState,
    tenant: &AdminTenant,
    user: &str,
    agent: &str,
    request: &ChatRequest,
) -> Result<Json<Value>, ProxyError> {
    let crate::agent::AgentView {
        blocks,
        counts,
        summary,
        queue,
    } = state.agents.view(&scope(tenant, user), agent).await?;
    let tool_set = state
        .agents
        .config()
        .tools(request.model.as_deref().unwrap_or_default());
    let memory = context::compile_memory(&blocks, &counts, crate::store::now_ms(), tool_set);
    let at = state.agents.config().core_memory_at;
    let start = request
        .messages
        .iter()
        .rposition(|m| m.role == "assistant")
        .map_or(0, |i| i + 1);
    let new: Vec<Value> = request.messages[start..]
        .iter()
        .filter(|m| m.role == "user")
        .map(|m| json!({"role": "user", "content": json!({"type": "user_message", "message": m.text(), "time": crate::dates::timestamp(crate::store::now_ms())}).to_string()}))
        .collect();
    // What recall before the turn would add for the new messages.
    let said: Vec<String> = request.messages[start..]
        .iter()
        .filter(|m| m.role == "user")
        .map(|m| m.text())
        .collect();
    let summary_text = summary.as_ref().map(|s| s.text.as_str());
    let recalled = state
        .agents
        .recall_preview(
            &scope(tenant, user),
            agent,
            &said,
            &queue,
            (summary_text, &memory),
        )
        .await?;
    let mut history: Vec<Value> = queue.iter().map(context::wire_message).collect();
    if state.agents.config().replies_as_text {
        history = context::replies_as_text(history);
    }
    let past = crate::agent::history::asked_about(&said);
    let messages = context::layout(
        (at, tool_set, past),
        &memory,
        recalled.as_deref(),
        summary.as_ref(),
        history.iter().cloned(),
        new.iter().cloned(),
    );
    let block_tokens: usize = blocks.iter().map(|b| tokens::count(&b.value)).sum();
    // The memory tools with the client's own, as the turn would offer them.
    let tools = crate::agent::tools::for_request(&request.extra, &[], tool_set)
        .0
        .schemas();
    let system_tokens = context::message_tokens(&messages[0])
        + match at {
            crate::agent::CoreMemoryAt::System => 0,
            crate::agent::CoreMemoryAt::Turn => tokens::count(&memory),
        };
    let count = |items: &[Value]| items.iter().map(context::message_tokens).sum::<usize>();
    let summary_tokens = summary.as_ref().map_or(0, |s| {
        context::message_tokens(&context::summary_message(s, &memory))
    });
    let sections = vec![
        section("instructions", system_tokens.saturating_sub(block_tokens)),
        section("core memory", block_tokens),
        section(
            "tools",
            tokens::count(&Value::Array(tools.clone()).to_string()),
        ),
        section("summary", summary_tokens),
        section("recalled", recalled.as_deref().map_or(0, tokens::count)),
        section("history", count(&history)),
        section("new message", count(&new)),
    ];
    let total: usize = sections
        .iter()
        .filter_map(|s| s["tokens"].as_u64())
        .sum::<u64>() as usize;
    Ok(Json(json!({
        "strategy": "explicit",
        "agent": agent,
        "conversation": agent_conversation(agent),
        "payload": {"model": request.model, "messages": messages, "tools": tools},
        "tokens_before": message_tokens(&request.messages),
        "tokens_after": total,
        "sections": sections,
        "memories": 0,
        "retrieved": [],
        "degraded": null,
    })))
}
