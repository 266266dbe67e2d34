//! The words of a text as the rules compare them, through the current language ([`super::current`]):
//! its content words, whether one text only adds to another, the names it gives to other
//! people, and the words it capitalises as names. On the ground floor, so that retrieval,
//! injection and the gates read texts the same way without reaching into one another.

use std::collections::HashSet;

use super::{current, words};

/// The words of `text` that carry content: lowercased, stemmed, without stop words.
pub fn content_words(text: &str) -> HashSet<String> {
    let stop = words().stop_words;
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().count() > 1)
        .map(str::to_lowercase)
        // A stop word is known by its own form ("assistant", whose stem is "assist").
        .filter(|w| !stop.contains(&w.as_str()))
        .map(|w| current().stem(&w))
        .filter(|w| !stop.contains(&w.as_str()))
        .collect()
}

/// Whether `new` only adds to `old`: every content word of `old` is still in it ("has a dog" →
/// "has a dog named Pixel"), so `old` did not stop being true.
pub fn only_adds_to(new: &str, old: &str) -> bool {
    let (new, old) = (content_words(new), content_words(old));
    !old.is_empty() && old.is_subset(&new)
}

/// Names the user gave to someone else ("my dog Pixel", "my brother Tomas", "a cat named Mochi",
/// "The user's sister Ana", "The user lives with their dog Pixel"), lowercased: a capitalised word
/// after an owner's word and a noun, or after a word of naming.
pub fn names_of_others(texts: &[&str]) -> Vec<String> {
    let lists = words();
    let mut names = Vec::new();
    for text in texts {
        let raw: Vec<&str> = text
            .split(|c: char| !c.is_alphanumeric() && c != '\'')
            .filter(|w| !w.is_empty())
            .collect();
        for (index, word) in raw.iter().enumerate() {
            let capitalized = word.chars().next().is_some_and(char::is_uppercase);
            if !capitalized || *word == "I" || index == 0 {
                continue;
            }
            let before = raw[index - 1].to_lowercase();
            let owner = index >= 2
                && lists
                    .names_owners
                    .contains(&raw[index - 2].to_lowercase().as_str());
            let noun = before.chars().next().is_some_and(char::is_lowercase);
            if (owner && noun) || lists.names_naming.contains(&before.as_str()) {
                names.push(word.to_lowercase());
            }
        }
    }
    names
}

/// `word` lowercased, without a possessive "'s", when written as a name may be: with a capital,
/// and not "I" ("I'm", …), a month or a weekday.
fn name_like(word: &str) -> Option<String> {
    let capitalized = word.chars().next().is_some_and(char::is_uppercase);
    let own = word == "I" || word.starts_with("I'") || word.starts_with("I\u{2019}");
    if !capitalized || own || crate::dates::is_date_word(word) {
        return None;
    }
    Some(
        word.trim_end_matches("'s")
            .trim_end_matches("\u{2019}s")
            .to_lowercase(),
    )
}

/// The capitalised first words of the texts' sentences (and of what follows a colon or a
/// semicolon), lowercased: not "I", not a month or weekday. A capital there marks no name on its
/// own ("Quick update: …", "Dorota moved our lessons"); whether one is a name is for other texts
/// to tell, where the word stands inside a sentence or after a word of naming.
pub fn sentence_openers(texts: &[&str]) -> Vec<String> {
    let mut openers = Vec::new();
    for text in texts {
        for sentence in text.split(['.', '!', '?', ';', ':', '\n']) {
            let Some(word) = sentence
                .split(|c: char| !c.is_alphanumeric() && c != '\'' && c != '\u{2019}')
                .find(|w| !w.is_empty())
            else {
                continue;
            };
            if let Some(opener) = name_like(word).filter(|o| !openers.contains(o)) {
                openers.push(opener);
            }
        }
    }
    openers
}

/// Words the texts write with a capital inside a sentence, where a capital marks a name ("My new
/// manager, Priya, is 29" gives "priya"), lowercased: not a sentence's first word, not "I"
/// ("I'm", …), not a month or weekday. A name that only ever opens a sentence is not found.
pub fn proper_nouns(texts: &[&str]) -> Vec<String> {
    let mut names = Vec::new();
    for text in texts {
        for sentence in text.split(['.', '!', '?', ';', ':', '\n']) {
            let raw = sentence
                .split(|c: char| !c.is_alphanumeric() && c != '\'' && c != '\u{2019}')
                .filter(|w| !w.is_empty());
            for word in raw.skip(1) {
                if let Some(name) = name_like(word).filter(|n| !names.contains(n)) {
                    names.push(name);
                }
            }
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sentence_opener_is_read_in_any_sentence() {
        let openers = sentence_openers(&[
            "Quick update: Dorota moved our lessons. I'm glad!",
            "Monday was long; Tomas's car broke down.\nwe stayed home",
        ]);
        assert_eq!(openers, ["quick", "dorota", "tomas"]);
    }

    #[test]
    fn names_given_to_others_are_found() {
        let names = names_of_others(&[
            "The user's brother Tomas is turning 30.",
            "I adopted a cat named Mochi.",
            "Yesterday I met Ana.",
        ]);
        assert_eq!(names, ["tomas", "mochi"]);
    }

    #[test]
    fn a_capital_inside_a_sentence_is_a_name() {
        let names = proper_nouns(&[
            "My new manager, Priya, is 29. Quick update: Dorota's class moved to Friday.",
            "I'm off to Lisbon in May; I think Ana's coming.",
        ]);
        assert_eq!(names, ["priya", "lisbon", "ana"]);
    }

    #[test]
    fn a_rewrite_that_only_adds_keeps_the_old_text_true() {
        assert!(only_adds_to(
            "The user has a dog named Pixel.",
            "The user has a dog."
        ));
        assert!(!only_adds_to("The user has a cat.", "The user has a dog."));
        assert!(content_words("The dogs played").contains(&current().stem("dog")));
    }
}
