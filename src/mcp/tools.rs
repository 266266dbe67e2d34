//! The memory tools memproxy serves over MCP: each a name, a description, a JSON Schema for its
//! arguments, and what it does with the user's memory (facts, past turns, and the core and
//! archival memory of the user's explicit-mode agents). The user is never an argument: it comes
//! from the connection ([`super::Caller`]), so no tool call can reach another user's memory.

use std::sync::Arc;

use serde::Deserialize;
use serde_json::{json, Value};

use crate::agent::one_memory;
use crate::memory::{MemoryService, RetrievalRequest};
use crate::postprocess::{PostProcessor, Remembered};
use crate::store::{Corpus, Page, UserScope, Within};

/// What the audit log records as the cause of a change made over MCP.
pub const VIA_MCP: &str = "via MCP";

/// `(name, description, schema of the arguments)` of every tool; a memory text is at most
/// `max_chars` long (`limits.max_memory_chars`).
pub fn catalog(max_chars: usize) -> Vec<(&'static str, &'static str, Value)> {
    vec![
        (
            "search_memories",
            "Search the user's long-term memory (facts learned from their chats) by meaning and keywords, best first. Set include_messages to search their past chat turns too.",
            json!({"type": "object", "properties": {
                "query": {"type": "string", "minLength": 1, "description": "What to look for."},
                "top_k": {"type": "integer", "minimum": 1, "maximum": 50, "default": 8},
                "include_messages": {"type": "boolean", "default": false}
            }, "required": ["query"], "additionalProperties": false}),
        ),
        (
            "add_memory",
            "Remember a fact about the user, in the third person (\"The user is vegetarian.\"). It is reconciled with what is stored: a fact already known is not stored twice, and a changed fact (a new job, a new city) updates or retires the old memory instead of piling up beside it. The answer's event says which.",
            json!({"type": "object", "properties": {
                "text": {"type": "string", "minLength": 1, "maxLength": max_chars}
            }, "required": ["text"], "additionalProperties": false}),
        ),
        (
            "list_memories",
            "List the user's memories, oldest first (with their ids, for update_memory and delete_memory).",
            json!({"type": "object", "properties": {
                "limit": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 100},
                "offset": {"type": "integer", "minimum": 0, "default": 0},
                "include_invalid": {"type": "boolean", "default": false,
                    "description": "Also the memories retired as no longer true."}
            }, "additionalProperties": false}),
        ),
        (
            "update_memory",
            "Rewrite one memory (by id, from list_memories or search_memories); the old text stays in the audit log.",
            json!({"type": "object", "properties": {
                "id": {"type": "integer"},
                "text": {"type": "string", "minLength": 1, "maxLength": max_chars}
            }, "required": ["id", "text"], "additionalProperties": false}),
        ),
        (
            "delete_memory",
            "Delete one memory by id, or with invalidate=true retire it as no longer true (kept as history).",
            json!({"type": "object", "properties": {
                "id": {"type": "integer"},
                "invalidate": {"type": "boolean", "default": false}
            }, "required": ["id"], "additionalProperties": false}),
        ),
        (
            "search_conversations",
            "Search what the user and their assistants said in past chats (the recall log), best first.",
            json!({"type": "object", "properties": {
                "query": {"type": "string", "minLength": 1},
                "top_k": {"type": "integer", "minimum": 1, "maximum": 50, "default": 8}
            }, "required": ["query"], "additionalProperties": false}),
        ),
        (
            "get_core_memory",
            "The core memory blocks of one of the user's explicit-mode agents (label, value, limit; shared blocks name their shared block).",
            json!({"type": "object", "properties": {
                "agent": {"type": "string", "minLength": 1, "maxLength": 256}
            }, "required": ["agent"], "additionalProperties": false}),
        ),
        (
            "edit_core_memory",
            "Replace the text of one core memory block of an explicit-mode agent (a shared block changes for every agent that has it). Read-only blocks are refused.",
            json!({"type": "object", "properties": {
                "agent": {"type": "string", "minLength": 1, "maxLength": 256},
                "label": {"type": "string", "minLength": 1, "maxLength": 64},
                "value": {"type": "string"}
            }, "required": ["agent", "label", "value"], "additionalProperties": false}),
        ),
        (
            "search_archival",
            "Search the archival memory (long-term passages) of one of the user's explicit-mode agents.",
            json!({"type": "object", "properties": {
                "agent": {"type": "string", "minLength": 1, "maxLength": 256},
                "query": {"type": "string", "minLength": 1},
                "top_k": {"type": "integer", "minimum": 1, "maximum": 50, "default": 8}
            }, "required": ["agent", "query"], "additionalProperties": false}),
        ),
    ]
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Agent {
    agent: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EditBlock {
    agent: String,
    label: String,
    value: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Archival {
    agent: String,
    query: String,
    #[serde(default = "default_top_k")]
    top_k: usize,
}

/// An agent name as the headers allow one.
fn agent_name(agent: &str) -> Result<String, Failure> {
    let agent = agent.trim();
    if agent.is_empty() || agent.len() > 256 || agent.chars().any(char::is_control) {
        return Err(Failure::Refused(
            "'agent' must be 1-256 bytes without control characters".to_owned(),
        ));
    }
    Ok(agent.to_owned())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Search {
    query: String,
    #[serde(default = "default_top_k")]
    top_k: usize,
    #[serde(default)]
    include_messages: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Text {
    text: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Listing {
    #[serde(default = "default_limit")]
    limit: usize,
    #[serde(default)]
    offset: usize,
    #[serde(default)]
    include_invalid: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Update {
    id: i64,
    text: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Delete {
    id: i64,
    #[serde(default)]
    invalidate: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Conversations {
    query: String,
    #[serde(default = "default_top_k")]
    top_k: usize,
}

fn default_top_k() -> usize {
    8
}

fn default_limit() -> usize {
    100
}

/// `add_memory`'s answer: what happened (`added`, `updated`, `invalidated`, `unchanged`,
/// `duplicate`), the memory that holds the fact now, and the one it replaced.
fn remembered_json(remembered: &Remembered) -> Value {
    let outcome = &remembered.outcome;
    let note = match outcome.event.as_str() {
        "duplicate" => Some("a memory already says this".to_owned()),
        "unchanged" => Some("the stored memories already cover this".to_owned()),
        "updated" => Some("an existing memory was rewritten to include this".to_owned()),
        "invalidated" => Some("an older memory it contradicts was retired".to_owned()),
        _ => None,
    };
    let mut answer = json!({
        "event": outcome.event,
        "id": outcome.memory,
        "created": outcome.event == "added" || outcome.event == "invalidated",
    });
    if let Some(replaced) = outcome.replaced {
        answer["replaced"] = json!(replaced);
    }
    if let Some(note) = note {
        answer["note"] = json!(note);
    }
    if let Some(reason) = &remembered.unreconciled {
        answer["reconciled"] = json!(false);
        answer["note"] = json!(format!(
            "stored without comparing it with the other memories (the memory LLM failed: {reason})"
        ));
    }
    answer
}

/// Why a call failed: the caller's arguments (shown to the model, which can retry), or no such
/// tool.
#[derive(Debug)]
pub enum Failure {
    /// Arguments or a request the memory layer refused; the message says what to change.
    Refused(String),
    UnknownTool(String),
}

fn parse<T: serde::de::DeserializeOwned>(arguments: Value) -> Result<T, Failure> {
    serde_json::from_value(arguments)
        .map_err(|error| Failure::Refused(format!("bad arguments: {error}")))
}

fn refused(error: crate::memory::MemoryError) -> Failure {
    Failure::Refused(error.to_string())
}

fn search_request(
    query: String,
    top_k: usize,
    corpora: Vec<Corpus>,
) -> Result<RetrievalRequest, Failure> {
    if query.trim().is_empty() {
        return Err(Failure::Refused("'query' is empty".to_owned()));
    }
    Ok(RetrievalRequest {
        query,
        corpora,
        top_k: top_k.clamp(1, 50),
        ..RetrievalRequest::default()
    })
}

/// What the tools work on.
pub struct Memory<'a> {
    pub memory: &'a Arc<MemoryService>,
    /// Reconciles `add_memory`'s fact with the stored ones.
    pub post: &'a PostProcessor,
}

/// Runs one tool for `scope`; the result is the JSON the client gets as the tool's output.
pub async fn call(
    on: &Memory<'_>,
    scope: &UserScope,
    name: &str,
    arguments: Value,
) -> Result<Value, Failure> {
    let memory = on.memory;
    match name {
        "search_memories" => {
            let args: Search = parse(arguments)?;
            let mut corpora = vec![Corpus::Memory];
            if args.include_messages {
                corpora.push(Corpus::Message);
            }
            let request = search_request(args.query, args.top_k, corpora)?;
            let hits = memory.retrieve(scope, request).await.map_err(refused)?;
            Ok(json!({"results": hits}))
        }
        "search_conversations" => {
            let args: Conversations = parse(arguments)?;
            let request = search_request(args.query, args.top_k, vec![Corpus::Message])?;
            let hits = memory.retrieve(scope, request).await.map_err(refused)?;
            Ok(json!({"results": hits}))
        }
        "add_memory" => {
            let args: Text = parse(arguments)?;
            let remembered = on
                .post
                .remember(scope, &args.text, VIA_MCP)
                .await
                .map_err(refused)?;
            Ok(remembered_json(&remembered))
        }
        "list_memories" => {
            let args: Listing = parse(arguments)?;
            let page = Page {
                limit: args.limit.clamp(1, 1000),
                offset: args.offset,
            };
            let rows = memory
                .list_memories(scope, args.include_invalid, page)
                .await
                .map_err(refused)?;
            Ok(json!({"memories": rows}))
        }
        "update_memory" => {
            let args: Update = parse(arguments)?;
            memory
                .update_memory(scope, args.id, args.text.trim(), &[], VIA_MCP)
                .await
                .map_err(refused)?;
            Ok(json!({"id": args.id, "updated": true}))
        }
        "delete_memory" => {
            let args: Delete = parse(arguments)?;
            memory
                .retire_memory(scope, args.id, !args.invalidate, VIA_MCP)
                .await
                .map_err(refused)?;
            Ok(json!({"id": args.id, "deleted": !args.invalidate,
                "invalidated": args.invalidate}))
        }
        "get_core_memory" => {
            let args: Agent = parse(arguments)?;
            let (scope, agent) = (scope.clone(), agent_name(&args.agent)?);
            let blocks = memory
                .blocking(move |store, _| Ok(store.core_blocks(&scope, &agent)?))
                .await
                .map_err(refused)?;
            Ok(json!({"agent": args.agent.trim(), "blocks": blocks}))
        }
        "edit_core_memory" => {
            let args: EditBlock = parse(arguments)?;
            let (scope, agent, label) = (scope.clone(), agent_name(&args.agent)?, args.label);
            let value = args.value;
            let (facts_scope, facts_agent) = (scope.clone(), agent.clone());
            let (edited, before) = memory
                .blocking(move |store, _| {
                    let mut before = None;
                    let edited = store.edit_core_block(&scope, &agent, &label, &mut |block| {
                        before = Some(block.value.clone());
                        if block.read_only {
                            return Err(format!("block '{}' is read-only", block.label));
                        }
                        let length = value.chars().count() as i64;
                        if length > block.char_limit {
                            return Err(format!(
                                "{length} characters are over block '{}''s limit of {}",
                                block.label, block.char_limit
                            ));
                        }
                        Ok(value.clone())
                    })?;
                    Ok((edited, before))
                })
                .await
                .map_err(refused)?;
            match edited {
                Ok(Ok(block)) => {
                    // What the user wrote about themselves is one of their facts.
                    one_memory::human_written(
                        memory,
                        &facts_scope,
                        &facts_agent,
                        before.as_deref(),
                        &block,
                        VIA_MCP,
                    )
                    .await
                    .map_err(refused)?;
                    Ok(json!({"agent": args.agent.trim(), "block": block}))
                }
                Ok(Err(refusal)) => Err(Failure::Refused(refusal)),
                Err(labels) => Err(Failure::Refused(format!(
                    "agent '{}' has no block of that label; its blocks: {}",
                    args.agent.trim(),
                    labels.join(", ")
                ))),
            }
        }
        "search_archival" => {
            let args: Archival = parse(arguments)?;
            let mut request = search_request(args.query, args.top_k, vec![Corpus::Passage])?;
            request.within = Some(Within::Agent(agent_name(&args.agent)?));
            let hits = memory.retrieve(scope, request).await.map_err(refused)?;
            Ok(json!({"results": hits}))
        }
        other => Err(Failure::UnknownTool(other.to_owned())),
    }
}
