//! Gates between the memory LLM and the store: deterministic checks that no model can talk past.
//!
//! A fact is stored only if it is a declarative statement about the user or their world (or a
//! commitment of the assistant's), self-contained, and grounded in what the user said: most of
//! its content words must come from the user's own messages. This keeps out what small models
//! extract in place of facts: the assistant's lines and advice, general knowledge, the user's
//! questions, list fragments, placeholders copied from the prompt's examples ("..."), and
//! anything seen only in the injected memory block. An update must keep the subject of the memory
//! it replaces. Every rejection has a reason, logged and counted.

use std::collections::HashSet;

use super::grounding::sentences;
use crate::language::content_words;

mod addressed;
mod asked;
mod clauses;
mod core_line;
mod dates;
mod deadline;
mod form;
mod guess;
mod instruction;
mod knowing;
#[cfg(test)]
mod labelled;
mod person;
mod promise;
mod reading;
mod rejection;
mod relation;
pub mod relative;
mod roles;
mod statements;
mod subject;
mod tense;
mod vaguer;
mod words;

pub use core_line::check_core_line;
pub use form::check_form;
pub use instruction::reads_as_instruction;
pub use person::{check_person, first_person};
pub use rejection::Rejection;
pub use relation::{carries, remainder, same_topic, states_one_at_a_time, supersedes};
pub use statements::statements;
pub use subject::{no_referent, someone_else, someone_else_named};
pub(super) use words::without_dates;
use words::{fact_words, lists, share, stem, GROUNDED_SHARE};

pub const MIN_WORDS: usize = 3;
/// Share of shared words from which a fact counts as a copy of a line.
const COPY_SHARE: f64 = 0.85;
/// Share of an old memory's content words an update must keep.
const KEPT_SUBJECT_SHARE: f64 = 0.3;
/// Share of a fact's content words that may come from the assistant's lines alone.
const ASSISTANT_ONLY_SHARE: f64 = 0.3;

/// What the facts of one extraction may be drawn from: the user's and the assistant's lines.
#[derive(Default)]
pub struct Evidence {
    user_texts: Vec<String>,
    /// The names the user calls the assistant by ("Hey Mel!").
    addressed: Vec<String>,
    user_words: HashSet<String>,
    user_questions: Vec<HashSet<String>>,
    /// What the user stated and what they only asked.
    asked: asked::Asked,
    assistant_lines: Vec<HashSet<String>>,
    assistant_words: HashSet<String>,
    /// The user's words as the date check reads them, and when they were said.
    dates: dates::SaidDates,
    /// The content words of each sentence in which the assistant promised something.
    assistant_promises: Vec<HashSet<String>>,
    /// The user's words are in a language the text rules have no rules for
    /// ([`crate::language::of`]).
    unread: bool,
    /// Words opening a sentence of the user's that their earlier messages show to be someone
    /// else's name ([`Evidence::with_earlier`]).
    earlier_names: Vec<String>,
}

