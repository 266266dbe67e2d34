//! The management API of explicit-mode agents, under `/memproxy/v1/users/{user}/agents`: inspect
//! and edit an agent's core blocks, archival memory, message queue and summary, read its step
//! trace, reset it. Same authorization as the rest of the management API (`admin::authorize`).

use axum::extract::State;
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::error::ProxyError;
use crate::identity::DEFAULT_ID;
use crate::memory::RetrievalRequest;
use crate::store::{agent_conversation, Corpus, Page, Within};

use super::admin::{list, scope, AdminTenant};
use super::extract::{ApiPath, ApiQuery, JsonBody};
use super::SharedState;

fn unknown_agent(user: &str, agent: &str) -> ProxyError {
    ProxyError::ResourceNotFound(format!("agent '{agent}' of user '{user}'"))
}

pub async fn list_agents(
    State(state): State<SharedState>,
    Extension(tenant): Extension<AdminTenant>,
    ApiPath(user): ApiPath<String>,
) -> Result<Json<Value>, ProxyError> {
    let agents = state.memory.agent_overviews(&scope(&tenant, &user)).await?;
    let rows: Vec<Value> = agents
        .into_iter()
        .map(|(agent, counts)| {
            json!({"name": agent.name, "tags": agent.tags, "created_at_ms": agent.created_at_ms,
                "updated_at_ms": agent.updated_at_ms, "counts": counts})
        })
        .collect();
    Ok(list(rows))
}

/// Everything about one agent: blocks, summary, counts, and the system message as compiled.
pub async fn show_agent(
    State(state): State<SharedState>,
    Extension(tenant): Extension<AdminTenant>,
    ApiPath((user, agent)): ApiPath<(String, String)>,
) -> Result<Json<Value>, ProxyError> {
    let found = state
        .memory
        .agent_detail(&scope(&tenant, &user), &agent)
        .await?;
    found
        .map(|detail| Json(json!(detail)))
        .ok_or_else(|| unknown_agent(&user, &agent))
}

pub async fn reset_agent(
    State(state): State<SharedState>,
    Extension(tenant): Extension<AdminTenant>,
    ApiPath((user, agent)): ApiPath<(String, String)>,
) -> Result<Json<Value>, ProxyError> {
    let scope = scope(&tenant, &user);
    let reset = state.memory.reset_agent(&scope, &agent);
    if !state.agents.between_turns(&scope, &agent, reset).await? {
        return Err(unknown_agent(&user, &agent));
    }
    Ok(Json(json!({"deleted": true, "agent": agent, "user": user})))
}

/// `DELETE …/agents/{agent}/messages/{position}`: one message out of the agent's log (and its
/// context), with the results of the tool calls it made.
pub async fn delete_message(
    State(state): State<SharedState>,
    Extension(tenant): Extension<AdminTenant>,
    ApiPath((user, agent, position)): ApiPath<(String, String, i64)>,
) -> Result<Json<Value>, ProxyError> {
    let scope = scope(&tenant, &user);
    let delete = state.memory.delete_agent_message(&scope, &agent, position);
    let deleted = state.agents.between_turns(&scope, &agent, delete).await?;
    Ok(Json(
        json!({"deleted": deleted, "agent": agent, "user": user}),
    ))
}

pub async fn delete_block(
    State(state): State<SharedState>,
    Extension(tenant): Extension<AdminTenant>,
    ApiPath((user, agent, label)): ApiPath<(String, String, String)>,
) -> Result<Json<Value>, ProxyError> {
    let scope = scope(&tenant, &user);
    let (agent_name, block) = (agent.clone(), label.clone());
    let deleted = state
        .memory
        .blocking(move |store, _| Ok(store.delete_core_block(&scope, &agent_name, &block)?))
        .await?;
    if !deleted {
        return Err(ProxyError::ResourceNotFound(format!(
            "block '{label}' of agent '{agent}'"
        )));
    }
    Ok(Json(json!({"deleted": true, "label": label})))
}

#[derive(Deserialize, schemars::JsonSchema)]
pub struct MessageQuery {
    /// Only the messages still in the context window.
    #[serde(default)]
    in_context: bool,
    // Not `#[serde(flatten)] Listing`: flattened query numbers arrive as strings and fail.
    #[serde(default = "default_limit")]
    limit: usize,
    #[serde(default)]
    offset: usize,
}

fn default_limit() -> usize {
    100
}

fn page(limit: usize, offset: usize) -> Page {
    Page {
        limit: limit.clamp(1, 1000),
        offset,
    }
}

pub async fn agent_messages(
    State(state): State<SharedState>,
    Extension(tenant): Extension<AdminTenant>,
    ApiPath((user, agent)): ApiPath<(String, String)>,
    ApiQuery(query): ApiQuery<MessageQuery>,
) -> Result<Json<Value>, ProxyError> {
    let scope = scope(&tenant, &user);
    let page = page(query.limit, query.offset);
    let rows = state
        .memory
        .blocking(move |store, _| {
            if query.in_context {
                let (_, queue) = store.agent_context(&scope, &agent)?;
                return Ok(queue
                    .into_iter()
                    .skip(page.offset)
                    .take(page.limit)
                    .collect());
            }
            Ok(store.list_messages(&scope, &agent_conversation(&agent), page)?)
        })
        .await?;
    Ok(list(rows))
}

#[derive(Deserialize, schemars::JsonSchema)]
pub struct ArchivalQuery {
    /// Search instead of listing.
    query: Option<String>,
    #[serde(default = "default_limit")]
    limit: usize,
    #[serde(default)]
    offset: usize,
}

