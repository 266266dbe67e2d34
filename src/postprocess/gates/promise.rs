//! An assistant's commitment is kept only if the assistant made it: one of its sentences promises
//! in the first person ("I'll remind you on Friday", "I will send the list", "Let me check"), and
//! what the commitment says is found in that sentence or in what the user said. Small models
//! otherwise store what the assistant might have offered ("The assistant promised to check
//! Tomas's availability", never said), and the user is later told of a promise nobody made.

use std::collections::HashSet;

use super::{content_words, sentences, share};

/// Share of what a commitment is about that the promise (or the user's words) must hold.
const PROMISED_SHARE: f64 = 0.6;

/// The content words of each sentence of an assistant's line that promises something.
pub(super) fn promises(line: &str) -> Vec<HashSet<String>> {
    let line = line.to_lowercase().replace('\u{2019}', "'");
    sentences(&line)
        .filter(|sentence| {
            super::lists().promise_first_person.iter().any(|phrase| {
                sentence.starts_with(phrase) || sentence.contains(&format!(" {phrase}"))
            }) && !sentence.contains("let me know")
        })
        .map(content_words)
        .filter(|words| !words.is_empty())
        .collect()
}

/// Whether the commitment with content words `fact` is one of `promises` (what it is about is
/// in one promise, or in the user's words with at least one word of the promise).
pub(super) fn promised(
    fact: &HashSet<String>,
    promises: &[HashSet<String>],
    user_words: &HashSet<String>,
) -> bool {
    let vocabulary: HashSet<String> = super::lists()
        .promise_commitment_words
        .iter()
        .flat_map(|w| content_words(w))
        .collect();
    let about: HashSet<String> = fact.difference(&vocabulary).cloned().collect();
    if about.is_empty() {
        return false;
    }
    promises.iter().any(|promise| {
        about.iter().any(|w| promise.contains(w))
            && share(&about, |w| promise.contains(w) || user_words.contains(w)) >= PROMISED_SHARE
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(fact: &str, assistant: &str, user: &str) -> bool {
        promised(
            &content_words(fact),
            &promises(assistant),
            &content_words(user),
        )
    }

    #[test]
    fn a_promise_the_assistant_made_is_one() {
        let user = "Can you remind me about the vet?";
        let said = "Sure! I\u{2019}ll remind you about the vet on Friday.";
        assert!(check(
            "The assistant promised to remind the user about the vet on Friday.",
            said,
            user
        ));
        assert!(check(
            "The assistant will send the user a packing list for Lisbon.",
            "Great trip! Let me put together a packing list for Lisbon and send it tomorrow.",
            "I fly to Lisbon next week."
        ));
    }

    #[test]
    fn an_offer_a_question_or_another_promise_is_none() {
        let user = "My brother Tomas turns 30 next month.";
        // Offered as a question, not promised.
        assert!(!check(
            "The assistant promised to check Tomas's availability.",
            "How exciting! Would you like ideas for his party? You could check his availability first.",
            user
        ));
        // A promise about something else.
        assert!(!check(
            "The assistant promised to check Tomas's availability.",
            "I'll remind you about the party on Friday.",
            user
        ));
        // No promise at all.
        assert!(!check(
            "The assistant promised to remind the user about the dentist.",
            "What a nice name!",
            "My dog is Rexford."
        ));
        assert!(!check("The assistant promised.", "I will.", ""));
        // "Let me know" asks; it promises nothing.
        assert!(!check(
            "The assistant will send the user recipes.",
            "Let me know if you want recipes.",
            "I like cooking."
        ));
    }
}
