//! Questions that ask what the assistant itself said ("Which restaurant did you suggest?").
//!
//! Implicit mode shows earlier messages that match the user's new one. The assistant's own past
//! replies are shown only for such a question: for any other, they crowd out the user's facts.
//! A small chat model, asked "How do I take my coffee?" with "The user takes their coffee
//! black, no sugar." in the block, answered with its own earlier reply on grind sizes, shown
//! beside it as a related message; asked its job before, it read its own earlier echo of the
//! memory block and a list of Python libraries. What the assistant promised is a fact of its own
//! (extraction keeps commitments), so only questions about its words need its lines.

/// Whether `question` asks about the assistant's own earlier words ("Which table did you tell me
/// to ask for?", "What was your advice on the grinder?").
pub fn asks_about_the_assistant(question: &str) -> bool {
    crate::language::words()
        .cues
        .iter()
        .any(|cue| spaced(question).contains(&format!(" {cue} ")))
}

/// `text` lower-cased as its words between single spaces, with a space at each end, so that a
/// phrase `" {cue} "` matches whole words only.
pub fn spaced(text: &str) -> String {
    let lower = text.to_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| !c.is_alphanumeric() && c != '\'')
        .filter(|w| !w.is_empty())
        .collect();
    format!(" {} ", words.join(" "))
}

#[cfg(test)]
mod tests {
    use super::asks_about_the_assistant;

    #[test]
    fn questions_about_the_assistants_words_are_told_apart() {
        for question in [
            "Which restaurant did you suggest for our anniversary?",
            "Which table did you tell me to ask for?",
            "What was your advice on the grinder?",
            "Remind me what you recommended for dinner.",
            "You promised to remind me of something, what was it?",
        ] {
            assert!(asks_about_the_assistant(question), "{question}");
        }
        for question in [
            "How do I take my coffee?",
            "What was my job before my current one?",
            "What is my dog's name?",
            "Do you know where I live?",
            "Did youth hostels come up?",
        ] {
            assert!(!asks_about_the_assistant(question), "{question}");
        }
    }
}
