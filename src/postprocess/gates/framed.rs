//! What the user only framed, stored as done: "I got an offer to be sous-chef at a small bistro"
//! kept as "The user is a sous-chef at the bistro.", "I plan to move to Porto" as "The user moves
//! to Porto.", "I used to live in Lyon" as "The user lives in Lyon.". A small memory LLM keeps the
//! words that say what and drops the one that says it is an offer, a plan or the past; the fact
//! then reads as current, and is wrong.
//!
//! The rule reads the fact against the user's sentence, not a list of such words: the fact's
//! head (its first content word after "the user") opens an infinitive in the sentence ("to be
//! sous-chef", "to move"), and the content word that governs that infinitive ("offer", "plan",
//! "used") is not in the fact. A fact that keeps it ("The user got an offer to be a sous-chef")
//! stands, and so does one the user also said plainly elsewhere ("I'm now sous-chef"). The
//! infinitive's mark is the language's ([`crate::language::Words::infinitive_marks`]); a
//! governing word that is a stop word ("I have to work Saturday") decides nothing.

use crate::language::content_words;
use crate::postprocess::grounding::sentences;

/// The word of the user's sentence that made `fact` an offer, a plan or the past, when the fact
/// drops it and no sentence of `user_texts` says the fact's head plainly. `None`: not framed.
pub fn framed(fact: &str, user_texts: &[impl AsRef<str>]) -> Option<String> {
    let lower = fact.trim().to_lowercase();
    let rest = lower.strip_prefix("the user ")?;
    let fact_words = super::without_dates(content_words(fact));
    let mut heads = rest
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(|w| content_words(w).into_iter().next());
    // "The user moves …": the head is the verb, and opens the infinitive itself ("to move").
    // "The user is a sous-chef …": the verb is a stop word, and so is the infinitive's ("to be
    // sous-chef"); a place right after the mark ("moved to Toronto" for "is in Toronto") opens
    // no infinitive.
    let verb_first = heads.next()?;
    let gap_needed = verb_first.is_none();
    let head = match verb_first {
        Some(stem) => stem,
        None => heads.flatten().next()?,
    };
    let marks = super::lists().infinitive_marks;
    let (mut plain, mut governing) = (false, None);
    for text in user_texts {
        for sentence in sentences(text.as_ref()) {
            let words: Vec<String> = sentence
                .split(|c: char| !c.is_alphanumeric() && c != '\'')
                .filter(|w| !w.is_empty())
                .map(str::to_lowercase)
                .collect();
            let stems: Vec<Option<String>> = words
                .iter()
                .map(|w| content_words(w).into_iter().next())
                .collect();
            let shared = stems
                .iter()
                .flatten()
                .filter(|s| fact_words.contains(*s))
                .collect::<std::collections::HashSet<_>>()
                .len();
            // The fact's source: a sentence with most of its words.
            if (shared as f64) < 0.5 * fact_words.len() as f64 {
                continue;
            }
            for at in (0..words.len()).filter(|&i| stems[i].as_deref() == Some(head.as_str())) {
                // Back over stop words ("to be sous-chef") to the infinitive's mark, then to
                // the content word that governs it ("an offer to").
                let mut back = (0..at)
                    .rev()
                    .skip_while(|&i| stems[i].is_none() && !marks.contains(&words[i].as_str()));
                let framed = back
                    .next()
                    .filter(|&i| marks.contains(&words[i].as_str()) && (!gap_needed || i + 1 < at))
                    .and_then(|mark| {
                        (0..mark)
                            .rev()
                            .find_map(|i| stems[i].as_ref().map(|s| (i, s)))
                            .filter(|(_, s)| !fact_words.contains(*s))
                            .map(|(i, _)| words[i].clone())
                    });
                match framed {
                    Some(word) => governing = governing.or(Some(word)),
                    None => plain = true,
                }
            }
        }
    }
    if plain {
        return None;
    }
    governing
}

#[cfg(test)]
mod tests {
    use super::*;

    fn said(texts: &[&str]) -> Vec<String> {
        texts.iter().map(|t| (*t).to_owned()).collect()
    }

    #[test]
    fn an_offer_a_plan_or_the_past_is_not_stored_as_done() {
        let offer = said(&["I work as a line cook at a hotel in Porto. I got an offer to be sous-chef at a small bistro. Should I take it?"]);
        assert_eq!(
            framed("The user is a sous-chef at the bistro.", &offer),
            Some("offer".to_owned())
        );
        assert_eq!(
            framed(
                "The user got an offer to be a sous-chef at a small bistro.",
                &offer
            ),
            None
        );
        assert_eq!(
            framed("The user works as a line cook at a hotel in Porto.", &offer),
            None
        );
        let plan = said(&["I plan to move to Porto next spring."]);
        assert_eq!(
            framed("The user moves to Porto next spring.", &plan),
            Some("plan".to_owned())
        );
        assert_eq!(
            framed("The user plans to move to Porto next spring.", &plan),
            None
        );
        let past = said(&["I used to live in Lyon, years ago."]);
        assert_eq!(
            framed("The user lives in Lyon.", &past),
            Some("used".to_owned())
        );
    }

    #[test]
    fn a_place_after_to_or_a_plain_statement_is_no_frame() {
        // "to" before a place, not a verb: the fact's head is not there.
        let moved = said(&["I moved to Porto last year."]);
        assert_eq!(framed("The user lives in Porto.", &moved), None);
        assert_eq!(framed("The user moved to Porto.", &moved), None);
        assert_eq!(framed("The user is in Porto.", &moved), None);
        // Said plainly too.
        let took = said(&[
            "I got an offer to be sous-chef at the bistro.",
            "I took it! I'm now sous-chef at the bistro.",
        ]);
        assert_eq!(
            framed("The user is a sous-chef at the bistro.", &took),
            None
        );
        // A stop word governs: no frame to drop.
        let must = said(&["I have to work on Saturday."]);
        assert_eq!(framed("The user works on Saturday.", &must), None);
        // Not about the user.
        assert_eq!(framed("The user's sister is a nurse.", &took), None);
    }
}
