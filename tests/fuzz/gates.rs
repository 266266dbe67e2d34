//! The gates and core-memory hygiene on generated facts: sentences built from the phrases the
//! newest-wins rule reads ("works as", "left", "no longer", "is now a … at …"), names, clause
//! breaks and characters whose lowercase is longer than themselves ("İ"). Nothing panics, no fact
//! supersedes itself, and a `human` block keeps every line that was not superseded.

use proptest::prelude::*;

use memproxy::agent::history::{self, is_history};
use memproxy::agent::hygiene;
use memproxy::postprocess::gates;

const PIECES: [&str; 28] = [
    "The user",
    "Ana",
    "the user's sister",
    "no longer",
    "now",
    "also",
    "works as a",
    "works at",
    "is a",
    "is now an",
    "left",
    "moved to",
    "lives in",
    "job is",
    "data analyst",
    "at",
    "for",
    "Fabrikam",
    "Contoso",
    "Porto",
    "and",
    ",",
    "İstanbul",
    "STRAßE",
    "…",
    "'s",
    ".",
    "No longer true:",
];

/// A fact shaped like the ones the rule reads, so that many pairs supersede each other.
fn claim() -> impl Strategy<Value = String> {
    (
        prop::sample::select(vec!["The user", "Ana", "The user's sister", "İlke"]),
        prop::sample::select(vec!["", " now", " no longer", " also", " has just"]),
        prop::sample::select(vec![
            " works as a",
            " works at",
            " is a",
            " left",
            " moved to",
            " lives in",
            "'s job is",
        ]),
        prop::sample::select(vec![
            " data analyst at Fabrikam",
            " Contoso",
            " Porto",
            " Lisbon",
            " nurse for STRAßE GmbH",
            " engineer at İstanbul Labs",
        ]),
        prop::sample::select(vec![
            "",
            " and works at Contoso",
            ", mostly SQL",
            " for a new job",
        ]),
    )
        .prop_map(|(who, adverb, verb, what, tail)| format!("{who}{adverb}{verb}{what}{tail}."))
}

fn sentence() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => claim(),
        1 => prop::collection::vec(prop::sample::select(PIECES.to_vec()), 0..10)
            .prop_map(|words| words.join(" ")),
        1 => "\\PC{0,60}",
    ]
}

#[test]
fn newest_wins_and_hygiene_on_generated_facts() {
    crate::run(
        "gates-newest-wins",
        3_000,
        (
            sentence(),
            sentence(),
            prop::collection::vec(sentence(), 0..4),
        ),
        |(new, old, block)| {
            prop_assert!(
                !gates::supersedes(&new, &new),
                "a fact superseded itself: {new:?}"
            );
            let _ = (
                gates::supersedes(&new, &old),
                gates::same_topic(&new, &old),
                gates::carries(&new, &old),
                gates::check_form(&new),
            );
            let value = block.join("\n");
            let placeholder =
                value.trim().is_empty() || hygiene::PLACEHOLDERS.contains(&value.trim());
            if let (Ok(after), false) = (
                hygiene::append("human", &value, &new, std::slice::from_ref(&old)),
                placeholder,
            ) {
                // Every line is still there, as it was or marked as history; only history is
                // dropped, for newer history, once the block keeps its two lines of it.
                let history = after.lines().filter(|l| is_history(l)).count();
                for line in value.lines() {
                    let marked = history::line(line, &new, None);
                    let kept = after.lines().any(|l| l == line || l == marked);
                    prop_assert!(
                        kept || is_history(line) || history == 2,
                        "line {line:?} lost: {value:?} + {new:?} -> {after:?}"
                    );
                }
            }
            Ok(())
        },
    );
}

