//! English: Snowball's English (Porter 2) stemmer.

use rust_stemmers::{Algorithm, Stemmer};

use super::Language;

/// The English rules.
pub struct English;

impl Language for English {
    fn code(&self) -> &'static str {
        "en"
    }

    fn stem(&self, word: &str) -> String {
        // Creating a Snowball stemmer only picks its function: no state to keep.
        Stemmer::create(Algorithm::English).stem(word).into_owned()
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
