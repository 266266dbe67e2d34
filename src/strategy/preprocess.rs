//! The pre-processor: on the request path, within a time budget, store the new turns, retrieve
//! memories and rewrite the request for the chosen strategy. It fails open: on an error or past
//! the budget the request goes upstream unmodified and the answer says why (`x-memproxy-degraded`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::compact::{self, Window};
use super::inject::{self, MemoryBlock};
use super::{MemoryConfig, Plan};
use crate::conversation::request::{Message, Request};
use crate::identity::Scope;
use crate::memory::{history, unmentioned, MemoryService, RetrievalRequest};
use crate::mode::Mode;
use crate::store::{Corpus, NewMessage, UserScope};

/// What the pre-processor did to one request (all zero for `passthrough`, which does nothing).
#[derive(Debug, Default)]
pub struct Rewrite {
    /// What to change in the request, as steps each API applies to its own form; `None`: the
    /// client's own request goes unchanged.
    pub plan: Option<Plan>,
    pub memories: usize,
    pub tokens_before: usize,
    pub tokens_after: usize,
    pub elapsed: Duration,
    /// Why the request went upstream unmodified although the strategy would have changed it.
    pub degraded: Option<String>,
}

/// The conversation turns of a request as the recall log stores them (system prompts and any
/// echoed memory block left out: memories must never be re-extracted from themselves).
pub fn turns_of(messages: &[Message], now: i64) -> Vec<NewMessage> {
    messages
        .iter()
        .filter(|m| !compact::is_system(m))
        .map(|m| NewMessage {
            position: 0,
            role: m.role.clone(),
            content: inject::strip_blocks(&m.text()),
            name: m.name.clone(),
            tool_calls: m.stored_calls(),
            tool_call_id: m.call_id.clone(),
            created_at_ms: now,
        })
        .collect()
}

pub async fn prepare(
    memory: &Arc<MemoryService>,
    config: &MemoryConfig,
    mode: Mode,
    scope: &Scope,
    request: &Request,
) -> Rewrite {
    let started = Instant::now();
    if matches!(mode, Mode::Passthrough | Mode::Explicit) {
        // Nothing to rewrite, and no tokenizing on the plain proxy's hot path.
        return Rewrite::default();
    }
    let tokens_before = compact::total_tokens(&request.messages);
    let mut rewrite = match mode {
        Mode::Passthrough | Mode::Explicit => Rewrite::default(),
        Mode::Window => {
            let window = compact::window(&request.messages, config.history_budget_tokens);
            build(request, &window, None, config)
        }
        Mode::Summary | Mode::Implicit => {
            let work = with_memory(memory, config, mode, scope, request);
            match tokio::time::timeout(config.preprocess_timeout, work).await {
                Ok(Ok(rewrite)) => rewrite,
                Ok(Err(reason)) => degraded(reason, tokens_before),
                Err(_) => degraded(
                    format!("timeout after {} ms", config.preprocess_timeout.as_millis()),
                    tokens_before,
                ),
            }
        }
    };
    rewrite.tokens_before = tokens_before;
    rewrite.elapsed = started.elapsed();
    rewrite
}

fn degraded(reason: String, tokens: usize) -> Rewrite {
    tracing::warn!(%reason, "memory pre-processing failed; forwarding the request unmodified");
    Rewrite {
        tokens_after: tokens,
        degraded: Some(reason),
        ..Rewrite::default()
    }
}

/// The plan for the compacted request with the block (if any) in place, and what it changes.
fn build(
    request: &Request,
    window: &Window,
    block: Option<MemoryBlock>,
    config: &MemoryConfig,
) -> Rewrite {
    let memories = block.as_ref().map_or(0, MemoryBlock::count);
    let plan = Plan {
        first_kept: window.first_turn_kept,
        block: block
            .filter(|b| !b.is_empty())
            .map(|block| (block.render(), config.inject)),
    };
    let messages = plan.apply(&request.messages);
    let tokens_after = compact::total_tokens(&messages);
    let changed = messages != request.messages;
    let degraded = window.over_budget.map(|(used, budget)| {
        format!("the newest turn is {used} tokens, over memory.history_budget_tokens ({budget}): sent whole")
    });
    Rewrite {
        degraded,
        plan: changed.then_some(plan),
        memories,
        tokens_after,
        ..Rewrite::default()
    }
}

