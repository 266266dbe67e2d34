//! Facts of which a user has one at a time (where they live, where they work, their job), read
//! from a fact's text: the UPDATE and INVALIDATE checks ask whether two texts state the same one,
//! and the newest-wins rule ([`supersedes`]) retires the older of two that disagree, in implicit
//! memory and in an agent's `human` block alike. When a text is not plainly one such fact (a
//! second job "also", a compound sentence, someone's opinion of it), nothing is superseded: a
//! wrong retirement would destroy a correct fact.

use std::collections::HashSet;

use super::{content_words, covers, fact_words, share, without_dates, COVERED_SHARE};

/// Whether the text of an UPDATE carries the new `fact`: it covers it, or states the same
/// one-at-a-time fact with the fact's other words ("Ana lives in Porto." carries "Ana moved to
/// Porto."). An update that keeps the old text, or rewrites it into something else, does not.
pub fn carries(text: &str, fact: &str) -> bool {
    if covers(text, fact) {
        return true;
    }
    let kind = relation(fact);
    if kind.is_none() || kind != relation(text) {
        return false;
    }
    let phrase_words: HashSet<String> = super::lists()
        .relation_relations
        .iter()
        .filter(|(k, _)| Some(*k) == kind)
        .flat_map(|(_, phrases)| phrases.iter().flat_map(|p| content_words(p)))
        .collect();
    let rest: HashSet<String> = without_dates(fact_words(fact))
        .difference(&phrase_words)
        .cloned()
        .collect();
    let text = content_words(text);
    !rest.is_empty() && share(&rest, |w| text.contains(w)) >= COVERED_SHARE
}

/// Which one-at-a-time fact a text states, wherever the phrase is in it.
fn relation(text: &str) -> Option<&'static str> {
    let lower = format!(" {} ", text.to_lowercase());
    super::lists()
        .relation_relations
        .iter()
        .find(|(_, phrases)| phrases.iter().any(|p| lower.contains(&format!(" {p} "))))
        .map(|(kind, _)| *kind)
}

/// Whether `fact` is about what the stored memory `old` is about (they share a content word
/// beyond their subject, or state the same one-at-a-time fact: "moved to Berlin" and "lives in
/// Paris"), so that it may retire it as no longer true. A small model's
/// INVALIDATE of an unrelated memory ("allergic to penicillin" retiring "teaches chemistry")
/// would destroy a correct fact; when unsure, both are kept.
pub fn same_topic(fact: &str, old: &str) -> bool {
    let (fact_relation, old_relation) = (relation(fact), relation(old));
    if fact_relation.is_some() && fact_relation == old_relation {
        return true;
    }
    let (fact, old) = (fact_words(fact), fact_words(old));
    fact.intersection(&old).next().is_some()
}

/// One such fact as a text states it.
#[derive(Debug, PartialEq, Eq)]
struct Claim {
    /// Whom it is about, lowercased: "the user", "ana", "the user's sister".
    subject: String,
    /// Which relations it states ("works as a nurse at St Mary's" is a job and a workplace).
    kinds: Vec<&'static str>,
    /// Its content words after the relation's phrase, without dates.
    object: HashSet<String>,
    /// It says the relation ended ("left Fabrikam", "no longer lives in Lisbon").
    ended: bool,
}

