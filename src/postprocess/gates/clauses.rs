//! The user's messages cut into clauses, each with its subject: the user ("I", "we", "my wife
//! and I"), someone or something else ("my cat", "my brother", "he", "Dad", "the trip", a name
//! the user gave someone), or no one said. Read by [`super::subject`] (whose fact it is) and
//! [`super::roles`] (who did what to whom).

use std::collections::HashSet;

use crate::language::content_words;

#[derive(Clone, Debug, PartialEq)]
pub(super) enum Subject {
    User,
    /// Someone or something else, as the user named it ("cat", "brother", "he").
    Other(String),
    Unknown,
}

/// The words of `text`, lowercased, a possessive "'s" and apostrophes dropped ("I'm": "im").
pub(super) fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric() && c != '\'')
        .filter(|w| !w.is_empty())
        .map(|w| {
            let lower = w.to_lowercase();
            lower.trim_end_matches("'s").replace('\'', "")
        })
        .collect()
}

/// The clause's subject, from its first words.
fn subject_of(clause: &[String], names: &[String]) -> Subject {
    let start: Vec<&str> = clause
        .iter()
        .map(String::as_str)
        .skip_while(|w| super::lists().subject_leading.contains(w))
        .collect();
    let first = start.first().copied().unwrap_or_default();
    let user = speaks_as_user;
    if user(first) {
        return Subject::User;
    }
    if matches!(first, "my" | "our") {
        // "my wife and I", "my brother and me": the user too.
        if start.iter().take(5).skip(2).any(|w| user(w) || *w == "me") {
            return Subject::User;
        }
        // The noun, past the words that only qualify it ("my best friend Siobhan": the friend).
        return match start
            .iter()
            .skip(1)
            .find(|w| !super::lists().unmentioned_modifiers.contains(w))
            .or(start.get(1))
        {
            Some(noun) => Subject::Other((*noun).to_owned()),
            None => Subject::Unknown,
        };
    }
    // "the trip is now in November": a clause about the thing it names.
    if super::lists().subject_definite.contains(&first) && !start.iter().any(|w| user(w)) {
        if let Some(noun) = start.get(1) {
            return Subject::Other((*noun).to_owned());
        }
    }
    if super::lists().subject_others.contains(&first) {
        return Subject::Other(first.to_owned());
    }
    // A name opening a clause in which the user does not speak ("Priya agreed to monthly
    // one-to-ones"; not "Tomas and I went climbing", which is the user's too), or a word for a
    // person used as one ("Dad is walking with a frame now").
    let person = super::lists()
        .subject_people
        .iter()
        .any(|p| first == *p || first.strip_suffix('s') == Some(p));
    if (person || names.iter().any(|n| n == first)) && !start.iter().any(|w| user(w)) {
        return Subject::Other(first.to_owned());
    }
    Subject::Unknown
}

/// The user's clauses with their subjects; a clause that names none has the one before it in
/// its sentence ("Noor, my wife, is a doctor on nights": the doctor is the wife), unless it has
/// the user speaking in it ("My boss agreed, from Monday I'm remote"), which keeps it the user's
/// as any clause with no subject is.
pub(super) fn clauses(text: &str, names: &[String]) -> Vec<(Subject, Vec<String>)> {
    let mut out: Vec<(Subject, Vec<String>)> = Vec::new();
    // A colon opens a clause of its own ("Quick update: Dorota moved our lessons").
    for sentence in text.split(['.', '!', '?', ';', ':', '\n']) {
        let mut pieces: Vec<Vec<String>> = Vec::new();
        for part in sentence.split(',') {
            let mut current: Vec<String> = Vec::new();
            for word in words(part) {
                if super::lists().subject_joins.contains(&word.as_str()) && !current.is_empty() {
                    pieces.push(std::mem::take(&mut current));
                }
                current.push(word);
            }
            pieces.push(current);
        }
        let mut previous = Subject::Unknown;
        for piece in pieces.into_iter().filter(|p| !p.is_empty()) {
            let subject = match subject_of(&piece, names) {
                Subject::Unknown if piece.iter().any(|w| speaks_as_user(w)) => Subject::Unknown,
                Subject::Unknown => previous.clone(),
                found => found,
            };
            previous = subject.clone();
            out.push((subject, piece));
        }
    }
    out
}

/// A word by which the user speaks of themselves as the one who does something ("I", "we",
/// "I'm", …, as [`words`] writes them).
fn speaks_as_user(word: &str) -> bool {
    matches!(word, "i" | "im" | "ive" | "id" | "ill" | "we" | "were")
}

/// How much of `fact_words` (a fact's content words) the user's clauses say: the best share
/// among the clauses about the user (or about no one said), and the best among those about
/// someone else that `counts` accepts (`counts(who, clause)`), with who that is.
pub(super) fn best_shares(
    fact_words: &HashSet<String>,
    user_texts: &[&str],
    names: &[String],
    counts: impl Fn(&str, &[String]) -> bool,
) -> (f64, Option<(f64, String)>) {
    let (mut best_user, mut best_other): (f64, Option<(f64, String)>) = (0.0, None);
    for text in user_texts {
        for (subject, clause) in clauses(text, names) {
            let clause_words = content_words(&clause.join(" "));
            let share =
                fact_words.intersection(&clause_words).count() as f64 / fact_words.len() as f64;
            match subject {
                Subject::User | Subject::Unknown => best_user = best_user.max(share),
                Subject::Other(who) => {
                    if counts(&who, &clause) && best_other.as_ref().is_none_or(|(s, _)| share > *s)
                    {
                        best_other = Some((share, who));
                    }
                }
            }
        }
    }
    (best_user, best_other)
}
