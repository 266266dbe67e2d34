//! Background consolidation of a user's facts (Letta's sleep-time idea, for implicit memory).
//!
//! A durable per-user job, queued after extraction and debounced (`memory.consolidation_delay`),
//! at most `memory.consolidation_runs_per_day` runs per user per day. It works on what is stored:
//! - **junk the gates missed** (stored before a gate existed, or imported) is retired;
//! - a fact **contained in another** (every content word, the same negations) is retired;
//! - the largest group of **scattered facts about one subject** (three or more, close in vector
//!   space) is rewritten by the memory LLM into fewer facts: one call. The answer passes the gates:
//!   each new fact well formed and drawn from the group's words, every fact of the group still
//!   said by the merged ones (with every name and number), fewer facts than before. Else nothing
//!   changes.
//!
//! Nothing is deleted: a retired memory is kept with its audit event ("consolidation job N: …")
//! and `POST …/memories/{id}/restore` undoes it.

use std::collections::HashSet;

use serde_json::{json, Value};

use super::gates;
use super::llm::{json_object, Answer};
use super::PostProcessor;
use crate::embed::cosine;
use crate::language::content_words;
use crate::memory::NewFact;
use crate::store::{now_ms, Corpus, Job, Memory, Page, Source, UserScope};

/// Facts closer than this (cosine) are about one subject.
const SAME_SUBJECT: f32 = 0.55;
/// The smallest group worth a merge.
const MIN_GROUP: usize = 3;
/// The largest group sent to the memory LLM.
const MAX_GROUP: usize = 8;
/// Most facts one run reads (newest first).
const MAX_FACTS: usize = 500;
/// Share of a merged fact's content words that must come from its group.
const MERGE_GROUNDED_SHARE: f64 = 0.8;

const DAY_MS: i64 = 86_400_000;

pub async fn consolidate(
    pp: &PostProcessor,
    job: &Job,
    scope: &UserScope,
) -> Result<String, String> {
    let cause = |what: &str| format!("consolidation job {}: {what}", job.id);
    let (budget_scope, kind) = (scope.clone(), job.kind.clone());
    let runs = pp
        .memory
        .blocking(move |store, _| {
            Ok(store.count_done_jobs(&budget_scope, &kind, now_ms() - DAY_MS)?)
        })
        .await
        .map_err(|e| e.to_string())?;
    if runs >= pp.config.consolidation_runs_per_day {
        return Ok(format!("skipped: {runs} runs in the last 24 h"));
    }
    let (read_scope, model) = (scope.clone(), pp.memory.embedder().model_id().to_owned());
    let (mut facts, vectors) = pp
        .memory
        .blocking(move |store, _| {
            let page = Page {
                limit: MAX_FACTS,
                offset: 0,
            };
            let facts = store.list_memories(&read_scope, false, page)?;
            let vectors = match store.find_user(&read_scope)? {
                Some(uid) => store.embeddings(uid, Corpus::Memory, &model)?,
                None => Vec::new(),
            };
            Ok((facts, vectors))
        })
        .await
        .map_err(|e| e.to_string())?;
    let mut report = Vec::new();

    let mut retire = Vec::new();
    for fact in &facts {
        if let Err(reason) =
            gates::check_form(&fact.text).and_then(|()| gates::check_person(&fact.text))
        {
            retire.push((fact.id, cause(&format!("junk ({})", reason.as_str()))));
        }
    }
    let junk = retire.len();
    for (id, by) in contained(&facts, &retire) {
        retire.push((id, cause(&format!("contained in memory {by}"))));
    }
    let contained_count = retire.len() - junk;
    for (id, why) in &retire {
        pp.memory
            .retire_memory(scope, *id, false, why)
            .await
            .map_err(|e| e.to_string())?;
    }
    facts.retain(|f| !retire.iter().any(|(id, _)| *id == f.id));
    if junk > 0 {
        report.push(format!("{junk} junk retired"));
    }
    if contained_count > 0 {
        report.push(format!("{contained_count} contained retired"));
    }

    // Pairwise similarity of up to MAX_FACTS vectors: CPU work, kept off the async runtime.
    let group = tokio::task::spawn_blocking(move || largest_group(&facts, &vectors))
        .await
        .map_err(|e| e.to_string())?;
    if let Some(group) = group {
        report.push(merge(pp, job, scope, &group, &cause).await?);
    }
    Ok(if report.is_empty() {
        "nothing to consolidate".to_owned()
    } else {
        report.join(", ")
    })
}

