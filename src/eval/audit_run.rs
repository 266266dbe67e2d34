//! `memproxy eval audit --run OUT --dataset …`: labels the memories a finished run left (its
//! `runs.jsonl`, or the stores it kept with `--keep-data`) with the judge model, reports the
//! labels per strategy, and the judge's agreement with a person's labels (`--labels`).

use std::collections::BTreeMap;
use std::path::PathBuf;

use clap::Args;

use super::audit::{
    agreement, live_memories, read_hand_labels, Agreement, AuditSummary, AuditedMemory, HandLabel,
    Label,
};
use super::audit_judge::Judge;
use super::client::EVAL_USER;
use super::dataset;
use super::run::read_runs;

#[derive(Args, Clone, Debug)]
pub struct AuditArgs {
    /// A finished run's output directory (`runs.jsonl`; `data/` when it kept its stores).
    #[arg(long)]
    pub run: PathBuf,
    /// The run's dataset (the judge reads each whole conversation).
    #[arg(long)]
    pub dataset: PathBuf,
    /// The judge model (default: the upstream's default model).
    #[arg(long)]
    pub judge_model: Option<String>,
    /// The judge's /v1 endpoint.
    #[arg(long, default_value = "http://127.0.0.1:8090/v1")]
    pub judge_upstream: String,
    /// A person's labels (JSON lines: conversation, memory, label): the judge's agreement with
    /// them is reported.
    #[arg(long)]
    pub labels: Option<PathBuf>,
    /// Reuse the labels the run's judge already gave instead of asking again.
    #[arg(long)]
    pub keep_judged: bool,
    /// Write the memories that `--labels` does not cover here, as JSON lines to label by hand.
    #[arg(long)]
    pub unlabelled: Option<PathBuf>,
}

/// (strategy, conversation, memories) of one replay.
type Pair = (String, String, Vec<AuditedMemory>);

/// The memories of one pair: from `runs.jsonl`, else from the store the run kept.
fn memories_of(
    args: &AuditArgs,
    pair: &super::pair::PairResult,
) -> anyhow::Result<Vec<AuditedMemory>> {
    if !pair.memories.is_empty() {
        return Ok(pair.memories.clone());
    }
    let kept = args
        .run
        .join("data")
        .join(format!("{}-{}", pair.conversation, pair.strategy))
        .join("memproxy.db");
    if !kept.exists() {
        return Ok(Vec::new());
    }
    let store = crate::store::sqlite::SqliteStore::open(&kept)?;
    Ok(live_memories(
        &store,
        &crate::store::UserScope::new("default", EVAL_USER),
    )?)
}

