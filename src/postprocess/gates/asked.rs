//! What the user only asked about is no fact about them. "Any tips for sleeping after night
//! shifts?" is stored by small models as "The user has a preference for a good night's sleep",
//! and "How should I structure the literature review?" as "The user is working on how to
//! structure the literature review". A fact whose words come from the user's questions and not
//! from anything they stated is refused, unless it carries a detail only the question gave: a
//! number or date, a name, or something of the user's own ("dinner for our anniversary on June
//! 12?" holds a fact). A statement joined to a question ("…, since I just moved there?") is a
//! statement. Pure: the implicit gates and explicit mode's core-memory hygiene both call it.

use std::collections::HashSet;

use super::{content_words, sentences, share};

/// The user's words, split into what they stated and what they asked.
#[derive(Default)]
pub(super) struct Asked {
    /// Content words of the user's statements (sentences and clauses that ask nothing).
    stated: HashSet<String>,
    /// Content words of the user's questions.
    asked: HashSet<String>,
    /// Details a question carries: numbers, names, the user's own things ("our anniversary").
    specifics: HashSet<String>,
    /// The verbs of the user's requests to the assistant, lowercase: a sentence whose first
    /// word takes "me" or "us" as its object ("Tell me about my dog.", "Show us the plan")
    /// is an imperative, since in a statement a subject, not an object, follows the first word.
    requests: HashSet<String>,
}

fn raw_words(text: &str) -> Vec<&str> {
    text.split(|c: char| !c.is_alphanumeric() && c != '\'')
        .filter(|w| !w.is_empty())
        .collect()
}

impl Asked {
    /// Reads one of the user's messages.
    pub(super) fn add(&mut self, text: &str) {
        for sentence in sentences(text) {
            if let [verb, object, ..] = raw_words(sentence)[..] {
                if matches!(object, "me" | "us") && verb.chars().all(char::is_alphabetic) {
                    self.requests.insert(verb.to_lowercase());
                }
            }
            if !sentence.ends_with('?') {
                self.stated.extend(content_words(sentence));
                continue;
            }
            self.asked.extend(content_words(sentence));
            for clause in sentence.split([',', ';', ':', '(', '\u{2014}']) {
                let words: Vec<String> = raw_words(clause)
                    .iter()
                    .map(|w| w.to_lowercase().replace('\'', ""))
                    .skip_while(|w| super::lists().asked_joins.contains(&w.as_str()))
                    .collect();
                if words
                    .first()
                    .is_some_and(|w| super::lists().asked_first_person.contains(&w.as_str()))
                {
                    self.stated.extend(content_words(clause));
                }
            }
            let raw = raw_words(sentence);
            for (index, word) in raw.iter().enumerate() {
                let lower = word.to_lowercase();
                let number = word.chars().any(|c| c.is_ascii_digit())
                    && !clock_time(word, raw.get(index + 1).copied());
                let name = index > 0
                    && *word != "I"
                    && !word.starts_with("I'")
                    && word.chars().next().is_some_and(char::is_uppercase);
                let owned =
                    index > 0 && matches!(raw[index - 1].to_lowercase().as_str(), "my" | "our");
                if number || name || owned {
                    self.specifics.extend(content_words(&lower));
                }
            }
        }
    }

    /// Whether a fact with content `words` was drawn from the user's questions: most of its
    /// words are asked, none stated (`known`: words of what is already known about the user,
    /// which count as stated), and no detail of a question's is in it. A fact that joins a
    /// statement to a question ("works night shifts as a nurse") is kept.
    pub(super) fn only_asked(
        &self,
        words: &HashSet<String>,
        known: &HashSet<String>,
        grounded_share: f64,
    ) -> bool {
        if words.is_empty() || words.iter().any(|w| self.specifics.contains(w)) {
            return false;
        }
        let stated = words
            .iter()
            .any(|w| self.stated.contains(w) || known.contains(w));
        !stated && share(words, |w| self.asked.contains(w)) >= grounded_share
    }
}

impl Asked {
    /// Whether `fact` is one of the user's requests restated ("Tell the user about the user's
    /// dog." from "Tell me about my dog."): it opens with a request's verb, so it is an
    /// imperative, which states nothing about anyone.
    pub(super) fn restates_request(&self, fact: &str) -> bool {
        raw_words(fact)
            .first()
            .is_some_and(|first| self.requests.contains(&first.to_lowercase()))
    }

    /// Whether a fact with content `words` is the assistant's answer to a question of the user's,
    /// told as the user's: too few of its words stated to ground it, enough only asked, and some
    /// said only by the assistant (`answered`). "The user recommended standing leg stretches"
    /// (from "My legs still hurt!", "Any stretches you recommend?" and the answer's "standing")
    /// is one; "works night shifts as a nurse" (a statement and a question, nothing of the
    /// answer's) is not.
    pub(super) fn answer_told_as_the_users(
        &self,
        words: &HashSet<String>,
        known: &HashSet<String>,
        answered: impl Fn(&String) -> bool,
        grounded_share: f64,
    ) -> bool {
        if words.is_empty() || words.iter().any(|w| self.specifics.contains(w)) {
            return false;
        }
        let stated = |w: &String| self.stated.contains(w) || known.contains(w);
        let asked = |w: &String| self.asked.contains(w) && !stated(w);
        share(words, stated) < grounded_share
            && share(words, asked) >= grounded_share
            && words.iter().any(|w| !stated(w) && !asked(w) && answered(w))
    }
}

