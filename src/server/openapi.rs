//! The management API's OpenAPI 3.1 description (`/memproxy/v1/openapi.json`).
//!
//! Built from one table of routes whose request bodies, query parameters and list items are the
//! handlers' own Rust types (JSON Schema derived with schemars), so the document says what the
//! server actually accepts and returns. A test calls every route in it, so it cannot list a route
//! the router lacks.

use axum::Json;
use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde_json::{json, Map, Value};

use super::admin::{BlockBody, JobQuery, Listing, NewMemoryBody, RetireQuery, UpdateBody};
use super::agents_api::{ArchivalQuery, MessageQuery, StepQuery, TagsBody, TextField};
use super::blocks_api::SharedBlockBody;
use super::simulate::SimulateBody;
use crate::memory::check::CheckReport;
use crate::memory::{AgentDetail, Hit, RetrievalRequest};
use crate::store::{
    Conversation, CoreBlock, ImportCounts, Memory, MemoryEvent, Passage, SharedBlock, StepRecord,
    StoredMessage, Summary,
};

type SchemaOf = fn(&mut SchemaGenerator) -> Schema;

fn schema<T: JsonSchema>(generator: &mut SchemaGenerator) -> Schema {
    generator.subschema_for::<T>()
}

fn string(_: &mut SchemaGenerator) -> Schema {
    schemars::json_schema!({"type": "string"})
}

/// What a route answers with.
#[derive(Clone, Copy)]
enum Answer {
    /// `{"object":"list","data":[item…]}`.
    ListOf(SchemaOf),
    One(SchemaOf),
    /// A small acknowledgement (`{"id":…,"deleted":true}` and the like).
    Ack,
    Jsonl,
}

struct Route {
    method: &'static str,
    path: &'static str,
    summary: &'static str,
    query: Option<SchemaOf>,
    body: Option<SchemaOf>,
    answer: Answer,
}

const fn route(method: &'static str, path: &'static str, summary: &'static str) -> Route {
    Route {
        method,
        path,
        summary,
        query: None,
        body: None,
        answer: Answer::Ack,
    }
}

impl Route {
    const fn query(mut self, query: SchemaOf) -> Route {
        self.query = Some(query);
        self
    }
    const fn body(mut self, body: SchemaOf) -> Route {
        self.body = Some(body);
        self
    }
    const fn answers(mut self, answer: Answer) -> Route {
        self.answer = answer;
        self
    }
}

