//! The third-person rule: a fact is written about the user, so "I", "me" or "my" outside quotes
//! marks a line of the conversation copied as a fact, and "you" or "your" a line of the
//! assistant's.

use super::Rejection;

/// A fact is written about the user, in the third person: "I", "me", "my" outside quotes mean a
/// line of the conversation copied as a fact (seen on LoCoMo: "The transgender stories were so
/// inspiring! I was so happy and thankful for all the support.").
pub fn check_person(text: &str) -> Result<(), Rejection> {
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
    let words: Vec<String> = outside
        .split(|c: char| !c.is_alphanumeric() && c != '\'' && c != '’')
        .map(|w| w.trim_matches(['\'', '’']).replace('’', "'"))
        .filter(|w| !w.is_empty())
        .collect();
    let first_person = words.iter().enumerate().any(|(at, w)| match w.as_str() {
        // "I" before a word ("I was"), not a numeral ("World War I").
        "I" => words
            .get(at + 1)
            .is_some_and(|next| next.chars().next().is_some_and(char::is_lowercase)),
        "I'm" | "I've" | "I'd" | "I'll" | "me" | "Me" | "my" | "My" | "myself" | "Myself" => true,
        _ => false,
    });
    if first_person {
        return Err(Rejection::FirstPerson);
    }
    // "The assistant will make sure to keep you updated on any changes to the research plan."
    // (explicit mode's background save, the scenario suite).
    let second_person = words.iter().any(|w| {
        matches!(
            w.to_lowercase().as_str(),
            "you" | "your" | "yours" | "yourself" | "you're" | "you've" | "you'll" | "you'd"
        )
    });
    if second_person {
        return Err(Rejection::SecondPerson);
    }
    Ok(())
}
