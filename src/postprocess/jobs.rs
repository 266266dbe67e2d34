//! The memory jobs: extract facts from new turns and reconcile them with what is stored, and
//! refresh a conversation's rolling summary. Each reads the recall log (the client's own turns:
//! never the injected memory block, never the client's system prompt), asks the memory LLM, and
//! only then writes; a malformed answer fails the job before anything is changed.

use std::collections::HashMap;

use serde_json::{json, Value};

use super::gates::{self, Evidence, Rejection};
use super::llm::{json_object, Answer};
use super::PostProcessor;
use crate::dates::ymd_weekday;
use crate::memory::{MemoryError, RetrievalRequest, MAX_MEMORY_CHARS};
use crate::store::{
    content_hash, now_ms, Corpus, Job, Page, Source, StoreError, StoredMessage, Summary, UserScope,
};
use crate::strategy::inject::strip_blocks;

/// Earlier turns shown with the new ones, to understand them (not to extract from).
const CONTEXT_TURNS: usize = 4;
/// Stored memories compared with each new fact.
const CANDIDATES_PER_FACT: usize = 5;

pub(super) struct Fact {
    pub text: String,
    pub kind: String,
}

fn field<'a>(job: &'a Job, name: &str) -> &'a str {
    job.payload[name].as_str().unwrap_or_default()
}

/// Branches a lineage walks at most (a guard against a corrupted parent chain).
const MAX_LINEAGE: usize = 64;

/// A conversation's live turns as the chat saw them: for a branch, the turns of the conversations
/// it branched from, each up to where the next one left it, then its own.
async fn live_turns(
    pp: &PostProcessor,
    scope: &UserScope,
    conversation: &str,
) -> Result<Vec<StoredMessage>, String> {
    let (scope, conversation) = (scope.clone(), conversation.to_owned());
    let page = Page {
        limit: 100_000,
        offset: 0,
    };
    let messages = pp
        .memory
        .blocking(move |store, _| {
            let mut chain = vec![(conversation.clone(), i64::MAX)];
            // Only a branch (its id always holds `~`) has a lineage to read.
            let conversations = if conversation.contains('~') {
                store.list_conversations(&scope)?
            } else {
                Vec::new()
            };
            while chain.len() < MAX_LINEAGE {
                let (current, _) = &chain[chain.len() - 1];
                let Some(found) = conversations.iter().find(|c| &c.id == current) else {
                    break;
                };
                let Some(parent) = &found.parent else {
                    break;
                };
                chain.push((parent.clone(), found.fork_position));
            }
            let mut turns = Vec::new();
            for (id, before) in chain.into_iter().rev() {
                let own = store.list_messages(&scope, &id, page)?;
                turns.extend(own.into_iter().filter(|m| m.position < before));
            }
            Ok(turns)
        })
        .await
        .map_err(|e| e.to_string())?;
    Ok(messages
        .into_iter()
        .filter(|m| {
            !m.superseded
                && matches!(m.role.as_str(), "user" | "assistant")
                && !m.content.trim().is_empty()
        })
        .collect())
}

/// Turns as the memory LLM reads them: `[date] role: text`, one per line.
pub(super) fn transcript<'a>(turns: impl IntoIterator<Item = (i64, &'a str, &'a str)>) -> String {
    turns
        .into_iter()
        .map(|(at, role, text)| format!("[{}] {role}: {}", ymd_weekday(at), text.trim()))
        .collect::<Vec<_>>()
        .join("\n")
}

fn lines(turns: &[StoredMessage]) -> impl Iterator<Item = (i64, &str, &str)> {
    turns
        .iter()
        .map(|m| (m.created_at_ms, m.role.as_str(), m.content.as_str()))
}

/// What an extraction call reads: the newest message's date, earlier context (transcript or
/// empty) and the new turns (transcript).
pub(super) fn extraction_material(newest_ms: i64, context: &str, new: &str) -> String {
    let context = if context.is_empty() {
        "(none)"
    } else {
        context
    };
    format!(
        "Date of the newest message: {}\n\nEarlier context (for reference only):\n{context}\n\nNew messages:\n{new}\n",
        ymd_weekday(newest_ms)
    )
}

