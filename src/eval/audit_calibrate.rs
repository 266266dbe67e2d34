//! `memproxy eval judge --dataset DIR --labels FILE`: the audit's judge against a person, on every
//! memory a person labelled, without a run. A person's labels were written run by run, so the
//! consecutive lines of one conversation are the memories of one run's store: each memory is
//! judged among those (the entries the judge sees, in that order), with the whole conversation.
//! The agreement (same label, same correct-or-not verdict, Cohen's kappa, the confusion pairs)
//! is what the audit's labels of a run are worth.

use std::collections::HashMap;
use std::path::PathBuf;

use clap::Args;

use super::audit::{agreement, read_hand_labels, AuditedMemory, HandLabel, Label};
use super::audit_judge::Judge;
use super::audit_run::{agreed_json, agreement_line};
use super::dataset::{self, Conversation};

#[derive(Args, Clone, Debug)]
pub struct JudgeArgs {
    /// The conversations (a folder of them, as `memproxy eval --dataset` reads); labels of other
    /// conversations are left out.
    #[arg(long)]
    pub dataset: PathBuf,
    /// A person's labels (JSON lines: conversation, memory, label).
    #[arg(long)]
    pub labels: PathBuf,
    /// The judge model (default: the upstream's default model).
    #[arg(long)]
    pub judge_model: Option<String>,
    /// The judge's /v1 endpoint.
    #[arg(long, default_value = "http://127.0.0.1:8090/v1")]
    pub judge_upstream: String,
    /// Where to write each memory with both labels and the agreement (JSON).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Print each memory with the person's and the judge's label.
    #[arg(long)]
    pub show: bool,
}

/// One run's memories of one conversation: consecutive labels of the same conversation.
struct Group<'a> {
    conversation: &'a Conversation,
    memories: Vec<AuditedMemory>,
    person: Vec<Label>,
}

/// The labels of `data`'s conversations, grouped as they were written (see the module's doc).
fn groups<'a>(by_id: &HashMap<&str, &'a Conversation>, labels: &[HandLabel]) -> Vec<Group<'a>> {
    let mut out: Vec<Group<'a>> = Vec::new();
    let mut previous: Option<&str> = None;
    for label in labels {
        let Some(conversation) = by_id.get(label.conversation.as_str()) else {
            previous = None;
            continue;
        };
        if previous != Some(label.conversation.as_str()) {
            out.push(Group {
                conversation,
                memories: Vec::new(),
                person: Vec::new(),
            });
        }
        previous = Some(label.conversation.as_str());
        if let Some(group) = out.last_mut() {
            group.memories.push(AuditedMemory {
                text: label.memory.clone(),
                label: None,
                reason: None,
            });
            group.person.push(label.label);
        }
    }
    out
}

pub async fn run(args: JudgeArgs) -> anyhow::Result<()> {
    let data = dataset::load(&args.dataset, None, false)?;
    let labels = read_hand_labels(&args.labels)?;
    let by_id: HashMap<&str, &Conversation> = data
        .conversations
        .iter()
        .map(|c| (c.id.as_str(), c))
        .collect();
    let mut groups = groups(&by_id, &labels);
    let total: usize = groups.iter().map(|g| g.memories.len()).sum();
    if total == 0 {
        anyhow::bail!(
            "{} labels no memory of the conversations in {}",
            args.labels.display(),
            args.dataset.display()
        );
    }
    let model = args.judge_model.clone().unwrap_or_default();
    let judge = Judge {
        http: reqwest::Client::new(),
        url: &args.judge_upstream,
        model: &model,
    };
    let mut done = 0;
    for group in &mut groups {
        eprintln!(
            "judging {} memories of {} ({done} of {total} done)",
            group.memories.len(),
            group.conversation.id
        );
        judge.audit(group.conversation, &mut group.memories).await;
        done += group.memories.len();
    }
    let judged = groups.iter().flat_map(|g| {
        g.memories
            .iter()
            .map(move |m| (g.conversation.id.as_str(), m))
    });
    let agreed = agreement(judged, &labels);
    let mut rows = Vec::new();
    for group in &groups {
        for (memory, person) in group.memories.iter().zip(&group.person) {
            let judge = memory.label.map_or("unlabelled", Label::as_str);
            if args.show {
                println!(
                    "  person {:<13} judge {judge:<13} {}: {}  ({})",
                    person.as_str(),
                    group.conversation.id,
                    memory.text,
                    memory.reason.as_deref().unwrap_or("")
                );
            }
            rows.push(serde_json::json!({"conversation": group.conversation.id,
                "memory": memory.text, "person": person, "judge": memory.label,
                "reason": memory.reason}));
        }
    }
    let unlabelled = total - rows.iter().filter(|r| !r["judge"].is_null()).count();
    println!(
        "{} ({unlabelled} of {total} memories without the judge's label)",
        agreement_line(&agreed)
    );
    for ((person, judge), count) in &agreed.confusion {
        if person != judge {
            println!(
                "  person {}, judge {}: {count}",
                person.as_str(),
                judge.as_str()
            );
        }
    }
    if let Some(path) = &args.out {
        let report = serde_json::json!({"model": model, "agreement": agreed_json(&agreed),
            "memories": rows});
        std::fs::write(path, serde_json::to_vec_pretty(&report)?)?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::dataset::Session;

    fn conversation(id: &str) -> Conversation {
        Conversation {
            id: id.to_owned(),
            system: String::new(),
            sessions: vec![Session {
                time_ms: None,
                turns: Vec::new(),
            }],
            probes: Vec::new(),
        }
    }

    #[test]
    fn a_run_is_the_consecutive_labels_of_one_conversation() {
        let (a, b) = (conversation("a"), conversation("b"));
        let by_id: HashMap<&str, &Conversation> = [("a", &a), ("b", &b)].into_iter().collect();
        let label = |conversation: &str, memory: &str, label: Label| HandLabel {
            conversation: conversation.to_owned(),
            memory: memory.to_owned(),
            label,
            note: None,
        };
        let labels = [
            label("a", "one", Label::Correct),
            label("a", "two", Label::Stale),
            label("b", "three", Label::Correct),
            label("elsewhere", "four", Label::Correct),
            label("b", "five", Label::Duplicate),
            label("a", "six", Label::NotAFact),
        ];
        let got: Vec<(String, Vec<String>, Vec<Label>)> = groups(&by_id, &labels)
            .into_iter()
            .map(|g| {
                (
                    g.conversation.id.clone(),
                    g.memories.into_iter().map(|m| m.text).collect(),
                    g.person,
                )
            })
            .collect();
        let strings = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            got,
            vec![
                (
                    "a".to_owned(),
                    strings(&["one", "two"]),
                    vec![Label::Correct, Label::Stale]
                ),
                ("b".to_owned(), strings(&["three"]), vec![Label::Correct]),
                ("b".to_owned(), strings(&["five"]), vec![Label::Duplicate]),
                ("a".to_owned(), strings(&["six"]), vec![Label::NotAFact]),
            ]
        );
    }
}
