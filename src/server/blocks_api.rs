//! The management API of shared core-memory blocks: a user's blocks under
//! `/memproxy/v1/users/{user}/blocks`, attached to and detached from the user's agents under
//! `/memproxy/v1/users/{user}/agents/{agent}/shared/{name}`. An edit (here, or by any agent it is
//! attached to) is in every attached agent's next compiled context. Same authorization as the rest
//! of the management API.

use axum::extract::State;
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::error::ProxyError;
use crate::store::SharedBlock;

use super::admin::{list, scope, AdminTenant};
use super::extract::{ApiPath, JsonBody};
use super::SharedState;

pub async fn list_shared(
    State(state): State<SharedState>,
    Extension(tenant): Extension<AdminTenant>,
    ApiPath(user): ApiPath<String>,
) -> Result<Json<Value>, ProxyError> {
    let scope = scope(&tenant, &user);
    let blocks = state
        .memory
        .blocking(move |store, _| Ok(store.shared_blocks(&scope)?))
        .await?;
    Ok(list(blocks))
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SharedBlockBody {
    /// What the agents see it as (default: the block's name). Fixed once the block exists.
    #[serde(default)]
    label: Option<String>,
    value: String,
    /// Default: the configured `explicit.block_char_limit`.
    #[serde(default)]
    char_limit: Option<i64>,
    /// Agents cannot edit it (the API can).
    #[serde(default)]
    read_only: bool,
}

/// Creates or updates a shared block; an update reaches every agent it is attached to.
pub async fn put_shared(
    State(state): State<SharedState>,
    Extension(tenant): Extension<AdminTenant>,
    ApiPath((user, name)): ApiPath<(String, String)>,
    JsonBody(body): JsonBody<SharedBlockBody>,
) -> Result<Json<Value>, ProxyError> {
    let scope = scope(&tenant, &user);
    let limit = state.agents.config().block_char_limit as i64;
    let block = SharedBlock {
        label: body.label.unwrap_or_else(|| name.clone()),
        name,
        value: body.value,
        char_limit: body.char_limit.unwrap_or(limit),
        read_only: body.read_only,
        updated_at_ms: 0,
        agents: Vec::new(),
    };
    let name = block.name.clone();
    let limits = state.memory.limits().clone();
    let saved = state
        .memory
        .blocking(move |store, _| {
            let existing = store.shared_blocks(&scope)?;
            limits
                .shared_block(&block.name, existing.iter().map(|b| b.name.as_str()))
                .map_err(crate::memory::MemoryError::Limit)?;
            store.put_shared_block(&scope, &block)?;
            Ok(store.shared_blocks(&scope)?)
        })
        .await?;
    let saved = saved.into_iter().find(|b| b.name == name);
    Ok(Json(json!(saved)))
}

pub async fn delete_shared(
    State(state): State<SharedState>,
    Extension(tenant): Extension<AdminTenant>,
    ApiPath((user, name)): ApiPath<(String, String)>,
) -> Result<Json<Value>, ProxyError> {
    let scope = scope(&tenant, &user);
    let block = name.clone();
    let deleted = state
        .memory
        .blocking(move |store, _| Ok(store.delete_shared_block(&scope, &block)?))
        .await?;
    if !deleted {
        return Err(ProxyError::ResourceNotFound(format!(
            "shared block '{name}' of user '{user}'"
        )));
    }
    Ok(Json(json!({"deleted": true, "name": name})))
}

/// Attaches a shared block to an agent (created with the configured starting memory if new).
pub async fn attach(
    State(state): State<SharedState>,
    Extension(tenant): Extension<AdminTenant>,
    ApiPath((user, agent, name)): ApiPath<(String, String, String)>,
) -> Result<Json<Value>, ProxyError> {
    let (scope, starting) = (scope(&tenant, &user), state.agents.default_blocks());
    let (agent_name, block) = (agent.clone(), name.clone());
    let limits = state.memory.limits().clone();
    let blocks = state
        .memory
        .blocking(move |store, _| {
            crate::memory::admit_agent(store, &limits, &scope, &agent_name)?;
            let shared = store.shared_blocks(&scope)?;
            if let Some(shared) = shared.iter().find(|shared| shared.name == block) {
                crate::memory::admit_block(store, &limits, &scope, &agent_name, &shared.label)?;
            }
            store.attach_shared_block(&scope, &agent_name, &block, &starting)?;
            Ok(store.core_blocks(&scope, &agent_name)?)
        })
        .await?;
    Ok(Json(
        json!({"agent": agent, "attached": name, "blocks": blocks}),
    ))
}

/// Detaches a shared block from an agent (an own block of its label comes back).
pub async fn detach(
    State(state): State<SharedState>,
    Extension(tenant): Extension<AdminTenant>,
    ApiPath((user, agent, name)): ApiPath<(String, String, String)>,
) -> Result<Json<Value>, ProxyError> {
    let scope = scope(&tenant, &user);
    let (agent_name, block) = (agent.clone(), name.clone());
    let detached = state
        .memory
        .blocking(move |store, _| Ok(store.detach_shared_block(&scope, &agent_name, &block)?))
        .await?;
    if !detached {
        return Err(ProxyError::ResourceNotFound(format!(
            "shared block '{name}' attached to agent '{agent}'"
        )));
    }
    Ok(Json(json!({"agent": agent, "detached": name})))
}