fn negations(text: &str) -> HashSet<String> {
    text.to_lowercase()
        .split(|c: char| !c.is_alphanumeric() && c != '\'')
        .filter(|w| {
            crate::language::words().consolidate_negations.contains(w) || w.ends_with("n't")
        })
        .map(str::to_owned)
        .collect()
}

/// Facts every content word of which another (longer) fact also says, with the same negations:
/// (contained fact, the one containing it). Facts in `skip` are left out.
fn contained(facts: &[Memory], skip: &[(i64, String)]) -> Vec<(i64, i64)> {
    let live: Vec<(&Memory, HashSet<String>, HashSet<String>)> = facts
        .iter()
        .filter(|f| !skip.iter().any(|(id, _)| *id == f.id))
        .map(|f| (f, content_words(&f.text), negations(&f.text)))
        .collect();
    let mut found: Vec<(i64, i64)> = Vec::new();
    for (fact, words, negs) in &live {
        if words.len() < 2 {
            continue;
        }
        let by = live.iter().find(|(other, other_words, other_negs)| {
            other.id != fact.id
                && !found.iter().any(|(id, _)| *id == other.id)
                && other_words.len() > words.len()
                && words.is_subset(other_words)
                && negs == other_negs
        });
        if let Some((other, _, _)) = by {
            found.push((fact.id, other.id));
        }
    }
    found
}

/// The largest group (single link, cosine ≥ [`SAME_SUBJECT`], subjects not known to differ) of
/// at least [`MIN_GROUP`] facts, its newest [`MAX_GROUP`].
fn largest_group(facts: &[Memory], vectors: &[(i64, Vec<f32>)]) -> Option<Vec<Memory>> {
    let with_vectors: Vec<(&Memory, &Vec<f32>)> = facts
        .iter()
        .filter_map(|f| {
            vectors
                .iter()
                .find(|(id, _)| *id == f.id)
                .map(|(_, v)| (f, v))
        })
        .collect();
    let n = with_vectors.len();
    let mut group_of: Vec<usize> = (0..n).collect();
    fn root(group_of: &mut [usize], mut i: usize) -> usize {
        while group_of[i] != i {
            group_of[i] = group_of[group_of[i]];
            i = group_of[i];
        }
        i
    }
    for i in 0..n {
        for j in i + 1..n {
            let (a, b) = (with_vectors[i].0, with_vectors[j].0);
            if crate::store::same_subject(a.subject.as_deref(), b.subject.as_deref())
                && cosine(with_vectors[i].1, with_vectors[j].1) >= SAME_SUBJECT
            {
                let (a, b) = (root(&mut group_of, i), root(&mut group_of, j));
                group_of[a] = b;
            }
        }
    }
    let mut groups: std::collections::BTreeMap<usize, Vec<Memory>> = Default::default();
    for (i, (fact, _)) in with_vectors.iter().enumerate() {
        let r = root(&mut group_of, i);
        groups.entry(r).or_default().push((*fact).clone());
    }
    let mut group = groups.into_values().max_by_key(Vec::len)?;
    if group.len() < MIN_GROUP {
        return None;
    }
    group.sort_by_key(|f| std::cmp::Reverse(f.created_at_ms));
    group.truncate(MAX_GROUP);
    Some(group)
}

/// Names and numbers of a text: words with a capital or a digit past its first word.
fn key_tokens(text: &str) -> HashSet<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .skip(1)
        .filter(|w| w.chars().any(|c| c.is_ascii_digit()) || w.starts_with(char::is_uppercase))
        .map(str::to_lowercase)
        .collect()
}

