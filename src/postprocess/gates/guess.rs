//! A short fact has no room for a guess. "I booked it. Should I bring flowers?" can be stored by
//! a small model as "The user booked a hotel." (it was a restaurant, named turns before): the
//! model filled in what "it" was. In a fact of few content words the last one is what the fact is
//! about, and it must be a word the user said (or one of what is known about them). Longer facts
//! are left to the grounding share. Pure: the implicit gates (and the background save) call it.

use std::collections::HashSet;

use super::content_words;

/// Facts of at most this many content words get the check.
const SHORT_FACT: usize = 2;

/// Whether `fact` (content words `words`) is short and ends on a word `said` does not hold.
pub(super) fn guessed_object(
    fact: &str,
    words: &HashSet<String>,
    said: impl Fn(&String) -> bool,
) -> bool {
    if words.len() > SHORT_FACT {
        return false;
    }
    let last = fact
        .split(|c: char| !c.is_alphanumeric())
        .rev()
        .find_map(|w| content_words(w).into_iter().next());
    last.is_some_and(|w| words.contains(&w) && !said(&w))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guessed(fact: &str, said: &str) -> bool {
        let said = content_words(said);
        guessed_object(fact, &super::super::fact_words(fact), |w| said.contains(w))
    }

    #[test]
    fn a_short_fact_must_end_on_a_word_of_the_users() {
        let said = "I booked it. Should I bring flowers?";
        assert!(guessed("The user booked a hotel.", said));
        assert!(!guessed(
            "The user owns a cat.",
            "My cat Miso sleeps all day."
        ));
        assert!(!guessed("The user moved to Porto.", "I moved to Porto."));
        // Longer facts are the grounding share's business.
        assert!(!guessed("The user booked a table at the restaurant.", said));
    }
}
