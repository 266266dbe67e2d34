//! A fact that says less than another of its batch, in words the user never said. Small models
//! extract one statement twice, once as told and once paraphrased into something vaguer: "I will
//! use the extra time for more field data." gave both "The user will use the extra time for more
//! field data." and "The user will take advantage of the extra time." (the scenario suite, run
//! H). Beside the other, the paraphrase is a padded variant that adds nothing the user said.
//! Pure: reconcile asks it of each fact that passed the gates, against the others of its batch.

use super::{content_words, fact_words, without_dates, Evidence};

/// Fewest content words the vaguer fact must share with the other one.
const MIN_SHARED: usize = 2;

impl Evidence {
    /// Whether `fact` says nothing `other` does not, but in words the user never said: half its
    /// content words or more are `other`'s, the rest nobody said, and `other` says something of
    /// the user's that `fact` does not.
    pub fn vaguer_than(&self, fact: &str, other: &str) -> bool {
        if self.unread {
            return false;
        }
        let lower = format!(" {} ", fact.to_lowercase());
        if super::lists()
            .vaguer_changes
            .iter()
            .any(|c| lower.contains(c))
        {
            return false;
        }
        let words = without_dates(fact_words(fact));
        let others = content_words(other);
        let shared = words.iter().filter(|w| others.contains(*w)).count();
        shared >= MIN_SHARED
            && shared * 2 >= words.len()
            && words
                .iter()
                .all(|w| others.contains(w) || !self.user_words.contains(w))
            && others
                .iter()
                .any(|w| !words.contains(w) && self.user_words.contains(w))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_paraphrase_that_adds_only_unsaid_words_is_vaguer() {
        let evidence = Evidence::new([("user", "I will use the extra time for more field data.")]);
        let told = "The user will use the extra time for more field data.";
        let vague = "The user will take advantage of the extra time.";
        assert!(evidence.vaguer_than(vague, told));
        assert!(!evidence.vaguer_than(told, vague));
        let evidence = Evidence::new([(
            "user",
            "This weekend I stayed home and painted the kitchen blue.",
        )]);
        assert!(evidence.vaguer_than(
            "The user painted the kitchen.",
            "The user stayed home and painted the kitchen blue."
        ));
    }

    #[test]
    fn different_facts_changes_and_what_the_user_said_are_not() {
        let evidence = Evidence::new([(
            "user",
            "I quit Fabrikam. I moved to Porto last week for a new job.",
        )]);
        let stated = "The user works as a data analyst at Fabrikam.";
        // A change, even in the model's words.
        assert!(!evidence.vaguer_than("The user no longer works at Fabrikam.", stated));
        // Its own word of the user's ("moved").
        assert!(!evidence.vaguer_than(
            "The user moved to Porto.",
            "The user lives in Porto for a new job."
        ));
        // Too little in common.
        assert!(!evidence.vaguer_than(
            "The user is employed in Porto.",
            "The user moved to Porto for a new job."
        ));
        // The other says nothing more of the user's.
        assert!(!evidence.vaguer_than(
            "The user got a new job in Porto.",
            "The user started a new job in Porto."
        ));
    }
}