/// The history lines of a `human` block, on generated facts and texts: nothing panics, a line made
/// of any old and new fact reads back as history, its old fact without what holds since, and
/// neither a generated fact nor a line of it is taken for history.
#[test]
fn history_lines_on_generated_facts() {
    crate::run(
        "agent-history-lines",
        2_000,
        (sentence(), sentence(), prop::option::of(0i64..200_000)),
        |(old, new, day)| {
            let line = history::line(&old, &new, day);
            prop_assert!(is_history(&line), "{line:?}");
            let former = history::former(&line).unwrap_or_default();
            prop_assert!(!former.contains('\n') || old.contains('\n'));
            // The old fact ends where what holds since begins.
            if !old.contains("; since then: ") {
                prop_assert!(
                    line.contains(&format!("{former}; since then: ")),
                    "{line:?}"
                );
            }
            for text in [&old, &new] {
                let generated_history = ["No longer true: ", "Until ", "Formerly, "]
                    .iter()
                    .any(|mark| text.trim_start().starts_with(mark));
                prop_assert!(generated_history || !is_history(text), "{text:?}");
            }
            Ok(())
        },
    );
}

/// Facts that no longer hold, on generated texts: nothing panics, a question is told about the
/// past or not without failing, and what is shown is some of what was given, each text once,
/// none that a live fact says, none that its replacement only added to.
#[test]
fn former_facts_on_generated_texts() {
    use memproxy::memory::history;
    use memproxy::store::FormerFact;
    crate::run(
        "history-former-facts",
        2_000,
        (
            sentence(),
            prop::collection::vec((sentence(), prop::option::of(sentence())), 0..6),
            prop::collection::vec(sentence(), 0..3),
        ),
        |(question, given, live)| {
            let _ = history::asks_about_the_past(&question);
            let former: Vec<FormerFact> = given
                .iter()
                .enumerate()
                .map(|(i, (text, replaced_by))| FormerFact {
                    memory_id: i as i64,
                    text: text.clone(),
                    replaced_by: replaced_by.clone(),
                    until_ms: i as i64,
                })
                .collect();
            let shown = history::worth_showing(former.clone(), &live);
            for (k, fact) in shown.iter().enumerate() {
                prop_assert!(former.contains(fact), "{fact:?} was not given");
                prop_assert!(!fact.text.trim().is_empty());
                prop_assert!(!live.iter().any(|l| l.trim() == fact.text.trim()));
                prop_assert!(!shown[..k].iter().any(|s| s.text.trim() == fact.text.trim()));
                if let Some(new) = &fact.replaced_by {
                    prop_assert!(!memproxy::language::only_adds_to(new, &fact.text));
                }
            }
            Ok(())
        },
    );
}

/// The question cues and the names followed to a second hop, on generated texts: no panic, and
/// every name followed is a word of the facts it came from.
#[test]
fn question_cues_and_followed_names_on_generated_texts() {
    use memproxy::memory::cues;
    crate::run(
        "cues-and-names",
        2_000,
        (sentence(), prop::collection::vec(sentence(), 0..6)),
        |(question, facts)| {
            let _ = cues::asks_about_the_assistant(&question);
            let texts: Vec<&str> = facts.iter().map(String::as_str).collect();
            let all = facts.join(" ").to_lowercase();
            for name in memproxy::language::names_of_others(&texts) {
                prop_assert!(!name.is_empty());
                prop_assert!(all.contains(&name), "{name} is not in {all}");
            }
            Ok(())
        },
    );
}

/// What a question takes for granted, on generated texts: no panic, at most `MOST` things, each
/// a word of ASCII lowercase letters (it is written into the memory block as is), and a
/// statement that names one mentions it.
#[test]
fn presupposed_things_on_generated_texts() {
    use memproxy::memory::unmentioned::{self, MOST};
    crate::run(
        "unmentioned",
        2_000,
        (sentence(), sentence(), prop::bool::ANY),
        |(question, other, statements_only)| {
            let asked = format!("{question} What is my {other}?");
            let found = unmentioned::presupposed(&asked);
            prop_assert!(found.len() <= MOST);
            for thing in &found {
                prop_assert!(thing.thing.chars().all(|c| c.is_ascii_lowercase()));
                prop_assert!(thing.thing.chars().count() >= 3);
                prop_assert!(!thing.words.is_empty());
                let said = format!("I have a {}.", thing.words[0]);
                prop_assert!(unmentioned::mentions(&said, &thing.words, statements_only));
            }
            let _ = unmentioned::mentions(&other, std::slice::from_ref(&question), statements_only);
            Ok(())
        },
    );
}

