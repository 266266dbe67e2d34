//! The agent's tools (names and signatures as in MemGPT, descriptions in our own words) and their
//! execution against the memory layer.
//!
//! Every failure is a result the model can read and act on, never an error of the turn: a wrong
//! call costs a step, not the conversation.

use serde_json::{json, Map, Value};

use super::hygiene;
use super::lenient::{page_arg, text_arg, truthy};
use super::ExplicitConfig;
use crate::dates;
use crate::memory::{MemoryService, RetrievalRequest};
use crate::store::{agent_conversation, Corpus, Page, UserScope, Within};

pub const SEND_MESSAGE: &str = "send_message";

/// What a tool did, as the loop needs it.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolOutcome {
    pub ok: bool,
    /// Shown to the model as the result's `message`.
    pub message: String,
    /// The reply to the user (`send_message`).
    pub reply: Option<String>,
    /// A core block changed: the system message must be rebuilt.
    pub memory_changed: bool,
}

impl ToolOutcome {
    fn ok(message: impl Into<String>) -> Self {
        ToolOutcome {
            ok: true,
            message: message.into(),
            reply: None,
            memory_changed: false,
        }
    }

    pub fn failed(message: impl Into<String>) -> Self {
        ToolOutcome {
            ok: false,
            message: message.into(),
            reply: None,
            memory_changed: false,
        }
    }

    /// The tool message content (architecture §3).
    pub fn result_json(&self, now_ms: i64) -> String {
        json!({
            "status": if self.ok { "OK" } else { "Failed" },
            "message": self.message,
            "time": dates::timestamp(now_ms),
        })
        .to_string()
    }
}

/// Tools that change memory (not offered, and refused, in read-only turns).
pub fn writes(name: &str) -> bool {
    matches!(
        name,
        "core_memory_append" | "core_memory_replace" | "archival_memory_insert"
    )
}

/// Whose memory a tool works on.
pub struct ToolScope<'a> {
    /// A read-only turn (`X-Memproxy-Record: false`): memory may be searched, not changed.
    pub read_only: bool,
    pub memory: &'a MemoryService,
    pub scope: &'a UserScope,
    pub agent: &'a str,
    pub config: &'a ExplicitConfig,
    /// What the user said this turn (a persona write restating it is refused).
    pub user_said: &'a [String],
}

const HEARTBEAT: &str = "request_heartbeat";

fn function(name: &str, description: &str, properties: Value, required: &[&str]) -> Value {
    let mut properties = properties;
    let mut required: Vec<&str> = required.to_vec();
    if name != SEND_MESSAGE {
        properties[HEARTBEAT] = json!({
            "type": "boolean",
            "description": "true to get control back right after this function runs (for example to call send_message next); false to end your turn."
        });
        required.push(HEARTBEAT);
    }
    json!({"type": "function", "function": {
        "name": name,
        "description": description,
        "parameters": {"type": "object", "properties": properties, "required": required},
    }})
}

/// The OpenAI `tools` array. Memory tools come first: small models lean towards the first tool
/// listed, and answering without saving is the failure that loses facts.
pub fn schemas() -> Vec<Value> {
    let page = json!({"type": "integer", "description": "Page of results, from 0."});
    vec![
        function(
            "core_memory_append",
            "Add a line to a block of your core memory (always visible to you in the system message). Facts about the user go in 'human', in the third person ('The user ...'), and only what the user said; 'persona' is only about you.",
            json!({
                "label": {"type": "string", "description": "'human' for facts about the user; 'persona' only for your own character."},
                "content": {"type": "string", "description": "One short fact, in the third person for the user ('The user ...')."},
            }),
            &["label", "content"],
        ),
        function(
            "core_memory_replace",
            "Replace text in a block of your core memory. old_content must match the block's text exactly; an empty new_content deletes it.",
            json!({
                "label": {"type": "string", "description": "Block to edit."},
                "old_content": {"type": "string", "description": "Exact text to replace."},
                "new_content": {"type": "string", "description": "Replacement text."},
            }),
            &["label", "old_content", "new_content"],
        ),
        function(
            "archival_memory_insert",
            "Store a passage in archival memory (unlimited, not visible until searched). Write it so it makes sense on its own later.",
            json!({"content": {"type": "string", "description": "Passage to store."}}),
            &["content"],
        ),
        function(
            "archival_memory_search",
            "Search archival memory by meaning and keywords.",
            json!({"query": {"type": "string", "description": "What to look for."}, "page": page}),
            &["query"],
        ),
        function(
            "conversation_search",
            "Search the whole history of your conversation with the user, including messages no longer in view.",
            json!({"query": {"type": "string", "description": "What to look for."}, "page": page}),
            &["query"],
        ),
        function(
            "conversation_search_date",
            "List messages of your conversation with the user between two dates (inclusive).",
            json!({
                "start_date": {"type": "string", "description": "First day, YYYY-MM-DD."},
                "end_date": {"type": "string", "description": "Last day, YYYY-MM-DD."},
                "page": page,
            }),
            &["start_date", "end_date"],
        ),
        function(
            SEND_MESSAGE,
            "Send a message to the user. This is the only way the user sees anything from you; it ends your turn.",
            json!({"message": {"type": "string", "description": "The message, in your own voice."}}),
            &["message"],
        ),
    ]
}

