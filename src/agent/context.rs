//! The agent's context window (architecture §3): the system message (instructions, core memory with
//! sizes, memory metadata), the recursive summary of evicted messages, then the message queue.
//! Also token accounting and the choice of which messages to evict.

use std::sync::OnceLock;

use serde_json::{json, Value};

use super::{CoreMemoryAt, Tools};
use crate::dates;
pub use crate::store::CLIENT_BLOCK;
use crate::store::{AgentCounts, CoreBlock, StoredMessage, Summary};
use crate::tokens;

const BASE_INSTRUCTIONS: &str = "\
You are a conversational agent with a long-term memory that you manage yourself with functions.

How you act:
- Everything you want the user to see goes through send_message. Plain text you write outside a \
function call is your private thinking; the user never sees it.
- Each user message arrives as JSON: {\"type\": \"user_message\", \"message\": ..., \"time\": ...}. \
Messages of type \"heartbeat\" or \"system_alert\" come from the system, not from the user.
- To keep working after a function (for example to save something and then answer), set \
request_heartbeat to true. A turn ends when you call send_message.

Your memory:
- Core memory {WHERE} is always in view. Keep what you learn about the user in the \"human\" block, \
one short fact per line, in the third person, as \"The user ...\" (only what the user said). The \"persona\" \
block is only about you, never about the user. Use core_memory_append, and core_memory_replace \
when a fact changes. Blocks have a size limit: keep them short and current.
- Archival memory holds as many passages as you like, out of view: archival_memory_insert to \
save, archival_memory_search to look things up.
- Recall memory is the full history of your conversation with the user, including messages that \
no longer fit in view: conversation_search and conversation_search_date.
When the user tells you something worth keeping (a name, a preference, a plan, a change), save \
it before you answer. When asked about the past, search before you answer.";

/// The instructions of the compact tool set ([`Tools::Compact`]): the same rules in fewer words,
/// naming only the tools it offers.
const COMPACT_INSTRUCTIONS: &str = "\
You are a conversational agent with a long-term memory that you manage yourself with functions.

- Reply to the user with send_message: text outside a function call is never shown to them.
- User messages arrive as JSON ({\"type\": \"user_message\", ...}); \"heartbeat\" and \
\"system_alert\" messages come from the system.
- Set request_heartbeat to true to act again after a function; send_message ends your turn.

Your memory:
- Core memory {WHERE} is always in view. The \"human\" block is what you know about the user: \
answer questions about them from it. When the user tells you something worth keeping (a name, a \
preference, a plan, a change), save it there first with core_memory_append, one short line in the \
third person (\"The user ...\"), only what the user said; use core_memory_replace when a fact \
changes. The \"persona\" block is only about you, never about the user.
- Older messages and saved passages that match the newest message are shown with core memory; \
conversation_search finds others.";

/// Heading of the message that shows core memory at the turn ([`CoreMemoryAt::Turn`]).
pub const MEMORY_HEADING: &str = "[Core memory, as it is now]";

/// The instructions at the top of the system message (no memory in them: they never change).
pub fn instructions(at: CoreMemoryAt, set: Tools) -> String {
    let place = match at {
        CoreMemoryAt::System => "(below)",
        CoreMemoryAt::Turn => {
            "(shown, as it is now, in the message headed [Core memory] just before the newest user message)"
        }
    };
    let text = match set {
        Tools::Full => BASE_INSTRUCTIONS,
        Tools::Compact => COMPACT_INSTRUCTIONS,
    };
    text.replace("{WHERE}", place)
}

/// Memory metadata and core memory blocks. It depends on memory only (its date is that of the
/// newest block change, `now_ms` when no block has one), so it is byte-identical from one
/// compilation to the next while memory is unchanged: upstream prompt caches keep serving it.
pub fn compile_memory(
    blocks: &[CoreBlock],
    counts: &AgentCounts,
    now_ms: i64,
    set: Tools,
) -> String {
    let modified = blocks
        .iter()
        .map(|b| b.updated_at_ms)
        .max()
        .filter(|at| *at > 0)
        .unwrap_or(now_ms);
    let hidden = (counts.messages - counts.in_context).max(0);
    let mut text = format!(
        "### Memory [last modified: {}]\n\
         {hidden} earlier messages between you and the user are in recall memory (not in view; \
         use conversation_search).\n\
         {} passages are in archival memory ({}).\n\n\
         Core memory:",
        dates::timestamp(modified),
        counts.passages,
        match set {
            Tools::Full => "use archival_memory_search",
            Tools::Compact => "those that match the newest message are shown with core memory",
        },
    );
    for block in blocks {
        let size = format!("{}/{}", block.value.chars().count(), block.char_limit);
        let access = if block.read_only {
            " read_only=\"true\""
        } else {
            ""
        };
        // The agent knows its edits reach the user's other agents that have this block.
        let shared = if block.shared.is_some() {
            " shared=\"true\""
        } else {
            ""
        };
        text.push_str(&format!(
            "\n<{label} characters=\"{size}\"{access}{shared}>\n{value}\n</{label}>",
            label = block.label,
            value = block.value,
        ));
    }
    text
}

/// Whether a stored compiled memory is of this format (an agent state saved before the
/// instructions and the memory were split holds both, and is compiled again).
pub fn is_compiled_memory(text: &str) -> bool {
    text.starts_with("### Memory [")
}

/// The request's messages around the compiled `memory`: the system message, the summary, the
/// stored queue, then this turn's messages, with core memory where `at` puts it and what was
/// recalled for the turn ([`super::recall`]) just before the turn's messages. Core memory's
/// history lines are shown only when `past` (the turn asks about the past: [`super::history`]).
pub fn layout(
    (at, set, past): (CoreMemoryAt, Tools, bool),
    memory: &str,
    recalled: Option<&str>,
    summary: Option<&Summary>,
    queue: impl IntoIterator<Item = Value>,
    turn: impl IntoIterator<Item = Value>,
) -> Vec<Value> {
    let shown = super::history::in_view(memory, past);
    let system = match at {
        CoreMemoryAt::System => format!("{}\n\n{shown}", instructions(at, set)),
        CoreMemoryAt::Turn => instructions(at, set),
    };
    let mut messages = vec![json!({"role": "system", "content": system})];
    if let Some(summary) = summary {
        messages.push(summary_message(summary, memory));
    }
    messages.extend(queue);
    let recalled = recalled
        .map(|text| format!("\n\n{text}"))
        .unwrap_or_default();
    match at {
        CoreMemoryAt::Turn => messages.push(json!({"role": "user",
            "content": format!("{MEMORY_HEADING}\n{shown}{recalled}")})),
        CoreMemoryAt::System if !recalled.is_empty() => {
            messages.push(json!({"role": "user", "content": recalled.trim_start()}));
        }
        CoreMemoryAt::System => {}
    }
    messages.extend(turn);
    messages
}

/// The summary message that stands for evicted messages, as read next to core memory `memory`
/// (without notes of facts it keeps as no longer true: [`super::notes::current`]).
pub fn summary_message(summary: &Summary, memory: &str) -> Value {
    json!({"role": "user", "content": format!(
        "[Summary of earlier messages, now out of view but searchable with conversation_search]\n{}",
        super::notes::current(&summary.text, memory)
    )})
}

/// A stored message of the agent's log as it goes upstream.
pub fn wire_message(message: &StoredMessage) -> Value {
    let mut wire = json!({"role": message.role, "content": message.content});
    if let Some(calls) = &message.tool_calls {
        if let Ok(calls) = serde_json::from_str::<Value>(calls) {
            wire["tool_calls"] = calls;
            if message.content.is_empty() {
                wire["content"] = Value::Null;
            }
        }
    }
    if let Some(id) = &message.tool_call_id {
        wire["tool_call_id"] = json!(id);
    }
    wire
}

/// Past replies as plain assistant text: an `send_message` call and its result become the
/// assistant message the user saw. Small models given a history of their own `send_message`
/// calls often answer nothing at all; a history that reads like a conversation they handle.
/// Memory-tool calls stay calls.
pub fn replies_as_text(messages: Vec<Value>) -> Vec<Value> {
    // A send_message that failed was never said: it stays a call, with the result that says why.
    let failed: Vec<Value> = messages
        .iter()
        .filter(|m| {
            m["role"] == "tool"
                && m["content"]
                    .as_str()
                    .is_some_and(|c| c.starts_with(r#"{"status":"Failed""#))
        })
        .map(|m| m["tool_call_id"].clone())
        .collect();
    let mut replaced: Vec<Value> = Vec::new();
    let mut rendered = Vec::with_capacity(messages.len());
    for message in messages {
        let calls = message["tool_calls"].as_array();
        let only_replies = calls.is_some_and(|calls| {
            !calls.is_empty()
                && calls.iter().all(|c| {
                    c["function"]["name"] == super::tools::SEND_MESSAGE
                        && !failed.contains(&c["id"])
                })
        });
        if message["role"] == "assistant" && only_replies {
            let calls = calls.cloned().unwrap_or_default();
            let text: Vec<String> = calls
                .iter()
                .filter_map(|c| {
                    let arguments = c["function"]["arguments"].as_str()?;
                    let parsed = super::lenient::arguments(arguments).ok()?;
                    super::lenient::text_arg(&parsed, "message")
                })
                .collect();
            replaced.extend(calls.iter().map(|c| c["id"].clone()));
            rendered.push(json!({"role": "assistant", "content": text.join("\n")}));
        } else if message["role"] == "tool" && replaced.contains(&message["tool_call_id"]) {
            continue;
        } else {
            rendered.push(message);
        }
    }
    rendered
}

/// Tokens of a message as built by [`wire_message`].
pub fn message_tokens(message: &Value) -> usize {
    let role = message["role"].as_str().unwrap_or_default();
    let content = message["content"].as_str().unwrap_or_default();
    let calls = match &message["tool_calls"] {
        Value::Null => 0,
        calls => tokens::count(&calls.to_string()),
    };
    tokens::count_message(role, content) + calls
}

/// Tokens the memory tools' schemas add to every request (counted once per set).
pub fn tools_tokens(set: Tools) -> usize {
    static FULL: OnceLock<usize> = OnceLock::new();
    static COMPACT: OnceLock<usize> = OnceLock::new();
    let cell = match set {
        Tools::Full => &FULL,
        Tools::Compact => &COMPACT,
    };
    *cell.get_or_init(|| tokens::count(&Value::Array(super::tools::schemas(set)).to_string()))
}

/// How many of the oldest `queue` messages to evict so that `total` falls to `target` tokens:
/// never leaves a tool result without its call, and always keeps the newest message.
pub fn eviction_count(queue: &[(String, usize)], total: usize, target: usize) -> usize {
    let mut remaining = total;
    let mut count = 0;
    while count + 1 < queue.len() && remaining > target {
        remaining = remaining.saturating_sub(queue[count].1);
        count += 1;
        // The results of an evicted call go with it.
        while count + 1 < queue.len() && queue[count].0 == "tool" {
            remaining = remaining.saturating_sub(queue[count].1);
            count += 1;
        }
    }
    // The cut landed on a tool result (only the newest message left): keep its call too.
    while count > 0 && queue.get(count).is_some_and(|(role, _)| role == "tool") {
        count -= 1;
    }
    count
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue(roles: &[&str]) -> Vec<(String, usize)> {
        roles.iter().map(|r| (r.to_string(), 10)).collect()
    }

    #[test]
    fn eviction_keeps_tool_pairs_and_the_newest_message() {
        let q = queue(&["user", "assistant", "tool", "tool", "user", "assistant"]);
        // Evicting 1 would leave a dangling call? No: 'assistant' then its tools go together.
        assert_eq!(eviction_count(&q, 60, 55), 1);
        assert_eq!(eviction_count(&q, 60, 45), 4);
        assert_eq!(eviction_count(&q, 60, 0), 5);
        let calls = queue(&["user", "assistant", "tool"]);
        // Only the call/result pair would be left: the result never goes alone.
        assert_eq!(eviction_count(&calls, 30, 0), 1);
        assert_eq!(eviction_count(&queue(&["user"]), 10, 0), 0);
    }

    #[test]
    fn past_replies_read_as_conversation() {
        let messages = vec![
            json!({"role": "user", "content": "hi"}),
            json!({"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
                "function": {"name": "send_message", "arguments": "{\"message\": \"Hello!\"}"}}]}),
            json!({"role": "tool", "tool_call_id": "c1", "content": "{\"status\":\"OK\"}"}),
            json!({"role": "assistant", "content": null, "tool_calls": [{"id": "c2", "type": "function",
                "function": {"name": "core_memory_append", "arguments": "{}"}}]}),
            json!({"role": "tool", "tool_call_id": "c2", "content": "{\"status\":\"OK\"}"}),
        ];
        let rendered = replies_as_text(messages);
        assert_eq!(rendered.len(), 4);
        assert_eq!(
            rendered[1],
            json!({"role": "assistant", "content": "Hello!"})
        );
        assert_eq!(rendered[3]["tool_call_id"], "c2");
        // A send_message that failed was never said: the call and why it failed stay.
        let failed = vec![
            json!({"role": "assistant", "content": null, "tool_calls": [{"id": "c3", "type": "function",
                "function": {"name": "send_message", "arguments": "{\"message\": \"Hello!\"}"}}]}),
            json!({"role": "tool", "tool_call_id": "c3", "content": "{\"status\":\"Failed\",\"message\":\"not sent\"}"}),
        ];
        assert_eq!(replies_as_text(failed.clone()), failed);
    }

    #[test]
    fn system_message_shows_blocks_with_sizes() {
        let blocks = vec![CoreBlock {
            label: "human".to_owned(),
            value: "Name: Ada".to_owned(),
            char_limit: 2000,
            read_only: false,
            updated_at_ms: 1_700_000_000_000,
            shared: None,
        }];
        let counts = AgentCounts {
            messages: 10,
            in_context: 4,
            passages: 3,
        };
        let text = compile_memory(&blocks, &counts, 0, Tools::Full);
        assert!(text.contains("<human characters=\"9/2000\">\nName: Ada\n</human>"));
        // Compiled later with memory unchanged: the same bytes.
        assert_eq!(
            text,
            compile_memory(&blocks, &counts, 86_400_000, Tools::Full)
        );
        assert!(text.contains("6 earlier messages"));
        assert!(text.contains("3 passages"));
    }
}