pub async fn run(args: AuditArgs) -> anyhow::Result<()> {
    let data = dataset::load(&args.dataset, None, false)?;
    let runs = read_runs(&args.run.join("runs.jsonl"))?;
    if runs.is_empty() {
        anyhow::bail!(
            "{} has no runs.jsonl with finished pairs",
            args.run.display()
        );
    }
    let hand: Vec<HandLabel> = match &args.labels {
        Some(path) => read_hand_labels(path)?,
        None => Vec::new(),
    };
    let model = args.judge_model.clone().unwrap_or_default();
    let judge = Judge {
        http: reqwest::Client::new(),
        url: &args.judge_upstream,
        model: &model,
    };
    let mut audited: Vec<Pair> = Vec::new();
    for pair in &runs {
        let mut memories = memories_of(&args, pair)?;
        if memories.is_empty() {
            continue;
        }
        let Some(conversation) = data
            .conversations
            .iter()
            .find(|c| c.id == pair.conversation)
        else {
            anyhow::bail!("the dataset has no conversation {}", pair.conversation);
        };
        if !args.keep_judged || memories.iter().any(|m| m.label.is_none()) {
            eprintln!(
                "judging {} memories of {} / {}",
                memories.len(),
                pair.conversation,
                pair.strategy
            );
            judge.audit(conversation, &mut memories).await;
        }
        audited.push((pair.strategy.clone(), pair.conversation.clone(), memories));
    }
    let mut by_strategy: BTreeMap<&str, Vec<&Pair>> = BTreeMap::new();
    for entry in &audited {
        by_strategy.entry(entry.0.as_str()).or_default().push(entry);
    }
    let mut report = serde_json::Map::new();
    for (strategy, pairs) in &by_strategy {
        let summary = AuditSummary::of(pairs.iter().flat_map(|(_, _, m)| m));
        println!("\n{strategy}: {}", summary.line());
        for (_, conversation, memories) in pairs {
            for memory in memories {
                println!(
                    "  [{}] {conversation}: {}  ({})",
                    memory.label.map_or("unlabelled", Label::as_str),
                    memory.text,
                    memory.reason.as_deref().unwrap_or("")
                );
            }
        }
        let agreed = agreement(
            pairs
                .iter()
                .flat_map(|(_, c, m)| m.iter().map(move |memory| (c.as_str(), memory))),
            &hand,
        );
        if args.labels.is_some() {
            println!("{strategy}: {}", agreement_line(&agreed));
        }
        report.insert(
            (*strategy).to_owned(),
            serde_json::json!({"audit": summary, "agreement": agreed_json(&agreed),
                "memories": pairs.iter().map(|(_, c, m)| serde_json::json!({"conversation": c, "memories": m})).collect::<Vec<_>>()}),
        );
    }
    if args.labels.is_some() {
        let all = agreement(
            audited
                .iter()
                .flat_map(|(_, c, m)| m.iter().map(move |memory| (c.as_str(), memory))),
            &hand,
        );
        println!("\nall strategies: {}", agreement_line(&all));
        report.insert("agreement".to_owned(), agreed_json(&all));
    }
    if let Some(path) = &args.unlabelled {
        let known: std::collections::HashSet<(String, String)> = hand
            .iter()
            .map(|h| (h.conversation.clone(), super::score::normalize(&h.memory)))
            .collect();
        let mut lines = String::new();
        let mut seen = std::collections::HashSet::new();
        for (_, conversation, memories) in &audited {
            for memory in memories {
                let key = (conversation.clone(), super::score::normalize(&memory.text));
                if known.contains(&key) || !seen.insert(key) {
                    continue;
                }
                lines.push_str(&serde_json::to_string(&serde_json::json!({
                    "conversation": conversation, "memory": memory.text,
                    "label": memory.label.map(Label::as_str)}))?);
                lines.push('\n');
            }
        }
        std::fs::write(path, lines)?;
        eprintln!(
            "wrote the memories without a person's label to {}",
            path.display()
        );
    }
    let out = args.run.join("audit.json");
    std::fs::write(&out, serde_json::to_vec_pretty(&report)?)?;
    eprintln!("wrote {}", out.display());
    Ok(())
}

pub(super) fn agreement_line(agreed: &Agreement) -> String {
    if agreed.compared == 0 {
        return "no memory has both a judge's and a person's label".to_owned();
    }
    format!(
        "judge vs person on {} memories: same label {:.0}%, same correct/wrong verdict {:.0}%, kappa {:.2}",
        agreed.compared,
        agreed.same as f64 * 100.0 / agreed.compared as f64,
        agreed.same_verdict as f64 * 100.0 / agreed.compared as f64,
        agreed.kappa
    )
}

pub(super) fn agreed_json(agreed: &Agreement) -> serde_json::Value {
    let confusion: Vec<serde_json::Value> = agreed
        .confusion
        .iter()
        .map(|((person, judge), count)| {
            serde_json::json!({"person": person, "judge": judge, "count": count})
        })
        .collect();
    serde_json::json!({"compared": agreed.compared, "same": agreed.same,
        "same_verdict": agreed.same_verdict, "kappa": agreed.kappa, "confusion": confusion})
}
