//! `archival_memory_insert` and `archival_memory_search`: the agent's unlimited passage store,
//! and the search shared with `conversation_search` (meaning and keywords, paged).

use async_trait::async_trait;
use serde_json::{json, Map, Value};

use super::kit::{function, page_schema, paged, required, Tool, ToolOutcome, ToolScope};
use crate::agent::lenient::page_arg;
use crate::agent::one_memory;
use crate::dates;
use crate::memory::RetrievalRequest;
use crate::store::{agent_conversation, Corpus, Within};

pub struct Insert;
pub struct Search;

#[async_trait]
impl Tool for Insert {
    fn name(&self) -> &str {
        "archival_memory_insert"
    }

    fn schema(&self) -> Value {
        function(
            self.name(),
            "Store a passage in archival memory (unlimited, not visible until searched). Write it so it makes sense on its own later.",
            json!({"content": {"type": "string", "description": "Passage to store."}}),
            &["content"],
        )
    }

    fn writes(&self) -> bool {
        true
    }

    async fn execute(&self, tools: &ToolScope<'_>, arguments: &Map<String, Value>) -> ToolOutcome {
        let content = match required(arguments, "content") {
            Ok(content) => content,
            Err(failed) => return failed,
        };
        // A fact about the user is one of their facts, whichever mode or agent learned it; the
        // archival search finds it with the passages.
        if one_memory::fact_about_the_user(&content, tools.user_said)
            && tools.memory.check_text(&content).is_ok()
        {
            let at = tools.clock.unwrap_or_else(crate::store::now_ms);
            return match one_memory::fact_saved(
                tools.memory,
                tools.scope,
                tools.agent,
                &content,
                at,
                self.name(),
            )
            .await
            {
                Ok(()) => ToolOutcome::ok("Inserted into archival memory."),
                Err(error) => ToolOutcome::failed(error.to_string()),
            };
        }
        match tools
            .memory
            .insert_passage(tools.scope, tools.agent, &content)
            .await
        {
            Ok(_) => ToolOutcome::ok("Inserted into archival memory."),
            Err(error) => ToolOutcome::failed(error.to_string()),
        }
    }
}

#[async_trait]
impl Tool for Search {
    fn name(&self) -> &str {
        "archival_memory_search"
    }

    fn schema(&self) -> Value {
        function(
            self.name(),
            "Search archival memory by meaning and keywords.",
            json!({"query": {"type": "string", "description": "What to look for."}, "page": page_schema()}),
            &["query"],
        )
    }

    async fn execute(&self, tools: &ToolScope<'_>, arguments: &Map<String, Value>) -> ToolOutcome {
        searched(tools, arguments, Corpus::Passage).await
    }
}

/// Results searched at most (so the page count is real, not an estimate).
const SEARCH_RESULTS: usize = 100;

/// A paged search of the agent's passages or of its own conversation.
pub(super) async fn searched(
    tools: &ToolScope<'_>,
    arguments: &Map<String, Value>,
    corpus: Corpus,
) -> ToolOutcome {
    let run = async {
        let query = required(arguments, "query")?;
        let page = page_arg(arguments).map_err(ToolOutcome::failed)?;
        let within = match corpus {
            Corpus::Passage => Within::Agent(tools.agent.to_owned()),
            // Its own log and the user's chats in the other modes (one memory, issue 46).
            _ => Within::Recall(agent_conversation(tools.agent)),
        };
        let request = RetrievalRequest {
            query,
            corpora: vec![corpus],
            top_k: SEARCH_RESULTS,
            candidates: SEARCH_RESULTS,
            within: Some(within),
            ..RetrievalRequest::default()
        };
        let facts = (corpus == Corpus::Passage).then(|| RetrievalRequest {
            corpora: vec![Corpus::Memory],
            within: None,
            ..request.clone()
        });
        let mut hits = tools
            .memory
            .retrieve(tools.scope, request)
            .await
            .map_err(|e| ToolOutcome::failed(e.to_string()))?;
        // Archival memory also holds the user's facts, whichever mode wrote them (one memory
        // under every mode, issue 46): both lists by score, as one.
        if let Some(facts) = facts {
            let facts = tools
                .memory
                .retrieve(tools.scope, facts)
                .await
                .map_err(|e| ToolOutcome::failed(e.to_string()))?;
            hits.extend(facts);
            hits.sort_by(|a, b| b.score.total_cmp(&a.score));
            hits.truncate(SEARCH_RESULTS);
        }
        let total = hits.len();
        let page_size = tools.config.page_size;
        let items = hits
            .into_iter()
            .skip(page * page_size)
            .take(page_size)
            .map(|hit| {
                let when = dates::timestamp(hit.created_at_ms);
                match (hit.role, hit.corpus) {
                    (Some(role), _) => format!("[{when}] {role}: {}", hit.text),
                    (None, Corpus::Memory) => {
                        format!("[{when}] (known about the user) {}", hit.text)
                    }
                    (None, _) => format!("[{when}] {}", hit.text),
                }
            })
            .collect();
        Ok::<_, ToolOutcome>(paged(items, total, page, page_size))
    };
    run.await.unwrap_or_else(|failed| failed)
}
