//! Language-dependent rules behind one interface, on the ground floor: the word forms the memory
//! gates compare. Each rule a language needs is a method of [`Language`]; the English
//! implementation is [`English`], one place, and its stemmer is Snowball's (the `rust-stemmers`
//! crate), not hand-written suffix rules. (The gates' word lists move here step by step.)

mod english;

pub use english::English;

/// What the text rules need to know of a language.
pub trait Language: Send + Sync {
    /// The language's code ("en").
    fn code(&self) -> &'static str;
    /// A word's stem, so that its inflections meet ("plays", "played" and "playing" → "play");
    /// the word is given lower-cased.
    fn stem(&self, word: &str) -> String;
}

/// The language the rules read today.
pub fn english() -> &'static English {
    &English
}
