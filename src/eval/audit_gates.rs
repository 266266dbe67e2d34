//! `memproxy eval gates --dataset DIR --labels FILE`: the gates against what a person decided,
//! without a model. Every hand-labelled memory of the dataset's conversations is put to every
//! gate and counted by its label: a correct memory refused is a fact the store would lose, a
//! wrong one refused is one it would keep out. The evidence is, by default, what a run's
//! extraction would read: the one session whose user messages hold most of the memory's words
//! (its likely source), said by that session's date, and as what is already known, the memories
//! of that conversation labelled correct whose source is an earlier session (what a run would
//! have stored by then), and the user's messages of earlier sessions for the names in them (what
//! a run looks up: [`Evidence::with_earlier`]). `--evidence conversation` gives every message of the conversation
//! instead, and nothing known. Neither replays a run, whose known memories are the stored ones
//! most like the fact.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use clap::{Args, ValueEnum};

use super::audit::{read_hand_labels, HandLabel, Label};
use super::dataset::{self, Conversation, Dataset, Session};
use crate::language::content_words;
use crate::postprocess::gates::{Evidence, Rejection};

/// What a memory is checked against.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum Scope {
    /// The session that holds most of its words, and the correct memories of earlier sessions.
    #[default]
    Session,
    /// The whole conversation.
    Conversation,
}

#[derive(Args, Clone, Debug)]
pub struct GatesArgs {
    /// The conversations (a folder of them, as `memproxy eval --dataset` reads).
    #[arg(long)]
    pub dataset: PathBuf,
    /// A person's labels (JSON lines: conversation, memory, label).
    #[arg(long)]
    pub labels: PathBuf,
    /// The evidence each memory is put to the gates with.
    #[arg(long, value_enum, default_value_t = Scope::Session)]
    pub evidence: Scope,
    /// Print each memory with its label and the gate's verdict, not only the counts.
    #[arg(long)]
    pub show: bool,
}

/// How the gates met the memories of one label.
#[derive(Default)]
struct Count {
    passed: usize,
    /// By the rejection's name.
    refused: BTreeMap<&'static str, usize>,
}

/// The evidence of `sessions` (all the turns, said by the last one's date).
fn evidence_of<'a>(sessions: impl IntoIterator<Item = &'a Session>) -> Evidence {
    let sessions: Vec<&Session> = sessions.into_iter().collect();
    let turns = sessions
        .iter()
        .flat_map(|session| &session.turns)
        .map(|turn| (turn.role.as_str(), turn.content.as_str()));
    let evidence = Evidence::new(turns);
    match sessions.iter().rev().find_map(|s| s.time_ms) {
        Some(at) => evidence.said_at(at),
        None => evidence,
    }
}

/// The index of the session of `conversation` whose user messages hold most of `memory`'s
/// content words (the first of equals).
fn source_session(conversation: &Conversation, memory: &str) -> usize {
    let words = content_words(memory);
    let mut best: Option<(usize, usize)> = None;
    for (index, session) in conversation.sessions.iter().enumerate() {
        let said: String = session
            .turns
            .iter()
            .filter(|t| t.role == "user")
            .map(|t| t.content.as_str())
            .collect::<Vec<_>>()
            .join("\n");
        let shared = content_words(&said).intersection(&words).count();
        if best.is_none_or(|(most, _)| shared > most) {
            best = Some((shared, index));
        }
    }
    best.map_or(0, |(_, index)| index)
}

/// The gates' verdict on a memory: refused when one of its statements is (a run reads a fact of
/// several statements as each of them: [`crate::postprocess::gates::statements`]), with how many
/// of how many statements would be stored.
struct Verdict {
    result: Result<(), Rejection>,
    kept: usize,
    statements: usize,
}

impl Verdict {
    fn of(memory: &str, check: impl Fn(&str) -> Result<(), Rejection>) -> Verdict {
        let results: Vec<Result<(), Rejection>> = crate::postprocess::gates::statements(memory)
            .iter()
            .map(|statement| check(statement))
            .collect();
        Verdict {
            result: results
                .iter()
                .copied()
                .find(Result::is_err)
                .unwrap_or(Ok(())),
            kept: results.iter().filter(|r| r.is_ok()).count(),
            statements: results.len(),
        }
    }
}