/// Whether `word` (with the word after it) is a time of day ("7am", "7 pm"): it says when in a
/// day, not which day, so it is no detail of the user's ("a quick breakfast before a 7am
/// shift?" asks about breakfast; seen stored as "The user is planning to have a quick breakfast
/// before a 7am shift.").
fn clock_time(word: &str, next: Option<&str>) -> bool {
    let lower = word.to_lowercase();
    let digits = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit());
    let suffixed = ["am", "pm"]
        .iter()
        .any(|m| lower.strip_suffix(m).is_some_and(digits));
    let spaced =
        digits(&lower) && next.is_some_and(|n| matches!(n.to_lowercase().as_str(), "am" | "pm"));
    suffixed || spaced
}

/// Whether `fact` is drawn from what the user asked in `said` rather than stated (`known`: lines
/// already known about the user).
pub(super) fn drawn_from_question(fact: &str, said: &[&str], known: &[&str]) -> bool {
    let mut asked = Asked::default();
    for text in said {
        asked.add(text);
    }
    let known: HashSet<String> = known.iter().flat_map(|k| content_words(k)).collect();
    asked.only_asked(&super::fact_words(fact), &known, super::GROUNDED_SHARE)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether `word` (stemmed as content words are) is among `words`.
    fn has(words: &HashSet<String>, word: &str) -> bool {
        words.contains(&super::super::stem(word))
    }

    #[test]
    fn a_request_restated_is_no_fact_and_a_fact_told_in_a_request_is() {
        use super::super::{Evidence, Rejection};
        let e = Evidence::new([
            (
                "user",
                "Tell me about my dog. Remind us to water the plants!",
            ),
            ("user", "Remember that my dog is called Rexford."),
        ]);
        for restated in [
            "Tell the user about the user's dog.",
            "Remind the user to water the plants.",
        ] {
            assert_eq!(e.check(restated), Err(Rejection::FromQuestion));
        }
        assert_eq!(e.check("The user's dog is called Rexford."), Ok(()));
        // A statement's first word is its subject, never followed by "me".
        let mut asked = Asked::default();
        asked.add("Rexford loves me. Anna told me about Lisbon.");
        assert!(!asked.restates_request("Rexford loves the user."));
        assert!(!asked.restates_request("Anna told the user about Lisbon."));
    }

    #[test]
    fn questions_restated_as_facts_are_drawn_from_them() {
        let said = ["Long week. Any tips for sleeping after night shifts?"];
        assert!(drawn_from_question(
            "The user has a preference for a good night's sleep.",
            &said,
            &[]
        ));
        let said = [
            "I'm writing my thesis on coral reef bleaching.",
            "How should I structure the literature review?",
        ];
        assert!(drawn_from_question(
            "The user is currently working on how to structure the literature review.",
            &said,
            &[]
        ));
        assert!(!drawn_from_question(
            "The user is writing their thesis on coral reef bleaching.",
            &said,
            &[]
        ));
    }

    #[test]
    fn a_question_with_a_detail_or_a_statement_in_it_holds_a_fact() {
        let said = ["Can you help me plan dinner for our anniversary on June 12?"];
        assert!(!drawn_from_question(
            "The user plans to have dinner for their anniversary on June 12.",
            &said,
            &[]
        ));
        let said = ["Can you recommend a vet, since I just adopted a kitten?"];
        assert!(!drawn_from_question(
            "The user just adopted a kitten.",
            &said,
            &[]
        ));
        let said = ["Any idea what to cook for my sister who loves spicy food?"];
        assert!(!drawn_from_question(
            "The user's sister loves spicy food.",
            &said,
            &[]
        ));
        // What is already known counts as stated.
        let said = ["Where could I walk a dog near the river?"];
        assert!(!drawn_from_question(
            "The user has a dog named Pixel.",
            &said,
            &["The user lives in Lisbon with a dog named Pixel."]
        ));
        // A fact from a statement of another turn is not drawn from this turn's question.
        assert!(!drawn_from_question(
            "The user works as a data analyst at Fabrikam.",
            &["How do I make a pivot table faster?"],
            &[]
        ));
    }

    #[test]
    fn specifics_are_numbers_names_and_the_users_own_things() {
        let mut asked = Asked::default();
        asked.add("Should I bring flowers to Casa Mia for our anniversary on the 12th?");
        assert!(has(&asked.specifics, "casa"));
        assert!(has(&asked.specifics, "anniversary"));
        assert!(has(&asked.specifics, "12th"));
        assert!(!has(&asked.specifics, "flowers"));
        assert!(!has(&asked.specifics, "should"));
        let mut asked = Asked::default();
        asked.add("Can you suggest a quick breakfast I can eat before a 7am shift or a 10 pm one?");
        assert!(!has(&asked.specifics, "7am"));
        assert!(!has(&asked.specifics, "10"));
    }

    #[test]
    fn a_time_of_day_in_a_question_holds_no_fact() {
        let said = ["Thanks. Can you suggest a quick breakfast I can eat before a 7am shift?"];
        assert!(drawn_from_question(
            "The user is planning to have a quick breakfast before a 7am shift.",
            &said,
            &[]
        ));
        // A date does: it says which day.
        let said = ["Can you suggest a quick breakfast for the 12th?"];
        assert!(!drawn_from_question(
            "The user is planning to have a quick breakfast on the 12th.",
            &said,
            &[]
        ));
    }
}
