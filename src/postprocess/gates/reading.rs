//! Likings, interests and worries a model reads into what the user said. "I painted the kitchen
//! blue." is stored by small models as "The user has a preference for painting", and "The paint
//! smell is awful. How long does it last?" as "The user is concerned about the smell of the
//! paint." and "…is looking for information about the paint smell". Such a claim stands only when
//! one of the user's sentences says it in some word of its kind about what the fact names. Pure:
//! the implicit gates (and through them explicit mode's background save) call it.

use std::collections::HashSet;

use super::lists;
use super::{content_words, sentences};

/// Whether `fact` (lowercased `lower`, content words `words`) makes a claim of liking, interest
/// or worry that none of `texts` (the user's messages, what is known about them) voices.
pub(super) fn unvoiced<'a>(
    lower: &str,
    words: &HashSet<String>,
    texts: impl Iterator<Item = &'a str> + Clone,
) -> bool {
    lists().readings.iter().any(|(claims, own_words)| {
        claims.iter().any(|c| lower.contains(c)) && !voiced(words, claims, own_words, texts.clone())
    })
}

/// Whether one sentence of `texts` holds one of `own_words` and one of the fact's words that
/// are not the claim's own ("worried" and "sleep" for "The user is worried about the baby's
/// sleep.", not "worried" in a sentence about something else).
fn voiced<'a>(
    words: &HashSet<String>,
    claims: &[&str],
    own_words: &[&str],
    texts: impl Iterator<Item = &'a str>,
) -> bool {
    let claim_words: HashSet<String> = claims.iter().flat_map(|c| content_words(c)).collect();
    let object: Vec<&String> = words.iter().filter(|w| !claim_words.contains(*w)).collect();
    texts.flat_map(sentences).any(|sentence| {
        let lower = sentence.to_lowercase();
        let said = content_words(sentence);
        own_words.iter().any(|w| lower.contains(w))
            && (object.is_empty() || object.iter().any(|w| said.contains(*w)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reads(fact: &str, said: &[&str]) -> bool {
        unvoiced(
            &fact.to_lowercase(),
            &super::super::fact_words(fact),
            said.iter().copied(),
        )
    }

    #[test]
    fn a_claim_needs_its_word_in_a_sentence_about_its_object() {
        let said = ["The paint smell is awful. I'm worried about the baby's sleep."];
        assert!(reads(
            "The user is concerned about the smell of the paint.",
            &said
        ));
        assert!(!reads("The user is worried about the baby's sleep.", &said));
        assert!(reads(
            "The user is interested in painting.",
            &["I painted the kitchen blue."]
        ));
        assert!(!reads(
            "The user likes climbing.",
            &["I'm really into climbing these days."]
        ));
        // A fact that claims nothing of the kind is not this gate's business.
        assert!(!reads("The user painted the kitchen blue.", &["Hi."]));
    }
}
