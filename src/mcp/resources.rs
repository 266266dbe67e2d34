//! The user's memory as MCP resources, for clients that read resources (attach them to a chat,
//! show them in a side panel) rather than call tools:
//! - `memproxy://memories/recent`: the user's live memories, most recently changed first;
//! - `memproxy://agents/{agent}/core-memory`: the core memory blocks of each of the user's
//!   explicit-mode agents (also a resource template, for an agent not listed yet).
//!
//! Both are Markdown. As with the tools, whose memory is read comes from the connection, never
//! from the URI: an agent name in a URI is looked up among the caller's own agents.

use std::sync::Arc;

use percent_encoding::{percent_decode_str, utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use rmcp::model::{ReadResourceResult, Resource, ResourceContents, ResourceTemplate};

use crate::memory::MemoryService;
use crate::store::{CoreBlock, Memory, Page, UserScope};

pub const RECENT: &str = "memproxy://memories/recent";
const AGENT_PREFIX: &str = "memproxy://agents/";
const CORE_SUFFIX: &str = "/core-memory";
const MARKDOWN: &str = "text/markdown";
/// Memories the recent list shows.
const RECENT_COUNT: usize = 50;
/// Memories read at most to find the recent ones.
const SCAN_LIMIT: usize = 20_000;

/// Characters left as they are in an agent's name in a URI (RFC 3986 unreserved).
const AGENT_NAME: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

pub fn core_uri(agent: &str) -> String {
    format!(
        "{AGENT_PREFIX}{}{CORE_SUFFIX}",
        utf8_percent_encode(agent, AGENT_NAME)
    )
}

/// The agent a core-memory URI names.
fn agent_of(uri: &str) -> Option<String> {
    let encoded = uri.strip_prefix(AGENT_PREFIX)?.strip_suffix(CORE_SUFFIX)?;
    let agent = percent_decode_str(encoded).decode_utf8().ok()?;
    let ok = !agent.is_empty() && agent.len() <= 256 && !agent.chars().any(char::is_control);
    ok.then(|| agent.into_owned())
}

pub fn templates() -> Vec<ResourceTemplate> {
    vec![ResourceTemplate::new(
        format!("{AGENT_PREFIX}{{agent}}{CORE_SUFFIX}"),
        "core-memory",
    )
    .with_title("Core memory of an agent")
    .with_description("The core memory blocks of one of the user's explicit-mode agents.")
    .with_mime_type(MARKDOWN)]
}

/// The recent memories, and the core memory of each of the user's agents.
pub async fn list(memory: &Arc<MemoryService>, scope: &UserScope) -> Result<Vec<Resource>, String> {
    let scope = scope.clone();
    let agents = memory
        .blocking(move |store, _| Ok(store.list_agents(&scope)?))
        .await
        .map_err(|error| error.to_string())?;
    let mut resources = vec![Resource::new(RECENT, "recent-memories")
        .with_title("Recent memories")
        .with_description(
            "What memproxy remembers about the user (facts learned from their chats and saved \
             over MCP), most recently changed first.",
        )
        .with_mime_type(MARKDOWN)];
    resources.extend(agents.into_iter().map(|agent| {
        Resource::new(core_uri(&agent.name), format!("core-memory-{}", agent.name))
            .with_title(format!("Core memory of agent '{}'", agent.name))
            .with_description("The agent's core memory blocks (what it always has in view).")
            .with_mime_type(MARKDOWN)
    }));
    Ok(resources)
}

/// Why a read failed.
pub enum ReadError {
    /// No such resource for this user.
    NotFound(String),
    Failed(String),
}

pub async fn read(
    memory: &Arc<MemoryService>,
    scope: &UserScope,
    uri: &str,
) -> Result<ReadResourceResult, ReadError> {
    let failed = |error: crate::memory::MemoryError| ReadError::Failed(error.to_string());
    let text = if uri == RECENT {
        recent_markdown(&recent(memory, scope).await.map_err(failed)?)
    } else if let Some(agent) = agent_of(uri) {
        let (scope, name) = (scope.clone(), agent.clone());
        let blocks = memory
            .blocking(move |store, _| Ok(store.core_blocks(&scope, &name)?))
            .await
            .map_err(failed)?;
        if blocks.is_empty() {
            return Err(ReadError::NotFound(format!(
                "the user has no agent '{agent}' with core memory"
            )));
        }
        core_markdown(&agent, &blocks)
    } else {
        return Err(ReadError::NotFound(format!("no resource '{uri}'")));
    };
    Ok(ReadResourceResult::new(vec![ResourceContents::text(
        text, uri,
    )
    .with_mime_type(MARKDOWN)]))
}

/// The live memories changed last, newest first.
async fn recent(
    memory: &Arc<MemoryService>,
    scope: &UserScope,
) -> Result<Vec<Memory>, crate::memory::MemoryError> {
    let mut all = Vec::new();
    while all.len() < SCAN_LIMIT {
        let page = Page {
            limit: 1000,
            offset: all.len(),
        };
        let rows = memory.list_memories(scope, false, page).await?;
        let last = rows.len() < 1000;
        all.extend(rows);
        if last {
            break;
        }
    }
    all.sort_by_key(|m| std::cmp::Reverse((m.updated_at_ms, m.id)));
    all.truncate(RECENT_COUNT);
    Ok(all)
}

fn recent_markdown(memories: &[Memory]) -> String {
    if memories.is_empty() {
        return "# Recent memories\n\nNothing is remembered about this user yet.\n".to_owned();
    }
    let lines: Vec<String> = memories
        .iter()
        .map(|m| {
            format!(
                "- {} (id {}, {})",
                m.text.trim(),
                m.id,
                crate::dates::ymd(m.updated_at_ms)
            )
        })
        .collect();
    format!("# Recent memories\n\n{}\n", lines.join("\n"))
}

fn core_markdown(agent: &str, blocks: &[CoreBlock]) -> String {
    let sections: Vec<String> = blocks
        .iter()
        .map(|block| {
            let mut notes = vec![format!(
                "{}/{} characters",
                block.value.chars().count(),
                block.char_limit
            )];
            if block.read_only {
                notes.push("read-only".to_owned());
            }
            if let Some(shared) = &block.shared {
                notes.push(format!("shared block '{shared}'"));
            }
            format!(
                "## {} ({})\n\n{}\n",
                block.label,
                notes.join(", "),
                block.value.trim()
            )
        })
        .collect();
    format!(
        "# Core memory of agent '{agent}'\n\n{}",
        sections.join("\n")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_names_round_trip_through_uris() {
        for name in ["coach", "my agent/2", "ünï", "a%b"] {
            let uri = core_uri(name);
            assert!(!uri[AGENT_PREFIX.len()..].contains(' '), "{uri}");
            assert_eq!(agent_of(&uri).as_deref(), Some(name), "{uri}");
        }
        assert_eq!(agent_of("memproxy://agents//core-memory"), None);
        assert_eq!(agent_of("memproxy://agents/%0A/core-memory"), None);
        assert_eq!(agent_of("memproxy://agents/%FF/core-memory"), None);
        assert_eq!(agent_of("memproxy://memories/recent"), None);
    }
}