impl Evidence {
    /// From the turns the facts were extracted from, `(role, text)`, with any injected memory
    /// block already removed from the text.
    pub fn new<'a>(turns: impl IntoIterator<Item = (&'a str, &'a str)>) -> Evidence {
        let mut evidence = Evidence::default();
        for (role, text) in turns {
            match role {
                "user" => {
                    evidence.user_texts.push(text.to_owned());
                    evidence.dates.add(text);
                    evidence.user_words.extend(content_words(text));
                    evidence.asked.add(text);
                    for sentence in sentences(text) {
                        if sentence.trim_end().ends_with('?') {
                            evidence.user_questions.push(content_words(sentence));
                        }
                    }
                }
                "assistant" => {
                    evidence.assistant_words.extend(content_words(text));
                    evidence.assistant_promises.extend(promise::promises(text));
                    for line in text.lines().chain(text.lines().flat_map(sentences)) {
                        let words = content_words(line);
                        if !words.is_empty() {
                            evidence.assistant_lines.push(words);
                        }
                    }
                }
                _ => {}
            }
        }
        evidence.addressed = addressed::addressed(&evidence.user_texts);
        // Told from all the user's words together: one line is often too short to tell.
        evidence.unread = crate::language::of(&evidence.user_texts.join("\n")).is_none();
        evidence
    }

    /// Whether the text rules read the user's language: when not, the gates that compare a fact
    /// with the user's words (dates, tense, the user's own words for a claim, vaguer variants)
    /// leave the facts alone, and a capital is no sign of a name (German gives every noun one).
    /// The gates that read the fact alone still judge a fact in a language they read.
    pub fn has_rules(&self) -> bool {
        !self.unread
    }

    /// The words opening the user's sentences that may be names ("Dorota moved our lessons"):
    /// what to look up in the user's earlier messages ([`Evidence::with_earlier`]).
    pub fn sentence_openers(&self) -> Vec<String> {
        if self.unread {
            return Vec::new();
        }
        let texts: Vec<&str> = self.user_texts.iter().map(String::as_str).collect();
        crate::language::sentence_openers(&texts)
    }

    /// With the user's earlier messages (of any conversation) that hold one of
    /// [`Evidence::sentence_openers`]: read only for who is who ([`subject::names_in`]), never as
    /// the user's words for a fact. A name given in an earlier session ("my teacher Dorota")
    /// makes "Dorota moved our lessons" Dorota's, where these turns alone cannot tell.
    pub fn with_earlier(mut self, earlier: &[String]) -> Evidence {
        let texts: Vec<&str> = earlier.iter().map(String::as_str).collect();
        self.earlier_names = subject::names_in(&texts, &self.sentence_openers());
        self
    }

    /// Of the words opening a sentence of `said` (the user's messages), those that `earlier` (the
    /// user's earlier messages: [`crate::postprocess::turn_facts::earlier`]) shows to be someone
    /// else's name, as [`Evidence::with_earlier`] reads them: for the agent's own writes
    /// ([`someone_else_named`]).
    pub fn names_told_earlier(said: &[String], earlier: &[String]) -> Vec<String> {
        Evidence::new(said.iter().map(|text| ("user", text.as_str())))
            .with_earlier(earlier)
            .earlier_names
    }

    /// When the newest of the turns was said: a date resolved from "last week" must be near it.
    pub fn said_at(mut self, ms: i64) -> Evidence {
        self.dates.at(ms);
        self
    }

    /// `fact` without a date phrase the user neither gave nor can have meant ("The user moved to
    /// Porto in October 2026." for "last week" in February: the prompt's example copied), when
    /// cutting it out leaves a fact that passes the date check; `None` when there is nothing to
    /// cut. Small models add such dates to facts that are right without them.
    pub fn undated(&self, fact: &str) -> Option<String> {
        if self.unread || !self.dates.invented(fact, &[]) {
            return None;
        }
        let cut = dates::strip(fact)?;
        (!self.dates.invented(&cut, &[]) && check_form(&cut).is_ok()).then_some(cut)
    }

    /// `fact` in the tense the user told it ("The user is painting the kitchen blue." from "I
    /// painted the kitchen blue." becomes "The user painted …"; [`tense`]); `None`: as it is.
    pub fn as_told(&self, fact: &str) -> Option<String> {
        if self.unread {
            return None;
        }
        tense::as_told(fact, &self.user_texts)
    }

    /// `fact` with its one-meaning relative days ("yesterday", "on Saturday" told in the past)
    /// made dates, counted from when it was said, or dated from the user's sentence it comes
    /// from ([`relative`]); `None`: nothing to resolve, or the time is unknown.
    pub fn resolved(&self, fact: &str) -> Option<String> {
        if self.unread {
            return None;
        }
        let day = self.dates.day()?;
        relative::resolve(fact, day).or_else(|| relative::from_source(fact, &self.user_texts, day))
    }

    /// Whether `fact` may be stored (knowing nothing stored about the user).
    pub fn check(&self, fact: &str) -> Result<(), Rejection> {
        self.check_knowing(fact, &[])
    }

    /// [`Self::check`], with the user's stored memories that the fact relates to (their words
    /// count as the user's): the form, then each of the named gates in turn
    /// ([`knowing::GATES`]).
    pub fn check_knowing(&self, fact: &str, known: &[&str]) -> Result<(), Rejection> {
        self.check_reading(fact, known, !self.unread)
    }

    /// What a fact drawn from words in a language without rules meets: its form, and the gates
    /// that read the fact alone when it is in a language with rules ([`knowing::Reads::Fact`]).
    pub fn check_fact_alone(fact: &str) -> Result<(), Rejection> {
        Evidence::default().check_reading(fact, &[], false)
    }

    /// The form, then the named gates: those that compare the fact with the user's words only
    /// with `users_words` (the user's language has rules). A gate judges only text in a
    /// language it reads ([`knowing::Reads`]).
    fn check_reading(
        &self,
        fact: &str,
        known: &[&str],
        users_words: bool,
    ) -> Result<(), Rejection> {
        check_form(fact)?;
        if crate::language::of(fact).is_none() {
            return Ok(());
        }
        let read = knowing::Read::new(fact, known);
        for (name, reads, gate) in knowing::GATES {
            if *reads == knowing::Reads::UsersWords && !users_words {
                continue;
            }
            if let Err(reason) = gate(self, &read) {
                tracing::debug!(gate = name, reason = reason.as_str(), fact, "gate refused");
                return Err(reason);
            }
        }
        Ok(())
    }

    /// Whether `new` may replace the memory `old` (the update's text merges both, so its words
    /// may come from the old memory too).
    pub fn check_update(&self, old: &str, new: &str) -> Result<(), Rejection> {
        check_form(new)?;
        if sentences(new).count() > sentences(old).count().max(1) {
            return Err(Rejection::SeveralFacts);
        }
        if new.trim().chars().count() * 2 < old.trim().chars().count() {
            return Err(Rejection::LosesSubject);
        }
        // A number the old memory held (an age, a date, a count) may change, not vanish: "turning
        // 30 next month and into climbing" rewritten as "into climbing" loses a fact.
        let has_number = |text: &str| text.chars().any(|c| c.is_ascii_digit());
        if has_number(old) && !has_number(new) {
            return Err(Rejection::LosesSubject);
        }
        let (old_words, new_words) = (content_words(old), content_words(new));
        if share(&old_words, |w| new_words.contains(w)) < KEPT_SUBJECT_SHARE {
            return Err(Rejection::LosesSubject);
        }
        let grounded = share(&new_words, |w| {
            old_words.contains(w) || self.user_words.contains(w)
        });
        if grounded < GROUNDED_SHARE {
            return Err(Rejection::Ungrounded);
        }
        // What the update says of its subject must be said, or kept from the old memory.
        if predicate(new).is_some_and(|p| {
            !p.is_empty()
                && !p
                    .iter()
                    .any(|w| old_words.contains(w) || self.user_words.contains(w))
        }) {
            return Err(Rejection::Ungrounded);
        }
        Ok(())
    }
}