pub async fn extract(pp: &PostProcessor, job: &Job, scope: &UserScope) -> Result<String, String> {
    let conversation = field(job, "conversation");
    let (progress_scope, progress_conversation) = (scope.clone(), conversation.to_owned());
    let progress = pp
        .memory
        .blocking(move |store, _| {
            Ok(store.extraction_progress(&progress_scope, &progress_conversation)?)
        })
        .await
        .map_err(|e| e.to_string())?;
    let turns = live_turns(pp, scope, conversation).await?;
    // Only this conversation's own turns are new: a branch's beginning belongs to its parent.
    let first_new = turns
        .iter()
        .position(|m| m.conversation == conversation && m.position > progress)
        .unwrap_or(turns.len());
    let new = &turns[first_new..];
    let Some(last) = new.last() else {
        return Ok("nothing new".to_owned());
    };
    let context = &turns[first_new.saturating_sub(CONTEXT_TURNS)..first_new];
    let material = extraction_material(
        last.created_at_ms,
        &transcript(lines(context)),
        &transcript(lines(new)),
    );
    let answer = pp
        .llm
        .complete(
            field(job, "model"),
            &pp.prompts.extract,
            &material,
            Answer::Json("facts", &facts_schema()),
        )
        .await
        .map_err(|e| e.to_string())?;
    let facts = parse_facts(&answer)?;
    // What the facts may be drawn from: the user's words (also of the context turns) and the
    // assistant's lines of the new turns, never an injected memory block.
    let said: Vec<(&str, String)> = context
        .iter()
        .filter(|m| m.role == "user")
        .chain(new)
        .map(|m| (m.role.as_str(), strip_blocks(&m.content)))
        .collect();
    let evidence = Evidence::new(said.iter().map(|(role, text)| (*role, text.as_str())));
    let sources: Vec<Source> = new
        .iter()
        .map(|m| Source {
            conversation: conversation.to_owned(),
            position: m.position,
        })
        .collect();
    let report = reconcile(
        pp,
        job,
        scope,
        facts,
        &evidence,
        sources,
        last.created_at_ms,
    )
    .await?;
    let (done_scope, done_conversation, through) =
        (scope.clone(), conversation.to_owned(), last.position);
    pp.memory
        .blocking(move |store, _| {
            Ok(store.set_extraction_progress(&done_scope, &done_conversation, through)?)
        })
        .await
        .map_err(|e| e.to_string())?;
    Ok(report)
}

/// Facts an extraction may return at most, and the longest fact (bounded answers: a small model
/// cannot repeat one fact until `max_tokens`).
const MAX_FACTS: usize = 12;
const MAX_FACT_CHARS: usize = 300;

pub(super) fn facts_schema() -> Value {
    json!({"type": "object", "additionalProperties": false, "required": ["facts"],
    "properties": {"facts": {"type": "array", "maxItems": MAX_FACTS, "items": {
        "type": "object", "additionalProperties": false, "required": ["text", "kind"],
        "properties": {
            "text": {"type": "string", "minLength": 10, "maxLength": MAX_FACT_CHARS},
            "kind": {"type": "string", "enum": ["fact", "preference", "event", "commitment"]}
        }}}}})
}

fn decisions_schema(facts: usize) -> Value {
    json!({"type": "object", "additionalProperties": false, "required": ["decisions"],
    "properties": {"decisions": {"type": "array", "maxItems": facts, "items": {
        "type": "object", "additionalProperties": false,
        "required": ["fact", "action", "memory", "text"],
        "properties": {
            "fact": {"type": "integer", "minimum": 0},
            "action": {"type": "string", "enum": ["ADD", "UPDATE", "INVALIDATE", "NOOP"]},
            "memory": {"type": ["integer", "null"], "minimum": 0},
            "text": {"type": ["string", "null"], "maxLength": MAX_FACT_CHARS + 100}
        }}}}})
}

