//! Facts that no longer hold, for questions about the past ("What was my job before?").
//!
//! The newest fact wins: a replaced fact leaves the memory block, and the turn that said it too.
//! That is right for "Where do I work?", and leaves nothing for "Where did I work before?". So
//! when the question asks about the past, the block also shows the few former facts nearest to
//! it, apart and dated by when they stopped holding ([`crate::strategy::inject`]). Only then: a
//! present-tense question never sees an old fact beside the new one.

use super::{MemoryResult, MemoryService};
use crate::embed::cosine;
use crate::store::{FormerFact, UserScope};

/// Former facts read (newest first) and weighed against the question: a bound on the work a
/// question about the past adds (one store read, one embedding batch of at most this many).
const CANDIDATES: usize = 24;

/// Whether `question` asks how things were ("What was my job before my current one?", "Do I
/// still live in Lisbon?", "my old address"), not only how they are.
pub fn asks_about_the_past(question: &str) -> bool {
    // "How old is my brother?" asks an age, not about the past.
    let text = super::cues::spaced(question).replace(" how old ", " how ");
    crate::language::words()
        .history_past_cues
        .iter()
        .any(|cue| text.contains(&format!(" {cue} ")))
}

/// The former facts worth showing, newest first: each text once, none that a live memory still
/// says, and no rewrite that only added to it ("has a dog" → "has a dog named Pixel": the old
/// text did not stop being true).
pub fn worth_showing(former: Vec<FormerFact>, live: &[String]) -> Vec<FormerFact> {
    let mut shown: Vec<FormerFact> = Vec::new();
    for fact in former {
        let text = fact.text.trim();
        let said_again = live.iter().any(|l| l.trim() == text);
        let only_added_to = fact
            .replaced_by
            .as_deref()
            .is_some_and(|new| crate::language::only_adds_to(new, text));
        let repeated = shown.iter().any(|s| s.text.trim() == text);
        if text.is_empty() || said_again || only_added_to || repeated {
            continue;
        }
        shown.push(fact);
    }
    shown
}

impl MemoryService {
    /// The former facts nearest to a question about the past: at most `k`, each at least
    /// `min_similarity` from `question` (its vector), none that `live` (the facts shown) says.
    pub async fn former_facts(
        &self,
        scope: &UserScope,
        question: &[f32],
        live: &[String],
        k: usize,
        min_similarity: f32,
    ) -> MemoryResult<Vec<FormerFact>> {
        let owned = scope.clone();
        let former = self
            .blocking(move |store, _| Ok(store.former_facts(&owned, CANDIDATES)?))
            .await?;
        let former = worth_showing(former, live);
        if former.is_empty() || k == 0 {
            return Ok(Vec::new());
        }
        let vectors = self
            .embed(former.iter().map(|f| f.text.clone()).collect())
            .await?;
        let mut scored: Vec<(f32, FormerFact)> = former
            .into_iter()
            .zip(vectors)
            .map(|(fact, embedding)| (cosine(question, &embedding.vector), fact))
            .filter(|(similarity, _)| *similarity >= min_similarity)
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0));
        scored.truncate(k);
        Ok(scored.into_iter().map(|(_, fact)| fact).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn former(text: &str, replaced_by: Option<&str>, until_ms: i64) -> FormerFact {
        FormerFact {
            memory_id: until_ms,
            text: text.to_owned(),
            replaced_by: replaced_by.map(str::to_owned),
            until_ms,
        }
    }

    #[test]
    fn questions_about_the_past_are_told_from_questions_about_now() {
        for past in [
            "What was my job before my current one?",
            "Which city did I live in previously?",
            "Do I still live in Lisbon?",
            "What did I use to drink? Coffee I used to have.",
            "What's my old address?",
            "Has my deadline changed?",
            "Where did I work at first?",
        ] {
            assert!(asks_about_the_past(past), "{past}");
        }
        for now in [
            "Which company do I work for?",
            "Which city do I live in now?",
            "When is my thesis due?",
            "What is my dog's name?",
            "Tell me a bold story",
            "What did I do last weekend?",
            "How old is my brother turning?",
        ] {
            assert!(!asks_about_the_past(now), "{now}");
        }
    }

    #[test]
    fn only_facts_that_stopped_holding_are_shown_once() {
        let live = vec!["The user works as a machine learning engineer at Contoso.".to_owned()];
        let shown = worth_showing(
            vec![
                former(
                    "The user works as a data analyst at Fabrikam.",
                    Some("The user works as a machine learning engineer at Contoso."),
                    3,
                ),
                former(
                    "The user has a dog.",
                    Some("The user has a dog named Pixel."),
                    2,
                ),
                former(
                    "The user lives in Lisbon with a dog named Pixel.",
                    Some("The user lives in Porto with a dog named Pixel."),
                    2,
                ),
                former("The user works as a data analyst at Fabrikam.", None, 1),
                former(
                    "The user works as a machine learning engineer at Contoso.",
                    None,
                    1,
                ),
                former("  ", None, 1),
            ],
            &live,
        );
        assert_eq!(
            shown.iter().map(|f| f.text.as_str()).collect::<Vec<_>>(),
            [
                "The user works as a data analyst at Fabrikam.",
                "The user lives in Lisbon with a dog named Pixel."
            ]
        );
        assert_eq!(shown[0].until_ms, 3, "the newest of the same text");
    }
}
