//! The fact-store audit: every memory a replay left, labelled as a person would label it by a
//! judge model that reads the whole conversation (correct, misattributed, wrong subject, stale,
//! duplicate, not a fact), and the judge's agreement with a person's own labels.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::score;
use crate::store::{Page, Store, StoreResult, UserScope};

/// What a person would say of one stored memory.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    clap::ValueEnum,
)]
#[serde(rename_all = "snake_case")]
pub enum Label {
    /// True of the user or of the person it names, by the user's own words, and still current.
    Correct,
    /// The assistant's words, suggestion or answer (or the user's question) kept as the user's.
    Misattributed,
    /// Another person's attribute given to the user, or one person's to another.
    WrongSubject,
    /// True once, but the user later said it changed.
    Stale,
    /// An earlier memory already says it.
    Duplicate,
    /// A request, greeting, question or the assistant's action: not a fact about anyone.
    NotAFact,
}

impl Label {
    pub const ALL: [Label; 6] = [
        Label::Correct,
        Label::Misattributed,
        Label::WrongSubject,
        Label::Stale,
        Label::Duplicate,
        Label::NotAFact,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Label::Correct => "correct",
            Label::Misattributed => "misattributed",
            Label::WrongSubject => "wrong_subject",
            Label::Stale => "stale",
            Label::Duplicate => "duplicate",
            Label::NotAFact => "not_a_fact",
        }
    }
}

/// One live memory at the end of a replay, oldest first, with the judge's label once audited.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AuditedMemory {
    pub text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<Label>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The live memories of `scope`, oldest first (the order "duplicate" refers to).
pub fn live_memories(store: &dyn Store, scope: &UserScope) -> StoreResult<Vec<AuditedMemory>> {
    let all = Page {
        limit: 100_000,
        offset: 0,
    };
    let mut live: Vec<_> = store
        .list_memories(scope, false, all)?
        .into_iter()
        .filter(|m| m.valid_until_ms.is_none())
        .collect();
    live.sort_by_key(|m| (m.created_at_ms, m.id));
    Ok(live
        .into_iter()
        .map(|m| AuditedMemory {
            text: m.text,
            label: None,
            reason: None,
        })
        .collect())
}

/// Label counts over some audited memories, and the share of them that is wrong.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct AuditSummary {
    pub memories: usize,
    pub labelled: usize,
    pub labels: BTreeMap<Label, usize>,
}

impl AuditSummary {
    pub fn of<'a>(memories: impl IntoIterator<Item = &'a AuditedMemory>) -> AuditSummary {
        let mut summary = AuditSummary::default();
        for memory in memories {
            summary.memories += 1;
            if let Some(label) = memory.label {
                summary.labelled += 1;
                *summary.labels.entry(label).or_default() += 1;
            }
        }
        summary
    }

    /// "31 memories, 9 wrong (29%): misattributed 3, stale 2, …".
    pub fn line(&self) -> String {
        let summary = self;
        let wrong: Vec<String> = summary
            .labels
            .iter()
            .filter(|(label, _)| **label != Label::Correct)
            .map(|(label, count)| format!("{} {count}", label.as_str()))
            .collect();
        format!(
            "{} memories, {} labelled, {} wrong ({}): {}",
            summary.memories,
            summary.labelled,
            summary.labelled - summary.labels.get(&Label::Correct).copied().unwrap_or(0),
            summary
                .wrong()
                .map_or_else(|| "-".to_owned(), |w| format!("{:.0}%", w * 100.0)),
            if wrong.is_empty() {
                "none".to_owned()
            } else {
                wrong.join(", ")
            }
        )
    }

    /// The share of labelled memories that are not correct.
    pub fn wrong(&self) -> Option<f64> {
        let correct = self.labels.get(&Label::Correct).copied().unwrap_or(0);
        (self.labelled > 0).then(|| (self.labelled - correct) as f64 / self.labelled as f64)
    }
}

/// A person's label of one memory of one conversation (`examples/audit/labels.jsonl`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct HandLabel {
    pub conversation: String,
    pub memory: String,
    pub label: Label,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

pub fn read_hand_labels(path: &Path) -> anyhow::Result<Vec<HandLabel>> {
    let text = std::fs::read_to_string(path)?;
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(number, line)| {
            serde_json::from_str(line)
                .map_err(|e| anyhow::anyhow!("{}:{}: {e}", path.display(), number + 1))
        })
        .collect()
}

/// How often the judge's label is the person's, over the memories both labelled.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Agreement {
    pub compared: usize,
    /// Same label.
    pub same: usize,
    /// Same verdict on "correct or not".
    pub same_verdict: usize,
    /// Cohen's kappa over the six labels (agreement beyond chance).
    pub kappa: f64,
    /// (person's label, judge's label) → count.
    pub confusion: BTreeMap<(Label, Label), usize>,
}