pub(super) fn parse_facts(answer: &str) -> Result<Vec<Fact>, String> {
    let object = json_object(answer).map_err(|e| e.to_string())?;
    let Some(items) = object["facts"].as_array() else {
        return Err(format!(
            "the extraction answer has no \"facts\" list: {object}"
        ));
    };
    let mut facts = Vec::new();
    for item in items {
        let (text, kind) = match item {
            Value::String(text) => (text.clone(), "fact".to_owned()),
            Value::Object(fields) => (
                fields
                    .get("text")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                fields
                    .get("kind")
                    .and_then(Value::as_str)
                    .unwrap_or("fact")
                    .to_owned(),
            ),
            _ => continue,
        };
        let text = text.trim().to_owned();
        if !text.is_empty() && text.chars().count() <= MAX_FACT_CHARS.min(MAX_MEMORY_CHARS) {
            facts.push(Fact { text, kind });
        }
    }
    facts.truncate(MAX_FACTS);
    Ok(facts)
}

enum Decision {
    Add,
    Update(i64, String),
    Invalidate(i64),
    Noop,
}

#[allow(clippy::too_many_arguments)]
async fn reconcile(
    pp: &PostProcessor,
    job: &Job,
    scope: &UserScope,
    facts: Vec<Fact>,
    evidence: &Evidence,
    sources: Vec<Source>,
    said_at_ms: i64,
) -> Result<String, String> {
    let cause = format!(
        "job {}: {} of conversation {}",
        job.id,
        job.kind,
        field(job, "conversation")
    );
    let mut counts: HashMap<String, usize> = HashMap::new();
    let reject = |counts: &mut HashMap<String, usize>, text: &str, reason: Rejection| {
        tracing::info!(
            job = job.id,
            reason = reason.as_str(),
            text,
            "memory fact rejected"
        );
        pp.metrics.count_rejection(reason.as_str());
        *counts
            .entry(format!("rejected ({})", reason.as_str()))
            .or_default() += 1;
    };
    // Exact duplicates (of each other and of stored facts) go before any LLM call, and so does
    // whatever the gates refuse.
    let mut seen = std::collections::HashSet::new();
    let mut fresh = Vec::new();
    let mut candidates: Vec<(i64, String, i64)> = Vec::new();
    for fact in facts {
        if let Err(reason) = gates::check_form(&fact.text) {
            reject(&mut counts, &fact.text, reason);
            continue;
        }
        if !seen.insert(content_hash(&fact.text)) {
            *counts.entry("duplicate".to_owned()).or_default() += 1;
            continue;
        }
        let request = RetrievalRequest {
            query: fact.text.clone(),
            corpora: vec![Corpus::Memory],
            top_k: CANDIDATES_PER_FACT,
            min_similarity: 0.5,
            ..RetrievalRequest::default()
        };
        let hits = pp
            .memory
            .retrieve(scope, request)
            .await
            .map_err(|e| e.to_string())?;
        if hits
            .iter()
            .any(|h| content_hash(&h.text) == content_hash(&fact.text))
        {
            *counts.entry("duplicate".to_owned()).or_default() += 1;
            continue;
        }
        let known: Vec<&str> = hits.iter().map(|h| h.text.as_str()).collect();
        if let Err(reason) = evidence.check_knowing(&fact.text, &fact.kind, &known) {
            reject(&mut counts, &fact.text, reason);
            continue;
        }
        for hit in hits {
            if !candidates.iter().any(|(id, _, _)| *id == hit.id) {
                candidates.push((hit.id, hit.text, hit.created_at_ms));
            }
        }
        fresh.push(fact);
    }
    if fresh.is_empty() {
        return Ok(report_of(counts, "no new facts"));
    }
    let decisions = if pp.config.add_only || candidates.is_empty() {
        fresh.iter().map(|_| Decision::Add).collect()
    } else {
        decide(pp, job, &fresh, &candidates).await?
    };
    // Memories this job already changed: a second decision about one of them saw text that is
    // no longer there, so its fact is added instead.
    let mut touched = std::collections::HashSet::new();
    for (fact, decision) in fresh.into_iter().zip(decisions) {
        let decision = match decision {
            Decision::Update(id, _) | Decision::Invalidate(id) if !touched.insert(id) => {
                tracing::info!(job = job.id, memory = id, fact = %fact.text, "a second decision about one memory in one job: the fact is added instead");
                Decision::Add
            }
            // An update must keep the subject of the memory it rewrites (a small model's "..."
            // or an unrelated sentence would destroy a correct fact): else the fact is added.
            Decision::Update(id, text) => {
                let old = candidates.iter().find(|(c, _, _)| *c == id);
                match old.map(|(_, old, _)| evidence.check_update(old, &text)) {
                    Some(Err(reason)) => {
                        reject(&mut counts, &text, reason);
                        Decision::Add
                    }
                    _ => Decision::Update(id, text),
                }
            }
            decision => decision,
        };
        let label = apply(pp, scope, &fact, decision, &sources, &cause, said_at_ms).await?;
        *counts.entry(label.to_owned()).or_default() += 1;
    }
    Ok(report_of(counts, "no changes"))
}

