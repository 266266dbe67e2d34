//! Facts from one explicit-mode turn, for the agent's background save: the extraction prompt on
//! the user's messages of the turn, one memory LLM call, and the same gates as implicit mode
//! (nothing the user did not say, no questions, no placeholders, no vaguer paraphrase of another
//! fact).

use super::fact::{facts_schema, grounded, parse_facts};
use super::gates::Evidence;
use super::grounding::Said;
use super::jobs::{earlier_naming, extraction_material, transcript};
use super::llm::{Answer, MemoryLlm};

/// The user's earlier messages that tell whether a word opening one of their sentences in
/// `turns` is someone's name ([`Evidence::with_earlier`]); none when they cannot be read (the
/// gates then judge on the turn alone).
pub async fn earlier(
    memory: &crate::memory::MemoryService,
    scope: &crate::store::UserScope,
    turns: &[(&str, &str)],
) -> Vec<String> {
    let openers = Evidence::new(turns.iter().copied()).sentence_openers();
    earlier_naming(memory, scope, openers)
        .await
        .unwrap_or_else(|error| {
            tracing::warn!(%error, "the user's earlier messages could not be read for names");
            Vec::new()
        })
}

/// The facts of `turns` (`(role, text)`: the user's messages, and the agent's reply) said at
/// `at_ms` that pass the gates (reading `earlier` for names: [`earlier`]), and how many were
/// refused.
pub async fn extract(
    llm: &MemoryLlm,
    prompt: &str,
    model: &str,
    turns: &[(&str, &str)],
    earlier: &[String],
    at_ms: i64,
) -> Result<(Vec<String>, usize), String> {
    if turns.is_empty() {
        return Ok((Vec::new(), 0));
    }
    let answer = llm
        .complete(
            model,
            prompt,
            &material(turns, at_ms),
            Answer::Json("facts", &facts_schema()),
        )
        .await
        .map_err(|e| e.to_string())?;
    read(&answer, turns, earlier, at_ms)
}

/// What the extraction prompt reads about `turns`: the date, then the messages.
pub fn material(turns: &[(&str, &str)], at_ms: i64) -> String {
    let new = transcript(turns.iter().map(|(role, text)| (at_ms, *role, *text)));
    extraction_material(at_ms, "", &new)
}

/// The facts an extraction `answer` about `turns` gives that pass the gates, and how many were
/// refused; an answer with no list of facts in it is an error.
pub fn read(
    answer: &str,
    turns: &[(&str, &str)],
    earlier: &[String],
    at_ms: i64,
) -> Result<(Vec<String>, usize), String> {
    let evidence = Evidence::new(turns.iter().copied())
        .said_at(at_ms)
        .with_earlier(earlier);
    let mut kept = Vec::new();
    let mut refused = 0;
    let said: Vec<Said<'_>> = turns
        .iter()
        .map(|(role, text)| Said { role, text })
        .collect();
    for mut fact in parse_facts(answer)? {
        // Only what the user stated (see `grounding`).
        let checked = grounded(&fact, &said, evidence.has_rules())
            .and_then(|found| found.unsaid_check(&[]).map_err(super::fact::rejection));
        if let Err(reason) = checked {
            tracing::info!(reason = reason.as_str(), text = %fact.text, quote = ?fact.quote, about = ?fact.about, "background save: fact refused");
            refused += 1;
            continue;
        }
        if let Some(undated) = evidence.undated(&fact.text) {
            fact.text = undated;
        }
        if let Some(told) = evidence.as_told(&fact.text) {
            fact.text = told;
        }
        // Checked as written, stored with its relative day made a date (see `reconcile`).
        let resolved = evidence.resolved(&fact.text);
        match evidence.check(&fact.text) {
            Ok(()) => kept.push(resolved.unwrap_or(fact.text)),
            Err(reason) => {
                tracing::info!(reason = reason.as_str(), text = %fact.text, "background save: fact refused");
                refused += 1;
            }
        }
    }
    // A paraphrase beside the fact as told says less, in words the user never said.
    let all = kept.clone();
    kept.retain(|fact| {
        let vaguer = all
            .iter()
            .any(|other| other != fact && evidence.vaguer_than(fact, other));
        if vaguer {
            tracing::info!(reason = "vaguer", text = %fact, "background save: fact refused");
            refused += 1;
        }
        !vaguer
    });
    Ok((kept, refused))
}