/// Whether a merge of `group` into `merged` passes: fewer facts, each well formed and drawn from
/// the group's words, every fact of the group still said by them together (a merge rewrites, it
/// never drops: a small model's "merge" that keeps two facts and leaves out the third would retire
/// that third fact unsaid), and every name and number of the group kept.
pub(super) fn check_merge(group: &[&str], merged: &[String]) -> Result<(), String> {
    if merged.is_empty() || merged.len() >= group.len() {
        return Err(format!("{} facts for {}", merged.len(), group.len()));
    }
    let words: HashSet<String> = group.iter().flat_map(|t| content_words(t)).collect();
    for text in merged {
        gates::check_form(text).map_err(|r| r.as_str().to_owned())?;
        let own = content_words(text);
        let drawn = own.iter().filter(|w| words.contains(*w)).count();
        if !own.is_empty() && (drawn as f64) < MERGE_GROUNDED_SHARE * own.len() as f64 {
            return Err("ungrounded".to_owned());
        }
    }
    let kept: HashSet<String> = merged.iter().flat_map(|t| key_tokens(t)).collect();
    let lost: std::collections::BTreeSet<String> = group
        .iter()
        .flat_map(|t| key_tokens(t))
        .filter(|k| !kept.contains(k))
        .collect();
    if !lost.is_empty() {
        let lost: Vec<String> = lost.into_iter().collect();
        return Err(format!("loses {}", lost.join(", ")));
    }
    let together = merged.join(" ");
    if let Some(dropped) = group.iter().find(|fact| !gates::covers(&together, fact)) {
        return Err(format!("drops \"{dropped}\""));
    }
    Ok(())
}

fn merge_schema(group: usize) -> Value {
    json!({"type": "object", "additionalProperties": false, "required": ["facts"],
    "properties": {"facts": {"type": "array", "maxItems": group.saturating_sub(1).max(1), "items": {
        "type": "object", "additionalProperties": false, "required": ["text"],
        "properties": {"text": {"type": "string", "minLength": 10, "maxLength": 400}}}}}})
}

