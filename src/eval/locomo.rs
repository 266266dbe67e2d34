//! LoCoMo retrieval evaluation (Maharana et al., ACL 2024): each conversation's turns become one
//! user's recall log (with their session dates), then every question of categories 1–4 is a query;
//! recall@k is the fraction of the question's evidence turns among the top k retrieved turns.
//! Needs no LLM. Hybrid, vector-only and keyword-only retrieval are measured side by side.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use serde::Deserialize;

use super::locomo_data::{Question, Turn};
use serde_json::{json, Value};

use crate::bench::quantile_ms;
use crate::embed::{EmbeddingConfig, LocalEmbedder};
use crate::memory::{MemoryService, RetrievalRequest};
use crate::store::{Corpus, NewMessage, UserScope};

#[derive(Args, Clone)]
pub struct RetrievalEval {
    /// Path to locomo10.json.
    #[arg(long)]
    locomo: PathBuf,
    /// Cut-offs, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "5,10,20")]
    k: Vec<usize>,
    /// Where the local model is installed (scripts/fetch-model).
    #[arg(long, default_value = "./.memproxy")]
    model_data_dir: PathBuf,
    /// Only the first N conversations (quick runs).
    #[arg(long)]
    limit: Option<usize>,
    /// Leave out the first N conversations (before `--limit`): `--limit 5` and `--skip 5` are
    /// the two halves, one to tune on and one held out.
    #[arg(long, default_value_t = 0)]
    skip: usize,
    /// Also write the figures as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Extra hybrid variants with these vector weights in the fusion (keyword weight 1).
    #[arg(long, value_delimiter = ',')]
    vector_weights: Vec<f64>,
    /// Extra hybrid variants with these rank-fusion constants.
    #[arg(long, value_delimiter = ',')]
    rrf_ks: Vec<f64>,
}

#[derive(Deserialize)]
struct Sample {
    sample_id: String,
    conversation: serde_json::Map<String, Value>,
    qa: Vec<Question>,
}

/// One retrieval measured: which searches, fused how, with which rules.
#[derive(Clone)]
struct Variant {
    name: String,
    vector: bool,
    keyword: bool,
    vector_weight: f64,
    rrf_k: f64,
    /// The turn rules of `memory::neighbours`.
    turn_rules: bool,
    /// The vector search's pseudo-relevance feedback (`memory::feedback`).
    feedback: bool,
}

const CATEGORIES: [(u8, &str); 4] = [
    (1, "multi-hop"),
    (2, "temporal"),
    (3, "open-domain"),
    (4, "single-hop"),
];

/// "1:56 pm on 8 May, 2023" → milliseconds since the epoch (UTC).
pub(super) fn parse_session_date(text: &str) -> Option<i64> {
    let (clock, date) = text.split_once(" on ")?;
    let (hm, meridiem) = clock.trim().split_once(' ')?;
    let (hour, minute) = hm.split_once(':')?;
    let mut hour: i64 = hour.parse().ok()?;
    let minute: i64 = minute.parse().ok()?;
    match meridiem.to_ascii_lowercase().as_str() {
        "pm" if hour != 12 => hour += 12,
        "am" if hour == 12 => hour = 0,
        _ => {}
    }
    let parts: Vec<&str> = date.split([' ', ',']).filter(|p| !p.is_empty()).collect();
    let [day, month, year] = parts[..] else {
        return None;
    };
    let month = crate::dates::MONTHS
        .iter()
        .position(|m| m.starts_with(&month.to_ascii_lowercase()))? as i64
        + 1;
    let days = crate::dates::days_from_civil(year.parse().ok()?, month, day.parse().ok()?);
    Some(((days * 24 + hour) * 60 + minute) * 60_000)
}

/// Evidence ids, tolerating the few malformed entries ("D8:6; D9:17", "D:11:26").
pub(super) fn evidence_ids(evidence: &[String]) -> Vec<String> {
    evidence
        .iter()
        .flat_map(|entry| entry.split([';', ',', ' ']))
        .filter_map(|id| {
            let rest = id.trim().strip_prefix('D')?.trim_start_matches(':');
            let (session, turn) = rest.split_once(':')?;
            (session.parse::<u32>().is_ok() && turn.parse::<u32>().is_ok())
                .then(|| format!("D{session}:{turn}"))
        })
        .collect()
}

#[derive(Default)]
struct Tally {
    questions: usize,
    recall: Vec<f64>,
    latencies: Vec<Duration>,
}