/// Share of a fact's content words a stored memory must hold to say the same already.
const COVERED_SHARE: f64 = 0.75;

/// Whether the stored `memory` already says what `fact` says (nearly all the fact's content
/// words are in it): the memory LLM's NOOP is only taken then. A small model's NOOP on a fact
/// with something new ("The user has a dog named Biscuit." beside a memory about their job)
/// would lose it.
pub fn covers(memory: &str, fact: &str) -> bool {
    let (memory, fact) = (content_words(memory), without_dates(fact_words(fact)));
    !fact.is_empty() && share(&fact, |w| memory.contains(w)) >= COVERED_SHARE
}

/// The content words of what a fact says of its subject: what follows its first "is", "are",
/// "was", "has" or "have"; `None` when it has none of them.
fn predicate(fact: &str) -> Option<HashSet<String>> {
    let lower = format!(" {} ", fact.to_lowercase());
    let at = [" is ", " are ", " was ", " were ", " has ", " have "]
        .iter()
        .filter_map(|verb| lower.find(verb).map(|at| at + verb.len()))
        .min()?;
    Some(content_words(&lower[at..]))
}

fn starts_with_assistant(lower: &str) -> bool {
    lower.starts_with("the assistant") || lower.starts_with("assistant")
}

fn mentions_assistant(text: &str) -> bool {
    let lower = text.to_lowercase();
    lower.contains("the assistant") || lower.starts_with("assistant")
}

/// Both texts share nearly all their content words.
fn near_copy(fact: &HashSet<String>, line: &HashSet<String>) -> bool {
    if fact.is_empty() || line.is_empty() {
        return false;
    }
    let common = fact.intersection(line).count() as f64;
    common / fact.len() as f64 >= COPY_SHARE && common / line.len() as f64 >= COPY_SHARE
}

#[cfg(test)]
mod tests;
