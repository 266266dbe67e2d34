//! Two rules for ranking past turns, applied after fusion: a turn next to a found one shares its
//! score, and a query that names one participant prefers that participant's turns.
//!
//! Both hold for any conversation log. A turn is often only findable through its neighbour: the
//! answer "Sure, I can give it to you tomorrow" carries none of the words of "which recipe did
//! they offer to share?", the question before it does. And what a person did or said is stated in
//! that person's own turns; the other side's turns mostly ask or echo. Measured on LoCoMo in
//! docs/benchmarks.md, tuned on half of the conversations and checked on the other half.

use std::collections::{HashMap, HashSet};

use crate::embed::cosine;
use crate::store::{Corpus, Store, StoreResult, UserScope};

use super::retrieval::{hit_of, Hit, RetrievalRequest};

/// Adds `neighbour_weight × score / distance` of every found turn to the live turns within
/// `neighbour_window` positions of it in the same conversation, bringing in those not yet found
/// that are similar enough to the query.
#[allow(clippy::too_many_arguments)]
pub(super) fn spread(
    store: &dyn Store,
    scope: &UserScope,
    hits: &mut Vec<Hit>,
    request: &RetrievalRequest,
    allowed: Option<&HashSet<i64>>,
    query_vector: Option<&[f32]>,
    model: &str,
    now_ms: i64,
) -> StoreResult<()> {
    if hits.is_empty() || request.neighbour_weight <= 0.0 || request.neighbour_window <= 0 {
        return Ok(());
    }
    let found: HashMap<i64, f64> = hits.iter().map(|hit| (hit.id, hit.score)).collect();
    let ids: Vec<i64> = found.keys().copied().collect();
    let mut shared: HashMap<i64, f64> = HashMap::new();
    for (from, neighbour, distance) in
        store.message_neighbours(scope, &ids, request.neighbour_window)?
    {
        if allowed.is_some_and(|allowed| !allowed.contains(&neighbour)) {
            continue;
        }
        let score = found.get(&from).copied().unwrap_or(0.0);
        *shared.entry(neighbour).or_default() +=
            request.neighbour_weight * score / distance.max(1) as f64;
    }
    for hit in hits.iter_mut() {
        if let Some(extra) = shared.remove(&hit.id) {
            hit.score += extra;
        }
    }
    let new: Vec<i64> = shared.keys().copied().collect();
    for document in store.documents(scope, Corpus::Message, &new)? {
        if request.current_only && document.outdated {
            continue;
        }
        let spread = shared.get(&document.id).copied().unwrap_or(0.0);
        let similarity = match (query_vector, &document.embedding) {
            (Some(query), Some(embedding)) if embedding.model == model => {
                Some(cosine(query, &embedding.vector))
            }
            _ => None,
        };
        // Brought in by its place alone, a turn must still be as similar as a vector-only match
        // (`min_similarity`): being next to a relevant turn is no reason to inject small talk.
        if !similarity.is_some_and(|s| s >= request.min_similarity) {
            continue;
        }
        hits.push(hit_of(
            document, spread, similarity, None, None, request, now_ms,
        ));
    }
    Ok(())
}

/// When the query names exactly one of the authors among `hits` (every word of their name is a
/// word of the query), that author's turns count `author_weight` times.
pub(super) fn prefer_named_author(hits: &mut [Hit], request: &RetrievalRequest) {
    if request.author_weight == 1.0 {
        return;
    }
    let asked: HashSet<String> = words(&request.query).collect();
    let mut named: Vec<&str> = hits
        .iter()
        .filter_map(|hit| hit.author.as_deref())
        .filter(|author| {
            let mut parts = words(author).peekable();
            parts.peek().is_some() && parts.all(|part| asked.contains(&part))
        })
        .collect();
    named.sort_unstable();
    named.dedup();
    let [author] = named[..] else {
        return;
    };
    let author = author.to_owned();
    for hit in hits.iter_mut() {
        if hit.author.as_deref() == Some(author.as_str()) {
            hit.score *= request.author_weight;
        }
    }
}

fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|word| !word.is_empty())
        .map(str::to_lowercase)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(id: i64, author: Option<&str>, score: f64) -> Hit {
        Hit {
            corpus: Corpus::Message,
            id,
            text: String::new(),
            created_at_ms: 0,
            conversation: None,
            role: None,
            author: author.map(str::to_owned),
            score,
            similarity: None,
            vector_rank: None,
            keyword_rank: None,
            tokens: 0,
            subject: None,
        }
    }

    fn scores(hits: &[Hit]) -> Vec<f64> {
        hits.iter().map(|hit| hit.score).collect()
    }

    #[test]
    fn the_one_named_author_counts_more() {
        let request = RetrievalRequest {
            query: "What did Caroline research?".into(),
            ..RetrievalRequest::default()
        };
        let mut hits = vec![
            hit(1, Some("Caroline"), 1.0),
            hit(2, Some("Melanie"), 1.0),
            hit(3, None, 1.0),
        ];
        prefer_named_author(&mut hits, &request);
        assert_eq!(scores(&hits), [request.author_weight, 1.0, 1.0]);
    }

    #[test]
    fn two_names_or_a_partial_name_change_nothing() {
        for query in [
            "What do Caroline and Melanie both like?",
            "What did Ann say?",
            "What did she research?",
        ] {
            let request = RetrievalRequest {
                query: query.into(),
                ..RetrievalRequest::default()
            };
            let mut hits = vec![
                hit(1, Some("Caroline"), 1.0),
                hit(2, Some("Melanie"), 1.0),
                hit(3, Some("Ann Lee"), 1.0),
            ];
            prefer_named_author(&mut hits, &request);
            assert_eq!(scores(&hits), [1.0, 1.0, 1.0], "{query}");
        }
    }
}