pub async fn run(options: RetrievalEval) -> anyhow::Result<()> {
    let samples: Vec<Sample> = serde_json::from_slice(&std::fs::read(&options.locomo)?)?;
    let samples = &samples[options.skip.min(samples.len())..];
    let samples = &samples[..options.limit.unwrap_or(samples.len()).min(samples.len())];
    let data_dir = options.model_data_dir.clone();
    let embedder = Arc::new(
        tokio::task::spawn_blocking(move || {
            LocalEmbedder::load(&EmbeddingConfig::default(), &data_dir)
        })
        .await??,
    );
    let dir = tempfile::tempdir()?;
    let memory = MemoryService::open(dir.path(), embedder)?;
    let mut ks = options.k.clone();
    ks.sort_unstable();
    let max_k = ks.last().copied().unwrap_or(10);

    // Load every conversation as one user's recall log.
    let started = Instant::now();
    let mut turns_loaded = 0;
    let mut dia_of: HashMap<(String, i64), String> = HashMap::new();
    for sample in samples {
        let scope = UserScope::new("locomo", &sample.sample_id);
        let speaker_a = sample
            .conversation
            .get("speaker_a")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        for session in 1.. {
            let Some(turns) = sample.conversation.get(&format!("session_{session}")) else {
                break;
            };
            let turns: Vec<Turn> = serde_json::from_value(turns.clone())?;
            let date = sample
                .conversation
                .get(&format!("session_{session}_date_time"))
                .and_then(Value::as_str)
                .and_then(parse_session_date)
                .unwrap_or(0);
            let messages: Vec<NewMessage> = turns
                .iter()
                .enumerate()
                .map(|(position, turn)| {
                    let content = format!("{}: {}", turn.speaker, turn.content());
                    NewMessage {
                        position: position as i64,
                        role: if turn.speaker == speaker_a {
                            "user"
                        } else {
                            "assistant"
                        }
                        .to_owned(),
                        content,
                        name: Some(turn.speaker.clone()),
                        tool_calls: None,
                        tool_call_id: None,
                        created_at_ms: date + position as i64 * 60_000,
                    }
                })
                .collect();
            let stored = memory
                .record_messages(&scope, &format!("session_{session}"), "default", messages)
                .await?
                .stored;
            turns_loaded += stored.len();
            for message in stored {
                let dia = turns[message.position as usize].dia_id.clone();
                dia_of.insert((sample.sample_id.clone(), message.id), dia);
            }
        }
    }
    // Recording embeds only the newest turns of a batch and leaves the rest to the background
    // embedder, which this command does not run: without this every older turn would be found
    // by keywords alone (the 0.614 -> 0.526 R@10 "regression" of issue 48 was that).
    let backlog = memory.reindex().await?;
    memory.flush().await?;
    println!(
        "LoCoMo retrieval: {} conversations, {turns_loaded} turns stored and embedded in {:.1} s \
         ({backlog} of them as a backlog)",
        samples.len(),
        started.elapsed().as_secs_f64()
    );

    let defaults = RetrievalRequest::default();
    let hybrid = Variant {
        name: "hybrid".into(),
        vector: true,
        keyword: true,
        vector_weight: defaults.vector_weight,
        rrf_k: defaults.rrf_k,
        turn_rules: true,
        feedback: true,
    };
    // "no-fb" is the hybrid without the vector search's feedback (`memory::feedback`), "fused"
    // without the turn rules of `memory::neighbours` too; vector and keyword are each alone.
    let mut variants = vec![
        Variant {
            name: "no-fb".into(),
            feedback: false,
            ..hybrid.clone()
        },
        Variant {
            name: "fused".into(),
            turn_rules: false,
            feedback: false,
            ..hybrid.clone()
        },
        Variant {
            name: "vector".into(),
            keyword: false,
            turn_rules: false,
            feedback: false,
            ..hybrid.clone()
        },
        Variant {
            name: "keyword".into(),
            vector: false,
            turn_rules: false,
            feedback: false,
            ..hybrid.clone()
        },
    ];
    for weight in &options.vector_weights {
        variants.push(Variant {
            name: format!("hyb-v{weight}"),
            vector_weight: *weight,
            ..hybrid.clone()
        });
    }
    for k in &options.rrf_ks {
        variants.push(Variant {
            name: format!("hyb-k{k}"),
            rrf_k: *k,
            ..hybrid.clone()
        });
    }
    variants.insert(0, hybrid);
    let mut report =
        json!({"conversations": samples.len(), "turns": turns_loaded, "k": ks, "variants": {}});
    println!(
        "\n{:<10} {:<12} {:>6} {}  {:>8} {:>8}",
        "variant",
        "category",
        "n",
        ks.iter()
            .map(|k| format!("{:>9}", format!("R@{k}")))
            .collect::<String>(),
        "p50 ms",
        "p99 ms"
    );
    for variant in variants {
        let name = variant.name.as_str();
        let mut tallies: BTreeMap<u8, Tally> = BTreeMap::new();
        let mut skipped = 0;
        for sample in samples {
            let scope = UserScope::new("locomo", &sample.sample_id);
            for question in sample.qa.iter().filter(|q| (1..=4).contains(&q.category)) {
                let evidence = evidence_ids(&question.evidence);
                if evidence.is_empty() {
                    skipped += 1;
                    continue;
                }
                let request = RetrievalRequest {
                    query: question.question.clone(),
                    corpora: vec![Corpus::Message],
                    top_k: max_k,
                    candidates: (2 * max_k).max(40),
                    // Ranking quality: no threshold, every candidate competes.
                    min_similarity: -1.0,
                    vector: variant.vector,
                    keyword: variant.keyword,
                    vector_weight: variant.vector_weight,
                    rrf_k: variant.rrf_k,
                    neighbour_weight: if variant.turn_rules {
                        defaults.neighbour_weight
                    } else {
                        0.0
                    },
                    author_weight: if variant.turn_rules {
                        defaults.author_weight
                    } else {
                        1.0
                    },
                    feedback_weight: if variant.feedback {
                        defaults.feedback_weight
                    } else {
                        0.0
                    },
                    ..RetrievalRequest::default()
                };
                let began = Instant::now();
                let hits = memory.retrieve(&scope, request).await?;
                let elapsed = began.elapsed();
                let retrieved: Vec<&str> = hits
                    .iter()
                    .filter_map(|h| {
                        dia_of
                            .get(&(sample.sample_id.clone(), h.id))
                            .map(String::as_str)
                    })
                    .collect();
                let tally = tallies.entry(question.category).or_default();
                tally.questions += 1;
                tally.latencies.push(elapsed);
                for (slot, &k) in ks.iter().enumerate() {
                    let top: Vec<&str> = retrieved.iter().take(k).copied().collect();
                    let found = evidence
                        .iter()
                        .filter(|e| top.contains(&e.as_str()))
                        .count();
                    let recall = found as f64 / evidence.len() as f64;
                    if tally.recall.len() <= slot {
                        tally.recall.push(0.0);
                    }
                    tally.recall[slot] += recall;
                }
            }
        }
        let mut overall = Tally::default();
        let mut rows = serde_json::Map::new();
        for (category, label) in CATEGORIES {
            let Some(tally) = tallies.remove(&category) else {
                continue;
            };
            print_row(name, label, &tally);
            rows.insert(label.to_owned(), row_json(&ks, &tally));
            overall.questions += tally.questions;
            overall.latencies.extend(tally.latencies.iter().copied());
            if overall.recall.is_empty() {
                overall.recall = vec![0.0; tally.recall.len()];
            }
            for (sum, value) in overall.recall.iter_mut().zip(&tally.recall) {
                *sum += value;
            }
        }
        print_row(name, "overall", &overall);
        rows.insert("overall".to_owned(), row_json(&ks, &overall));
        rows.insert("skipped_without_evidence".to_owned(), json!(skipped));
        report["variants"][name] = Value::Object(rows);
    }
    if let Some(path) = options.json {
        std::fs::write(&path, serde_json::to_vec_pretty(&report)?)?;
        println!("\nwrote {}", path.display());
    }
    Ok(())
}

