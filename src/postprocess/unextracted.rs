//! A change the memory LLM did not write as a fact still retires what it makes untrue. The user's
//! "I've moved to Toronto for a new job at a software company" may come back from a small model
//! as no fact at all, or as a fact about someone else in the same message; the older memories
//! of the old home and job then stay live beside it. So after the facts, each statement of the
//! user's new messages in which they speak of themselves is compared with the older live
//! memories about the user, and the ones most like it that this job has not read yet go to the
//! change check ([`super::changed`]): retired only when its
//! two questions agree, as for an extracted fact.

use std::collections::{HashMap, HashSet};

use super::changed::{self, Change, Older};
use super::reconcile::{retire, similar, Origin};
use super::PostProcessor;
use crate::store::{Source, UserScope};

/// Older memories put to the change check per statement, and per job: each costs two memory
/// LLM calls, in the background.
const PER_STATEMENT: usize = 2;
const PER_JOB: usize = 4;

/// How alike (cosine) an older memory must be to a statement, written about the user, to be put
/// to the change check: below the facts' bar ([`super::reconcile::CHANGE_SIMILARITY`]), because a change is told
/// in other words than what it ends ("the user has moved to Toronto for a new job at a software
/// company" scores 0.37 against "The user lives in Dublin." and 0.40 against "The user works in
/// a bank." with all-MiniLM-L6-v2). The check's two questions, not this bar, decide.
const STATEMENT_SIMILARITY: f32 = 0.3;

/// What the user said in the new turns, and what the job already read.
pub(super) struct Said<'a> {
    /// The user's new messages (injected memory blocks removed).
    pub messages: &'a [String],
    /// When the newest was said: only memories stored before it are older.
    pub at_ms: i64,
    /// Memories the facts' reconciliation changed or put to the change check.
    pub checked: &'a HashSet<i64>,
    /// The turns, for what of a retired memory is kept.
    pub sources: &'a [Source],
}

/// Retires the older memories a statement of `said` makes untrue (the change check agreeing);
/// returns the report's counts ("changed", "superseded", "kept_part").
pub(super) async fn check(
    pp: &PostProcessor,
    scope: &UserScope,
    origin: &Origin<'_>,
    said: &Said<'_>,
) -> Result<HashMap<String, usize>, String> {
    let mut counts = HashMap::new();
    if pp.config.add_only || pp.config.change_checks == 0 {
        return Ok(counts);
    }
    let mut read: HashSet<i64> = said.checked.clone();
    let mut touched: HashSet<i64> = HashSet::new();
    let mut asked = 0;
    for message in said.messages {
        for statement in statements(message) {
            if asked >= PER_JOB {
                return Ok(counts);
            }
            // Compared as a fact is written ("I've moved" → "the user has moved"): a
            // first-person sentence and a third-person memory embed far apart
            // ([`crate::memory::perspective`]).
            let about = crate::memory::perspective::about_the_user(statement);
            let query = about.as_deref().unwrap_or(statement);
            let hits = similar(pp, scope, query, PER_STATEMENT, STATEMENT_SIMILARITY).await?;
            let older: Vec<Older> = hits
                .into_iter()
                .filter(|h| {
                    h.created_at_ms < said.at_ms
                        && crate::store::same_subject(Some("user"), h.subject.as_deref())
                        && h.similarity.is_some_and(|s| s >= STATEMENT_SIMILARITY)
                        && !read.contains(&h.id)
                })
                .take(PER_JOB - asked)
                .map(|h| Older {
                    id: h.id,
                    text: h.text,
                    at: h.created_at_ms,
                })
                .collect();
            if older.is_empty() {
                continue;
            }
            asked += older.len();
            read.extend(older.iter().map(|o| o.id));
            let change = Change {
                fact: statement,
                told: message,
                model: origin.model,
            };
            let untrue = changed::superseded(pp, &change, &older).await;
            let superseded: Vec<(i64, String, i64)> = older
                .into_iter()
                .filter(|o| untrue.contains(&o.id))
                .map(|o| (o.id, o.text, o.at))
                .collect();
            *counts.entry("changed".to_owned()).or_default() += superseded.len();
            retire(
                pp,
                scope,
                origin,
                statement,
                superseded,
                said.sources,
                &mut touched,
                &mut counts,
            )
            .await?;
        }
    }
    counts.retain(|_, n| *n > 0);
    Ok(counts)
}

/// The statements of a message that may tell a change of the user's own: its sentences in which
/// the user speaks of themselves ([`super::gates::first_person`]), that do not ask, of three
/// words or more. (Another person's change is theirs: "Siobhan is staying in Galway" retires
/// nothing of the user's.)
fn statements(message: &str) -> impl Iterator<Item = &str> {
    crate::text::sentences(message).into_iter().filter(|s| {
        !crate::text::only_asks(s)
            && s.split_whitespace().count() >= super::gates::MIN_WORDS
            && super::gates::first_person(s)
    })
}

#[cfg(test)]
mod tests {
    use super::statements;

    #[test]
    fn a_message_is_read_by_its_statements_not_its_questions() {
        let said = "News: I've moved to Toronto for a new job. Siobhan is staying in Galway. \
                    How do I get a health card? Ok.";
        assert_eq!(
            statements(said).collect::<Vec<_>>(),
            ["News: I've moved to Toronto for a new job."]
        );
    }
}
