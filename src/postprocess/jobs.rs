//! The memory jobs: extract facts from new turns and reconcile them with what is stored, and
//! refresh a conversation's rolling summary. Each reads the recall log (the client's own turns:
//! never the injected memory block, never the client's system prompt), asks the memory LLM, and
//! only then writes; a malformed answer fails the job before anything is changed.

use super::fact::{facts_schema, grounded, parse_facts};
use super::gates::Evidence;
use super::grounding::Said;
use super::llm::Answer;
use super::reconcile::{reconcile, Origin};
use super::PostProcessor;
use crate::dates::ymd_weekday;
use crate::store::{now_ms, Job, Page, Source, StoredMessage, Summary, UserScope};
use crate::strategy::inject::strip_blocks;

/// Earlier turns shown with the new ones, to understand them (not to extract from).
const CONTEXT_TURNS: usize = 4;

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

/// The user's stored messages read per word that opens one of their new sentences, for whether
/// the word is someone's name ([`Evidence::with_earlier`]).
const EARLIER_PER_OPENER: usize = 20;

/// The user's earlier messages (any conversation) that hold one of `openers`, without any
/// injected memory block: what [`Evidence::with_earlier`] reads.
pub(super) async fn earlier_naming(
    memory: &crate::memory::MemoryService,
    scope: &UserScope,
    openers: Vec<String>,
) -> Result<Vec<String>, String> {
    let texts = memory
        .said_with(scope, openers, EARLIER_PER_OPENER)
        .await
        .map_err(|e| e.to_string())?;
    Ok(texts.iter().map(|text| strip_blocks(text)).collect())
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
    let mut facts = parse_facts(&answer)?;
    // A configured memory length below a fact's is the operator's bound, not the model's error.
    facts.retain(|fact| pp.memory.check_text(&fact.text).is_ok());
    // What the facts may be drawn from: the user's words (also of the context turns) and the
    // assistant's lines of the new turns, never an injected memory block.
    let said: Vec<(&str, String)> = context
        .iter()
        .filter(|m| m.role == "user")
        .chain(new)
        .map(|m| (m.role.as_str(), strip_blocks(&m.content)))
        .collect();
    let mut evidence = Evidence::new(said.iter().map(|(role, text)| (*role, text.as_str())));
    if let Some(at) = new.iter().map(|m| m.created_at_ms).max() {
        evidence = evidence.said_at(at);
    }
    let earlier = earlier_naming(&pp.memory, scope, evidence.sentence_openers()).await?;
    evidence = evidence.with_earlier(&earlier);
    let sources: Vec<Source> = new
        .iter()
        .map(|m| Source {
            conversation: conversation.to_owned(),
            position: m.position,
            quote: None,
        })
        .collect();
    // The same turns as stored: where each was said (a branch's first turns are its parent's).
    let read: Vec<&StoredMessage> = context
        .iter()
        .filter(|m| m.role == "user")
        .chain(new)
        .collect();
    let turns_said: Vec<Said<'_>> = said
        .iter()
        .map(|(role, text)| Said {
            role,
            text: text.as_str(),
        })
        .collect();
    for fact in &mut facts {
        let found = grounded(fact, &turns_said, evidence.has_rules());
        fact.told = found
            .as_ref()
            .ok()
            .and_then(|found| turns_said.get(found.turn))
            .filter(|said| said.role == "user")
            .map(|said| said.text.to_owned());
        fact.grounding = Some(found.map(|found| {
            let turn = read[found.turn];
            let source = Source {
                conversation: turn.conversation.clone(),
                position: turn.position,
                quote: Some(found.quote.clone()),
            };
            (source, found)
        }));
    }
    let origin = Origin {
        job: Some(job.id),
        model: field(job, "model"),
        cause: format!(
            "job {}: {} of conversation {conversation}",
            job.id, job.kind
        ),
        stated: false,
    };
    let reconciled = reconcile(
        pp,
        &origin,
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
    Ok(reconciled.report)
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