pub fn is_known(name: &str) -> bool {
    schemas()
        .iter()
        .any(|tool| tool["function"]["name"] == name)
}

pub fn wants_heartbeat(arguments: &Map<String, Value>) -> bool {
    truthy(arguments.get(HEARTBEAT))
}

fn required(arguments: &Map<String, Value>, name: &str) -> Result<String, ToolOutcome> {
    text_arg(arguments, name)
        .ok_or_else(|| ToolOutcome::failed(format!("missing required argument '{name}'")))
}

/// Runs one call; `Err` never escapes (every problem is a failed result).
pub async fn execute(
    tools: &ToolScope<'_>,
    name: &str,
    arguments: &Map<String, Value>,
) -> ToolOutcome {
    if tools.read_only && writes(name) {
        return ToolOutcome::failed(format!(
            "{name} is not available: this conversation is private and memory is read-only"
        ));
    }
    let run = async {
        match name {
            SEND_MESSAGE => {
                let message = required(arguments, "message")?;
                Ok(ToolOutcome {
                    reply: Some(message),
                    ..ToolOutcome::ok("Sent message successfully.")
                })
            }
            "core_memory_append" => {
                let label = required(arguments, "label")?;
                let content = required(arguments, "content")?;
                let (name, said) = (label.clone(), tools.user_said.to_vec());
                edit_block(tools, &label, move |value| {
                    hygiene::append(&name, value, &content, &said).map_err(ToolOutcome::failed)
                })
                .await
            }
            "core_memory_replace" => {
                let label = required(arguments, "label")?;
                let old = required(arguments, "old_content")?;
                let new = text_arg(arguments, "new_content").unwrap_or_default();
                let (name, said) = (label.clone(), tools.user_said.to_vec());
                edit_block(tools, &label, move |value| {
                    hygiene::check_replacement(&name, value, &old, &new, &said)
                        .map_err(ToolOutcome::failed)?;
                    replace(&name, value, &old, &new)
                })
                .await
            }
            "archival_memory_insert" => {
                let content = required(arguments, "content")?;
                tools
                    .memory
                    .insert_passage(tools.scope, tools.agent, &content)
                    .await
                    .map_err(|e| ToolOutcome::failed(e.to_string()))?;
                Ok(ToolOutcome::ok("Inserted into archival memory."))
            }
            "archival_memory_search" | "conversation_search" => {
                let query = required(arguments, "query")?;
                let page = page_arg(arguments).map_err(ToolOutcome::failed)?;
                search(tools, name == "archival_memory_search", &query, page).await
            }
            "conversation_search_date" => {
                let start = required(arguments, "start_date")?;
                let end = required(arguments, "end_date")?;
                let page = page_arg(arguments).map_err(ToolOutcome::failed)?;
                search_dates(tools, &start, &end, page).await
            }
            other => Err(ToolOutcome::failed(format!(
                "there is no function '{other}'; the functions are: {}",
                schemas()
                    .iter()
                    .filter_map(|t| t["function"]["name"].as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
        }
    };
    run.await.unwrap_or_else(|failed| failed)
}

fn replace(label: &str, value: &str, old: &str, new: &str) -> Result<String, ToolOutcome> {
    if old.is_empty() {
        return Err(ToolOutcome::failed(
            "'old_content' is empty; to add text use core_memory_append",
        ));
    }
    // Surrounding whitespace is the one inexactness with a single reading.
    let needle = if value.contains(old) { old } else { old.trim() };
    if needle.is_empty() || !value.contains(needle) {
        return Err(ToolOutcome::failed(format!(
            "'{old}' is not in block '{label}' (the text must match exactly). The block now reads: {value:?}"
        )));
    }
    Ok(value.replace(needle, new))
}

/// Edits a block in one store transaction (a concurrent writer, such as the background save, is
/// never overwritten): `edit` makes the new value or refuses with the tool's message.
pub(super) async fn edit_block(
    tools: &ToolScope<'_>,
    label: &str,
    edit: impl FnOnce(&str) -> Result<String, ToolOutcome> + Send + 'static,
) -> Result<ToolOutcome, ToolOutcome> {
    let (scope, agent, name) = (
        tools.scope.clone(),
        tools.agent.to_owned(),
        label.to_owned(),
    );
    let mut edit = Some(edit);
    let mut refusal: Option<ToolOutcome> = None;
    let (edited, refusal) = tools
        .memory
        .blocking(move |store, _| {
            let edited = store.edit_core_block(&scope, &agent, &name, &mut |block| {
                if block.read_only {
                    return Err(format!("block '{}' is read-only", block.label));
                }
                let edit = edit.take().ok_or_else(|| "edited twice".to_owned())?;
                let value = edit(&block.value).map_err(|failed| {
                    let message = failed.message.clone();
                    refusal = Some(failed);
                    message
                })?;
                let length = value.chars().count() as i64;
                if length > block.char_limit {
                    return Err(format!(
                        "block '{}' would hold {length} characters, over its limit of {}. Shorten it with core_memory_replace, or keep the details in archival memory with archival_memory_insert.",
                        block.label, block.char_limit
                    ));
                }
                Ok(value)
            })?;
            Ok((edited, refusal))
        })
        .await
        .map_err(|e| ToolOutcome::failed(e.to_string()))?;
    match edited {
        Err(labels) => Err(ToolOutcome::failed(format!(
            "there is no core memory block '{label}'; the blocks are: {}",
            labels.join(", ")
        ))),
        Ok(Err(message)) => Err(refusal.unwrap_or_else(|| ToolOutcome::failed(message))),
        Ok(Ok(block)) => Ok(ToolOutcome {
            memory_changed: true,
            ..ToolOutcome::ok(format!(
                "Block '{label}' updated ({} characters).",
                block.value.chars().count()
            ))
        }),
    }
}

/// "Showing x of N results (page p/P)" with the page's items, as MemGPT words it (P = last page).
fn paged(items: Vec<String>, page: usize, page_size: usize) -> ToolOutcome {
    let total = items.len();
    if total == 0 {
        return ToolOutcome::ok("No results found.");
    }
    let last = total.div_ceil(page_size) - 1;
    if page > last {
        return ToolOutcome::failed(format!(
            "page {page} is past the last page ({last}) of {total} results"
        ));
    }
    let shown: Vec<String> = items
        .into_iter()
        .skip(page * page_size)
        .take(page_size)
        .collect();
    ToolOutcome::ok(format!(
        "Showing {} of {total} results (page {page}/{last}):\n{}",
        shown.len(),
        shown.join("\n")
    ))
}

/// Results searched at most (so the page count is real, not an estimate).
const SEARCH_RESULTS: usize = 100;

async fn search(
    tools: &ToolScope<'_>,
    archival: bool,
    query: &str,
    page: usize,
) -> Result<ToolOutcome, ToolOutcome> {
    let (corpus, within) = if archival {
        (Corpus::Passage, Within::Agent(tools.agent.to_owned()))
    } else {
        (
            Corpus::Message,
            Within::Conversation(agent_conversation(tools.agent)),
        )
    };
    let request = RetrievalRequest {
        query: query.to_owned(),
        corpora: vec![corpus],
        top_k: SEARCH_RESULTS,
        candidates: SEARCH_RESULTS,
        within: Some(within),
        ..RetrievalRequest::default()
    };
    let hits = tools
        .memory
        .retrieve(tools.scope, request)
        .await
        .map_err(|e| ToolOutcome::failed(e.to_string()))?;
    let items = hits
        .into_iter()
        .map(|hit| {
            let when = dates::timestamp(hit.created_at_ms);
            match hit.role {
                Some(role) => format!("[{when}] {role}: {}", hit.text),
                None => format!("[{when}] {}", hit.text),
            }
        })
        .collect();
    Ok(paged(items, page, tools.config.page_size))
}

async fn search_dates(
    tools: &ToolScope<'_>,
    start: &str,
    end: &str,
    page: usize,
) -> Result<ToolOutcome, ToolOutcome> {
    let bad = |which: &str, text: &str| {
        ToolOutcome::failed(format!(
            "'{which}' must be a date as YYYY-MM-DD, not {text:?}"
        ))
    };
    let from = dates::parse_ymd(start).ok_or_else(|| bad("start_date", start))?;
    let to = dates::parse_ymd(end).ok_or_else(|| bad("end_date", end))? + 86_400_000;
    if to <= from {
        return Err(ToolOutcome::failed("'end_date' is before 'start_date'"));
    }
    let page_size = tools.config.page_size;
    let (scope, conversation) = (tools.scope.clone(), agent_conversation(tools.agent));
    let window = Page {
        limit: page_size,
        offset: page * page_size,
    };
    let (total, messages) = tools
        .memory
        .blocking(move |store, _| {
            Ok(store.messages_between(&scope, &conversation, from, to, window)?)
        })
        .await
        .map_err(|e| ToolOutcome::failed(e.to_string()))?;
    if total == 0 {
        return Ok(ToolOutcome::ok("No results found."));
    }
    let last = total.div_ceil(page_size) - 1;
    if page > last {
        return Err(ToolOutcome::failed(format!(
            "page {page} is past the last page ({last}) of {total} results"
        )));
    }
    let items: Vec<String> = messages
        .iter()
        .map(|m| {
            let text = m.search_text.as_deref().unwrap_or(&m.content);
            format!("[{}] {}: {text}", dates::timestamp(m.created_at_ms), m.role)
        })
        .collect();
    Ok(ToolOutcome::ok(format!(
        "Showing {} of {total} results (page {page}/{last}):\n{}",
        items.len(),
        items.join("\n")
    )))
}
