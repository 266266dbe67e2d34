//! English: Snowball's English (Porter 2) stemmer, and the word lists the gates read.

mod words;

use rust_stemmers::{Algorithm, Stemmer};

use super::{Language, WordLists};

/// English's lists, in one place ([`words`]).
static WORDS: WordLists = WordLists {
    promises: &words::PROMISES,
    reported_questions: &words::REPORTED_QUESTIONS,
    interests: &words::INTERESTS,
    interest_words: &words::INTEREST_WORDS,
    courtesy: &words::COURTESY,
    saying: &words::SAYING,
    passing: &words::PASSING,
    musings: &words::MUSINGS,
    sensitive: &words::SENSITIVE,
    readings: &words::READINGS,
    stop_words: &words::STOP_WORDS,
};

/// The English rules.
pub struct English;

impl Language for English {
    fn stem(&self, word: &str) -> String {
        // Creating a Snowball stemmer only picks its function: no state to keep.
        Stemmer::create(Algorithm::English).stem(word).into_owned()
    }

    fn words(&self) -> &'static WordLists {
        &WORDS
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inflections_meet() {
        let en = English;
        for (a, b) in [
            ("plays", "play"),
            ("played", "playing"),
            ("dogs", "dog"),
            ("families", "family"),
            ("studies", "studying"),
            ("moved", "moves"),
        ] {
            assert_eq!(en.stem(a), en.stem(b), "{a} / {b}");
        }
        assert_ne!(en.stem("meat"), en.stem("meet"));
    }
}