/// Each labelled memory of `data`'s conversations with the gates' verdict on it (labels of other
/// conversations are left out).
fn verdicts<'a>(
    data: &Dataset,
    labels: &'a [HandLabel],
    scope: Scope,
) -> Vec<(&'a HandLabel, Verdict)> {
    let by_id: HashMap<&str, &Conversation> = data
        .conversations
        .iter()
        .map(|c| (c.id.as_str(), c))
        .collect();
    // Each label's conversation and likeliest source session, read once.
    let placed: Vec<Option<(&Conversation, usize)>> = labels
        .iter()
        .map(|label| {
            let conversation = *by_id.get(label.conversation.as_str())?;
            Some((conversation, source_session(conversation, &label.memory)))
        })
        .collect();
    let mut out = Vec::new();
    for (label, place) in labels.iter().zip(&placed) {
        let Some((conversation, source)) = *place else {
            continue;
        };
        let verdict = match scope {
            Scope::Conversation => {
                let evidence = evidence_of(&conversation.sessions);
                Verdict::of(&label.memory, |text| evidence.check(text))
            }
            Scope::Session => {
                let known: Vec<&str> = labels
                    .iter()
                    .zip(&placed)
                    .filter(|(other, place)| {
                        other.conversation == label.conversation
                            && other.label == Label::Correct
                            && place.is_some_and(|(_, at)| at < source)
                    })
                    .map(|(other, _)| other.memory.as_str())
                    .collect();
                // What a run's lookup of the user's earlier messages reads (the names in them).
                let earlier: Vec<String> = conversation.sessions[..source]
                    .iter()
                    .flat_map(|s| &s.turns)
                    .filter(|t| t.role == "user")
                    .map(|t| t.content.clone())
                    .collect();
                let evidence =
                    evidence_of(conversation.sessions.get(source)).with_earlier(&earlier);
                Verdict::of(&label.memory, |text| evidence.check_knowing(text, &known))
            }
        };
        out.push((label, verdict));
    }
    out
}

pub fn run(args: GatesArgs) -> anyhow::Result<()> {
    let data = dataset::load(&args.dataset, None, false)?;
    let labels = read_hand_labels(&args.labels)?;
    let mut counts: BTreeMap<Label, Count> = BTreeMap::new();
    for (label, verdict) in verdicts(&data, &labels, args.evidence) {
        let count = counts.entry(label.label).or_default();
        match verdict.result {
            Ok(()) => count.passed += 1,
            Err(reason) => *count.refused.entry(reason.as_str()).or_default() += 1,
        }
        if args.show {
            let part = if verdict.statements > 1 {
                format!(
                    ", {} of {} statements kept",
                    verdict.kept, verdict.statements
                )
            } else {
                String::new()
            };
            let verdict = verdict.result.map_or_else(
                |r| format!("refused ({}{part})", r.as_str()),
                |()| format!("passed{part}"),
            );
            println!(
                "{:14} {:28} {}",
                label.label.as_str(),
                verdict,
                label.memory
            );
        }
    }
    println!(
        "{} labelled memories of {} conversations ({}; evidence: {:?})",
        counts
            .values()
            .map(|c| c.passed + c.refused.values().sum::<usize>())
            .sum::<usize>(),
        data.conversations.len(),
        args.dataset.display(),
        args.evidence
    );
    println!(
        "{:14} {:>6} {:>7}  refused by",
        "label", "passed", "refused"
    );
    for (label, count) in &counts {
        let reasons: Vec<String> = count
            .refused
            .iter()
            .map(|(r, n)| format!("{r} {n}"))
            .collect();
        println!(
            "{:14} {:>6} {:>7}  {}",
            label.as_str(),
            count.passed,
            count.refused.values().sum::<usize>(),
            reasons.join(", ")
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The gates against the tuning half's hand labels, with either evidence: no memory a person
    /// labelled correct is refused, and each labelled another person's (another's act or
    /// attribute told as the user's) is. The held-out half is not read here, so that it stays
    /// unseen by whoever changes the gates.
    #[test]
    fn the_tuning_labels_keep_every_correct_memory_and_no_one_elses() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/audit");
        let data = dataset::load(&root.join("tuning"), None, false).expect("the tuning half");
        let labels = read_hand_labels(&root.join("labels.jsonl")).expect("labels");
        for scope in [Scope::Session, Scope::Conversation] {
            let judged = verdicts(&data, &labels, scope);
            let of = |kind: Label| judged.iter().filter(move |(l, _)| l.label == kind);
            let refused: Vec<String> = of(Label::Correct)
                .filter_map(|(l, v)| {
                    v.result
                        .err()
                        .map(|r| format!("{} ({})", l.memory, r.as_str()))
                })
                .collect();
            assert!(of(Label::Correct).count() >= 50, "{scope:?}");
            assert!(refused.is_empty(), "{scope:?} refused: {refused:#?}");
            let others: Vec<&String> = of(Label::WrongSubject)
                .filter(|(_, v)| v.result.is_ok())
                .map(|(l, _)| &l.memory)
                .collect();
            assert!(of(Label::WrongSubject).count() >= 3, "{scope:?}");
            assert!(others.is_empty(), "{scope:?} kept: {others:#?}");
        }
    }
}
