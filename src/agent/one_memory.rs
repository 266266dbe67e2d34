//! One memory under every mode, the agent's side: what an agent keeps about the user is one of
//! the user's facts, listed, searched, edited and deleted as any other, and injected by implicit
//! mode.
//!
//! - A line added to `human` is a fact; a line an edit rewrites rewrites that fact (the old text
//!   stays in the fact's history); a line an edit drops retires the fact (kept, restorable).
//! - A new line retires the older facts it makes untrue ([`gates::supersedes`], the rule implicit
//!   mode's reconciliation and the block's own hygiene apply), so the newest statement wins
//!   whichever mode heard the older one.
//! - An archival passage about the user (written as the tools ask, "The user …") is stored as one
//!   of their facts, which `archival_memory_search` finds with the agent's passages.
//! - Lines written before this existed are adopted at start-up ([`adopt`]).
//!
//! The other direction (a fact rewritten or deleted elsewhere changes the block) is
//! [`crate::memory::human_lines`].

use super::{history, hygiene};
use crate::memory::human_lines::HUMAN;
use crate::memory::{MemoryError, MemoryResult, MemoryService, RetrievalRequest};
use crate::postprocess::gates;
use crate::store::{Inserted, StoreError, UserScope};

/// Stored facts searched for an older one a new line makes untrue.
const RIVALS: usize = 10;

/// What an edit of a `human` block did to its current lines (history lines and the placeholder
/// aside): lines rewritten (old, new), added and dropped.
#[derive(Debug, Default, PartialEq)]
pub struct HumanEdit {
    pub rewritten: Vec<(String, String)>,
    pub added: Vec<String>,
    pub dropped: Vec<String>,
}

/// The current lines of a `human` block: what it says holds now.
pub fn current_lines(value: &str) -> Vec<&str> {
    value
        .lines()
        .map(str::trim)
        .filter(|line| {
            !line.is_empty() && !history::is_history(line) && !hygiene::PLACEHOLDERS.contains(line)
        })
        .collect()
}

/// The edit from `before` to `after`. A line that left and one that came are paired in the order
/// they stand (an append that supersedes a line takes its place; a replace puts the new text
/// where the old was): each pair is a rewrite, the rest are additions or drops.
pub fn edit_of(before: &str, after: &str) -> HumanEdit {
    let (old, new) = (current_lines(before), current_lines(after));
    let dropped: Vec<String> = old
        .iter()
        .filter(|line| !new.contains(line))
        .map(|line| (*line).to_owned())
        .collect();
    let mut added: Vec<String> = new
        .iter()
        .filter(|line| !old.contains(line))
        .map(|line| (*line).to_owned())
        .collect();
    let pairs = dropped.len().min(added.len());
    let rest = added.split_off(pairs);
    let mut dropped = dropped;
    let left = dropped.split_off(pairs);
    HumanEdit {
        rewritten: dropped.into_iter().zip(added).collect(),
        added: rest,
        dropped: left,
    }
}

/// Whether an archival passage is a fact about the user: written as the tools ask such facts to
/// be written ("The user …", in the third person), and one core-memory hygiene would accept as a
/// `human` line (`said`: the user's messages of the turn). Anything else stays a passage of the
/// agent's own.
pub fn fact_about_the_user(passage: &str, said: &[String]) -> bool {
    hygiene::names_the_user(passage) && hygiene::check_fact(passage, said).is_ok()
}