/// One memory LLM call: the group rewritten into fewer facts, applied only if it passes.
async fn merge(
    pp: &PostProcessor,
    job: &Job,
    scope: &UserScope,
    group: &[Memory],
    cause: &(dyn Fn(&str) -> String + Sync),
) -> Result<String, String> {
    let material: Vec<String> = group
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let text = crate::strategy::inject::quoted(&f.text);
            format!("M{i} [{}] {text}", crate::dates::ymd(f.created_at_ms))
        })
        .collect();
    let model = job.payload["model"].as_str().unwrap_or_default();
    let answer = pp
        .llm
        .complete(
            model,
            &pp.prompts.consolidate,
            &format!("Stored facts:\n{}\n", material.join("\n")),
            Answer::Json("facts", &merge_schema(group.len())),
        )
        .await
        .map_err(|e| e.to_string())?;
    let object = json_object(&answer).map_err(|e| e.to_string())?;
    let merged: Vec<String> = object["facts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| f["text"].as_str().or_else(|| f.as_str()))
        .map(|t| t.trim().to_owned())
        .filter(|t| !t.is_empty())
        .collect();
    let texts: Vec<&str> = group.iter().map(|f| f.text.as_str()).collect();
    if let Err(reason) = check_merge(&texts, &merged) {
        tracing::info!(job = job.id, %reason, "consolidation merge rejected");
        pp.metrics.count_rejection("merge");
        return Ok(format!("merge of {} rejected ({reason})", group.len()));
    }
    // The merged facts hold from when the newest of the group was said, and come from its turns.
    let said_at = group
        .iter()
        .map(|f| f.created_at_ms)
        .max()
        .unwrap_or_else(now_ms);
    let mut sources: Vec<Source> = Vec::new();
    for source in group.iter().flat_map(|f| f.sources.iter()) {
        if !sources.contains(source) {
            sources.push(source.clone());
        }
    }
    let ids: Vec<String> = group.iter().map(|f| f.id.to_string()).collect();
    let why = cause(&format!("merge of memories {}", ids.join(", ")));
    // The group's subject, where its facts name one and no other.
    let mut known = group.iter().filter_map(|f| f.subject.as_deref());
    let subject = known
        .next()
        .filter(|first| known.all(|s| crate::store::same_subject(Some(first), Some(s))))
        .map(str::to_owned);
    let items = merged
        .iter()
        .map(|t| NewFact::new(t.clone(), "fact", sources.clone()).about(subject.clone()))
        .collect();
    let added = pp
        .memory
        .add_memories_at(scope, items, &why, said_at)
        .await
        .map_err(|e| e.to_string())?
        .iter()
        .filter(|i| matches!(i, crate::store::Inserted::New { .. }))
        .count();
    let mut retired = 0;
    for fact in group {
        // A fact the merge kept word for word stays as it is.
        if merged.iter().any(|m| m == &fact.text) {
            continue;
        }
        pp.memory
            .retire_memory(scope, fact.id, false, &why)
            .await
            .map_err(|e| e.to_string())?;
        retired += 1;
    }
    Ok(format!(
        "{} merged into {} ({retired} retired, {added} new)",
        group.len(),
        merged.len()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn memory(id: i64, text: &str) -> Memory {
        Memory {
            id,
            text: text.to_owned(),
            kind: "fact".to_owned(),
            sources: Vec::new(),
            created_at_ms: id,
            updated_at_ms: id,
            valid_until_ms: None,
            embedding_model: None,
            subject: None,
        }
    }

    #[test]
    fn facts_about_different_people_are_never_one_group() {
        let about = |id: i64, subject: Option<&str>| Memory {
            subject: subject.map(str::to_owned),
            ..memory(id, &format!("Fact {id}."))
        };
        // Four facts close enough in vector to be one group.
        let vectors: Vec<(i64, Vec<f32>)> = (1..=4)
            .map(|id| (id, vec![1.0, 0.01 * id as f32]))
            .collect();
        let facts = [
            about(1, Some("user")),
            about(2, Some("Ana")),
            about(3, Some("user")),
            about(4, Some("user")),
        ];
        let group = largest_group(&facts, &vectors).expect("a group");
        let ids: Vec<i64> = group.iter().map(|f| f.id).collect();
        assert_eq!(ids, [4, 3, 1], "Ana's fact stays out of the user's group");
        // A fact whose subject no one gave may join either.
        let facts = [
            about(1, Some("user")),
            about(2, None),
            about(3, Some("user")),
        ];
        assert_eq!(largest_group(&facts, &vectors).map(|g| g.len()), Some(3));
    }

    #[test]
    fn a_fact_another_says_in_full_is_contained_unless_negated() {
        let facts = [
            memory(1, "The user lives in Lisbon."),
            memory(2, "The user lives in Lisbon with a dog named Pixel."),
            memory(3, "The user eats meat."),
            memory(4, "The user does not eat meat on Fridays."),
        ];
        assert_eq!(contained(&facts, &[]), [(1, 2)]);
    }

    #[test]
    fn a_merge_must_be_shorter_grounded_and_keep_every_name() {
        let group = [
            "The user has a dog named Pixel.",
            "The user walks Pixel by the river.",
            "Pixel is three years old.",
        ];
        let good = vec![
            "The user has a dog named Pixel, three years old, walked by the river.".to_owned(),
        ];
        assert_eq!(check_merge(&group, &good), Ok(()));
        let invented = vec!["The user has a golden retriever puppy named Pixel.".to_owned()];
        assert_eq!(check_merge(&group, &invented), Err("ungrounded".to_owned()));
        let lost = vec!["The user has a dog, three years old, walked by the river.".to_owned()];
        assert_eq!(check_merge(&group, &lost), Err("loses pixel".to_owned()));
        let placeholder = vec!["...".to_owned()];
        assert!(check_merge(&group, &placeholder).is_err());
        let same_size: Vec<String> = group.iter().map(|t| (*t).to_owned()).collect();
        assert!(check_merge(&group, &same_size).is_err());
    }

    #[test]
    fn a_merge_that_leaves_a_fact_out_is_refused() {
        // Seen from a real memory LLM: two of three facts returned as they were, the third left
        // out, which retired it unsaid.
        let group = [
            "The user is Ines, 34 years old, learning the cello.",
            "The user has been playing the cello for about eight months.",
            "The user's teacher is Dorota Sikorska, 71 years old.",
        ];
        let dropped = vec![group[0].to_owned(), group[2].to_owned()];
        assert_eq!(
            check_merge(&group, &dropped),
            Err(format!("drops \"{}\"", group[1]))
        );
        let kept = vec![
            "The user is Ines, 34 years old, learning the cello and playing it for about eight months."
                .to_owned(),
            group[2].to_owned(),
        ];
        assert_eq!(check_merge(&group, &kept), Ok(()));
    }
}