pub async fn archival(
    State(state): State<SharedState>,
    Extension(tenant): Extension<AdminTenant>,
    ApiPath((user, agent)): ApiPath<(String, String)>,
    ApiQuery(query): ApiQuery<ArchivalQuery>,
) -> Result<Json<Value>, ProxyError> {
    let scope = scope(&tenant, &user);
    let page = page(query.limit, query.offset);
    if let Some(text) = query.query.filter(|q| !q.trim().is_empty()) {
        let request = RetrievalRequest {
            query: text,
            corpora: vec![Corpus::Passage],
            top_k: page.limit,
            within: Some(Within::Agent(agent)),
            ..RetrievalRequest::default()
        };
        return Ok(list(state.memory.retrieve(&scope, request).await?));
    }
    let rows = state
        .memory
        .blocking(move |store, _| Ok(store.list_passages(&scope, Some(&agent), page)?))
        .await?;
    Ok(list(rows))
}

/// `{"text": …}`: a passage to add, or a summary's new text.
#[derive(Deserialize, schemars::JsonSchema)]
pub struct TextField {
    text: String,
}

pub async fn add_passage(
    State(state): State<SharedState>,
    Extension(tenant): Extension<AdminTenant>,
    ApiPath((user, agent)): ApiPath<(String, String)>,
    JsonBody(body): JsonBody<TextField>,
) -> Result<Json<Value>, ProxyError> {
    let id = state
        .memory
        .insert_passage(&scope(&tenant, &user), &agent, &body.text)
        .await?;
    Ok(Json(json!({"id": id, "agent": agent, "text": body.text})))
}

pub async fn delete_passage(
    State(state): State<SharedState>,
    Extension(tenant): Extension<AdminTenant>,
    ApiPath((user, agent, id)): ApiPath<(String, String, i64)>,
) -> Result<Json<Value>, ProxyError> {
    state
        .memory
        .delete_passage(&scope(&tenant, &user), &agent, id)
        .await?;
    Ok(Json(json!({"deleted": true, "id": id})))
}

pub async fn summary(
    State(state): State<SharedState>,
    Extension(tenant): Extension<AdminTenant>,
    ApiPath((user, agent)): ApiPath<(String, String)>,
) -> Result<Json<Value>, ProxyError> {
    let scope = scope(&tenant, &user);
    let summary = state
        .memory
        .blocking(move |store, _| Ok(store.summary(&scope, &agent_conversation(&agent))?))
        .await?;
    Ok(Json(json!(summary)))
}

/// Rewrites the summary text (which messages it stands for does not change).
pub async fn put_summary(
    State(state): State<SharedState>,
    Extension(tenant): Extension<AdminTenant>,
    ApiPath((user, agent)): ApiPath<(String, String)>,
    JsonBody(body): JsonBody<TextField>,
) -> Result<Json<Value>, ProxyError> {
    let saved = state
        .memory
        .rewrite_agent_summary(&scope(&tenant, &user), &agent, &body.text)
        .await?;
    saved
        .map(|summary| Json(json!(summary)))
        .ok_or_else(|| unknown_agent(&user, &agent))
}

/// An agent's tags.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TagsBody {
    pub tags: Vec<String>,
}

/// Replaces an agent's tags (creating the agent with its starting memory if it is new, so a
/// group of agents can be set up before their first turn).
pub async fn put_tags(
    State(state): State<SharedState>,
    Extension(tenant): Extension<AdminTenant>,
    ApiPath((user, agent)): ApiPath<(String, String)>,
    JsonBody(body): JsonBody<TagsBody>,
) -> Result<Json<Value>, ProxyError> {
    let tags = crate::store::agent::normalize_tags(&body.tags)
        .map_err(|message| ProxyError::invalid(message, Some("tags")))?;
    let (who, blocks) = (scope(&tenant, &user), state.agents.default_blocks());
    let (name, saved) = (agent.clone(), tags.clone());
    let memory = std::sync::Arc::clone(&state.memory);
    let limits = state.memory.limits().clone();
    state
        .agents
        .between_turns(&who.clone(), &agent, async move {
            memory
                .blocking(move |store, _| {
                    crate::memory::admit_agent(store, &limits, &who, &name)?;
                    store.ensure_agent(&who, &name, &blocks)?;
                    Ok(store.set_agent_tags(&who, &name, &saved)?)
                })
                .await
        })
        .await?;
    Ok(Json(json!({"agent": agent, "tags": tags})))
}

#[derive(Deserialize, schemars::JsonSchema)]
pub struct StepQuery {
    user: Option<String>,
    #[serde(default = "default_turns")]
    turns: usize,
}

fn default_turns() -> usize {
    10
}

/// `GET /memproxy/v1/agents/{agent}/steps?user=…&turns=N`: the newest turns' steps.
pub async fn steps(
    State(state): State<SharedState>,
    Extension(tenant): Extension<AdminTenant>,
    ApiPath(agent): ApiPath<String>,
    ApiQuery(query): ApiQuery<StepQuery>,
) -> Result<Json<Value>, ProxyError> {
    let user = query.user.unwrap_or_else(|| DEFAULT_ID.to_owned());
    let scope = scope(&tenant, &user);
    let turns = query.turns.clamp(1, 1000);
    let steps = state
        .memory
        .blocking(move |store, _| Ok(store.agent_steps(&scope, &agent, turns)?))
        .await?;
    Ok(list(steps))
}

/// The same, under the user's path.
pub async fn user_steps(
    state: State<SharedState>,
    tenant: Extension<AdminTenant>,
    ApiPath((user, agent)): ApiPath<(String, String)>,
    ApiQuery(query): ApiQuery<StepQuery>,
) -> Result<Json<Value>, ProxyError> {
    let query = StepQuery {
        user: Some(user),
        turns: query.turns,
    };
    steps(state, tenant, ApiPath(agent), ApiQuery(query)).await
}
