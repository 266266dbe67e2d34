//! Two rules for ranking past turns, applied after fusion: a turn next to a found one shares its
//! score, and a query that names one participant prefers that participant's turns.
//!
//! Both hold for any conversation log. A turn is often only findable through its neighbour: the
//! answer "Sure, I can give it to you tomorrow" carries none of the words of "which recipe did
//! they offer to share?", the question before it does. And what a person did or said is stated in
//! that person's own turns; the other side's turns mostly ask or echo. Measured on LoCoMo in
//! docs/benchmarks.md, tuned on half of the conversations and checked on the other half.

use std::collections::{HashMap, HashSet};

use crate::store::{Store, StoreResult, UserScope};

/// What the found turns (`id → score`) give their live neighbours within `window` positions in
/// the same conversation: `weight × score / distance`, summed per neighbour (found or not).
pub(super) fn shares(
    store: &dyn Store,
    scope: &UserScope,
    found: &HashMap<i64, f64>,
    weight: f64,
    window: i64,
    allowed: Option<&HashSet<i64>>,
) -> StoreResult<HashMap<i64, f64>> {
    let mut shared: HashMap<i64, f64> = HashMap::new();
    if found.is_empty() || weight <= 0.0 || window <= 0 {
        return Ok(shared);
    }
    let ids: Vec<i64> = found.keys().copied().collect();
    for (from, neighbour, distance) in store.message_neighbours(scope, &ids, window)? {
        if allowed.is_some_and(|allowed| !allowed.contains(&neighbour)) {
            continue;
        }
        let score = found.get(&from).copied().unwrap_or(0.0);
        *shared.entry(neighbour).or_default() += weight * score / distance.max(1) as f64;
    }
    Ok(shared)
}

/// The one author among `authors` that `query` names (every word of their name is a word of the
/// query); `None` when it names none or several.
pub(super) fn named_author<'a>(
    query: &str,
    authors: impl Iterator<Item = &'a str>,
) -> Option<&'a str> {
    let asked: HashSet<String> = words(query).collect();
    let mut named: Vec<&str> = authors
        .filter(|author| {
            let mut parts = words(author).peekable();
            parts.peek().is_some() && parts.all(|part| asked.contains(&part))
        })
        .collect();
    named.sort_unstable();
    named.dedup();
    match named[..] {
        [author] => Some(author),
        _ => None,
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

    const AUTHORS: [&str; 4] = ["Caroline", "Melanie", "Ann Lee", "Caroline"];

    #[test]
    fn the_one_named_author_is_found() {
        assert_eq!(
            named_author("What did Caroline research?", AUTHORS.into_iter()),
            Some("Caroline")
        );
        assert_eq!(
            named_author("what did ann lee say", AUTHORS.into_iter()),
            Some("Ann Lee")
        );
    }

    #[test]
    fn two_names_a_partial_name_or_none_name_nobody() {
        for query in [
            "What do Caroline and Melanie both like?",
            "What did Ann say?",
            "What did she research?",
        ] {
            assert_eq!(named_author(query, AUTHORS.into_iter()), None, "{query}");
        }
    }
}
