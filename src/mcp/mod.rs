//! Memory over MCP (the Model Context Protocol): the same memories as the proxy, for clients that
//! attach an MCP server instead of changing their LLM's URL (desktop assistants, IDEs, agents).
//!
//! [`MemoryServer`] is an rmcp server handler with the tools of [`tools`]. Over Streamable HTTP it
//! is mounted at `/mcp` on the proxy's listener behind the management API's authorization (a
//! proxy key serves its own tenant, the admin key any tenant chosen with `X-Memproxy-Tenant`), and
//! the user is the request's `X-Memproxy-User` header (or the one user of a key restricted to
//! one, see [`crate::keys`]); over stdio (`memproxy mcp --user …`) the
//! user is fixed by the command line. Never by a tool argument: a call cannot reach another
//! user's memory. Changes are audited with the cause "via MCP".

pub mod resources;
pub mod tools;

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};

use crate::identity::USER_HEADER;
use crate::memory::MemoryService;
use crate::postprocess::PostProcessor;
use crate::store::UserScope;

/// Whose memory a connection serves.
#[derive(Clone, Debug)]
pub enum Caller {
    /// Fixed for the connection (stdio: `memproxy mcp --user`).
    Fixed(UserScope),
    /// Each HTTP request's admitted tenant and its `X-Memproxy-User` header.
    FromRequest,
}

#[derive(Clone)]
pub struct MemoryServer {
    memory: Arc<MemoryService>,
    /// Reconciles what `add_memory` saves with what is stored.
    post: Arc<PostProcessor>,
    caller: Caller,
}

impl MemoryServer {
    pub fn new(
        memory: Arc<MemoryService>,
        post: Arc<PostProcessor>,
        caller: Caller,
    ) -> MemoryServer {
        MemoryServer {
            memory,
            post,
            caller,
        }
    }

    /// The user of this call, or why there is none (shown to the client as the tool's error).
    fn scope(&self, context: &RequestContext<RoleServer>) -> Result<UserScope, String> {
        match &self.caller {
            Caller::Fixed(scope) => Ok(scope.clone()),
            Caller::FromRequest => {
                let parts = context
                    .extensions
                    .get::<http::request::Parts>()
                    .ok_or("no HTTP request behind this call")?;
                let tenant = parts
                    .extensions
                    .get::<crate::identity::AdminTenant>()
                    .ok_or("the request was not authorized")?;
                let named = crate::identity::header_id(&parts.headers, USER_HEADER)
                    .map_err(|error| error.to_string())?;
                // A key restricted to one user acts as that user, and only as them.
                let grant = crate::keys::KeyGrant {
                    tenant: tenant.0.clone(),
                    user: parts
                        .extensions
                        .get::<crate::identity::KeyUser>()
                        .map(|own| own.0.clone()),
                };
                let user = grant.user_for(named)?.ok_or_else(|| {
                    format!("no user: send the '{USER_HEADER}' header with every request")
                })?;
                Ok(UserScope::new(&tenant.0, &user))
            }
        }
    }
}

/// The Streamable HTTP service (stateless, JSON answers) for `/mcp`, reading bodies up to
/// `max_body_bytes` as every other route. Its own `Host` check is off: `server::guard` checks
/// `Host` and `Origin` on every route alike (loopback names and `server.allowed_hosts`).
pub fn http_service(
    memory: Arc<MemoryService>,
    post: Arc<PostProcessor>,
    max_body_bytes: usize,
) -> rmcp::transport::streamable_http_server::StreamableHttpService<
    MemoryServer,
    rmcp::transport::streamable_http_server::session::local::LocalSessionManager,
> {
    use rmcp::transport::streamable_http_server::StreamableHttpServerConfig;
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_max_request_body_bytes(max_body_bytes)
        .disable_allowed_hosts();
    let server = MemoryServer::new(memory, post, Caller::FromRequest);
    rmcp::transport::streamable_http_server::StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::default(),
        config,
    )
}