/// Makes the user's facts say what an edit of agent `agent`'s `human` block did. `at_ms`: when it
/// was said. Every write is its own transaction; a failure is returned after the others ran
/// (start-up adoption repairs a line left without its fact).
pub async fn human_edited(
    memory: &MemoryService,
    scope: &UserScope,
    agent: &str,
    edit: HumanEdit,
    at_ms: i64,
    how: &str,
) -> MemoryResult<()> {
    let cause = format!("agent {agent}: {how}");
    let mut outcome = Ok(());
    for (old, new) in &edit.rewritten {
        let found = find(memory, scope, old).await?;
        let done = match found {
            Some(id) => match memory.update_memory(scope, id, new, &[], &cause).await {
                Ok(()) => Ok(Some(id)),
                // The new text is a live fact already (implicit mode learned it first): that one
                // stands, and the old one is retired.
                Err(MemoryError::Store(StoreError::DuplicateText)) => {
                    memory.retire_memory(scope, id, false, &cause).await?;
                    find(memory, scope, new).await
                }
                Err(error) => Err(error),
            },
            None => add(memory, scope, new, &cause, at_ms).await,
        };
        outcome = outcome.and(newest_wins(memory, scope, new, done, &cause).await);
    }
    for line in &edit.added {
        let done = add(memory, scope, line, &cause, at_ms).await;
        outcome = outcome.and(newest_wins(memory, scope, line, done, &cause).await);
    }
    for line in &edit.dropped {
        if let Some(id) = find(memory, scope, line).await? {
            outcome = outcome.and(memory.retire_memory(scope, id, false, &cause).await);
        }
    }
    outcome
}

/// Stores a fact the agent wrote outside `human` (an archival passage about the user), retiring
/// what it makes untrue.
pub async fn fact_saved(
    memory: &MemoryService,
    scope: &UserScope,
    agent: &str,
    text: &str,
    at_ms: i64,
    how: &str,
) -> MemoryResult<()> {
    let cause = format!("agent {agent}: {how}");
    let done = add(memory, scope, text.trim(), &cause, at_ms).await;
    newest_wins(memory, scope, text.trim(), done, &cause).await
}

/// The value of `agent`'s `human` block, if it has one (the `before` of an edit made by
/// replacing the whole block).
pub fn human_value(
    store: &dyn crate::store::Store,
    scope: &UserScope,
    agent: &str,
) -> crate::store::StoreResult<Option<String>> {
    Ok(store
        .core_blocks(scope, agent)?
        .into_iter()
        .find(|block| block.label == HUMAN)
        .map(|block| block.value))
}

/// [`human_edited`] for a whole block written from outside a turn (the management API, MCP, the
/// command line): a read-only block is the operator's, not what the agent learned.
pub async fn human_written(
    memory: &MemoryService,
    scope: &UserScope,
    agent: &str,
    before: Option<&str>,
    written: &crate::store::CoreBlock,
    how: &str,
) -> MemoryResult<()> {
    if written.label != HUMAN || written.read_only {
        return Ok(());
    }
    let edit = edit_of(before.unwrap_or_default(), &written.value);
    human_edited(memory, scope, agent, edit, crate::store::now_ms(), how).await
}

/// Writes a whole block from outside a turn (the management API, the command line) and makes the
/// user's facts say what it changed in `human` ([`human_written`]). `first` runs in the same
/// store call before the write (admission checks, creating the agent).
pub async fn put_block(
    memory: &MemoryService,
    scope: &UserScope,
    agent: &str,
    block: crate::store::CoreBlock,
    how: &str,
    first: impl FnOnce(&dyn crate::store::Store) -> MemoryResult<()> + Send + 'static,
) -> MemoryResult<()> {
    let (who, name, written) = (scope.clone(), agent.to_owned(), block.clone());
    let before = memory
        .blocking(move |store, _| {
            first(store)?;
            let before = human_value(store, &who, &name)?;
            store.put_core_block(&who, &name, &block)?;
            Ok(before)
        })
        .await?;
    human_written(memory, scope, agent, before.as_deref(), &written, how).await
}

async fn find(memory: &MemoryService, scope: &UserScope, text: &str) -> MemoryResult<Option<i64>> {
    let (scope, text) = (scope.clone(), text.to_owned());
    memory
        .blocking(move |store, _| Ok(store.live_memory_id(&scope, &text)?))
        .await
}

/// Adds `text` as a fact (a line too long for the configured memory length stays in the block
/// only); the id of the live fact that says it.
async fn add(
    memory: &MemoryService,
    scope: &UserScope,
    text: &str,
    cause: &str,
    at_ms: i64,
) -> MemoryResult<Option<i64>> {
    if memory.check_text(text).is_err() {
        return Ok(None);
    }
    let item = vec![crate::memory::NewFact::new(text, "fact", Vec::new())];
    let inserted = memory.add_memories_at(scope, item, cause, at_ms).await?;
    Ok(inserted.first().map(|inserted| match inserted {
        Inserted::New { id, .. } | Inserted::Duplicate { id } => *id,
    }))
}

