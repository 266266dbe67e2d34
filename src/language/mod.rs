//! Language-dependent rules behind one interface, on the ground floor: the word forms the memory
//! gates compare. Each rule a language needs is a method of [`Language`]; the English
//! implementation is `english::English`, one place, and its stemmer is Snowball's (the `rust-stemmers`
//! crate), not hand-written suffix rules, and its word lists are `english/words.rs`. The gates
//! reach them through [`current`]: another language is another implementation, not an edit of
//! the gates. The lists of the single gates (`postprocess::gates::*`) are
//! here too, each field named after its gate (`subject_leading` is `gates::subject`'s).

mod compare;
mod english;
mod interface;

pub use compare::{content_words, names_of_others, only_adds_to, proper_nouns, sentence_openers};
pub use interface::{Language, WordLists};

use english::English;

/// The word lists of the language the rules read ([`current`]'s).
pub fn words() -> &'static WordLists {
    current().words()
}

/// The language the gates read: English until a second implementation and a way to choose it
/// exist.
pub fn current() -> &'static dyn Language {
    &English
}

/// The language whose rules read `text`, or `None` for text in a language this module has no
/// rules for: the text rules then leave it alone, and only the mechanisms that read no words
/// judge it (where it is found in the user's turns, question marks, numbers, whom it names, the
/// memory LLM's own answers). The language is told by a trigram model (the `whatlang` crate):
/// text it places reliably in another language is that language's, unless a fifth of its words
/// are the implementation's own function words (a trigram model can take a short English line
/// with a foreign name or food for French or Italian; no sentence of another language is made of
/// English function words). Text it cannot place reliably, a short line mostly, is read as
/// English, as before there was a choice: so a short line in another language still meets the
/// English rules; give the reader more of it (a conversation's user turns together) to tell.
pub fn of(text: &str) -> Option<&'static dyn Language> {
    let english: &'static dyn Language = &English;
    match whatlang::detect(text) {
        Some(info) if info.is_reliable() && info.lang() != whatlang::Lang::Eng => {
            (function_word_share(english, text) >= OWN_FUNCTION_WORDS).then_some(english)
        }
        _ => Some(english),
    }
}

/// The share of a text's function words at which it is the language's own, whatever else it
/// looks like.
const OWN_FUNCTION_WORDS: f64 = 0.2;

/// The share of `text`'s words that are `language`'s function words.
fn function_word_share(language: &dyn Language, text: &str) -> f64 {
    let stop = language.words().stop_words;
    let words: Vec<String> = text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    let own = words.iter().filter(|w| stop.contains(&w.as_str())).count();
    own as f64 / words.len().max(1) as f64
}

#[cfg(test)]
mod tests {
    use super::of;

    #[test]
    fn english_is_read_by_the_english_rules_other_languages_by_none() {
        for text in [
            "I'm lactose intolerant myself, so no pizza place.",
            "Chiara loves climbing.",
            "Helga turns 60 next month.",
            // Lines a trigram model alone places in French, Afrikaans and Italian.
            "Absolutely, let's do that! Can't wait for our coffee date next week. See you then. Stay safe!",
            "Wow, John! Way to go helping veterans! I'm doing my part too, volunteering at a homeless shelter. It's so rewarding.",
            "I like also cheese pizza and prosciutto.",
        ] {
            assert!(of(text).is_some(), "{text}");
        }
        for text in [
            "Ich wohne seit März in Leipzig und arbeite als Krankenpflegerin im Klinikum. Meine Schwester Lena ist 34.",
            "Mi hermana Lucía vive en Sevilla y tiene dos gatos. Yo soy vegetariana desde hace un año.",
        ] {
            assert!(of(text).is_none(), "{text}");
        }
        // Too short to tell: the English rules, as before.
        assert!(of("Vivo en Madrid.").is_some());
    }
}