#[rustfmt::skip]
const ROUTES: &[Route] = &[
    route("get", "/memproxy/v1/users", "Users of the tenant").answers(Answer::ListOf(string)),
    route("delete", "/memproxy/v1/users/{user}", "Forget a user: every row and vector file"),
    route("get", "/memproxy/v1/users/{user}/memories", "List memories, oldest first")
        .query(schema::<Listing>).answers(Answer::ListOf(schema::<Memory>)),
    route("post", "/memproxy/v1/users/{user}/memories", "Add a memory (201; 200 with created=false for a duplicate)")
        .body(schema::<NewMemoryBody>),
    route("post", "/memproxy/v1/users/{user}/memories/search", "Hybrid search over memories and past turns")
        .body(schema::<RetrievalRequest>).answers(Answer::ListOf(schema::<Hit>)),
    route("patch", "/memproxy/v1/users/{user}/memories/{id}", "Edit a memory").body(schema::<UpdateBody>),
    route("delete", "/memproxy/v1/users/{user}/memories/{id}", "Delete a memory, or invalidate it (kept as history)")
        .query(schema::<RetireQuery>),
    route("post", "/memproxy/v1/users/{user}/memories/{id}/restore", "Make a retired memory live again (400 if a live one already says the same)"),
    route("get", "/memproxy/v1/users/{user}/events", "Audit log of memory changes")
        .answers(Answer::ListOf(schema::<MemoryEvent>)),
    route("get", "/memproxy/v1/users/{user}/conversations", "Conversations")
        .answers(Answer::ListOf(schema::<Conversation>)),
    route("get", "/memproxy/v1/users/{user}/conversations/{conversation}/messages", "Recall log of a conversation")
        .query(schema::<Listing>).answers(Answer::ListOf(schema::<StoredMessage>)),
    route("get", "/memproxy/v1/users/{user}/export", "Export as JSONL").answers(Answer::Jsonl),
    route("post", "/memproxy/v1/users/{user}/import", "Import JSONL (all or nothing)")
        .body(string).answers(Answer::One(schema::<ImportCounts>)),
    route("get", "/memproxy/v1/users/{user}/agents", "Explicit-mode agents with counts"),
    route("get", "/memproxy/v1/users/{user}/agents/{agent}", "An agent: blocks, summary, counts, compiled system message")
        .answers(Answer::One(schema::<AgentDetail>)),
    route("delete", "/memproxy/v1/users/{user}/agents/{agent}", "Reset an agent"),
    route("put", "/memproxy/v1/users/{user}/agents/{agent}/tags", "Set an agent's tags (creates the agent if new)").body(schema::<TagsBody>),
    route("get", "/memproxy/v1/users/{user}/agents/{agent}/blocks", "Core memory blocks")
        .answers(Answer::ListOf(schema::<CoreBlock>)),
    route("put", "/memproxy/v1/users/{user}/agents/{agent}/blocks/{label}", "Set a block").body(schema::<BlockBody>),
    route("delete", "/memproxy/v1/users/{user}/agents/{agent}/blocks/{label}", "Remove a block"),
    route("get", "/memproxy/v1/users/{user}/blocks", "Shared core-memory blocks, each with the agents it is attached to")
        .answers(Answer::ListOf(schema::<SharedBlock>)),
    route("put", "/memproxy/v1/users/{user}/blocks/{name}", "Create or update a shared block (an update reaches every agent it is attached to)")
        .body(schema::<SharedBlockBody>).answers(Answer::One(schema::<SharedBlock>)),
    route("delete", "/memproxy/v1/users/{user}/blocks/{name}", "Delete a shared block (detached from every agent)"),
    route("put", "/memproxy/v1/users/{user}/agents/{agent}/shared/{name}", "Attach a shared block to an agent (creates the agent if new; it takes the place of an own block with its label until detached)"),
    route("delete", "/memproxy/v1/users/{user}/agents/{agent}/shared/{name}", "Detach a shared block from an agent"),
    route("get", "/memproxy/v1/users/{user}/agents/{agent}/messages", "The agent's log, or its queue (in_context=true)")
        .query(schema::<MessageQuery>).answers(Answer::ListOf(schema::<StoredMessage>)),
    route("delete", "/memproxy/v1/users/{user}/agents/{agent}/messages/{position}", "Delete a message from the agent's log and context, with the results of its tool calls (a tool result alone is refused)"),
    route("get", "/memproxy/v1/users/{user}/agents/{agent}/archival", "Archival passages (with query: search hits instead)")
        .query(schema::<ArchivalQuery>).answers(Answer::ListOf(schema::<Passage>)),
    route("post", "/memproxy/v1/users/{user}/agents/{agent}/archival", "Add a passage").body(schema::<TextField>),
    route("delete", "/memproxy/v1/users/{user}/agents/{agent}/archival/{id}", "Delete a passage"),
    route("get", "/memproxy/v1/users/{user}/agents/{agent}/summary", "Summary of evicted messages (null if none)")
        .answers(Answer::One(schema::<Summary>)),
    route("put", "/memproxy/v1/users/{user}/agents/{agent}/summary", "Rewrite the summary").body(schema::<TextField>),
    route("get", "/memproxy/v1/users/{user}/agents/{agent}/steps", "Step trace of the newest turns")
        .query(schema::<StepQuery>).answers(Answer::ListOf(schema::<StepRecord>)),
    route("get", "/memproxy/v1/agents/{agent}/steps", "Step trace of the newest turns (user in the query)")
        .query(schema::<StepQuery>).answers(Answer::ListOf(schema::<StepRecord>)),
    route("post", "/memproxy/v1/simulate", "Context simulator: the payload a strategy would send upstream (nothing stored, upstream not called)")
        .body(schema::<SimulateBody>),
    route("get", "/memproxy/v1/jobs", "Post-processing jobs").query(schema::<JobQuery>),
    route("get", "/memproxy/v1/check", "Consistency check of the whole store (admin key only)")
        .answers(Answer::One(schema::<CheckReport>)),
    route("post", "/memproxy/v1/check/repair", "Consistency check, repairing what can be without losing anything (admin key only)")
        .answers(Answer::One(schema::<CheckReport>)),
];