/// Retires the stored facts that `text` (now fact `kept`) makes untrue.
async fn newest_wins(
    memory: &MemoryService,
    scope: &UserScope,
    text: &str,
    kept: MemoryResult<Option<i64>>,
    cause: &str,
) -> MemoryResult<()> {
    let kept = kept?;
    if !gates::states_one_at_a_time(text) {
        return Ok(());
    }
    let request = RetrievalRequest {
        query: text.to_owned(),
        corpora: vec![crate::store::Corpus::Memory],
        top_k: RIVALS,
        candidates: RIVALS * 2,
        ..RetrievalRequest::default()
    };
    for hit in memory.retrieve(scope, request).await? {
        if Some(hit.id) != kept && gates::supersedes(text, &hit.text) {
            tracing::info!(memory = hit.id, fact = %text, "newest wins: an older fact the agent's line makes untrue is retired");
            memory.retire_memory(scope, hit.id, false, cause).await?;
        }
    }
    Ok(())
}

/// Makes every current line of every agent's `human` block (unless read-only: an operator wrote
/// it) one of the user's facts, if no live fact says it: an existing database, whose agents
/// learned before a user had one memory, needs no manual step, and a line whose fact a crash kept
/// from being written gets it. Facts come without vectors; the backlog embedder adds them.
/// Returns how many facts were added.
pub async fn adopt(memory: &MemoryService) -> MemoryResult<usize> {
    let orphans = memory
        .blocking(|store, _| {
            let mut orphans = Vec::new();
            for tenant in store.list_tenants()? {
                for user in store.list_users(&tenant)? {
                    let scope = UserScope::new(tenant.clone(), user);
                    for agent in store.list_agents(&scope)? {
                        for block in store.core_blocks(&scope, &agent.name)? {
                            if block.label != HUMAN || block.read_only {
                                continue;
                            }
                            for line in current_lines(&block.value) {
                                if store.live_memory_id(&scope, line)?.is_none() {
                                    let at = block.updated_at_ms;
                                    orphans.push((
                                        scope.clone(),
                                        agent.name.clone(),
                                        line.to_owned(),
                                        at,
                                    ));
                                }
                            }
                        }
                    }
                }
            }
            Ok(orphans)
        })
        .await?;
    // A line longer than the configured memory length stays in the block only.
    let orphans: Vec<_> = orphans
        .into_iter()
        .filter(|(_, _, line, _)| memory.check_text(line).is_ok())
        .collect();
    memory
        .blocking(move |store, _| {
            let mut added = 0;
            for (scope, agent, text, at) in orphans {
                let fact = crate::store::NewMemory {
                    text,
                    kind: "fact".to_owned(),
                    sources: Vec::new(),
                    subject: None,
                    created_at_ms: at,
                    embedding: None,
                };
                let cause = format!("agent {agent}: adopted from core memory");
                if let Inserted::New { .. } = store.insert_memory(&scope, &fact, &cause)? {
                    added += 1;
                }
            }
            Ok(added)
        })
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_edit_pairs_what_left_with_what_came_in_order() {
        let before = "The user lives in Lisbon.\nThe user has a dog named Pixel.";
        let after = "The user lives in Porto.\nThe user has a dog named Pixel.\nThe user plays chess.\nUntil 2026-12-05, the user lived in Lisbon; since then: the user lives in Porto.";
        assert_eq!(
            edit_of(before, after),
            HumanEdit {
                rewritten: vec![(
                    "The user lives in Lisbon.".to_owned(),
                    "The user lives in Porto.".to_owned()
                )],
                added: vec!["The user plays chess.".to_owned()],
                dropped: Vec::new(),
            }
        );
        // The placeholder the first write replaces is no fact.
        let first = edit_of(hygiene::PLACEHOLDERS[0], "The user plays chess.");
        assert_eq!(first.added, vec!["The user plays chess.".to_owned()]);
        assert!(first.rewritten.is_empty() && first.dropped.is_empty());
        let emptied = edit_of(before, "The user has a dog named Pixel.");
        assert_eq!(
            emptied.dropped,
            vec!["The user lives in Lisbon.".to_owned()]
        );
    }
}
