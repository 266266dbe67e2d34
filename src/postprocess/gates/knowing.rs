//! The gates a fact drawn from a chat meets after its form, as a list of named checks asked in
//! order ([`GATES`]); the first that refuses names the reason. Each reads the fact once read
//! ([`Read`]) and the evidence of the turns it came from. The order matters where two gates could
//! refuse one fact: the more particular reason comes first (a musing before the words it lacks).

use std::collections::HashSet;

use super::{
    addressed, check_person, guess, lists, mentions_assistant, near_copy, no_referent, predicate,
    promise, reading, share, someone_else_named, starts_with_assistant, Evidence, Rejection,
    ASSISTANT_ONLY_SHARE, COPY_SHARE, GROUNDED_SHARE,
};
use crate::postprocess::grounding::sentences;

/// A fact as the gates read it.
pub(super) struct Read<'a> {
    pub fact: &'a str,
    pub lower: String,
    /// Its content words ([`super::fact_words`]).
    pub words: HashSet<String>,
    /// It names the assistant.
    pub about_assistant: bool,
    /// "The assistant will think about it": wondering aloud, no fact.
    pub musing: bool,
    /// "The assistant will help": a promise of nothing in particular.
    pub vague: bool,
    /// A commitment of the assistant's: it names the assistant and promises something. The
    /// model's `kind` is not trusted; the words are.
    pub commitment: bool,
    /// The content words of the stored memories the fact relates to (the user's, as said).
    pub known: HashSet<String>,
    pub known_texts: &'a [&'a str],
}