/// Reads the one-at-a-time fact `text` states, if it plainly states one.
fn claim(text: &str) -> Option<Claim> {
    let lower = text
        .trim()
        .trim_end_matches(['.', '!'])
        .to_lowercase()
        .replace(['\u{2019}'], "'");
    let padded = format!(" {lower} ");
    if super::lists()
        .relation_not_exclusive
        .iter()
        .any(|w| padded.contains(&format!(" {w} ")))
    {
        return None;
    }
    let words: Vec<&str> = lower
        .split_whitespace()
        .filter(|w| !super::lists().relation_adverbs.contains(w))
        .collect();
    let plain = format!(" {} ", words.join(" "));
    let at_or_for = |rest: &str| rest.contains(" at ") || rest.contains(" for ");
    // (where, phrase, kinds, ended)
    let mut found: Option<(usize, &str, Vec<&'static str>, bool)> = None;
    let mut consider = |phrase: &'static str, kinds: Vec<&'static str>, ended: bool| {
        if let Some(at) = plain.find(&format!(" {phrase} ")) {
            if found.as_ref().is_none_or(|(best, ..)| at < *best) {
                found = Some((at, phrase, kinds, ended));
            }
        }
    };
    for (kind, phrases) in super::lists().relation_relations {
        for phrase in phrases.iter().filter(|p| **p != "lives near") {
            consider(phrase, vec![kind], false);
        }
    }
    for (phrase, kinds) in super::lists().relation_endings {
        consider(phrase, kinds.to_vec(), true);
    }
    for phrase in super::lists().relation_role_verbs {
        consider(phrase, vec!["job", "workplace"], false);
    }
    let (at, phrase, mut kinds, mut ended) = found?;
    let mut subject: Vec<&str> = plain[..at].split_whitespace().collect();
    while subject.last().is_some_and(|w| ["has", "have"].contains(w)) {
        subject.pop();
    }
    if subject.ends_with(&["no", "longer"]) {
        subject.truncate(subject.len() - 2);
        ended = true;
    }
    let mut subject = subject.join(" ");
    if phrase == "job is" {
        subject = subject.strip_suffix("'s").unwrap_or(&subject).to_owned();
    }
    if subject == "user" {
        subject = "the user".to_owned();
    }
    if subject.is_empty()
        || subject.split_whitespace().count() > 4
        || subject
            .split_whitespace()
            .any(|w| super::lists().relation_not_subjects.contains(&w))
    {
        return None;
    }
    let rest = &plain[at + phrase.len() + 1..];
    let cut = super::lists()
        .relation_clause_breaks
        .iter()
        .filter_map(|b| rest.find(b))
        .min()
        .unwrap_or(rest.len());
    let (object_text, extra) = rest.split_at(cut);
    let object_text = format!(" {} ", object_text.trim());
    // A second relation in the same sentence: a compound fact, not one to retire whole.
    if relation(extra).is_some() {
        return None;
    }
    if super::lists().relation_role_verbs.contains(&phrase) {
        let role = object_text.split(" at ").next().unwrap_or_default();
        let role = role.split(" for ").next().unwrap_or_default();
        if !at_or_for(&object_text)
            || role
                .split_whitespace()
                .any(|w| super::lists().relation_not_roles.contains(&w))
        {
            return None;
        }
    } else if !ended {
        if kinds == ["job"] && at_or_for(&object_text) {
            kinds.push("workplace");
        } else if kinds == ["workplace"] && object_text.contains(" as ") {
            kinds.push("job");
        }
    }
    let object = without_dates(content_words(&object_text));
    if object.is_empty() {
        return None;
    }
    Some(Claim {
        subject,
        kinds,
        object,
        ended,
    })
}

/// Whether `text` plainly states where someone lives or works, or their job (or that one ended).
pub fn states_one_at_a_time(text: &str) -> bool {
    claim(text).is_some()
}

/// Whether the newer fact `new` makes the older `old` no longer true: both plainly state a
/// one-at-a-time fact of the same subject, and `new` either names another value ("is now an
/// engineer at Contoso" over "works as an analyst at Fabrikam") or ends the old one ("left
/// Fabrikam"). A new text that says less than the old one ("works at Fabrikam" after "works as an
/// analyst at Fabrikam"), or all of it and more, retires nothing.
/// A deadline moved to another date supersedes the old one ([`super::deadline`]).
pub fn supersedes(new: &str, old: &str) -> bool {
    if super::deadline::moves(new, old) {
        return true;
    }
    let (Some(new), Some(old)) = (claim(new), claim(old)) else {
        return false;
    };
    if new.subject != old.subject || old.ended || !new.kinds.iter().any(|k| old.kinds.contains(k)) {
        return false;
    }
    if new.ended {
        return new.object.is_subset(&old.object);
    }
    // Another value: each says something the other does not. A text that says all the old one
    // said and more ("moved to Porto for a new job" after "moved to Porto") leaves it true.
    !new.object.is_subset(&old.object) && !old.object.is_subset(&new.object)
}

/// What of a home fact stays true when the home changes: "The user lives in Lisbon with a dog
/// named Pixel." superseded by a move keeps "The user lives with a dog named Pixel." (who the user
/// lives with moves along; a later fact corrects it if not). `None`: nothing beyond the home.
pub fn remainder(old: &str) -> Option<String> {
    let claim = claim(old)?;
    if !claim.kinds.contains(&"home") || claim.ended {
        return None;
    }
    let lower = old.to_lowercase();
    let phrase = super::lists()
        .relation_relations
        .iter()
        .filter(|(kind, _)| *kind == "home")
        .flat_map(|(_, phrases)| phrases.iter())
        .filter_map(|p| lower.find(&format!(" {p} ")).map(|at| (at, p.len())))
        .min()?;
    let with = lower[phrase.0..].find(" with ")? + phrase.0;
    let rest = old.get(with + " with ".len()..)?.trim();
    let subject = old.get(..phrase.0)?.trim();
    (!rest.is_empty() && !subject.is_empty()).then(|| format!("{subject} lives with {rest}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn who_the_user_lives_with_outlasts_the_home() {
        assert_eq!(
            remainder("The user lives in Lisbon with a dog named Pixel."),
            Some("The user lives with a dog named Pixel.".to_owned())
        );
        assert_eq!(
            remainder("Ana lives in Porto with her partner Rui."),
            Some("Ana lives with her partner Rui.".to_owned())
        );
        assert_eq!(remainder("The user lives in Lisbon."), None);
        assert_eq!(remainder("The user works at Fabrikam with Ana."), None);
        assert_eq!(
            remainder("The user no longer lives in Lisbon with Ana."),
            None
        );
    }

    #[test]
    fn a_new_job_home_or_workplace_supersedes_the_old_one() {
        let analyst = "The user works as a data analyst at Fabrikam.";
        assert!(supersedes(
            "The user is now a machine learning engineer at Contoso.",
            analyst
        ));
        assert!(supersedes("The user left Fabrikam.", analyst));
        assert!(supersedes("The user quit Fabrikam in May.", analyst));
        assert!(supersedes("The user now works at Contoso.", analyst));
        assert!(supersedes(
            "The user moved to Porto in October 2026.",
            "The user lives in Lisbon."
        ));
        assert!(supersedes(
            "The user no longer lives in Lisbon.",
            "The user lives in Lisbon."
        ));
        assert!(supersedes("The user's job is nursing.", analyst));
        assert!(supersedes("Ana moved to Braga.", "Ana lives in Porto."));
        assert!(supersedes(
            "The user moved to Porto for a new job.",
            "The user lives in Lisbon with their dog Pixel."
        ));
    }

    #[test]
    fn what_is_not_plainly_a_change_supersedes_nothing() {
        let analyst = "The user works as a data analyst at Fabrikam.";
        // Less than the old text, the same, or more of it: the old one is still true (a small
        // model marked "moved to Porto" untrue beside "moved to Porto for a new job").
        assert!(!supersedes("The user works at Fabrikam.", analyst));
        assert!(!supersedes(analyst, "The user works at Fabrikam."));
        assert!(!supersedes(
            "The user moved to Porto for a new job.",
            "The user moved to Porto."
        ));
        assert!(!supersedes(analyst, analyst));
        assert!(!supersedes(
            "The user lives in Porto.",
            "The user moved to Porto in October."
        ));
        // A second job, someone else's, an opinion, a compound fact, another relation.
        assert!(!supersedes(
            "The user also works as a barista at Casa Mia.",
            analyst
        ));
        assert!(!supersedes(
            "The user's sister works as a nurse at St Mary's.",
            analyst
        ));
        assert!(!supersedes(
            "The user thinks Ana works at Contoso.",
            "The user thinks Ana works at Fabrikam."
        ));
        assert!(!supersedes(
            "The user moved to Porto and works at Contoso.",
            analyst
        ));
        assert!(!supersedes(
            "The user lives in Porto.",
            "The user works at Contoso and lives in Lisbon."
        ));
        assert!(!supersedes("The user moved to Porto.", analyst));
        assert!(!supersedes("The user is a regular at Casa Mia.", analyst));
        assert!(!supersedes("The user is a big fan of jazz.", analyst));
        assert!(!supersedes(
            "The user left their umbrella at the office.",
            analyst
        ));
        // A departure from somewhere else, and a departure that is already old.
        assert!(!supersedes("The user left Contoso.", analyst));
        assert!(!supersedes(
            "The user works at Contoso.",
            "The user left Fabrikam."
        ));
    }
}