/// Relative days made dates, on generated facts and sentences: no panic; a resolved fact has a
/// date and no relative day left to resolve (resolving twice changes nothing).
#[test]
fn relative_days_on_generated_facts() {
    use memproxy::postprocess::gates::relative;
    crate::run(
        "relative-days",
        2_000,
        (sentence(), sentence(), -1_000i64..40_000),
        |(fact, said, day)| {
            let when = ["yesterday", "on Saturday", "last Monday", "this morning"];
            for fact in
                std::iter::once(fact.clone()).chain(when.iter().map(|w| format!("{fact} {w}.")))
            {
                if let Some(resolved) = relative::resolve(&fact, day) {
                    prop_assert!(resolved.chars().any(|c| c.is_ascii_digit()), "{resolved}");
                    prop_assert_eq!(relative::resolve(&resolved, day), None);
                }
                if let Some(dated) = relative::from_source(&fact, std::slice::from_ref(&said), day)
                {
                    prop_assert!(dated.starts_with(fact.trim_end().trim_end_matches(['.', '!'])));
                    prop_assert_eq!(
                        relative::from_source(&dated, std::slice::from_ref(&said), day),
                        None
                    );
                }
            }
            Ok(())
        },
    );
}

/// A fact put in the tense the user told it ("is painting" → "painted") changes only that, and
/// once: the result has nothing left to change.
#[test]
fn tense_as_told_on_generated_facts() {
    crate::run(
        "tense-as-told",
        2_000,
        (sentence(), sentence(), "[a-zA-Z]{1,8}"),
        |(fact, said, verb)| {
            for (fact, said) in [
                (fact.clone(), said.clone()),
                (
                    format!("{fact} is {verb}ing {fact}"),
                    format!("{said} I {verb}ed it."),
                ),
            ] {
                let evidence = gates::Evidence::new([("user", said.as_str())]);
                if let Some(told) = evidence.as_told(&fact) {
                    prop_assert_ne!(&told, &fact);
                    prop_assert!(told.split(' ').count() < fact.split(' ').count(), "{told}");
                    prop_assert_eq!(evidence.as_told(&told), None);
                }
            }
            Ok(())
        },
    );
}

/// A claim of liking, interest or worry stands only when the user voiced one: with no such word
/// in anything the user said, it is refused, whatever else they said.
#[test]
fn unvoiced_readings_on_generated_texts() {
    crate::run(
        "unvoiced-readings",
        2_000,
        (
            sentence(),
            prop::sample::select(vec![
                "is worried about",
                "is concerned about",
                "is interested in",
                "is looking for information about",
                "prefers",
                "is passionate about",
            ]),
            "[a-zA-Z ]{3,20}",
        ),
        |(said, claim, object)| {
            let fact = format!("The user {claim} the {object}.");
            let evidence = gates::Evidence::new([("user", said.as_str())]);
            let result = evidence.check(&fact);
            let lower = said.to_lowercase();
            let voiced = [
                "worr",
                "concern",
                "interest",
                "look",
                "prefer",
                "passion",
                "like",
                "love",
                "fond",
                "into ",
                "want",
                "need",
                "help",
                "try",
                "plan",
                "keen",
                "hop",
                "wish",
                "anxious",
                "nervous",
                "afraid",
                "scared",
                "fear",
                "stress",
                "panic",
                "uneasy",
                "bother",
                "freak",
                "enjoy",
                "fan of",
                "favo",
                "adore",
                "obsess",
                "crazy",
                "go-to",
                "hooked",
                "great",
                "amazing",
                "awesome",
                "curious",
                "learn",
                "seek",
                "search",
                "think",
                "consider",
                "dream",
                "eager",
                "explor",
                "wanna",
                "fascinat",
                "'d like",
                "would like",
                "'d love",
                "would love",
                "can't get enough",
            ]
            .iter()
            .any(|w| lower.contains(w));
            // Words in a language the rules do not read are not held to English words: only the
            // fact's form and the gates that read the (English) fact alone are asked.
            if memproxy::language::of(&said).is_none() {
                prop_assert_eq!(
                    result,
                    gates::Evidence::check_fact_alone(&fact),
                    "{} from {:?}",
                    fact,
                    said
                );
            } else if !voiced {
                prop_assert!(result.is_err(), "{fact} from {said:?}");
            }
            Ok(())
        },
    );
}
