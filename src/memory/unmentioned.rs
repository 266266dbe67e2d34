//! Things a question takes for granted that the user never mentioned ("What is my dog's name?"
//! from a user who only ever spoke of a cat).
//!
//! Handed a memory block, a small chat model answers from whatever is in it: asked for the dog's
//! name with only the cat in memory, it gives the cat's name, or says "The user has a dog named
//! Miso." A general line ("if memory does not say, say you don't know") made it refuse
//! questions the block did answer. So the proxy tells it only what it can check: that nothing the
//! user said mentions the thing asked about.
//!
//! Checked: "my <thing>", which presupposes that the user has one, and "which <thing> do I …"
//! for a few kinds of things a person may or may not have (a vet, a car, a dog). Not checked:
//! "Which ingredient do I dislike?" (the user said "mushrooms", never "ingredient"), and
//! attributes everyone has, which are told without their word ("I'm Marta", "I work as a
//! nurse"). A thing
//! is mentioned when one of its words is in a statement of the user's (a question is not one), in
//! a fact about them, or anywhere in the conversation the request carries. A few words stand for
//! others ("pet" is mentioned by "dog"; "wife" by "partner").

use super::cues::spaced;
use crate::store::{Corpus, UserScope};

/// Things checked per question, at most.
pub const MOST: usize = 2;

/// Something the question presupposes the user has.
#[derive(Clone, Debug, PartialEq)]
pub struct Presupposed {
    /// The thing as asked ("dog").
    pub thing: String,
    /// Words any of which mentions it ("dog", "puppy", "pup").
    pub words: Vec<String>,
}

/// What the newest user message presupposes the user has ("my <thing>" in a question), at most
/// [`MOST`].
pub fn presupposed(message: &str) -> Vec<Presupposed> {
    let mut found: Vec<Presupposed> = Vec::new();
    for sentence in sentences(message).filter(|s| s.is_question) {
        let words: Vec<&str> = sentence.text.split(' ').filter(|w| !w.is_empty()).collect();
        for (at, word) in words.iter().enumerate() {
            if *word != "my" {
                continue;
            }
            let mut next = words[at + 1..].iter().map(|w| strip_possessive(w));
            let thing = loop {
                match next.next() {
                    Some(w) if crate::language::words().unmentioned_modifiers.contains(&w) => {
                        continue
                    }
                    other => break other,
                }
            };
            let Some(thing) = thing else { continue };
            let checked = thing.chars().count() >= 3
                && thing.chars().all(|c| c.is_ascii_lowercase())
                && !crate::language::words()
                    .unmentioned_attributes
                    .contains(&thing)
                && !crate::language::words()
                    .unmentioned_not_things
                    .contains(&thing);
            if checked {
                add(&mut found, thing);
            }
        }
        // "Which vet do I take Miso to?": only for the kinds listed, as "which city" or "which
        // ingredient" ask for something told without that word.
        for window in words.windows(4) {
            let [which, thing, verb, subject] = window else {
                continue;
            };
            let asks = matches!(*which, "which" | "what")
                && (matches!(*verb, "do" | "did") && *subject == "i"
                    || matches!(*verb, "does" | "did" | "is" | "was") && *subject == "my");
            if asks
                && crate::language::words()
                    .unmentioned_kinds
                    .iter()
                    .any(|(kind, _)| kind == thing)
            {
                add(&mut found, thing);
            }
        }
    }
    found
}

fn add(found: &mut Vec<Presupposed>, thing: &str) {
    if found.len() < MOST && !found.iter().any(|p| p.thing == thing) {
        found.push(Presupposed {
            thing: thing.to_owned(),
            words: words_for(thing),
        });
    }
}

/// The words that mention `thing`: its kind's, or itself.
fn words_for(thing: &str) -> Vec<String> {
    match crate::language::words()
        .unmentioned_kinds
        .iter()
        .find(|(asked, _)| *asked == thing)
    {
        Some((_, words)) => words.iter().map(|w| (*w).to_owned()).collect(),
        None => vec![thing.to_owned()],
    }
}

/// Whether `text` mentions one of `words` (a plural or possessive counts); with
/// `statements_only`, only outside its questions.
pub fn mentions(text: &str, words: &[String], statements_only: bool) -> bool {
    sentences(text)
        .filter(|s| !(statements_only && s.is_question))
        .any(|s| {
            s.text
                .split(' ')
                .map(strip_possessive)
                .any(|token| words.iter().any(|w| same_word(token, w)))
        })
}

fn same_word(token: &str, word: &str) -> bool {
    if token == word {
        return true;
    }
    let Some(rest) = token.strip_prefix(word) else {
        return word
            .strip_suffix('y')
            .is_some_and(|stem| token.strip_prefix(stem) == Some("ies"));
    };
    rest == "s" || rest == "es"
}

fn strip_possessive(word: &str) -> &str {
    word.strip_suffix("'s")
        .or_else(|| word.strip_suffix('\''))
        .unwrap_or(word)
}

/// Stored texts read per thing and corpus, at most. A statement among them is enough, and the
/// read must reach it past any number of questions (which mention nothing): a user who told of
/// their sister once and asked about her 21 times was told she was never mentioned when only
/// the newest 20 were read. A read that fills this bound counts as mentioned: a false "never
/// mentioned" tells the model to deny what it was told, which is worse than no hint.
const TEXTS_READ: usize = 2_000;

