//! Who did it to whom: "Kwame lent me his old glider" stored as "The user lent Kwame his old
//! glider". The fact names the other person, so [`super::subject`]'s rule (a fact said of someone
//! it does not name) passes it; but its roles are swapped. The rule compares order, not words:
//! the fact's verb, the word right after "the user", is a word of a clause of the user's whose
//! subject is a person the fact names *after* that verb. In the user's clause that person comes
//! before the verb and does it; in the fact the user does it to them. Order is how English marks
//! who acts, and the fact's own form ("The user <verb> …") is the prompt's, in every language.
//! A verb with words between it and "the user" ("The user was lent a glider by Kwame", "has
//! lent") is not read, so a passive or a tense is never taken for a swap.

use super::clauses::{best_shares, clauses, words, Subject};
use crate::language::content_words;

/// The person whose act `fact` gives the user, if a clause of `user_texts` says that person did
/// it: the clause has the fact's verb after its subject, a person the fact names after the verb,
/// and at least half of the fact's content words, more than any clause of the user's own.
/// `names`: the names of others known from the messages and memories.
pub(super) fn swapped(fact: &str, user_texts: &[&str], names: &[String]) -> Option<String> {
    let said = words(fact);
    let at = said.iter().position(|w| w == "user")?;
    if at > 1 {
        return None;
    }
    let verb = content_words(said.get(at + 1)?).into_iter().next()?;
    // The people the fact names after its verb: written with a capital, so the fact itself shows
    // them to be names (a clause "Kwame lent me …" opens with one, which alone shows nothing).
    let named_after: Vec<String> = fact
        .split_whitespace()
        .skip(at + 2)
        .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()))
        .filter(|w| w.chars().next().is_some_and(char::is_uppercase) && *w != "I")
        .map(|w| w.trim_end_matches("'s").to_lowercase())
        .collect();
    if named_after.is_empty() {
        return None;
    }
    let fact_words = super::without_dates(content_words(fact));
    if fact_words.is_empty() {
        return None;
    }
    let mut known = names.to_vec();
    known.extend(named_after.iter().cloned());
    // A word of a clause that is the fact's verb, in any of its forms.
    let is_verb =
        |w: &String| content_words(w).into_iter().next().as_deref() == Some(verb.as_str());
    // The clauses whose subject, a person the fact names after its verb, comes before the verb.
    let acts = |who: &str, clause: &[String]| {
        named_after.iter().any(|n| n == who) && {
            let who_at = clause.iter().position(|w| w == who);
            let verb_at = clause.iter().position(is_verb);
            matches!((who_at, verb_at), (Some(w), Some(v)) if w < v)
        }
    };
    // The user is the one it was done to, right after the verb ("Kwame lent me"): the order says
    // it all, however much else the fact joins to it ("… to start flying lessons in May").
    let done_to_user = |clause: &[String]| {
        clause.iter().enumerate().any(|(at, w)| {
            is_verb(w)
                && clause
                    .get(at + 1)
                    .is_some_and(|next| super::lists().person_first.contains(&next.as_str()))
        })
    };
    for text in user_texts {
        for (subject, clause) in clauses(text, &known) {
            if let Subject::Other(who) = subject {
                if acts(&who, &clause) && done_to_user(&clause) {
                    return Some(who);
                }
            }
        }
    }
    let (best_user, best_swapped) = best_shares(&fact_words, user_texts, &known, acts);
    let (share, who) = best_swapped?;
    (share >= 0.5 && share > best_user).then_some(who)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_user_never_does_what_someone_did_to_them() {
        let said = ["Good news: Kwame lent me his old glider, so I can start lessons."];
        assert_eq!(
            swapped("The user lent Kwame his old glider.", &said, &[]),
            Some("kwame".to_owned())
        );
        // Said the right way round, or in a form the order does not decide: the user's.
        assert_eq!(
            swapped("The user borrowed Kwame's old glider.", &said, &[]),
            None
        );
        assert_eq!(
            swapped("The user was lent an old glider by Kwame.", &said, &[]),
            None
        );
        assert_eq!(swapped("The user can start lessons.", &said, &[]), None);
        // Seen from the 1.5B's background save: the swap joined to the user's own plan, with the
        // name opening the message. The user as the one it was done to decides.
        let opened = ["Kwame lent me his glider, so I can start flying lessons in May."];
        assert_eq!(
            swapped(
                "The user lent Kwame his glider to start flying lessons in May.",
                &opened,
                &[]
            ),
            Some("kwame".to_owned())
        );
        // The user did it too, or did it themselves.
        let mine = ["Kwame needed a glider, so I lent Kwame my old glider."];
        assert_eq!(
            swapped("The user lent Kwame their old glider.", &mine, &[]),
            None
        );
        let both = ["Kwame and I lent the club our old glider."];
        assert_eq!(
            swapped(
                "The user lent the club an old glider with Kwame.",
                &both,
                &[]
            ),
            None
        );
        // A name known from elsewhere, as the subject of the user's clause.
        let said = ["Yesterday Priya invited me to her wedding in June."];
        assert_eq!(
            swapped(
                "The user invited Priya to the wedding in June.",
                &said,
                &["priya".to_owned()]
            ),
            Some("priya".to_owned())
        );
    }
}
