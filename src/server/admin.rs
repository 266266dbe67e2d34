//! The management API under `/memproxy/v1`: browse, search, edit, export, import and forget a
//! user's memory.
//!
//! Who may call it: the admin key (any tenant, chosen with `X-Memproxy-Tenant`), or a proxy key
//! (its own tenant only). With neither kind of key configured the API is open, for local use.

use axum::extract::{FromRequestParts, Request, State};
use axum::http::{header, HeaderMap};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::agent::one_memory;
use crate::error::ProxyError;
use crate::identity::DEFAULT_ID;
use crate::keys::{key_digest, KeyGrant};
use crate::memory::RetrievalRequest;
use crate::store::{CoreBlock, Page, UserScope};

use super::extract::{ApiPath, ApiQuery, JsonBody, TextBody};
use super::SharedState;

pub use crate::identity::{AdminTenant, KeyUser};

pub const TENANT_HEADER: &str = "x-memproxy-tenant";

/// Whether the caller may act across tenants: the admin key, or an API open for local use.
#[derive(Clone, Copy, Debug)]
pub struct AllTenants(pub bool);

/// Who the caller is and which tenant it acts for; a refusal comes in the shape of the route's API
/// (JSON-RPC for MCP).
pub async fn authorize(State(state): State<SharedState>, request: Request, next: Next) -> Response {
    let path = request.uri().path().to_owned();
    match authorized(&state, request).await {
        Ok(request) => next.run(request).await,
        Err(error) => super::refusal::refusal(state.surfaces, &path, error),
    }
}

async fn authorized(state: &SharedState, mut request: Request) -> Result<Request, ProxyError> {
    let headers = request.headers();
    let key = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    let key_digest_sent = key.map(key_digest);
    let asked = headers
        .get(TENANT_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_owned);
    let admin_key = state.config.auth.admin_key.as_ref();
    let is_admin = match (admin_key, key) {
        (Some(admin), Some(key)) => key_digest(admin.expose()) == key_digest(key),
        _ => false,
    };
    let grant = if is_admin || (admin_key.is_none() && state.tenant_keys.is_empty()) {
        KeyGrant::tenant(asked.as_deref().unwrap_or(DEFAULT_ID))
    } else {
        let own = key
            .and_then(|key| state.tenant_keys.get(&key_digest(key)))
            .ok_or(ProxyError::Unauthorized)?;
        if asked.as_ref().is_some_and(|asked| asked != &own.tenant) {
            return Err(ProxyError::Unauthorized);
        }
        own.clone()
    };
    if let Some(user) = &grant.user {
        let (mut parts, body) = request.into_parts();
        only_own_user(&mut parts, user).await?;
        request = Request::from_parts(parts, body);
        request.extensions_mut().insert(KeyUser(user.clone()));
    }
    let all_tenants = is_admin || (admin_key.is_none() && state.tenant_keys.is_empty());
    if calls_llm(&request) {
        // The same budget as the key's `/v1` requests (one shared budget with auth off).
        let open = admin_key.is_none() && state.tenant_keys.is_empty();
        let budget = key_digest_sent.filter(|_| !open).unwrap_or([0u8; 32]);
        if let Some(limiter) = &state.rate_limiter {
            if let Err(wait) = limiter.take(budget, std::time::Instant::now()) {
                state.metrics.count_rate_limited();
                return Err(ProxyError::RateLimited(wait));
            }
        }
    }
    request.extensions_mut().insert(AllTenants(all_tenants));
    request.extensions_mut().insert(AdminTenant(grant.tenant));
    Ok(request)
}

/// Management requests that can call an LLM and so spend the key's request budget: MCP calls
/// (`add_memory` reconciles with the memory LLM) and the simulator.
fn calls_llm(request: &Request) -> bool {
    let path = request.uri().path();
    request.method() == axum::http::Method::POST
        && (path == "/mcp" || path == "/memproxy/v1/simulate")
}