/// The agreement of judged memories (conversation id, memory) with a person's labels; a memory's
/// text is compared after [`score::normalize`].
pub fn agreement<'a>(
    judged: impl IntoIterator<Item = (&'a str, &'a AuditedMemory)>,
    hand: &[HandLabel],
) -> Agreement {
    let by_text: BTreeMap<(&str, String), Label> = hand
        .iter()
        .map(|h| {
            (
                (h.conversation.as_str(), score::normalize(&h.memory)),
                h.label,
            )
        })
        .collect();
    let mut result = Agreement::default();
    for (conversation, memory) in judged {
        let (Some(judge), Some(&person)) = (
            memory.label,
            by_text.get(&(conversation, score::normalize(&memory.text))),
        ) else {
            continue;
        };
        result.compared += 1;
        result.same += usize::from(judge == person);
        result.same_verdict += usize::from((judge == Label::Correct) == (person == Label::Correct));
        *result.confusion.entry((person, judge)).or_default() += 1;
    }
    result.kappa = kappa(&result.confusion, result.compared);
    result
}

fn kappa(confusion: &BTreeMap<(Label, Label), usize>, total: usize) -> f64 {
    if total == 0 {
        return 0.0;
    }
    let n = total as f64;
    let observed = Label::ALL
        .iter()
        .map(|&l| confusion.get(&(l, l)).copied().unwrap_or(0))
        .sum::<usize>() as f64
        / n;
    let expected: f64 = Label::ALL
        .iter()
        .map(|&l| {
            let person = confusion
                .iter()
                .filter(|((p, _), _)| *p == l)
                .map(|(_, c)| c)
                .sum::<usize>();
            let judge = confusion
                .iter()
                .filter(|((_, j), _)| *j == l)
                .map(|(_, c)| c)
                .sum::<usize>();
            (person as f64 / n) * (judge as f64 / n)
        })
        .sum();
    if (1.0 - expected).abs() < f64::EPSILON {
        1.0
    } else {
        (observed - expected) / (1.0 - expected)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn memory(text: &str, label: Label) -> AuditedMemory {
        AuditedMemory {
            text: text.to_owned(),
            label: Some(label),
            reason: None,
        }
    }

    fn hand(conversation: &str, text: &str, label: Label) -> HandLabel {
        HandLabel {
            conversation: conversation.to_owned(),
            memory: text.to_owned(),
            label,
            note: None,
        }
    }

    #[test]
    fn agreement_counts_labels_verdicts_and_kappa_by_hand() {
        let judged = [
            memory("The user's name is Ines.", Label::Correct),
            memory("The user suggests York.", Label::Correct),
            memory("The user is 71.", Label::WrongSubject),
            memory("The user eats meat.", Label::Stale),
            memory("Not labelled by the person.", Label::Correct),
        ];
        let labels = [
            hand("c", "the user's name is Ines", Label::Correct),
            hand("c", "The user suggests York.", Label::Misattributed),
            hand("c", "The user is 71.", Label::WrongSubject),
            hand("c", "The user eats meat.", Label::Stale),
            hand("other", "Not labelled by the person.", Label::Correct),
        ];
        let result = agreement(judged.iter().map(|m| ("c", m)), &labels);
        assert_eq!(result.compared, 4);
        assert_eq!(result.same, 3);
        // "correct or not": the misattributed one judged correct is the only miss.
        assert_eq!(result.same_verdict, 3);
        // observed 3/4; expected: correct (1/4 person × 2/4 judge) + misattributed (1/4 × 0)
        // + wrong_subject (1/4 × 1/4) + stale (1/4 × 1/4) = 4/16; kappa = (12/16 − 4/16) / (12/16).
        assert!((result.kappa - 2.0 / 3.0).abs() < 1e-9, "{}", result.kappa);
        assert_eq!(result.confusion[&(Label::Misattributed, Label::Correct)], 1);
    }

    #[test]
    fn the_wrong_share_is_of_labelled_memories() {
        let mut memories = vec![
            memory("a", Label::Correct),
            memory("b", Label::Duplicate),
            memory("c", Label::Correct),
        ];
        memories.push(AuditedMemory {
            text: "d".to_owned(),
            label: None,
            reason: None,
        });
        let summary = AuditSummary::of(&memories);
        assert_eq!((summary.memories, summary.labelled), (4, 3));
        assert!((summary.wrong().unwrap() - 1.0 / 3.0).abs() < 1e-9);
    }
}
