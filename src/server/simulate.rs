//! The context simulator behind the web console: what memproxy *would* send upstream for a chat
//! request under a strategy, section by section, with the retrieved memories and their scores.
//! Read only: nothing is stored, no agent is created, the upstream is not called.

use axum::extract::State;
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::conversation::request::Message;
use crate::error::ProxyError;
use crate::identity::{Scope, DEFAULT_ID};
use crate::memory::RetrievalRequest;
use crate::mode::Mode;
use crate::openai::ChatRequest;
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

fn message_tokens(messages: &[Message]) -> usize {
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
    let wire = request;
    let request = wire.neutral();
    let rewrite = crate::strategy::prepare(
        &state.memory,
        &state.config.memory,
        body.strategy,
        &scope,
        &request,
    )
    .await;
    // What would go upstream (the plan applied to the request), and the same counted neutrally.
    let (payload, sent) = match &rewrite.plan {
        Some(plan) => (
            ChatRequest {
                messages: plan.apply(&wire.messages),
                ..wire
            },
            plan.apply(&request.messages),
        ),
        None => (wire, request.messages.clone()),
    };
    let newest = sent.iter().rposition(|m| m.role == "user");
    let mut instructions = 0;
    let mut history = 0;
    let mut new_message = 0;
    for (index, message) in sent.iter().enumerate() {
        let clean = tokens::count_message(&message.role, &strip_blocks(&message.text()));
        if message.role == "system" || message.role == "developer" {
            instructions += clean;
        } else if Some(index) == newest {
            new_message += clean;
        } else {
            history += clean;
        }
    }
    let total = message_tokens(&sent);
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
        "payload": payload,
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

/// The agent's next request, as its turn would send it (`agent::Agents::preview`: the turn's own
/// layout, opened read-only).
async fn explicit(
    state: &SharedState,
    tenant: &AdminTenant,
    user: &str,
    agent: &str,
    request: &ChatRequest,
) -> Result<Json<Value>, ProxyError> {
    let scope = Scope {
        tenant: tenant.0.clone(),
        user: user.to_owned(),
        agent: agent.to_owned(),
        conversation: agent_conversation(agent),
        // Never store anything from a simulation.
        record: false,
        time_ms: None,
    };
    let params = request.extra.clone();
    let input = super::core::explicit::turn_input(&request.neutral(), params, &scope)?;
    let preview = match state.agents.preview(input).await {
        Ok(preview) => preview,
        // The turn's own errors, as the turn would answer them (a preview calls no model).
        Err(error) => {
            return Err(super::core::explicit::failure(error)
                .err()
                .unwrap_or_else(|| ProxyError::Internal("the preview failed".to_owned())))
        }
    };
    let sections: Vec<Value> = preview
        .sections
        .iter()
        .map(|(name, tokens)| section(name, *tokens))
        .collect();
    let total: usize = preview.sections.iter().map(|(_, tokens)| tokens).sum();
    Ok(Json(json!({
        "strategy": "explicit",
        "agent": agent,
        "conversation": agent_conversation(agent),
        "payload": preview.body,
        "tokens_before": message_tokens(&request.neutral().messages),
        "tokens_after": total,
        "sections": sections,
        "memories": 0,
        "retrieved": [],
        "degraded": null,
    })))
}