async fn with_memory(
    memory: &Arc<MemoryService>,
    config: &MemoryConfig,
    mode: Mode,
    scope: &Scope,
    request: &Request,
) -> Result<Rewrite, String> {
    let user = UserScope::from(scope);
    let turns = turns_of(&request.messages, scope.now_ms());
    let query = (mode == Mode::Implicit)
        .then(|| query_of(request))
        .flatten();
    // The vector is the question's (the newest user turn, stored with it); keywords also get the
    // end of the previous assistant turn.
    let question = query.as_ref().map(|(question, _)| question.clone());
    // The conversation, or the branch of it, this history continues: its summary is this
    // request's (another chat with the same opening has a summary of its own).
    // A store opened read-only still answers from memory; the turn itself cannot be stored.
    let (conversation, query_vector) = if scope.record && !memory.store().read_only() {
        let recorded = memory
            .record_messages_and_embed(&user, &scope.conversation, &scope.agent, turns, question)
            .await
            .map_err(|e| e.to_string())?;
        (recorded.conversation, recorded.query)
    } else {
        // Retrieval embeds the query itself; nothing is stored.
        (scope.conversation.clone(), None)
    };
    let window = compact::window(&request.messages, config.history_budget_tokens);
    let mut block = MemoryBlock::default();
    if !window.dropped.is_empty() {
        let summary_scope = user.clone();
        block.summary = memory
            .blocking(move |store, _| Ok(store.summary(&summary_scope, &conversation)?))
            .await
            .map_err(|e| e.to_string())?
            .map(|s| s.text);
    }
    if let Some((question, keywords)) = query {
        let found = Found {
            query: keywords,
            vector: query_vector.clone(),
            assistant_lines: crate::memory::cues::asks_about_the_assistant(&question),
        };
        let budget =
            retrieve_into(&mut block, memory, config, &user, request, &window, found).await?;
        follow_names(&mut block, memory, config, &user, &question, budget).await?;
        if config.former_facts > 0 && history::asks_about_the_past(&question) {
            add_former(&mut block, memory, config, &user, &question, query_vector).await?;
        }
        if config.never_mentioned {
            add_never_mentioned(&mut block, memory, &user, request, &question).await?;
        }
    }
    Ok(build(request, &window, Some(block), config))
}

/// Facts that no longer hold, for a question about the past ([`history`]).
async fn add_former(
    block: &mut MemoryBlock,
    memory: &Arc<MemoryService>,
    config: &MemoryConfig,
    user: &UserScope,
    question: &str,
    vectors: Option<crate::memory::QueryVectors>,
) -> Result<(), String> {
    let vectors = match vectors {
        Some(vectors) => vectors,
        None => memory
            .query_vectors(question, true)
            .await
            .map_err(|e| e.to_string())?,
    };
    let Some(vector) = vectors.about_user.or(vectors.asked) else {
        return Ok(());
    };
    let live: Vec<String> = block.facts.iter().map(|(_, text)| text.clone()).collect();
    let former = memory
        .former_facts(
            user,
            &vector,
            &live,
            config.former_facts,
            config.min_similarity,
        )
        .await
        .map_err(|e| e.to_string())?;
    block.former = former.into_iter().map(|f| (f.until_ms, f.text)).collect();
    Ok(())
}

/// What the question takes for granted ("my dog") that neither the request's conversation, nor
/// the memories shown, nor anything stored of the user mentions ([`unmentioned`]).
async fn add_never_mentioned(
    block: &mut MemoryBlock,
    memory: &Arc<MemoryService>,
    user: &UserScope,
    request: &Request,
    question: &str,
) -> Result<(), String> {
    let newest = request.messages.iter().rposition(|m| m.role == "user");
    let mut asked = unmentioned::presupposed(question);
    asked.retain(|thing| {
        let words = &thing.words;
        let in_request = request.messages.iter().enumerate().any(|(at, message)| {
            // The question itself is no mention; a statement beside it is.
            let statements_only = Some(at) == newest;
            unmentioned::mentions(
                &inject::strip_blocks(&message.text()),
                words,
                statements_only,
            )
        });
        let shown = block
            .summary
            .iter()
            .any(|s| unmentioned::mentions(s, words, true))
            || block
                .facts
                .iter()
                .any(|(_, f)| unmentioned::mentions(f, words, true))
            || block
                .former
                .iter()
                .any(|(_, f)| unmentioned::mentions(f, words, true))
            || block
                .turns
                .iter()
                .any(|turn| unmentioned::mentions(&turn.text, words, true));
        !in_request && !shown
    });
    let never = memory
        .never_mentioned(user, asked)
        .await
        .map_err(|e| e.to_string())?;
    block.never_mentioned = never.into_iter().map(|thing| thing.thing).collect();
    Ok(())
}

/// The retrieval query: the newest user message, which carries the question, and the end of the
/// assistant turn before it, which often names its subject.
/// Returns `(question, question + context)`.
fn query_of(request: &Request) -> Option<(String, String)> {
    let newest = request.messages.iter().rposition(|m| m.role == "user")?;
    let question = inject::strip_blocks(&request.messages[newest].text());
    let previous = request.messages[..newest]
        .iter()
        .rev()
        .find(|m| m.role == "assistant");
    let keywords = match previous {
        Some(previous) => {
            let text = previous.text();
            let tail: Vec<char> = text.chars().rev().take(300).collect();
            format!("{question}\n{}", tail.into_iter().rev().collect::<String>())
        }
        None => question.clone(),
    };
    Some((question, keywords))
}

