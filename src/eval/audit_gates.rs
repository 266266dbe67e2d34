//! `memproxy eval gates --dataset DIR --labels FILE`: the gates against what a person decided,
//! without a model. Every hand-labelled memory of the dataset's conversations is put to every
//! gate, with its whole conversation as the evidence (the user's and the assistant's messages,
//! said by the last session's date), and counted by its label: a correct memory refused is a
//! fact the store would lose, a wrong one refused is one it would keep out. Wider evidence than
//! one extraction's turns, so a bound on what the gates catch, not a replay of a run.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use clap::Args;

use super::audit::{read_hand_labels, Label};
use super::dataset::{self, Conversation};
use crate::postprocess::gates::Evidence;

#[derive(Args, Clone, Debug)]
pub struct GatesArgs {
    /// The conversations (a folder of them, as `memproxy eval --dataset` reads).
    #[arg(long)]
    pub dataset: PathBuf,
    /// A person's labels (JSON lines: conversation, memory, label).
    #[arg(long)]
    pub labels: PathBuf,
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

fn evidence(conversation: &Conversation) -> Evidence {
    let turns = conversation
        .sessions
        .iter()
        .flat_map(|session| &session.turns)
        .map(|turn| (turn.role.as_str(), turn.content.as_str()));
    let evidence = Evidence::new(turns);
    match conversation.sessions.iter().rev().find_map(|s| s.time_ms) {
        Some(at) => evidence.said_at(at),
        None => evidence,
    }
}

pub fn run(args: GatesArgs) -> anyhow::Result<()> {
    let data = dataset::load(&args.dataset, None, false)?;
    let by_id: HashMap<&str, &Conversation> = data
        .conversations
        .iter()
        .map(|c| (c.id.as_str(), c))
        .collect();
    let mut counts: BTreeMap<Label, Count> = BTreeMap::new();
    let mut evidences: HashMap<&str, Evidence> = HashMap::new();
    for label in read_hand_labels(&args.labels)? {
        let Some(conversation) = by_id.get(label.conversation.as_str()) else {
            continue;
        };
        let evidence = evidences
            .entry(conversation.id.as_str())
            .or_insert_with(|| evidence(conversation));
        let verdict = evidence.check(&label.memory);
        let count = counts.entry(label.label).or_default();
        match verdict {
            Ok(()) => count.passed += 1,
            Err(reason) => *count.refused.entry(reason.as_str()).or_default() += 1,
        }
        if args.show {
            let verdict = verdict.map_or_else(
                |r| format!("refused ({})", r.as_str()),
                |()| "passed".into(),
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
        "{} labelled memories of {} conversations ({})",
        counts
            .values()
            .map(|c| c.passed + c.refused.values().sum::<usize>())
            .sum::<usize>(),
        data.conversations.len(),
        args.dataset.display()
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
