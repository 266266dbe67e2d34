//! One fact, one memory: a new fact that says again what a live memory (or an earlier fact of the
//! same extraction) already says is not stored a second time.
//!
//! The rule is a mechanism, not a word list: two statements are one when their vectors nearly
//! coincide (cosine at least `memory.restatement_similarity`) **and** they name the same names and
//! numbers. The vector carries the meaning ("wants to visit the York Railway Museum" and "wants to
//! visit the railway museum in York"); the names and numbers carry what a sentence encoder weighs
//! too lightly ("is 34 years old" and "is 35 years old" are nearly one vector, but two facts).
//! A negation or another value moves the vector well below the bar (docs/benchmarks.md, "The
//! fact-store as a person reads it", lists measured pairs), so "does not eat meat" never merges
//! into "eats meat". The rule reads letters and digits only, so it holds in any language the
//! embedding model reads.

use std::collections::HashSet;

use super::grounding::names_and_numbers;

/// Whether `new` says what `known` says: cosine `similarity` of their vectors at least `bar`, and
/// every name and number of each is a word of the other (compared ignoring case, so "York Railway
/// Museum" and "the railway museum in York" name the same things).
pub fn restates(new: &str, known: &str, similarity: f32, bar: f32) -> bool {
    if similarity < bar {
        return false;
    }
    let words = |text: &str| -> HashSet<String> {
        text.split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(str::to_lowercase)
            .collect()
    };
    let named_in = |text: &str, other: &HashSet<String>| {
        // (Capitals read as names in any language: a German noun then has to be in both, which
        // keeps two memories rather than merging two different ones.)
        names_and_numbers(text, &crate::dates::is_date_word, true)
            .into_iter()
            .all(|name| other.contains(&name.to_lowercase()))
    };
    named_in(new, &words(known)) && named_in(known, &words(new))
}

#[cfg(test)]
mod tests {
    use super::*;

    const BAR: f32 = 0.95;

    #[test]
    fn a_paraphrase_with_the_same_names_restates() {
        assert!(restates(
            "The user and Yusuf want to visit the York Railway Museum.",
            "The user and Yusuf want to visit the railway museum in York.",
            0.994,
            BAR
        ));
        assert!(restates(
            "The user's brother is called Tomas.",
            "The user's brother is Tomas.",
            0.969,
            BAR
        ));
    }

    #[test]
    fn another_name_or_number_is_another_fact() {
        assert!(!restates(
            "The user is 35 years old.",
            "The user is 34 years old.",
            0.959,
            BAR
        ));
        assert!(!restates(
            "The user's brother is Tomas and lives in Vilnius.",
            "The user's brother is Tomas.",
            0.96,
            BAR
        ));
    }

    #[test]
    fn below_the_bar_nothing_restates() {
        // A negation: 0.861 with the local model.
        assert!(!restates(
            "The user does not eat meat.",
            "The user eats meat.",
            0.861,
            BAR
        ));
    }

    #[test]
    fn names_are_read_in_any_language() {
        assert!(!restates(
            "Der Nutzer wohnt in Hamburg.",
            "Der Nutzer wohnt in Bremen.",
            0.97,
            BAR
        ));
        assert!(restates(
            "Der Nutzer wohnt jetzt in Hamburg.",
            "Der Nutzer wohnt in Hamburg.",
            0.97,
            BAR
        ));
    }
}