/// A job's report: "2 added, 1 rejected (question)", sorted.
fn report_of(counts: HashMap<String, usize>, empty: &str) -> String {
    let mut report: Vec<String> = counts
        .into_iter()
        .map(|(k, v)| format!("{v} {k}"))
        .collect();
    report.sort();
    if report.is_empty() {
        empty.to_owned()
    } else {
        report.join(", ")
    }
}

/// Applies one reconcile decision. A decision naming a memory that is no longer live (retired by
/// an edit or an earlier decision) is applied as an ADD of its fact: one stale decision never
/// fails the job and loses the other facts.
async fn apply(
    pp: &PostProcessor,
    scope: &UserScope,
    fact: &Fact,
    decision: Decision,
    sources: &[Source],
    cause: &str,
    said_at_ms: i64,
) -> Result<&'static str, String> {
    let add = || async {
        let item = vec![(fact.text.clone(), fact.kind.clone(), sources.to_vec())];
        pp.memory
            .add_memories_at(scope, item, cause, said_at_ms)
            .await
            .map_err(|e| e.to_string())
    };
    let gone = |id: i64| {
        tracing::info!(memory = id, fact = %fact.text, "a reconcile decision names a memory that is no longer live: the fact is added instead");
    };
    match decision {
        Decision::Add => add().await.map(|_| "added"),
        Decision::Noop => Ok("unchanged"),
        Decision::Update(id, text) => {
            match pp
                .memory
                .update_memory(scope, id, &text, sources, cause)
                .await
            {
                Ok(()) => Ok("updated"),
                // Another memory already says it (often one added by this very job): the old one is
                // superseded, not rewritten into a duplicate.
                Err(MemoryError::Store(StoreError::DuplicateText)) => {
                    match pp.memory.retire_memory(scope, id, false, cause).await {
                        Ok(()) | Err(MemoryError::Store(StoreError::NotFound(_))) => {
                            Ok("invalidated")
                        }
                        Err(error) => Err(error.to_string()),
                    }
                }
                Err(MemoryError::Store(StoreError::NotFound(_))) => {
                    gone(id);
                    add().await.map(|_| "added")
                }
                Err(error) => Err(error.to_string()),
            }
        }
        Decision::Invalidate(id) => {
            match pp.memory.retire_memory(scope, id, false, cause).await {
                Ok(()) => {}
                Err(MemoryError::Store(StoreError::NotFound(_))) => gone(id),
                Err(error) => return Err(error.to_string()),
            }
            add().await.map(|_| "invalidated")
        }
    }
}

