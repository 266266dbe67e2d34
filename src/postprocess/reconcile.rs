//! Reconciliation: new facts against the stored memories they resemble. Exact duplicates,
//! restatements ([`super::restated`]) and whatever the gates refuse go first; the memory LLM then decides per fact (ADD, UPDATE of a
//! stored memory, INVALIDATE one it contradicts, NOOP), and the decisions are applied so that one
//! stale or malformed decision never loses the other facts. Used by the extraction job and by
//! `add_memory` over MCP ([`super::PostProcessor::remember`]).

use std::collections::HashMap;

use super::changed::{self, Change, Older};
use super::decisions::{decide, Decision};
use super::fact::Fact;
use super::gates::{self, Evidence, Rejection};
use super::{restated, PostProcessor};
use crate::embed::cosine;
use crate::memory::{MemoryError, NewFact, RetrievalRequest};
use crate::store::{content_hash, Corpus, Inserted, Source, StoreError, UserScope};

/// Stored memories compared with each new fact.
const CANDIDATES_PER_FACT: usize = 5;

/// Stored memories searched for an older home, job or workplace a new fact supersedes.
const RIVALS_PER_FACT: usize = 10;

/// How alike (cosine) an older memory must be to a new fact to be put to the change check: the
/// candidates' own bar, so that the check reads what the reconcile call was shown.
const CHANGE_SIMILARITY: f32 = 0.5;

/// Where the facts come from.
pub(super) struct Origin<'a> {
    /// The job, for the logs (none for a fact saved over MCP).
    pub job: Option<i64>,
    /// The chat's model (the memory LLM's when `memory.llm.model` is not set).
    pub model: &'a str,
    /// The audit log's cause of every change.
    pub cause: String,
    /// Facts the user stated as facts to keep (over MCP): only the duplicate check and the
    /// reconciliation apply, not the gates for facts a model drew from a chat.
    pub stated: bool,
}

/// What became of one fact: `added`, `updated`, `invalidated` (an older memory retired, the fact
/// added), `unchanged`, `duplicate` or `rejected (reason)`, and the memory that now holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FactOutcome {
    pub event: String,
    pub memory: Option<i64>,
    /// The memory an invalidation retired (an update keeps its memory's id).
    pub replaced: Option<i64>,
}

pub(super) struct Reconciled {
    /// "2 added, 1 rejected (question)", sorted.
    pub report: String,
    /// One per fact, in order.
    pub outcomes: Vec<FactOutcome>,
}

