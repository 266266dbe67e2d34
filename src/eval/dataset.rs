//! Evaluation datasets in one shape: conversations of dated sessions, then probe questions with
//! gold answers and evidence turns. Loaders for LoCoMo, LongMemEval and memproxy's own scenario
//! files (`examples/scenarios/*.json`).

use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use crate::dates;

#[derive(Clone, Debug, PartialEq)]
pub struct Dataset {
    pub name: String,
    pub conversations: Vec<Conversation>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Conversation {
    pub id: String,
    /// The chat app's own system prompt (a date line is added per session).
    pub system: String,
    pub sessions: Vec<Session>,
    pub probes: Vec<Probe>,
}

impl Conversation {
    /// Keeps the first `sessions` sessions and the probes answerable from them: every evidence
    /// turn in a kept session (probes without evidence, such as never-given answers, stay).
    /// A subset of a long benchmark conversation that a small local model can replay in minutes.
    pub fn keep_first_sessions(&mut self, sessions: usize) {
        self.sessions.truncate(sessions);
        let kept: std::collections::HashSet<&str> = self
            .sessions
            .iter()
            .flat_map(|s| s.turns.iter().map(|t| t.id.as_str()))
            .collect();
        self.probes
            .retain(|p| p.evidence.iter().all(|e| kept.contains(e.as_str())));
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Session {
    pub time_ms: Option<i64>,
    pub turns: Vec<Turn>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Turn {
    /// `D<session>:<turn>`, 1-based, as LoCoMo writes evidence.
    pub id: String,
    /// `user` or `assistant`.
    pub role: String,
    pub content: String,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Probe {
    pub question: String,
    pub answer: String,
    pub category: String,
    /// Ids of the turns that hold the answer.
    pub evidence: Vec<String>,
    pub time_ms: Option<i64>,
    /// The answer was never given: the right reply says so.
    pub abstain: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Locomo,
    Longmemeval,
    Scenarios,
}

const DEFAULT_SYSTEM: &str = "You are a helpful assistant chatting with the user.";

/// Loads `path` (a file, or for scenarios a directory of `*.json`), guessing the format from the
/// content when `format` is `None`.
pub fn load(
    path: &Path,
    format: Option<Format>,
    include_adversarial: bool,
) -> anyhow::Result<Dataset> {
    let name = path.file_stem().map_or_else(
        || "dataset".to_owned(),
        |s| s.to_string_lossy().into_owned(),
    );
    if path.is_dir() {
        let mut files: Vec<_> = std::fs::read_dir(path)?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        files.sort();
        let mut conversations = Vec::new();
        for file in files {
            let value: Value = serde_json::from_slice(&std::fs::read(&file)?)
                .map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
            conversations
                .extend(scenarios(value).map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?);
        }
        return Ok(Dataset {
            name,
            conversations,
        });
    }
    let value: Value = serde_json::from_slice(&std::fs::read(path)?)?;
    let format = match format {
        Some(format) => format,
        None => guess(&value)?,
    };
    let conversations = match format {
        Format::Locomo => locomo(value, include_adversarial)?,
        Format::Longmemeval => longmemeval(value)?,
        Format::Scenarios => scenarios(value)?,
    };
    Ok(Dataset {
        name,
        conversations,
    })
}

fn guess(value: &Value) -> anyhow::Result<Format> {
    let first = match value {
        Value::Array(items) => items.first().cloned().unwrap_or(Value::Null),
        other => other.clone(),
    };
    if first.get("conversation").is_some() && first.get("qa").is_some() {
        Ok(Format::Locomo)
    } else if first.get("haystack_sessions").is_some() {
        Ok(Format::Longmemeval)
    } else if first.get("sessions").is_some() && first.get("probes").is_some() {
        Ok(Format::Scenarios)
    } else {
        anyhow::bail!("unknown dataset format: pass --format locomo|longmemeval|scenarios")
    }
}

/// LoCoMo categories (the official mapping; several harnesses mislabel them).
pub fn locomo_category(category: u64) -> &'static str {
    match category {
        1 => "multi-hop",
        2 => "temporal",
        3 => "open-domain",
        4 => "single-hop",
        5 => "adversarial",
        _ => "other",
    }
}

fn locomo(value: Value, include_adversarial: bool) -> anyhow::Result<Vec<Conversation>> {
    let samples = value.as_array().cloned().unwrap_or_default();
    let mut conversations = Vec::new();
    for (index, sample) in samples.iter().enumerate() {
        let talk = &sample["conversation"];
        let speaker_a = talk["speaker_a"].as_str().unwrap_or_default();
        let mut sessions = Vec::new();
        for number in 1.. {
            let Some(turns) = talk
                .get(format!("session_{number}"))
                .and_then(Value::as_array)
            else {
                break;
            };
            let time_ms = talk[format!("session_{number}_date_time")]
                .as_str()
                .and_then(super::locomo::parse_session_date);
            let turns = turns
                .iter()
                .map(|turn| {
                    let mut content = turn["text"].as_str().unwrap_or_default().to_owned();
                    if let Some(caption) = turn["blip_caption"].as_str() {
                        content = format!("{content} [shares a photo of {caption}]");
                    }
                    Turn {
                        id: turn["dia_id"].as_str().unwrap_or_default().to_owned(),
                        role: if turn["speaker"] == speaker_a {
                            "user"
                        } else {
                            "assistant"
                        }
                        .to_owned(),
                        content,
                    }
                })
                .collect();
            sessions.push(Session { time_ms, turns });
        }
        let last_time = sessions.iter().rev().find_map(|s| s.time_ms);
        let probes = sample["qa"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|qa| {
                let category = qa["category"].as_u64().unwrap_or(0);
                if category == 5 && !include_adversarial {
                    return None;
                }
                let answer = match (&qa["answer"], &qa["adversarial_answer"]) {
                    (Value::String(a), _) => a.clone(),
                    (Value::Number(n), _) => n.to_string(),
                    (_, Value::String(a)) => a.clone(),
                    _ => String::new(),
                };
                let evidence = qa["evidence"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect::<Vec<_>>();
                Some(Probe {
                    question: qa["question"].as_str()?.to_owned(),
                    answer,
                    category: locomo_category(category).to_owned(),
                    evidence: super::locomo::evidence_ids(&evidence),
                    time_ms: last_time.map(|t| t + 86_400_000),
                    abstain: category == 5,
                })
            })
            .collect();
        conversations.push(Conversation {
            id: sample["sample_id"]
                .as_str()
                .map_or_else(|| format!("locomo-{index}"), str::to_owned),
            system: DEFAULT_SYSTEM.to_owned(),
            sessions,
            probes,
        });
    }
    Ok(conversations)
}

/// LongMemEval (Wu et al., 2024): one question per instance, over its haystack sessions.
fn longmemeval(value: Value) -> anyhow::Result<Vec<Conversation>> {
    let items = value.as_array().cloned().unwrap_or_default();
    let mut conversations = Vec::new();
    for item in items {
        let dates_of: Vec<Option<i64>> = item["haystack_dates"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|d| d.as_str().and_then(longmemeval_date))
            .collect();
        let mut evidence = Vec::new();
        let mut sessions = Vec::new();
        for (s, session) in item["haystack_sessions"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            let turns: Vec<Turn> = session
                .as_array()
                .into_iter()
                .flatten()
                .enumerate()
                .map(|(t, turn)| {
                    let id = format!("D{}:{}", s + 1, t + 1);
                    if turn["has_answer"] == true {
                        evidence.push(id.clone());
                    }
                    Turn {
                        id,
                        role: turn["role"].as_str().unwrap_or("user").to_owned(),
                        content: turn["content"].as_str().unwrap_or_default().to_owned(),
                    }
                })
                .collect();
            sessions.push(Session {
                time_ms: dates_of.get(s).copied().flatten(),
                turns,
            });
        }
        let id = item["question_id"].as_str().unwrap_or_default().to_owned();
        let answer = match &item["answer"] {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        };
        conversations.push(Conversation {
            system: DEFAULT_SYSTEM.to_owned(),
            sessions,
            probes: vec![Probe {
                question: item["question"].as_str().unwrap_or_default().to_owned(),
                answer,
                category: item["question_type"].as_str().unwrap_or("other").to_owned(),
                evidence,
                time_ms: item["question_date"].as_str().and_then(longmemeval_date),
                abstain: id.ends_with("_abs"),
            }],
            id,
        });
    }
    Ok(conversations)
}

/// "2023/05/20 (Sat) 02:21" → milliseconds (UTC).
fn longmemeval_date(text: &str) -> Option<i64> {
    let (date, rest) = text.trim().split_once(' ')?;
    let day = dates::parse_ymd(&date.replace('/', "-"))?;
    let clock = rest.rsplit(' ').next()?;
    let (h, m) = clock.split_once(':')?;
    Some(day + (h.parse::<i64>().ok()? * 60 + m.parse::<i64>().ok()?) * 60_000)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ScenarioFile {
    id: String,
    #[serde(default)]
    #[allow(dead_code)]
    title: String,
    #[serde(default)]
    system: Option<String>,
    sessions: Vec<ScenarioSession>,
    probes: Vec<ScenarioProbe>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ScenarioSession {
    date: String,
    /// Each turn is `{"user": "..."}` or `{"assistant": "..."}`.
    turns: Vec<std::collections::BTreeMap<String, String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ScenarioProbe {
    question: String,
    answer: String,
    category: String,
    #[serde(default)]
    evidence: Vec<String>,
    date: Option<String>,
    #[serde(default)]
    abstain: bool,
}

/// memproxy's scenario format: one object (or a list of them) per file.
fn scenarios(value: Value) -> anyhow::Result<Vec<Conversation>> {
    let files: Vec<ScenarioFile> = match value {
        Value::Array(_) => serde_json::from_value(value)?,
        single => vec![serde_json::from_value(single)?],
    };
    let mut conversations = Vec::new();
    for file in files {
        let mut sessions = Vec::new();
        for (s, session) in file.sessions.iter().enumerate() {
            let time_ms = dates::parse_time(&session.date).ok_or_else(|| {
                anyhow::anyhow!(
                    "{}: session {} has a bad date '{}'",
                    file.id,
                    s + 1,
                    session.date
                )
            })?;
            let mut turns = Vec::new();
            for (t, turn) in session.turns.iter().enumerate() {
                let (role, content) = turn
                    .iter()
                    .next()
                    .filter(|(role, _)| turn.len() == 1 && (*role == "user" || *role == "assistant"))
                    .ok_or_else(|| anyhow::anyhow!("{}: session {} turn {} must be {{\"user\": …}} or {{\"assistant\": …}}", file.id, s + 1, t + 1))?;
                turns.push(Turn {
                    id: format!("D{}:{}", s + 1, t + 1),
                    role: role.clone(),
                    content: content.clone(),
                });
            }
            sessions.push(Session {
                time_ms: Some(time_ms),
                turns,
            });
        }
        let last = sessions.iter().rev().find_map(|s| s.time_ms);
        let ids: Vec<String> = sessions
            .iter()
            .flat_map(|s| s.turns.iter().map(|t| t.id.clone()))
            .collect();
        let mut probes = Vec::new();
        for probe in file.probes {
            if let Some(unknown) = probe.evidence.iter().find(|e| !ids.contains(e)) {
                anyhow::bail!(
                    "{}: probe '{}' cites unknown turn {unknown}",
                    file.id,
                    probe.question
                );
            }
            let time_ms = match &probe.date {
                Some(date) => Some(
                    dates::parse_time(date)
                        .ok_or_else(|| anyhow::anyhow!("{}: bad probe date '{date}'", file.id))?,
                ),
                None => last.map(|t| t + 86_400_000),
            };
            probes.push(Probe {
                question: probe.question,
                answer: probe.answer,
                category: probe.category,
                evidence: probe.evidence,
                time_ms,
                abstain: probe.abstain,
            });
        }
        conversations.push(Conversation {
            id: file.id,
            system: file.system.unwrap_or_else(|| DEFAULT_SYSTEM.to_owned()),
            sessions,
            probes,
        });
    }
    Ok(conversations)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(id: &str) -> Turn {
        Turn {
            id: id.to_owned(),
            role: "user".to_owned(),
            content: id.to_owned(),
        }
    }

    fn probe(question: &str, evidence: &[&str]) -> Probe {
        Probe {
            question: question.to_owned(),
            answer: String::new(),
            category: "c".to_owned(),
            evidence: evidence.iter().map(|e| (*e).to_owned()).collect(),
            time_ms: None,
            abstain: evidence.is_empty(),
        }
    }

    #[test]
    fn keeping_the_first_sessions_keeps_only_probes_they_answer() {
        let session = |ids: &[&str]| Session {
            time_ms: None,
            turns: ids.iter().map(|id| turn(id)).collect(),
        };
        let mut conversation = Conversation {
            id: "c".to_owned(),
            system: String::new(),
            sessions: vec![
                session(&["D1:1", "D1:2"]),
                session(&["D2:1"]),
                session(&["D3:1"]),
            ],
            probes: vec![
                probe("in one", &["D1:2"]),
                probe("across two", &["D1:1", "D2:1"]),
                probe("needs three", &["D2:1", "D3:1"]),
                probe("never said", &[]),
            ],
        };
        conversation.keep_first_sessions(2);
        assert_eq!(conversation.sessions.len(), 2);
        let kept: Vec<&str> = conversation
            .probes
            .iter()
            .map(|p| p.question.as_str())
            .collect();
        assert_eq!(kept, ["in one", "across two", "never said"]);
    }
}
