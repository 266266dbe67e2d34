//! What core memory keeps as no longer true (the history lines of the `human` block,
//! [`super::history`]) left out of what else the agent reads beside it: the summary's
//! notes and the messages recalled before the turn. Both keep the old fact as it was said, and a small
//! model answers from them (from a summary note, or from the user's old message that recall
//! before the turn found for "When is my thesis due?") even while the `human` block has the new
//! deadline and the old one as no longer true. A sentence is left out when it
//! restates a retired line more closely than any line still true; what is stored stays whole.

use std::collections::HashSet;

/// Share of a sentence's content words (in percent) a retired line must hold for the sentence
/// to restate it.
const RESTATES: usize = 75;

/// The lines of core memory, retired and live, as content words.
pub struct Retired {
    retired: Vec<HashSet<String>>,
    live: Vec<HashSet<String>>,
}

impl Retired {
    /// The retired and live lines of compiled core memory `memory`; `None` when nothing is retired.
    pub fn of(memory: &str) -> Option<Self> {
        let (retired, live): (Vec<&str>, Vec<&str>) = memory
            .lines()
            .map(str::trim)
            .filter(|line| !line.is_empty())
            .partition(|line| super::history::is_history(line));
        // The old fact only: what holds since, named on the same line, is live.
        let retired: Vec<&str> = retired
            .into_iter()
            .filter_map(super::history::former)
            .collect();
        if retired.is_empty() {
            return None;
        }
        let words = |lines: Vec<&str>| {
            lines
                .into_iter()
                .map(crate::language::content_words)
                .collect()
        };
        Some(Self {
            retired: words(retired),
            live: words(live),
        })
    }

    /// Whether `sentence` restates a retired line more closely than any live one.
    fn stale(&self, sentence: &str) -> bool {
        let said = crate::language::content_words(sentence);
        let share = |of: &[HashSet<String>]| {
            of.iter()
                .map(|line| said.intersection(line).count() * 100 / said.len().max(1))
                .max()
                .unwrap_or(0)
        };
        let old = share(&self.retired);
        said.len() >= 2 && old >= RESTATES && old > share(&self.live)
    }

    /// `text` without its stale sentences, `elided` standing where any went; `None` when nothing
    /// is left, the text itself when nothing went.
    pub fn without<'a>(&self, text: &'a str, elided: &str) -> Option<std::borrow::Cow<'a, str>> {
        let sentences = crate::text::sentences(text);
        let fresh: Vec<&str> = sentences
            .iter()
            .copied()
            .filter(|s| !self.stale(s))
            .collect();
        if fresh.len() == sentences.len() {
            return Some(std::borrow::Cow::Borrowed(text));
        }
        if fresh.is_empty() {
            return None;
        }
        let mut kept = fresh.join(" ");
        if !elided.is_empty() {
            kept.push(' ');
            kept.push_str(elided);
        }
        Some(std::borrow::Cow::Owned(kept))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MEMORY: &str = "<human>\nThe user is writing a thesis on coral reef bleaching.\n\
        The user's supervisor extended the deadline to November 30.\n\
        The user lives with a dog named Pixel.\n\
        No longer true: The deadline for the thesis is October 15.\n\
        No longer true: The user lives in Lisbon with a dog named Pixel.\n</human>";

    #[test]
    fn a_sentence_restating_a_retired_line_more_than_a_live_one_goes() {
        let retired = Retired::of(MEMORY).expect("retired lines");
        let said = "I'm writing my thesis on coral reef bleaching. The deadline is October 15.";
        assert_eq!(
            retired.without(said, "[…]").as_deref(),
            Some("I'm writing my thesis on coral reef bleaching. […]")
        );
        assert_eq!(
            retired.without("I live in Lisbon with my dog Pixel.", "[…]"),
            None
        );
        // The new fact, and one that shares words with both (the dog), stay.
        for text in [
            "My supervisor extended my deadline to November 30.",
            "The user has a dog named Pixel.",
            "The thesis is due in the autumn.",
        ] {
            assert_eq!(retired.without(text, "[…]").as_deref(), Some(text));
        }
        assert!(Retired::of("<human>\nThe user likes tea.\n</human>").is_none());
    }
}
