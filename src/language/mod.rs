//! Language-dependent rules behind one interface, on the ground floor: the word forms the memory
//! gates compare. Each rule a language needs is a method of [`Language`]; the English
//! implementation is `english::English`, one place, and its stemmer is Snowball's (the `rust-stemmers`
//! crate), not hand-written suffix rules, and its word lists are `english/words.rs`. The gates
//! reach them through [`current`]: another language is another implementation, not an edit of
//! the gates. (Word lists still inside single gates move here step by step.)

mod english;

use english::English;

/// What the text rules need to know of a language.
pub trait Language: Send + Sync {
    /// A word's stem, so that its inflections meet ("plays", "played" and "playing" → "play");
    /// the word is given lower-cased.
    fn stem(&self, word: &str) -> String;
    /// The word lists the memory gates read.
    fn words(&self) -> &'static WordLists;
}

/// The word lists a language gives the memory gates (`postprocess::gates`): each names words or
/// phrases by what they do in a sentence, so a gate reads the list, not the language.
pub struct WordLists {
    /// What makes a statement about the assistant a commitment ("will", "remind").
    pub promises: &'static [&'static str],
    /// How a model restates a question as a fact ("asked about").
    pub reported_questions: &'static [&'static str],
    /// How a fact says the user is interested in something.
    pub interests: &'static [&'static str],
    /// The single words of those.
    pub interest_words: &'static [&'static str],
    /// Thanks and greetings: manners, not facts.
    pub courtesy: &'static [&'static str],
    /// Words of saying ("said", "express") that carry no fact.
    pub saying: &'static [&'static str],
    /// A time that passes with the conversation ("tonight").
    pub passing: &'static [&'static str],
    /// Wondering aloud ("might", "thinking about").
    pub musings: &'static [&'static str],
    /// Claims only the user may make of themselves (health, faith and the like).
    pub sensitive: &'static [&'static str],
    /// Claims a model reads into what the user said, each with the words the user must have used.
    pub readings: &'static [(&'static [&'static str], &'static [&'static str])],
    /// Words that carry no content of their own, and the words naming the two sides.
    pub stop_words: &'static [&'static str],
}

/// The language the gates read: English until a second implementation and a way to choose it
/// exist.
pub fn current() -> &'static dyn Language {
    &English
}