/// One reconcile call for all new facts. Stored memories are shown as M0, M1, ... (small numbers:
/// models copy them reliably, unlike database ids).
async fn decide(
    pp: &PostProcessor,
    job: &Job,
    facts: &[Fact],
    candidates: &[(i64, String, i64)],
) -> Result<Vec<Decision>, String> {
    let stored: Vec<String> = candidates
        .iter()
        .enumerate()
        .map(|(i, (_, text, at))| format!("M{i} [{}] {text}", crate::dates::ymd(*at)))
        .collect();
    let new: Vec<String> = facts
        .iter()
        .enumerate()
        .map(|(i, f)| format!("F{i} {}", f.text))
        .collect();
    let material = format!(
        "Stored memories:\n{}\n\nNew facts:\n{}\n",
        stored.join("\n"),
        new.join("\n")
    );
    let answer = pp
        .llm
        .complete(
            field(job, "model"),
            &pp.prompts.reconcile,
            &material,
            Answer::Json("decisions", &decisions_schema(facts.len())),
        )
        .await
        .map_err(|e| e.to_string())?;
    let object = json_object(&answer).map_err(|e| e.to_string())?;
    let Some(items) = object["decisions"].as_array() else {
        return Err(format!(
            "the reconcile answer has no \"decisions\" list: {object}"
        ));
    };
    let index = |value: &Value| -> Option<usize> {
        match value {
            Value::Number(n) => n.as_u64().map(|n| n as usize),
            Value::String(s) => s.trim_start_matches(['M', 'F', 'm', 'f']).parse().ok(),
            _ => None,
        }
    };
    // A fact the model skipped, or a decision naming no real memory, is simply added.
    let mut decisions: Vec<Decision> = facts.iter().map(|_| Decision::Add).collect();
    for item in items {
        let Some(fact) = index(&item["fact"]).filter(|f| *f < facts.len()) else {
            continue;
        };
        let memory = index(&item["memory"])
            .and_then(|m| candidates.get(m))
            .map(|(id, _, _)| *id);
        let action = item["action"]
            .as_str()
            .unwrap_or("ADD")
            .to_ascii_uppercase();
        decisions[fact] = match (action.as_str(), memory) {
            ("UPDATE", Some(id)) => {
                let text = item["text"]
                    .as_str()
                    .map(str::trim)
                    .filter(|t| !t.is_empty())
                    .unwrap_or(&facts[fact].text);
                Decision::Update(id, text.to_owned())
            }
            ("INVALIDATE" | "DELETE", Some(id)) => Decision::Invalidate(id),
            ("NOOP" | "NONE", _) => Decision::Noop,
            _ => Decision::Add,
        };
    }
    Ok(decisions)
}

pub async fn summarize(pp: &PostProcessor, job: &Job, scope: &UserScope) -> Result<String, String> {
    let conversation = field(job, "conversation");
    let dropped = job.payload["dropped"].as_u64().unwrap_or(0) as usize;
    let turns = live_turns(pp, scope, conversation).await?;
    let evicted = &turns[..dropped.min(turns.len())];
    let (summary_scope, summary_conversation) = (scope.clone(), conversation.to_owned());
    let previous = pp
        .memory
        .blocking(move |store, _| Ok(store.summary(&summary_scope, &summary_conversation)?))
        .await
        .map_err(|e| e.to_string())?;
    let through = previous.as_ref().map_or(-1, |s| s.through_position);
    let pending: Vec<StoredMessage> = evicted
        .iter()
        .filter(|m| m.position > through)
        .cloned()
        .collect();
    let Some(last) = pending.last() else {
        return Ok("summary up to date".to_owned());
    };
    if pending.len() < pp.config.summary_min_turns {
        return Ok(format!(
            "{} turns pending, waiting for {}",
            pending.len(),
            pp.config.summary_min_turns
        ));
    }
    let material = format!(
        "Current summary:\n{}\n\nMessages leaving the window:\n{}\n",
        previous.as_ref().map_or("(none)", |s| s.text.as_str()),
        transcript(lines(&pending))
    );
    let text = pp
        .llm
        .complete(
            field(job, "model"),
            &pp.prompts.summarize,
            &material,
            Answer::Text,
        )
        .await
        .map_err(|e| e.to_string())?;
    let text = text.trim().to_owned();
    if text.is_empty() {
        return Err("the summary answer is empty".to_owned());
    }
    let summary = Summary {
        conversation: conversation.to_owned(),
        text,
        through_position: last.position,
        updated_at_ms: now_ms(),
    };
    let count = pending.len();
    let summary_scope = scope.clone();
    pp.memory
        .blocking(move |store, _| Ok(store.put_summary(&summary_scope, &summary)?))
        .await
        .map_err(|e| e.to_string())?;
    Ok(format!("summary now covers {count} more turns"))
}
