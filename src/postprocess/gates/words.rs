//! The word forms every gate compares, read through the language interface: a fact's content
//! words (its subject's name left out), stems, the words that only date a fact, and the share of
//! one set found in another.

use std::collections::HashSet;

use crate::language::content_words;

/// The word lists of the language the gates read ([`crate::language`]).
pub(super) fn lists() -> &'static crate::language::WordLists {
    crate::language::current().words()
}

/// Share of a fact's content words that must appear in the user's messages (or in what is
/// already known about the user: a new fact may combine both).
pub(super) const GROUNDED_SHARE: f64 = 0.4;
/// A fact's words without the ones that only date it: the NOOP and UPDATE checks ask whether
/// what a fact says is kept, and a memory that keeps it without its date still says it (a
/// small model's rewrite of "moved to Porto in October 2026" into "lives in Porto" must not be
/// refused, leaving "lives in Lisbon" live).
pub(in crate::postprocess) fn without_dates(words: HashSet<String>) -> HashSet<String> {
    let dates: HashSet<String> = crate::language::words()
        .gates_date_words
        .iter()
        .chain(crate::dates::MONTHS.iter())
        .chain(crate::dates::WEEKDAYS.iter())
        .map(|w| stem(w))
        .collect();
    words
        .into_iter()
        .filter(|w| !dates.contains(w) && !w.chars().all(|c| c.is_ascii_digit()))
        .collect()
}

/// A word's stem ([`crate::language`]), so that "plays" matches "play" and "dogs" "dog".
pub(super) fn stem(word: &str) -> String {
    crate::language::current().stem(word)
}

/// A fact's content words without its subject when that is a name ("Alice lives in Porto"): the
/// user's name is rarely in the messages a fact comes from.
pub(super) fn fact_words(fact: &str) -> HashSet<String> {
    let mut words = content_words(fact);
    let first = fact
        .split(|c: char| !c.is_alphanumeric())
        .find(|w| !w.is_empty())
        .unwrap_or_default();
    if first.chars().next().is_some_and(char::is_uppercase) && words.len() > 1 {
        words.remove(&stem(&first.to_lowercase()));
    }
    words
}

/// The share of `words` for which `found` holds (1.0 for no words: nothing to ground).
pub(super) fn share(words: &HashSet<String>, found: impl Fn(&String) -> bool) -> f64 {
    if words.is_empty() {
        return 1.0;
    }
    words.iter().filter(|w| found(w)).count() as f64 / words.len() as f64
}
