//! The third-person rule: a memory is read without its conversation, so the speaker's words for
//! themselves ("I", "my", "we", "our") outside quotes mark a line of the conversation copied as
//! a fact, and the words for the one spoken to ("you", "your") a line of the assistant's. The
//! words are the language's ([`crate::language::WordLists::person_first`]).

use super::{lists, Rejection};

/// A fact is written about the user, in the third person: "I", "me", "my", "we" or "our" outside
/// quotes mean a line of the conversation copied as a fact (seen on LoCoMo: "The transgender
/// stories were so inspiring! I was so happy and thankful for all the support."; from a 0.5B
/// memory model: "… Mine is in December.", "The Algarve apartment is what we'll do.").
pub fn check_person(text: &str) -> Result<(), Rejection> {
    let words = outside_quotes(text);
    if has(&words, lists().person_first) {
        return Err(Rejection::FirstPerson);
    }
    // "The assistant will make sure to keep you updated on any changes to the research plan."
    // (explicit mode's background save, the scenario suite).
    if has(&words, lists().person_second) {
        return Err(Rejection::SecondPerson);
    }
    Ok(())
}

/// Whether `text` speaks in the first person outside quotes ("I moved", "our lessons"): the
/// speaker's own line, not a fact about them.
pub fn first_person(text: &str) -> bool {
    has(&outside_quotes(text), lists().person_first)
}

/// The words of `text` outside quotes, apostrophes straightened.
fn outside_quotes(text: &str) -> Vec<String> {
    let mut quoted = false;
    let outside: String = text
        .chars()
        .map(|c| {
            if matches!(c, '"' | '“' | '”') {
                quoted = !quoted;
            }
            if quoted {
                ' '
            } else {
                c
            }
        })
        .collect();
    outside
        .split(|c: char| !c.is_alphanumeric() && c != '\'' && c != '’')
        .map(|w| w.trim_matches(['\'', '’']).replace('’', "'"))
        .filter(|w| !w.is_empty())
        .collect()
}

/// Whether one of `words` is a word of `list` (lowercase).
fn has(words: &[String], list: &[&str]) -> bool {
    let is = |at: usize| {
        let word = &words[at];
        // A word in capitals is an abbreviation ("the US"), not a pronoun; a pronoun of one
        // letter is one only before a lowercase word ("I was"), not as a numeral ("World War I").
        let capitals = word.chars().filter(|c| c.is_alphabetic()).count() > 1
            && word.chars().all(|c| !c.is_lowercase());
        let single = word.chars().count() == 1
            && !words
                .get(at + 1)
                .is_some_and(|next| next.chars().next().is_some_and(char::is_lowercase));
        !capitals && !single && list.contains(&word.to_lowercase().as_str())
    };
    (0..words.len()).any(is)
}