struct Found {
    query: String,
    vector: Option<crate::memory::QueryVectors>,
    /// The question asks what the assistant said: its earlier replies may be shown
    /// ([`crate::memory::cues`]).
    assistant_lines: bool,
}

#[allow(clippy::too_many_arguments)]
async fn retrieve_into(
    block: &mut MemoryBlock,
    memory: &Arc<MemoryService>,
    config: &MemoryConfig,
    user: &UserScope,
    request: &Request,
    window: &Window,
    found: Found,
) -> Result<usize, String> {
    let query = found.query;
    let mut corpora = vec![Corpus::Memory];
    if config.past_turns {
        corpora.push(Corpus::Message);
    }
    let in_window: Vec<String> = window
        .kept
        .iter()
        .map(|&i| inject::strip_blocks(&request.messages[i].text()))
        .collect();
    let retrieval = RetrievalRequest {
        query,
        corpora,
        // Room for the hits dropped below because the window already holds them.
        top_k: config.max_memories + in_window.len(),
        min_similarity: config.min_similarity,
        current_only: true,
        ..RetrievalRequest::default()
    };
    let hits = memory
        .retrieve_with(user, retrieval, found.vector)
        .await
        .map_err(|e| e.to_string())?;
    let mut budget = config.memory_budget_tokens;
    for hit in hits {
        // A turn the window holds (from this chat or the one it branched from) is there already.
        let in_context =
            hit.corpus == Corpus::Message && in_window.iter().any(|text| *text == hit.text.trim());
        // A fact extracted word for word from a turn, or the same turn twice: one is enough.
        let repeated = block
            .facts
            .iter()
            .any(|(_, text)| text.trim() == hit.text.trim())
            || block
                .turns
                .iter()
                .any(|turn| turn.text.trim() == hit.text.trim());
        let assistants = hit.corpus == Corpus::Message && hit.role.as_deref() == Some("assistant");
        if in_context
            || repeated
            || assistants && !found.assistant_lines
            || hit.text.trim().is_empty()
            || block.count() >= config.max_memories
        {
            continue;
        }
        let role = hit.role.clone().unwrap_or_else(|| "user".to_owned());
        let answers = match hit.corpus {
            Corpus::Message => inject::question_before(&role, hit.replies_to.as_ref()),
            _ => None,
        };
        let tokens = hit.tokens + answers.as_ref().map_or(0, |(_, q)| crate::tokens::count(q));
        if tokens > budget {
            continue;
        }
        budget -= tokens;
        match hit.corpus {
            Corpus::Message => block.turns.push(inject::PastTurn {
                at: hit.created_at_ms,
                role,
                text: hit.text,
                answers,
            }),
            _ => block.facts.push((hit.created_at_ms, hit.text)),
        }
    }
    Ok(budget)
}

/// Names followed from the facts found to the user's other facts about them.
const NAMES_FOLLOWED: usize = 2;
/// Facts one followed name may add.
const FACTS_PER_NAME: usize = 2;

/// The second hop: someone the facts found name ("The user's brother Tomas is turning 30.") and
/// the question does not, looked up by name among the user's other facts ("Tomas is really into
/// climbing."), within what is left of the budget. "What hobby does the person I might visit in
/// April have?" finds the visit and Tomas, not his hobby: no word of it is in the question.
async fn follow_names(
    block: &mut MemoryBlock,
    memory: &Arc<MemoryService>,
    config: &MemoryConfig,
    user: &UserScope,
    question: &str,
    mut budget: usize,
) -> Result<(), String> {
    let asked = question.to_lowercase();
    let texts: Vec<&str> = block.facts.iter().map(|(_, text)| text.as_str()).collect();
    let mut names: Vec<String> = Vec::new();
    for name in crate::language::names_of_others(&texts) {
        if !asked.contains(&name) && !names.contains(&name) && names.len() < NAMES_FOLLOWED {
            names.push(name);
        }
    }
    for name in names {
        if block.count() >= config.max_memories {
            break;
        }
        let retrieval = RetrievalRequest {
            query: name.clone(),
            corpora: vec![Corpus::Memory],
            top_k: FACTS_PER_NAME + block.facts.len(),
            vector: false,
            current_only: true,
            ..RetrievalRequest::default()
        };
        let hits = memory
            .retrieve_with(user, retrieval, None)
            .await
            .map_err(|e| e.to_string())?;
        let mut added = 0;
        for hit in hits {
            let text = hit.text.trim();
            let shown = block.facts.iter().any(|(_, f)| f.trim() == text);
            let names_them = text.to_lowercase().contains(&name);
            if shown || !names_them || hit.tokens > budget || added == FACTS_PER_NAME {
                continue;
            }
            if block.count() >= config.max_memories {
                break;
            }
            budget -= hit.tokens;
            added += 1;
            block.facts.push((hit.created_at_ms, hit.text));
        }
    }
    Ok(())
}