/// The transport's own refusals (wrong method, `Accept` or content type, a body too large) come
/// as plain text; this puts them in JSON-RPC's error shape, as memproxy's other MCP errors.
pub async fn errors_as_json_rpc(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::http::header::CONTENT_TYPE;
    let response = next.run(request).await;
    let status = response.status();
    let json = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.contains("json") || value.contains("event-stream"));
    if !(status.is_client_error() || status.is_server_error()) || json {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let text = axum::body::to_bytes(body, 64 * 1024)
        .await
        .map(|bytes| String::from_utf8_lossy(&bytes).trim().to_owned())
        .unwrap_or_default();
    let message = if text.is_empty() {
        status.canonical_reason().unwrap_or("error").to_owned()
    } else {
        text
    };
    let body = serde_json::json!({"jsonrpc": "2.0", "id": null,
        "error": {"code": -32600, "message": message}});
    parts.headers.remove(axum::http::header::CONTENT_LENGTH);
    parts.headers.insert(
        CONTENT_TYPE,
        axum::http::HeaderValue::from_static("application/json"),
    );
    axum::response::Response::from_parts(parts, axum::body::Body::from(body.to_string()))
}

fn text_result(value: &serde_json::Value, error: bool) -> CallToolResult {
    let content = vec![ContentBlock::text(value.to_string())];
    if error {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    }
}

impl ServerHandler for MemoryServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .build(),
        )
        .with_server_info(Implementation::new("memproxy", env!("CARGO_PKG_VERSION")))
        .with_instructions(
            "Long-term memory of the user, shared with the chats that go through memproxy: \
                 search it before answering from what you think you know, and add what the \
                 user tells you about themselves.",
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let tools = tools::catalog(self.memory.limits().max_memory_chars)
            .into_iter()
            .map(|(name, description, schema)| {
                let schema = match schema {
                    serde_json::Value::Object(map) => map,
                    _ => serde_json::Map::new(),
                };
                Tool::new(name, description, Arc::new(schema))
            })
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let scope = self
            .scope(&context)
            .map_err(|message| McpError::invalid_request(message, None))?;
        let listed = resources::list(&self.memory, &scope)
            .await
            .map_err(|message| McpError::internal_error(message, None))?;
        Ok(ListResourcesResult::with_all_items(listed))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        Ok(ListResourceTemplatesResult::with_all_items(
            resources::templates(),
        ))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let scope = self
            .scope(&context)
            .map_err(|message| McpError::invalid_request(message, None))?;
        match resources::read(&self.memory, &scope, &request.uri).await {
            Ok(result) => Ok(result.into()),
            Err(resources::ReadError::NotFound(message)) => {
                Err(McpError::resource_not_found(message, None))
            }
            Err(resources::ReadError::Failed(message)) => {
                Err(McpError::internal_error(message, None))
            }
        }
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let scope = match self.scope(&context) {
            Ok(scope) => scope,
            Err(message) => {
                return Ok(text_result(&serde_json::json!({"error": message}), true).into())
            }
        };
        let arguments = serde_json::Value::Object(request.arguments.unwrap_or_default());
        let memory = tools::Memory {
            memory: &self.memory,
            post: &self.post,
        };
        match tools::call(&memory, &scope, &request.name, arguments).await {
            Ok(value) => Ok(text_result(&value, false).into()),
            Err(tools::Failure::Refused(message)) => {
                Ok(text_result(&serde_json::json!({"error": message}), true).into())
            }
            Err(tools::Failure::UnknownTool(name)) => {
                Err(McpError::invalid_params(format!("no tool '{name}'"), None))
            }
        }
    }
}

/// `memproxy mcp`: serves one user's memory over stdio until the client closes it (stdout carries
/// the protocol; logs go to stderr). Works on the data directory directly, beside a running proxy
/// (SQLite arbitrates, as for the other commands).
pub async fn serve_stdio(config: &crate::config::Config, scope: UserScope) -> anyhow::Result<()> {
    use rmcp::ServiceExt;
    let memory = crate::memory::MemoryService::from_config(config).await?;
    let services = crate::postprocess::MemoryServices::build(config)?;
    let metrics = Arc::new(crate::metrics::Metrics::new()?);
    let post = Arc::new(PostProcessor::new(
        Arc::clone(&memory),
        config,
        metrics,
        &services,
    ));
    let server = MemoryServer::new(Arc::clone(&memory), post, Caller::Fixed(scope));
    let running = server
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|error| anyhow::anyhow!("MCP over stdio did not start: {error}"))?;
    running
        .waiting()
        .await
        .map_err(|error| anyhow::anyhow!("MCP over stdio stopped: {error}"))?;
    memory.flush().await?;
    Ok(())
}