/// What a key restricted to one user may call: that user's own routes (`/users/{user}/…`), the
/// user list (which shows only them) and MCP (where the key fixes the user); not the tenant-wide
/// routes (jobs, simulate, steps of all users) nor another user's.
async fn only_own_user(parts: &mut http::request::Parts, user: &str) -> Result<(), ProxyError> {
    let path = parts.uri.path();
    if path == "/memproxy/v1/users" || path == "/mcp" {
        return Ok(());
    }
    let params = axum::extract::RawPathParams::from_request_parts(parts, &()).await;
    let named = params.ok().and_then(|params| {
        params
            .iter()
            .find(|(name, _)| *name == "user")
            .map(|(_, value)| value.to_owned())
    });
    match named {
        Some(named) if named == user => Ok(()),
        Some(named) => Err(ProxyError::Forbidden(format!(
            "this key acts only for user '{user}', not '{named}'"
        ))),
        None => Err(ProxyError::Forbidden(format!(
            "this key acts only for user '{user}': use /memproxy/v1/users/{{user}}/… routes"
        ))),
    }
}

pub(super) fn scope(tenant: &AdminTenant, user: &str) -> UserScope {
    UserScope::new(&tenant.0, user)
}

pub(super) fn list(data: impl serde::Serialize) -> Json<Value> {
    Json(json!({"object": "list", "data": data}))
}

#[derive(Deserialize, schemars::JsonSchema)]
pub struct Listing {
    #[serde(default)]
    include_invalid: bool,
    #[serde(default = "default_limit")]
    limit: usize,
    #[serde(default)]
    offset: usize,
}

fn default_limit() -> usize {
    100
}

impl Listing {
    fn page(&self) -> Page {
        Page {
            limit: self.limit.clamp(1, 1000),
            offset: self.offset,
        }
    }
}

pub async fn list_users(
    State(state): State<SharedState>,
    Extension(tenant): Extension<AdminTenant>,
    only: Option<Extension<KeyUser>>,
) -> Result<Json<Value>, ProxyError> {
    let mut users = state
        .memory
        .blocking(move |store, _| Ok(store.list_users(&tenant.0)?))
        .await?;
    if let Some(Extension(KeyUser(own))) = only {
        users.retain(|user| user == &own);
    }
    Ok(list(users))
}

pub async fn delete_user(
    State(state): State<SharedState>,
    Extension(tenant): Extension<AdminTenant>,
    ApiPath(user): ApiPath<String>,
) -> Result<Json<Value>, ProxyError> {
    let scope = scope(&tenant, &user);
    if !state.memory.delete_user(&scope).await? {
        return Err(ProxyError::ResourceNotFound(format!("user '{user}'")));
    }
    Ok(Json(json!({"deleted": true, "user": user})))
}

pub async fn list_memories(
    State(state): State<SharedState>,
    Extension(tenant): Extension<AdminTenant>,
    ApiPath(user): ApiPath<String>,
    ApiQuery(listing): ApiQuery<Listing>,
) -> Result<Json<Value>, ProxyError> {
    let memories = state
        .memory
        .list_memories(
            &scope(&tenant, &user),
            listing.include_invalid,
            listing.page(),
        )
        .await?;
    Ok(list(memories))
}

#[derive(Deserialize, schemars::JsonSchema)]
pub struct NewMemoryBody {
    text: String,
    #[serde(default = "fact")]
    kind: String,
}

fn fact() -> String {
    "fact".to_owned()
}

pub async fn add_memory(
    State(state): State<SharedState>,
    Extension(tenant): Extension<AdminTenant>,
    ApiPath(user): ApiPath<String>,
    JsonBody(body): JsonBody<NewMemoryBody>,
) -> Result<Response, ProxyError> {
    crate::postprocess::refuse_instruction(&body.text)?;
    let inserted = state
        .memory
        .add_memory(&scope(&tenant, &user), &body.text, &body.kind, "api")
        .await?;
    Ok(match inserted {
        crate::store::Inserted::New { id, .. } => (
            axum::http::StatusCode::CREATED,
            Json(json!({"id": id, "created": true})),
        )
            .into_response(),
        crate::store::Inserted::Duplicate { id } => {
            Json(json!({"id": id, "created": false})).into_response()
        }
    })
}