impl<'a> Read<'a> {
    pub fn new(fact: &'a str, known_texts: &'a [&'a str]) -> Read<'a> {
        let lower = fact.to_lowercase();
        let about_assistant = mentions_assistant(fact);
        let musing = lists().musings.iter().any(|m| lower.contains(m));
        // "The user will help their sister move" is a plan, and a fact.
        let vague = about_assistant && lower.contains("will help");
        // A "commitment" that does not name the assistant ("The user suggests sending emails to
        // their dad", a small model's reading of the assistant's advice) is checked as any fact
        // is, against whose words it is.
        let commitment = about_assistant
            && !musing
            && !vague
            && lists().promises.iter().any(|p| lower.contains(p));
        Read {
            fact,
            words: super::fact_words(fact),
            lower,
            about_assistant,
            musing,
            vague,
            commitment,
            known: known_texts
                .iter()
                .flat_map(|k| super::content_words(k))
                .collect(),
            known_texts,
        }
    }

    /// Whether the user said `word` (in these turns, or in what is stored about them).
    fn said(&self, evidence: &Evidence, word: &String) -> bool {
        evidence.user_words.contains(word) || self.known.contains(word)
    }
}

/// One gate: `Err` with the reason it refuses the fact.
type Gate = fn(&Evidence, &Read<'_>) -> Result<(), Rejection>;

/// What a gate reads, and so whose language must be one the text rules read for it to judge.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Reads {
    /// The fact alone (its words against the language's lists): it judges a fact written in a
    /// language with rules, whatever language the user wrote in. Small models write their facts
    /// in English when the user spoke German; "The user will think about it" is a musing either
    /// way.
    Fact,
    /// The fact against the user's words (grounding, copies, dates, the user's own word for a
    /// claim): both must be in a language with rules, or an English fact's words would be
    /// looked for among German ones.
    UsersWords,
}

/// Every gate, in the order asked, with what it reads.
pub(super) const GATES: &[(&str, Reads, Gate)] = &[
    ("addressed", Reads::UsersWords, addressed_name),
    ("assistant_musing", Reads::Fact, assistant_musing),
    ("musing", Reads::Fact, musing),
    ("reported_question", Reads::Fact, reported_question),
    ("restated_request", Reads::UsersWords, restated_request),
    ("asked_interest", Reads::UsersWords, asked_interest),
    ("no_referent", Reads::Fact, no_referent_gate),
    ("passing", Reads::Fact, passing),
    ("someone_else", Reads::UsersWords, someone_else_gate),
    ("sensitive", Reads::UsersWords, sensitive),
    ("invented_date", Reads::UsersWords, invented_date),
    ("assistant_subject", Reads::Fact, assistant_subject),
    ("advice", Reads::UsersWords, advice),
    ("copy", Reads::UsersWords, copy),
    ("person", Reads::Fact, person),
    ("grounded", Reads::UsersWords, grounded),
    ("predicate", Reads::UsersWords, predicate_said),
    ("guessed_object", Reads::UsersWords, guessed_object),
    ("only_asked", Reads::UsersWords, only_asked),
    ("unvoiced_reading", Reads::UsersWords, unvoiced_reading),
    ("promised", Reads::UsersWords, promised),
    ("assistant_only", Reads::UsersWords, assistant_only),
];

fn refuse(refused: bool, reason: Rejection) -> Result<(), Rejection> {
    if refused {
        Err(reason)
    } else {
        Ok(())
    }
}

/// "Hey Mel!": Mel is the assistant, and neither the user nor a person in their life.
fn addressed_name(e: &Evidence, r: &Read<'_>) -> Result<(), Rejection> {
    refuse(
        addressed::about_addressed(r.fact, &e.addressed),
        Rejection::AboutAssistant,
    )
}

/// "The assistant will think about it" or "will help" promises the user nothing.
fn assistant_musing(_: &Evidence, r: &Read<'_>) -> Result<(), Rejection> {
    refuse(
        r.about_assistant && (r.musing || r.vague),
        Rejection::AboutAssistant,
    )
}

/// Wondering aloud ("might", "thinking about") states nothing yet.
fn musing(_: &Evidence, r: &Read<'_>) -> Result<(), Rejection> {
    refuse(r.musing, Rejection::Transient)
}

/// A question restated as a fact ("The user asked about …").
fn reported_question(_: &Evidence, r: &Read<'_>) -> Result<(), Rejection> {
    refuse(
        !r.about_assistant
            && lists()
                .reported_questions
                .iter()
                .any(|q| r.lower.contains(q)),
        Rejection::Question,
    )
}

/// What the user asked for, told as what they did.
fn restated_request(e: &Evidence, r: &Read<'_>) -> Result<(), Rejection> {
    refuse(e.asked.restates_request(r.fact), Rejection::FromQuestion)
}

/// An interest read into a question the user asked ("interested in X" from "What is X?").
fn asked_interest(e: &Evidence, r: &Read<'_>) -> Result<(), Rejection> {
    if r.about_assistant || !lists().interests.iter().any(|q| r.lower.contains(q)) {
        return Ok(());
    }
    let asked: HashSet<String> = r
        .words
        .iter()
        .filter(|w| !lists().interest_words.contains(&w.as_str()))
        .cloned()
        .collect();
    refuse(
        e.user_questions
            .iter()
            .any(|q| share(&asked, |w| q.contains(w)) >= 0.6),
        Rejection::Question,
    )
}

/// A fact that says nothing of anyone on its own ([`no_referent`]).
fn no_referent_gate(_: &Evidence, r: &Read<'_>) -> Result<(), Rejection> {
    refuse(no_referent(r.fact), Rejection::NoReferent)
}

/// A time that passes with the conversation ("tonight") makes no lasting fact.
fn passing(_: &Evidence, r: &Read<'_>) -> Result<(), Rejection> {
    refuse(
        !r.commitment && lists().passing.iter().any(|p| r.lower.contains(p)),
        Rejection::Transient,
    )
}

/// Another person's attribute given to the user ([`someone_else`]).
fn someone_else_gate(e: &Evidence, r: &Read<'_>) -> Result<(), Rejection> {
    let texts: Vec<&str> = e.user_texts.iter().map(String::as_str).collect();
    refuse(
        !r.commitment
            && someone_else_named(r.fact, &texts, r.known_texts, &e.earlier_names).is_some(),
        Rejection::NotTheUser,
    )
}

/// A claim about health or diet must be the user's own word, not the model's reading of it
/// ("cannot stand mushrooms" is no allergy). The list's stems are read in the text as written,
/// the fact's and the user's alike: a stemmer's output ("intolerant" → "intoler") need not start
/// with them.
fn sensitive(e: &Evidence, r: &Read<'_>) -> Result<(), Rejection> {
    let own_word = |stem: &str| {
        e.user_texts
            .iter()
            .map(String::as_str)
            .chain(r.known_texts.iter().copied())
            .any(|text| text.to_lowercase().contains(stem))
    };
    refuse(
        lists()
            .sensitive
            .iter()
            .any(|stem| r.lower.contains(stem) && !own_word(stem)),
        Rejection::Ungrounded,
    )
}

/// A date the user neither gave nor can have meant.
fn invented_date(e: &Evidence, r: &Read<'_>) -> Result<(), Rejection> {
    refuse(
        e.dates.invented(r.fact, r.known_texts),
        Rejection::InventedDate,
    )
}

/// About the assistant, and no promise: nothing of the user's.
fn assistant_subject(_: &Evidence, r: &Read<'_>) -> Result<(), Rejection> {
    refuse(
        r.about_assistant && !r.commitment && starts_with_assistant(&r.lower),
        Rejection::AboutAssistant,
    )
}

/// Advice is the assistant's ("The user should learn NumPy and Pandas."), unless the user said
/// it of themselves ("I should call my mother more"); asking it ("Should I bring flowers?") is
/// not saying it.
fn advice(e: &Evidence, r: &Read<'_>) -> Result<(), Rejection> {
    let advised = [
        " should ",
        " ought to ",
        " is advised to ",
        " is encouraged to ",
    ]
    .iter()
    .any(|a| r.lower.contains(a));
    if r.commitment || !advised {
        return Ok(());
    }
    let own_advice = e.user_texts.iter().any(|t| {
        sentences(t).any(|s| {
            let s = format!(" {} ", s.to_lowercase());
            !s.trim_end().ends_with('?') && (s.contains(" should ") || s.contains(" ought to "))
        })
    });
    refuse(!own_advice, Rejection::FromAssistant)
}

/// Word for word a line of the assistant's or a question of the user's. The assistant often
/// repeats the user's news ("Congratulations on your new role at Contoso!"): a fact the user said
/// nearly word for word is theirs.
fn copy(e: &Evidence, r: &Read<'_>) -> Result<(), Rejection> {
    if r.commitment {
        return Ok(());
    }
    let users_own = share(&r.words, |w| e.user_words.contains(w)) >= COPY_SHARE;
    if !users_own
        && e.assistant_lines
            .iter()
            .any(|line| near_copy(&r.words, line))
    {
        return Err(Rejection::CopyOfAssistant);
    }
    refuse(
        e.user_questions.iter().any(|q| near_copy(&r.words, q)),
        Rejection::CopyOfQuestion,
    )
}

/// [`check_person`].
fn person(_: &Evidence, r: &Read<'_>) -> Result<(), Rejection> {
    check_person(r.fact)
}

/// Most of the fact's words must be the user's (a commitment's may come from either side).
fn grounded(e: &Evidence, r: &Read<'_>) -> Result<(), Rejection> {
    let grounded = if r.commitment {
        share(&r.words, |w| r.said(e, w) || e.assistant_words.contains(w))
    } else {
        share(&r.words, |w| r.said(e, w))
    };
    refuse(grounded < GROUNDED_SHARE, Rejection::Ungrounded)
}

/// What a fact says of its subject must be said too: "The user's cat Miso is a pet lover." is
/// grounded by its subject alone.
fn predicate_said(e: &Evidence, r: &Read<'_>) -> Result<(), Rejection> {
    refuse(
        !r.commitment
            && predicate(r.fact).is_some_and(|p| !p.is_empty() && !p.iter().any(|w| r.said(e, w))),
        Rejection::Ungrounded,
    )
}

/// [`guess::guessed_object`].
fn guessed_object(e: &Evidence, r: &Read<'_>) -> Result<(), Rejection> {
    refuse(
        !r.commitment && guess::guessed_object(r.fact, &r.words, |w| r.said(e, w)),
        Rejection::Ungrounded,
    )
}

/// Drawn from what the user only asked, or from the answer to it told as the user's.
fn only_asked(e: &Evidence, r: &Read<'_>) -> Result<(), Rejection> {
    if r.commitment {
        return Ok(());
    }
    refuse(
        e.asked.only_asked(&r.words, &r.known, GROUNDED_SHARE)
            || e.asked.answer_told_as_the_users(
                &r.words,
                &r.known,
                |w| e.assistant_words.contains(w),
                GROUNDED_SHARE,
            ),
        Rejection::FromQuestion,
    )
}

/// A liking, an interest or a worry must be the user's own word: small models turn what the user
/// did or said into what they like, seek or fear.
fn unvoiced_reading(e: &Evidence, r: &Read<'_>) -> Result<(), Rejection> {
    let texts = e.user_texts.iter().map(String::as_str);
    refuse(
        reading::unvoiced(
            &r.lower,
            &r.words,
            texts.chain(r.known_texts.iter().copied()),
        ),
        Rejection::Ungrounded,
    )
}

/// A commitment must be one the assistant made.
fn promised(e: &Evidence, r: &Read<'_>) -> Result<(), Rejection> {
    refuse(
        r.commitment
            && r.about_assistant
            && !promise::promised(&r.words, &e.assistant_promises, &e.user_words),
        Rejection::NotPromised,
    )
}

/// Much of it in the assistant's words only: the assistant's, not the user's.
fn assistant_only(e: &Evidence, r: &Read<'_>) -> Result<(), Rejection> {
    refuse(
        !r.commitment
            && share(&r.words, |w| !r.said(e, w) && e.assistant_words.contains(w))
                >= ASSISTANT_ONLY_SHARE,
        Rejection::FromAssistant,
    )
}