pub(super) async fn reconcile(
    pp: &PostProcessor,
    origin: &Origin<'_>,
    scope: &UserScope,
    facts: Vec<Fact>,
    evidence: &Evidence,
    sources: Vec<Source>,
    said_at_ms: i64,
) -> Result<Reconciled, String> {
    let mut counts: HashMap<String, usize> = HashMap::new();
    let mut outcomes: Vec<Option<FactOutcome>> = facts.iter().map(|_| None).collect();
    let outcome = |event: &str, memory: Option<i64>, replaced: Option<i64>| FactOutcome {
        event: event.to_owned(),
        memory,
        replaced,
    };
    let reject = |counts: &mut HashMap<String, usize>, text: &str, reason: Rejection| {
        tracing::info!(
            job = origin.job,
            cause = %origin.cause,
            reason = reason.as_str(),
            text,
            "memory fact rejected"
        );
        pp.metrics.count_rejection(reason.as_str());
        let label = format!("rejected ({})", reason.as_str());
        *counts.entry(label.clone()).or_default() += 1;
        label
    };
    let overruled = |counts: &mut HashMap<String, usize>, action: &str, text: &str| {
        tracing::info!(job = origin.job, cause = %origin.cause, action, text, "memory LLM decision overruled: the fact is added");
        *counts.entry(format!("overruled ({action})")).or_default() += 1;
    };
    // Exact duplicates (of each other and of stored facts) go before any LLM call, and so does
    // whatever the gates refuse.
    let mut seen = std::collections::HashSet::new();
    let mut fresh: Vec<(usize, Fact)> = Vec::new();
    let mut candidates: Vec<(i64, String, i64)> = Vec::new();
    // Stored memories a new fact may supersede, beyond the candidates.
    let mut rivals: Vec<(i64, String, i64)> = Vec::new();
    // The facts of this batch kept so far, with their vectors.
    let mut accepted: Vec<(String, Vec<f32>)> = Vec::new();
    // Per fact, the older memories of its subject the change check reads ([`changed`]).
    let mut checks: HashMap<usize, Vec<Older>> = HashMap::new();
    for (index, mut fact) in facts.into_iter().enumerate() {
        // The gates read a fact as the model wrote it: a resolved date is no word of the user's
        // (with one, "The user ate grass this morning." no longer read as the cat's).
        let mut as_written: Option<String> = None;
        if !origin.stated {
            // A date the user never gave is cut out; the fact itself may well be right.
            if let Some(undated) = evidence.undated(&fact.text) {
                tracing::info!(job = origin.job, from = %fact.text, to = %undated, "memory fact: invented date removed");
                *counts.entry("undated".to_owned()).or_default() += 1;
                fact.text = undated;
            }
            if let Some(told) = evidence.as_told(&fact.text) {
                tracing::info!(job = origin.job, from = %fact.text, to = %told, "memory fact: put in the tense the user told it");
                *counts.entry("tense".to_owned()).or_default() += 1;
                fact.text = told;
            }
            if let Some(resolved) = evidence.resolved(&fact.text) {
                tracing::info!(job = origin.job, from = %fact.text, to = %resolved, "memory fact: relative day resolved");
                *counts.entry("dated".to_owned()).or_default() += 1;
                as_written = Some(std::mem::replace(&mut fact.text, resolved));
            }
            if let Err(reason) = gates::check_form(&fact.text) {
                let label = reject(&mut counts, &fact.text, reason);
                outcomes[index] = Some(outcome(&label, None, None));
                continue;
            }
        }
        // (A repeat of an earlier fact of the same batch: that one's outcome says where it went.)
        if !seen.insert(content_hash(&fact.text)) {
            *counts.entry("duplicate".to_owned()).or_default() += 1;
            outcomes[index] = Some(outcome("duplicate", None, None));
            continue;
        }
        let hits = similar(pp, scope, &fact.text, CANDIDATES_PER_FACT, 0.5).await?;
        if let Some(same) = hits
            .iter()
            .find(|h| content_hash(&h.text) == content_hash(&fact.text))
        {
            *counts.entry("duplicate".to_owned()).or_default() += 1;
            outcomes[index] = Some(outcome("duplicate", Some(same.id), None));
            continue;
        }
        let known: Vec<&str> = hits.iter().map(|h| h.text.as_str()).collect();
        if !origin.stated {
            let checked = as_written.as_deref().unwrap_or(&fact.text);
            if let Err(reason) = evidence.check_knowing(checked, &known) {
                let label = reject(&mut counts, &fact.text, reason);
                outcomes[index] = Some(outcome(&label, None, None));
                continue;
            }
        }
        // A fact whose source is not the user's own statement is not the user's (checked last,
        // so that the gates above name what they recognise).
        let grounded = match &fact.grounding {
            Some(Ok((_, found))) => found.unsaid_check(&known).map_err(super::fact::rejection),
            Some(Err(reason)) => Err(*reason),
            None => Ok(()),
        };
        if let Err(reason) = grounded {
            let label = reject(&mut counts, &fact.text, reason);
            outcomes[index] = Some(outcome(&label, None, None));
            continue;
        }
        // One fact, one memory: what a live memory or an earlier fact of this batch already says
        // is not stored again ([`restated`]).
        let bar = pp.config.restatement_similarity;
        if let Some(same) = hits.iter().find(|h| {
            h.similarity
                .is_some_and(|s| restated::restates(&fact.text, &h.text, s, bar))
        }) {
            *counts.entry("restated".to_owned()).or_default() += 1;
            outcomes[index] = Some(outcome("duplicate", Some(same.id), None));
            continue;
        }
        let vector = pp
            .memory
            .embed(vec![fact.text.clone()])
            .await
            .map_err(|e| e.to_string())?
            .pop()
            .map(|e| e.vector)
            .unwrap_or_default();
        if accepted
            .iter()
            .any(|(text, v)| restated::restates(&fact.text, text, cosine(&vector, v), bar))
        {
            *counts.entry("restated".to_owned()).or_default() += 1;
            outcomes[index] = Some(outcome("duplicate", None, None));
            continue;
        }
        accepted.push((fact.text.clone(), vector));
        let subject = fact.subject();
        let mut older: Vec<&crate::memory::Hit> = hits
            .iter()
            .filter(|h| {
                h.created_at_ms < said_at_ms
                    && h.similarity.is_some_and(|s| s >= CHANGE_SIMILARITY)
                    && crate::store::same_subject(subject.as_deref(), h.subject.as_deref())
            })
            .collect();
        older.sort_by(|a, b| {
            b.similarity
                .partial_cmp(&a.similarity)
                .unwrap_or(std::cmp::Ordering::Equal)
        });
        older.truncate(pp.config.change_checks);
        let older = older.into_iter().map(|h| Older {
            id: h.id,
            text: h.text.clone(),
            at: h.created_at_ms,
        });
        checks.insert(index, older.collect());
        for hit in hits {
            if !candidates.iter().any(|(id, _, _)| *id == hit.id) {
                candidates.push((hit.id, hit.text, hit.created_at_ms));
            }
        }
        // A new home, job or workplace: the old one may read too differently to be a candidate
        // ("is now an engineer at Contoso" and "works as an analyst at Fabrikam"), so it is
        // looked for more widely, for the newest-wins rule only.
        if gates::states_one_at_a_time(&fact.text) {
            for hit in similar(pp, scope, &fact.text, RIVALS_PER_FACT, 0.2).await? {
                if gates::supersedes(&fact.text, &hit.text)
                    && !rivals.iter().any(|(id, _, _)| *id == hit.id)
                {
                    rivals.push((hit.id, hit.text, hit.created_at_ms));
                }
            }
        }
        fresh.push((index, fact));
    }
    // A fact that says less than another of this batch, in words the user never said, is a
    // paraphrase of it: only the other is kept.
    if !origin.stated {
        let texts: Vec<String> = fresh.iter().map(|(_, fact)| fact.text.clone()).collect();
        fresh.retain(|(index, fact)| {
            let vaguer = texts
                .iter()
                .any(|other| *other != fact.text && evidence.vaguer_than(&fact.text, other));
            if vaguer {
                let label = reject(&mut counts, &fact.text, Rejection::Vaguer);
                outcomes[*index] = Some(outcome(&label, None, None));
            }
            !vaguer
        });
    }
    let finish =
        |counts: HashMap<String, usize>, outcomes: Vec<Option<FactOutcome>>, empty| Reconciled {
            report: report_of(counts, empty),
            outcomes: outcomes.into_iter().flatten().collect(),
        };
    if fresh.is_empty() {
        return Ok(finish(counts, outcomes, "no new facts"));
    }
    let decisions = if pp.config.add_only || candidates.is_empty() {
        fresh.iter().map(|_| Decision::Add).collect()
    } else {
        let facts: Vec<&Fact> = fresh.iter().map(|(_, fact)| fact).collect();
        decide(pp, origin.model, &facts, &candidates).await?
    };
    // Memories this job already changed: a second decision about one of them saw text that is
    // no longer there, so its fact is added instead.
    let mut touched = std::collections::HashSet::new();
    // Texts this job wrote (content hashes).
    let mut written = std::collections::HashSet::new();
    for ((index, fact), decision) in fresh.into_iter().zip(decisions) {
        let decision = match decision {
            // The memory was already replaced in this job, by the very text this update asks
            // for ("lives in Lisbon" retired by "lives in Porto", then updated to it).
            Decision::Update(id, text)
                if touched.contains(&id) && written.contains(&content_hash(&text)) =>
            {
                *counts.entry("duplicate".to_owned()).or_default() += 1;
                outcomes[index] = Some(outcome("duplicate", None, None));
                continue;
            }
            Decision::Update(id, _) | Decision::Invalidate(id) if touched.contains(&id) => {
                tracing::info!(job = origin.job, memory = id, fact = %fact.text, "a second decision about one memory in one job: the fact is added instead");
                Decision::Add
            }
            // An update must keep the subject of the memory it rewrites (a small model's "..."
            // or an unrelated sentence would destroy a correct fact): else the fact is added.
            // And it must carry the new fact: an update that keeps the old text (or rewrites it
            // into something else) would drop the fact.
            Decision::Update(id, text) => {
                let old = candidates.iter().find(|(c, _, _)| *c == id);
                match old.map(|(_, old, _)| evidence.check_update(old, &text)) {
                    Some(Err(reason)) => {
                        reject(&mut counts, &text, reason);
                        Decision::Add
                    }
                    _ if !gates::carries(&text, &fact.text) => {
                        overruled(&mut counts, "update", &fact.text);
                        Decision::Add
                    }
                    _ => Decision::Update(id, text),
                }
            }
            // A NOOP only when a stored memory already says it, an INVALIDATE only of a memory
            // about the same thing: else the fact is added (nothing is lost).
            Decision::Noop(memory) => {
                let named: Vec<&str> = candidates
                    .iter()
                    .filter(|(id, _, _)| memory.is_none_or(|m| m == *id))
                    .map(|(_, text, _)| text.as_str())
                    .collect();
                if named.iter().any(|old| gates::covers(old, &fact.text)) {
                    Decision::Noop(memory)
                } else {
                    overruled(&mut counts, "noop", &fact.text);
                    Decision::Add
                }
            }
            Decision::Invalidate(id) => {
                let old = candidates.iter().find(|(c, _, _)| *c == id);
                if old.is_some_and(|(_, old, _)| gates::same_topic(&fact.text, old)) {
                    Decision::Invalidate(id)
                } else {
                    overruled(&mut counts, "invalidate", &fact.text);
                    Decision::Add
                }
            }
            decision => decision,
        };
        // The newest fact wins: older memories this one makes untrue are retired (kept as
        // history), whatever the memory LLM decided about them; an ADD retires the first itself.
        // An UPDATE says the new fact too (the memory it rewrites is not another older one).
        let rewritten = match &decision {
            Decision::Update(id, _) => Some(*id),
            _ => None,
        };
        let mut superseded: Vec<(i64, String, i64)> = match &decision {
            Decision::Add | Decision::Invalidate(_) | Decision::Update(..) => candidates
                .iter()
                .chain(&rivals)
                .filter(|(id, old, at)| {
                    *at <= said_at_ms
                        && !touched.contains(id)
                        && rewritten != Some(*id)
                        && gates::supersedes(&fact.text, old)
                })
                .cloned()
                .collect(),
            Decision::Noop(_) => Vec::new(),
        };
        // A memory may be both a candidate and a rival.
        let mut seen = std::collections::HashSet::new();
        superseded.retain(|(id, _, _)| seen.insert(*id));
        let decision = match (decision, superseded.first()) {
            (Decision::Add, Some((first, _, _))) => Decision::Invalidate(*first),
            (decision, _) => decision,
        };
        if let Decision::Update(id, _) | Decision::Invalidate(id) = &decision {
            touched.insert(*id);
        }
        let wrote = match &decision {
            Decision::Update(_, text) => Some(content_hash(text)),
            Decision::Add | Decision::Invalidate(_) => Some(content_hash(&fact.text)),
            Decision::Noop(_) => None,
        };
        let applied = apply(
            pp,
            scope,
            &fact,
            decision,
            &sources,
            &origin.cause,
            said_at_ms,
        )
        .await?;
        *counts.entry(applied.event.clone()).or_default() += 1;
        written.extend(wrote);
        // A new fact may make older memories of its subject untrue in words no rule knows ("took
        // the job as sous-chef" over "works as a line cook"): the change check decides. Also
        // when the memory LLM wrote it as an update of another memory ("got an offer to be
        // sous-chef" rewritten "is a sous-chef"): the other older ones are still to check.
        let new_statement = matches!(applied.event.as_str(), "added" | "invalidated" | "updated");
        if !pp.config.add_only && new_statement {
            let older: Vec<Older> = checks
                .remove(&index)
                .unwrap_or_default()
                .into_iter()
                // (A memory this job retired or rewrote is in `touched`; the fact's own memory
                // may be an older one that already said it.)
                .filter(|o| {
                    !touched.contains(&o.id)
                        && applied.memory != Some(o.id)
                        && !superseded.iter().any(|(id, _, _)| *id == o.id)
                })
                .collect();
            if !older.is_empty() {
                let change = Change {
                    fact: &fact.text,
                    // A fact the user stated as one (over MCP) is their own words.
                    told: fact.told.as_deref().unwrap_or(&fact.text),
                    model: origin.model,
                };
                let untrue = changed::superseded(pp, &change, &older).await;
                for old in older.into_iter().filter(|o| untrue.contains(&o.id)) {
                    *counts.entry("changed".to_owned()).or_default() += 1;
                    superseded.push((old.id, old.text, old.at));
                }
            }
        }
        // What of a retired memory stays true ("lives with a dog named Pixel" when the home
        // changes) is kept, dated as the old memory was.
        for (_, old, at) in &superseded {
            let Some(kept) = gates::remainder(old).filter(|k| gates::check_form(k).is_ok()) else {
                continue;
            };
            let item = vec![NewFact::new(kept, "fact", sources.to_vec())];
            pp.memory
                .add_memories_at(scope, item, &origin.cause, *at)
                .await
                .map_err(|e| e.to_string())?;
            *counts.entry("kept_part".to_owned()).or_default() += 1;
        }
        for (id, _, _) in superseded {
            if !touched.insert(id) {
                continue;
            }
            tracing::info!(job = origin.job, memory = id, fact = %fact.text, "newest wins: an older memory the fact makes untrue is retired");
            match pp
                .memory
                .retire_memory(scope, id, false, &origin.cause)
                .await
            {
                Ok(()) => *counts.entry("superseded".to_owned()).or_default() += 1,
                Err(MemoryError::Store(StoreError::NotFound(_))) => {}
                Err(error) => return Err(error.to_string()),
            }
        }
        outcomes[index] = Some(applied);
    }
    Ok(finish(counts, outcomes, "no changes"))
}