#[derive(Deserialize, schemars::JsonSchema)]
pub struct UpdateBody {
    text: String,
}

pub async fn update_memory(
    State(state): State<SharedState>,
    Extension(tenant): Extension<AdminTenant>,
    ApiPath((user, id)): ApiPath<(String, i64)>,
    JsonBody(body): JsonBody<UpdateBody>,
) -> Result<Json<Value>, ProxyError> {
    crate::postprocess::refuse_instruction(&body.text)?;
    state
        .memory
        .update_memory(&scope(&tenant, &user), id, &body.text, &[], "api")
        .await?;
    Ok(Json(json!({"id": id, "updated": true})))
}

#[derive(Deserialize, schemars::JsonSchema)]
pub struct RetireQuery {
    /// Keep the memory as history (`valid_until`) instead of deleting it.
    #[serde(default)]
    invalidate: bool,
}

pub async fn delete_memory(
    State(state): State<SharedState>,
    Extension(tenant): Extension<AdminTenant>,
    ApiPath((user, id)): ApiPath<(String, i64)>,
    ApiQuery(query): ApiQuery<RetireQuery>,
) -> Result<Json<Value>, ProxyError> {
    state
        .memory
        .retire_memory(&scope(&tenant, &user), id, !query.invalidate, "api")
        .await?;
    Ok(Json(
        json!({"id": id, "deleted": !query.invalidate, "invalidated": query.invalidate}),
    ))
}

/// Makes a retired memory live again (undoes an invalidation: an edit, a reconcile decision or
/// consolidation). 400 when a live memory already says the same (as an edit into a duplicate).
pub async fn restore_memory(
    State(state): State<SharedState>,
    Extension(tenant): Extension<AdminTenant>,
    ApiPath((user, id)): ApiPath<(String, i64)>,
) -> Result<Json<Value>, ProxyError> {
    state
        .memory
        .restore_memory(&scope(&tenant, &user), id, "api")
        .await?;
    Ok(Json(json!({"id": id, "restored": true})))
}

pub async fn search(
    State(state): State<SharedState>,
    Extension(tenant): Extension<AdminTenant>,
    ApiPath(user): ApiPath<String>,
    JsonBody(request): JsonBody<RetrievalRequest>,
) -> Result<Json<Value>, ProxyError> {
    if request.top_k == 0 || request.top_k > 200 {
        return Err(ProxyError::invalid(
            "'top_k' must be between 1 and 200.",
            Some("top_k"),
        ));
    }
    let hits = state
        .memory
        .retrieve(&scope(&tenant, &user), request)
        .await?;
    Ok(list(hits))
}

pub async fn events(
    State(state): State<SharedState>,
    Extension(tenant): Extension<AdminTenant>,
    ApiPath(user): ApiPath<String>,
) -> Result<Json<Value>, ProxyError> {
    let scope = scope(&tenant, &user);
    let events = state
        .memory
        .blocking(move |store, _| Ok(store.memory_events(&scope)?))
        .await?;
    Ok(list(events))
}

pub async fn blocks(
    State(state): State<SharedState>,
    Extension(tenant): Extension<AdminTenant>,
    ApiPath((user, agent)): ApiPath<(String, String)>,
) -> Result<Json<Value>, ProxyError> {
    let scope = scope(&tenant, &user);
    let blocks = state
        .memory
        .blocking(move |store, _| Ok(store.core_blocks(&scope, &agent)?))
        .await?;
    Ok(list(blocks))
}

#[derive(Deserialize, schemars::JsonSchema)]
pub struct BlockBody {
    value: String,
    #[serde(default = "default_char_limit")]
    char_limit: i64,
    #[serde(default)]
    read_only: bool,
}

fn default_char_limit() -> i64 {
    2000
}