impl super::MemoryService {
    /// Of the things asked about, those that no statement in the user's facts, stored turns or
    /// archival passages mentions (the request's own messages are the caller's to check).
    pub async fn never_mentioned(
        &self,
        scope: &UserScope,
        asked: Vec<Presupposed>,
    ) -> super::MemoryResult<Vec<Presupposed>> {
        if asked.is_empty() {
            return Ok(asked);
        }
        let scope = scope.clone();
        self.blocking(move |store, _| {
            let mut unmentioned = Vec::new();
            for thing in asked {
                let mut said = false;
                for corpus in [Corpus::Memory, Corpus::Message, Corpus::Passage] {
                    let texts = store.texts_with(&scope, corpus, &thing.words, TEXTS_READ)?;
                    said = texts.len() >= TEXTS_READ
                        || texts.iter().any(|text| mentions(text, &thing.words, true));
                    if said {
                        break;
                    }
                }
                if !said {
                    unmentioned.push(thing);
                }
            }
            Ok(unmentioned)
        })
        .await
    }
}

impl super::MemoryService {
    /// The user's own stored messages (any conversation, newest first) that hold each of
    /// `words`, at most `per_word` per word, read one word at a time so that a common word fills
    /// no other's share: what the user said before about a word (as in "is it a name?").
    pub async fn said_with(
        &self,
        scope: &UserScope,
        words: Vec<String>,
        per_word: usize,
    ) -> super::MemoryResult<Vec<String>> {
        if words.is_empty() {
            return Ok(Vec::new());
        }
        let scope = scope.clone();
        self.blocking(move |store, _| {
            let mut texts = Vec::new();
            for word in words {
                texts.extend(store.texts_with(&scope, Corpus::Message, &[word], per_word)?);
            }
            Ok(texts)
        })
        .await
    }
}

struct Sentence {
    /// Lowercase words between single spaces ([`spaced`]).
    text: String,
    is_question: bool,
}

/// The sentences of `text`, each known as a question or not by its end.
fn sentences(text: &str) -> impl Iterator<Item = Sentence> + '_ {
    let normalized = text.replace('’', "'");
    let mut out = Vec::new();
    let mut start = 0;
    for (at, c) in normalized.char_indices() {
        if matches!(c, '.' | '!' | '?' | '\n') {
            out.push(Sentence {
                text: spaced(&normalized[start..at]),
                is_question: c == '?',
            });
            start = at + c.len_utf8();
        }
    }
    out.push(Sentence {
        text: spaced(&normalized[start..]),
        is_question: false,
    });
    out.into_iter().filter(|s| !s.text.trim().is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn things(message: &str) -> Vec<String> {
        presupposed(message).into_iter().map(|p| p.thing).collect()
    }

    #[test]
    fn a_question_about_my_thing_presupposes_it() {
        assert_eq!(things("What is my dog's name?"), ["dog"]);
        assert_eq!(things("Which vet does my cat go to?"), ["cat", "vet"]);
        assert_eq!(things("How old is my older brother turning?"), ["brother"]);
        assert_eq!(things("When is my new car due for service?"), ["car"]);
        assert_eq!(things("What’s my wife’s favourite flower?"), ["wife"]);
        assert_eq!(
            things("Do my kids like my sister's cooking?"),
            ["kids", "sister"]
        );
        assert_eq!(things("How do I take my coffee?"), ["coffee"]);
        assert_eq!(things("Which vet do I take Miso to?"), ["vet"]);
        assert_eq!(things("What car does my son drive?"), ["son", "car"]);
    }

    #[test]
    fn attributes_statements_and_other_questions_presuppose_nothing() {
        for message in [
            "What is my name?",
            "Which city do I work in?",
            "What is my job?",
            "What was my job before my current one?",
            "Which ingredient do I dislike?",
            "Which city do I work in?",
            "What dog breed should I get?",
            "Which vet is best for cats?",
            "My dog is called Rex.",
            "What are my plans for the weekend?",
            "Is my 2nd try better?",
            "What do you think of my idea?",
            "Where is my",
        ] {
            assert!(
                things(message).is_empty(),
                "{message}: {:?}",
                things(message)
            );
        }
    }

    #[test]
    fn a_mention_is_a_statement_naming_the_thing_or_a_word_for_it() {
        let dog = words_for("dog");
        assert!(mentions("I live in Lisbon with my dog Pixel.", &dog, true));
        assert!(mentions("Both dogs sleep a lot.", &dog, true));
        assert!(mentions("We got a puppy!", &dog, true));
        assert!(!mentions(
            "Where could I walk a dog near the river?",
            &dog,
            true
        ));
        assert!(mentions(
            "Where could I walk a dog near the river?",
            &dog,
            false
        ));
        assert!(!mentions(
            "I have a cat named Miso. Dogma is a film.",
            &dog,
            true
        ));
        let pet = words_for("pet");
        assert!(mentions("The user has a cat named Miso.", &pet, true));
        let party = words_for("party");
        assert!(mentions("We threw two parties.", &party, true));
        let wife = words_for("wife");
        assert!(mentions("My partner Sam cooks.", &wife, true));
        assert!(!mentions("My brother Sam cooks.", &wife, true));
    }
}