fn path_parameters(path: &str) -> impl Iterator<Item = Value> + '_ {
    path.split('/')
        .filter_map(|part| part.strip_prefix('{')?.strip_suffix('}'))
        .map(|name| {
            let kind = if matches!(name, "id" | "position") {
                "integer"
            } else {
                "string"
            };
            json!({"name": name, "in": "path", "required": true, "schema": {"type": kind}})
        })
}

/// The properties of a query struct's schema as `in: query` parameters.
fn query_parameters(generator: &mut SchemaGenerator, query: SchemaOf) -> Vec<Value> {
    let reference = query(generator);
    let name = reference
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.rsplit('/').next())
        .map(str::to_owned);
    let definition = name
        .and_then(|name| generator.definitions().get(&name).cloned())
        .unwrap_or_else(|| reference.to_value());
    let required: Vec<&str> = definition["required"]
        .as_array()
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(properties) = definition["properties"].as_object() else {
        return Vec::new();
    };
    properties
        .iter()
        .map(|(name, schema)| {
            let mut parameter = json!({"name": name, "in": "query", "required": required.contains(&name.as_str()), "schema": schema});
            if let Some(description) = schema.get("description") {
                parameter["description"] = description.clone();
            }
            parameter
        })
        .collect()
}

fn answer_content(generator: &mut SchemaGenerator, answer: Answer) -> Value {
    let json_schema = |schema: Value| json!({"application/json": {"schema": schema}});
    match answer {
        Answer::ListOf(item) => json_schema(json!({
            "type": "object", "required": ["object", "data"],
            "properties": {"object": {"const": "list"}, "data": {"type": "array", "items": item(generator)}},
        })),
        Answer::One(of) => json_schema(of(generator).to_value()),
        Answer::Ack => json_schema(json!({"type": "object"})),
        Answer::Jsonl => json!({"application/x-ndjson": {"schema": {"type": "string"}}}),
    }
}

/// OpenAPI 3.1 description of the management API.
pub async fn openapi() -> Json<Value> {
    let mut generator = SchemaSettings::draft2020_12()
        .with(|settings| settings.definitions_path = "/components/schemas".into())
        .into_generator();
    let mut paths = Map::new();
    for route in ROUTES {
        let mut parameters: Vec<Value> = path_parameters(route.path).collect();
        if let Some(query) = route.query {
            parameters.extend(query_parameters(&mut generator, query));
        }
        let mut operation = json!({
            "summary": route.summary,
            "parameters": parameters,
            "responses": {
                "200": {"description": "OK", "content": answer_content(&mut generator, route.answer)},
                "400": {"$ref": "#/components/responses/Error"},
                "401": {"$ref": "#/components/responses/Error"},
                "404": {"$ref": "#/components/responses/Error"},
            },
        });
        if let Some(body) = route.body {
            let media = if route.path.ends_with("/import") {
                "application/x-ndjson"
            } else {
                "application/json"
            };
            operation["requestBody"] =
                json!({"required": true, "content": {media: {"schema": body(&mut generator)}}});
        }
        let entry = paths
            .entry(route.path.to_owned())
            .or_insert_with(|| json!({}));
        entry[route.method] = operation;
    }
    let mut schemas = generator.take_definitions(true);
    schemas.insert(
        "Error".to_owned(),
        json!({"type": "object", "required": ["error"], "properties": {"error": {
            "type": "object", "required": ["message", "type"], "properties": {
                "message": {"type": "string"}, "type": {"type": "string"},
                "param": {"type": ["string", "null"]}, "code": {"type": ["string", "null"]}}}}}),
    );
    Json(json!({
        "openapi": "3.1.0",
        "info": {"title": "memproxy management API", "version": env!("CARGO_PKG_VERSION")},
        "security": [{"bearer": []}],
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer", "description": "The admin key (any tenant, X-Memproxy-Tenant picks it) or a proxy key (its own tenant)."}},
            "responses": {"Error": {"description": "OpenAI-shaped error", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}},
            "schemas": schemas,
        },
        "paths": paths,
    }))
}