pub async fn put_block(
    State(state): State<SharedState>,
    Extension(tenant): Extension<AdminTenant>,
    ApiPath((user, agent, label)): ApiPath<(String, String, String)>,
    JsonBody(body): JsonBody<BlockBody>,
) -> Result<Json<Value>, ProxyError> {
    let scope = scope(&tenant, &user);
    let block = CoreBlock {
        label,
        value: body.value,
        char_limit: body.char_limit,
        read_only: body.read_only,
        updated_at_ms: 0,
        shared: None,
    };
    let saved = block.clone();
    // Between the agent's turns (an edit never lands in the middle of one), and on an agent that
    // exists: one set up by its blocks before its first turn gets its starting memory and is
    // listed.
    let (who, name, defaults) = (scope.clone(), agent.clone(), state.agents.default_blocks());
    let memory = std::sync::Arc::clone(&state.memory);
    let limits = state.memory.limits().clone();
    let label = block.label.clone();
    let (facts_scope, facts_agent) = (scope.clone(), agent.clone());
    state
        .agents
        .between_turns(&scope, &agent, async move {
            // What the user wrote about themselves is one of their facts too.
            let first = move |store: &dyn crate::store::Store| {
                crate::memory::admit_agent(store, &limits, &who, &name)?;
                store.ensure_agent(&who, &name, &defaults)?;
                crate::memory::admit_block(store, &limits, &who, &name, &label)
            };
            one_memory::put_block(&memory, &facts_scope, &facts_agent, block, "api", first).await
        })
        .await?;
    Ok(Json(json!(saved)))
}

pub async fn conversations(
    State(state): State<SharedState>,
    Extension(tenant): Extension<AdminTenant>,
    ApiPath(user): ApiPath<String>,
) -> Result<Json<Value>, ProxyError> {
    let scope = scope(&tenant, &user);
    let rows = state
        .memory
        .blocking(move |store, _| Ok(store.list_conversations(&scope)?))
        .await?;
    Ok(list(rows))
}

pub async fn messages(
    State(state): State<SharedState>,
    Extension(tenant): Extension<AdminTenant>,
    ApiPath((user, conversation)): ApiPath<(String, String)>,
    ApiQuery(listing): ApiQuery<Listing>,
) -> Result<Json<Value>, ProxyError> {
    let scope = scope(&tenant, &user);
    let page = listing.page();
    let rows = state
        .memory
        .blocking(move |store, _| Ok(store.list_messages(&scope, &conversation, page)?))
        .await?;
    Ok(list(rows))
}

pub async fn export(
    State(state): State<SharedState>,
    Extension(tenant): Extension<AdminTenant>,
    ApiPath(user): ApiPath<String>,
) -> Result<Response, ProxyError> {
    let jsonl = state.memory.export(&scope(&tenant, &user)).await?;
    let disposition = format!("attachment; filename=\"memproxy-{user}.jsonl\"");
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/x-ndjson"),
    );
    if let Ok(value) = header::HeaderValue::from_str(&disposition) {
        headers.insert(header::CONTENT_DISPOSITION, value);
    }
    Ok((headers, jsonl).into_response())
}

pub async fn import(
    State(state): State<SharedState>,
    Extension(tenant): Extension<AdminTenant>,
    ApiPath(user): ApiPath<String>,
    TextBody(jsonl): TextBody,
) -> Result<Json<Value>, ProxyError> {
    let counts = state.memory.import(&scope(&tenant, &user), &jsonl).await?;
    Ok(Json(json!({"imported": counts})))
}

#[derive(Deserialize, schemars::JsonSchema)]
pub struct JobQuery {
    state: Option<String>,
    #[serde(default = "default_limit")]
    limit: usize,
}

pub async fn jobs(
    State(state): State<SharedState>,
    Extension(tenant): Extension<AdminTenant>,
    ApiQuery(query): ApiQuery<JobQuery>,
) -> Result<Json<Value>, ProxyError> {
    let page = Page {
        limit: query.limit.clamp(1, 1000),
        offset: 0,
    };
    let jobs = state
        .memory
        .blocking(move |store, _| Ok(store.list_jobs(query.state.as_deref(), page)?))
        .await?;
    let own: Vec<_> = jobs
        .into_iter()
        .filter(|job| job.scope.as_ref().is_none_or(|s| s.tenant == tenant.0))
        .collect();
    Ok(list(own))
}