/// Live memories like `text`: the best `top_k` by keyword, and by vector from `min_similarity`.
async fn similar(
    pp: &PostProcessor,
    scope: &UserScope,
    text: &str,
    top_k: usize,
    min_similarity: f32,
) -> Result<Vec<crate::memory::Hit>, String> {
    let request = RetrievalRequest {
        query: text.to_owned(),
        corpora: vec![Corpus::Memory],
        top_k,
        min_similarity,
        ..RetrievalRequest::default()
    };
    pp.memory
        .retrieve(scope, request)
        .await
        .map_err(|e| e.to_string())
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
) -> Result<FactOutcome, String> {
    let done = |event: &str, memory: Option<i64>, replaced: Option<i64>| FactOutcome {
        event: event.to_owned(),
        memory,
        replaced,
    };
    // A grounded fact's source is the one turn that states it, with its words.
    let grounded: Vec<Source>;
    let sources = match &fact.grounding {
        Some(Ok((source, _))) => {
            grounded = vec![source.clone()];
            &grounded[..]
        }
        _ => sources,
    };
    let add = || async {
        let item = vec![
            NewFact::new(fact.text.clone(), fact.kind.clone(), sources.to_vec())
                .about(fact.subject()),
        ];
        let inserted = pp
            .memory
            .add_memories_at(scope, item, cause, said_at_ms)
            .await
            .map_err(|e| e.to_string())?;
        Ok::<_, String>(match inserted.first() {
            Some(Inserted::New { id, .. } | Inserted::Duplicate { id }) => Some(*id),
            None => None,
        })
    };
    let gone = |id: i64| {
        tracing::info!(memory = id, fact = %fact.text, "a reconcile decision names a memory that is no longer live: the fact is added instead");
    };
    match decision {
        Decision::Add => Ok(done("added", add().await?, None)),
        Decision::Noop(memory) => Ok(done("unchanged", memory, None)),
        Decision::Update(id, text) => {
            match pp
                .memory
                .update_memory(scope, id, &text, sources, cause)
                .await
            {
                Ok(()) => Ok(done("updated", Some(id), None)),
                // Another memory already says it (often one added by this very job): the old one is
                // superseded, not rewritten into a duplicate.
                Err(MemoryError::Store(StoreError::DuplicateText)) => {
                    match pp.memory.retire_memory(scope, id, false, cause).await {
                        Ok(()) | Err(MemoryError::Store(StoreError::NotFound(_))) => {
                            Ok(done("invalidated", None, Some(id)))
                        }
                        Err(error) => Err(error.to_string()),
                    }
                }
                Err(MemoryError::Store(StoreError::NotFound(_))) => {
                    gone(id);
                    Ok(done("added", add().await?, None))
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
            Ok(done("invalidated", add().await?, Some(id)))
        }
    }
}
