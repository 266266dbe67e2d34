//! `conversation_search` and `conversation_search_date`: recall memory, the agent's whole log
//! including messages no longer in its context, and the user's chats in the other modes (one
//! memory under every mode).

use async_trait::async_trait;
use serde_json::{json, Map, Value};

use super::archival::searched;
use super::kit::{function, page_schema, paged, required, Tool, ToolOutcome, ToolScope};
use crate::agent::lenient::page_arg;
use crate::dates;
use crate::store::{agent_conversation, Corpus, Page};

pub struct Search;
pub struct SearchDate;

#[async_trait]
impl Tool for Search {
    fn name(&self) -> &str {
        "conversation_search"
    }

    fn schema(&self) -> Value {
        function(
            self.name(),
            "Search the whole history of your conversation with the user, including messages no longer in view.",
            json!({"query": {"type": "string", "description": "What to look for."}, "page": page_schema()}),
            &["query"],
        )
    }

    async fn execute(&self, tools: &ToolScope<'_>, arguments: &Map<String, Value>) -> ToolOutcome {
        searched(tools, arguments, Corpus::Message).await
    }
}

#[async_trait]
impl Tool for SearchDate {
    fn name(&self) -> &str {
        "conversation_search_date"
    }

    fn schema(&self) -> Value {
        function(
            self.name(),
            "List messages of your conversation with the user between two dates (inclusive).",
            json!({
                "start_date": {"type": "string", "description": "First day, YYYY-MM-DD."},
                "end_date": {"type": "string", "description": "Last day, YYYY-MM-DD."},
                "page": page_schema(),
            }),
            &["start_date", "end_date"],
        )
    }

    async fn execute(&self, tools: &ToolScope<'_>, arguments: &Map<String, Value>) -> ToolOutcome {
        let run = async {
            let start = required(arguments, "start_date")?;
            let end = required(arguments, "end_date")?;
            let page = page_arg(arguments).map_err(ToolOutcome::failed)?;
            search_dates(tools, &start, &end, page).await
        };
        run.await.unwrap_or_else(|failed| failed)
    }
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
    let items: Vec<String> = messages
        .iter()
        .map(|m| {
            let text = m.search_text.as_deref().unwrap_or(&m.content);
            format!("[{}] {}: {text}", dates::timestamp(m.created_at_ms), m.role)
        })
        .collect();
    Ok(paged(items, total, page, page_size))
}