fn print_row(variant: &str, label: &str, tally: &Tally) {
    let n = tally.questions.max(1) as f64;
    let mut latencies = tally.latencies.clone();
    latencies.sort_unstable();
    println!(
        "{variant:<10} {label:<12} {:>6} {}  {:>8.2} {:>8.2}",
        tally.questions,
        tally
            .recall
            .iter()
            .map(|r| format!("{:>9.3}", r / n))
            .collect::<String>(),
        quantile_ms(&latencies, 0.5),
        quantile_ms(&latencies, 0.99)
    );
}

fn row_json(ks: &[usize], tally: &Tally) -> Value {
    let n = tally.questions.max(1) as f64;
    let mut latencies = tally.latencies.clone();
    latencies.sort_unstable();
    let recall: serde_json::Map<String, Value> = ks
        .iter()
        .zip(&tally.recall)
        .map(|(k, r)| (format!("recall@{k}"), json!(r / n)))
        .collect();
    json!({"questions": tally.questions, "recall": recall,
           "latency_ms": {"p50": quantile_ms(&latencies, 0.5), "p99": quantile_ms(&latencies, 0.99)}})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_locomo_dates_and_evidence() {
        // 2023-05-08 13:56 UTC
        assert_eq!(
            parse_session_date("1:56 pm on 8 May, 2023"),
            Some(1_683_554_160_000)
        );
        assert_eq!(
            parse_session_date("12:05 am on 1 January, 2024"),
            Some(1_704_067_500_000)
        );
        assert_eq!(parse_session_date("someday"), None);
        let ids = evidence_ids(&[
            "D8:6; D9:17".into(),
            "D".into(),
            "D:11:26".into(),
            "D1:3".into(),
        ]);
        assert_eq!(ids, ["D8:6", "D9:17", "D11:26", "D1:3"]);
    }
}
