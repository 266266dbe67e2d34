//! Turns the pairs of an evaluation into the answer to "which strategy, at what cost, with what
//! accuracy": a summary per strategy and per question category, printed as tables and written as
//! `results.json` and a self-contained `report.html` (inline SVG, no scripts, works offline).

use std::collections::BTreeMap;

use serde::Serialize;

use super::pair::{PairResult, RunArgs};
use super::store_stats::StoreStats;
use super::work::Work;
use crate::bench::quantile_ms;

#[derive(Clone, Debug, Default, Serialize)]
pub struct StrategySummary {
    pub strategy: String,
    pub conversations: usize,
    pub requests: usize,
    pub probes: usize,
    pub errors: usize,
    /// By kind: chat, agent_step, rewarm, extract, reconcile, summarize.
    pub work: BTreeMap<String, Work>,
    pub chat_tokens: u64,
    pub memory_tokens: u64,
    pub overhead_p50_ms: f64,
    pub overhead_p95_ms: f64,
    pub total_p50_ms: f64,
    pub total_p95_ms: f64,
    /// With `--settle`: the median wait for a replayed turn's background work after its reply.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub settle_p50_ms: Option<f64>,
    pub f1: f64,
    pub contains: f64,
    pub judge: Option<f64>,
    pub evidence_in_context: Option<f64>,
    /// F1 as a share of the `full-context` ceiling's, when the run has one.
    pub f1_of_ceiling: Option<f64>,
    pub by_category: BTreeMap<String, CategoryScore>,
    /// What the replays left in the memory store, summed over conversations.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub store: Option<StoreStats>,
    /// The fact-store audit (`--audit`): the judge's labels of the memories left, summed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub audit: Option<super::audit::AuditSummary>,
    /// Overhead samples (ms) for the latency chart.
    #[serde(skip)]
    pub overhead_samples: Vec<f64>,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct CategoryScore {
    pub probes: usize,
    pub f1: f64,
    pub contains: f64,
    pub judge: Option<f64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    pub dataset: String,
    pub model: Option<String>,
    pub judge_model: Option<String>,
    pub upstream: String,
    /// `--pause`: seconds between a replayed turn's reply and the next turn (0: back to back).
    pub pause_s: f64,
    pub strategies: Vec<StrategySummary>,
}

fn mean(values: impl Iterator<Item = f64>) -> f64 {
    let (sum, count) = values.fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    if count == 0 {
        0.0
    } else {
        sum / count as f64
    }
}

fn percentile(samples: &[f64], q: f64) -> f64 {
    if samples.is_empty() {
        return 0.0;
    }
    let mut durations: Vec<std::time::Duration> = samples
        .iter()
        .map(|ms| std::time::Duration::from_secs_f64(ms.max(0.0) / 1e3))
        .collect();
    durations.sort();
    quantile_ms(&durations, q)
}

pub fn summarize(dataset: &str, args: &RunArgs, runs: &[PairResult]) -> Summary {
    let mut order: Vec<String> = args
        .strategies
        .iter()
        .map(|m| m.as_str().to_owned())
        .collect();
    for run in runs {
        if !order.contains(&run.strategy) {
            order.push(run.strategy.clone());
        }
    }
    let strategies = order
        .iter()
        .filter_map(|strategy| {
            let pairs: Vec<&PairResult> = runs.iter().filter(|r| &r.strategy == strategy).collect();
            if pairs.is_empty() {
                return None;
            }
            let mut summary = StrategySummary {
                strategy: strategy.clone(),
                conversations: pairs.len(),
                ..Default::default()
            };
            for pair in &pairs {
                for (kind, work) in &pair.work {
                    summary.work.entry(kind.clone()).or_default().add(work);
                }
                summary.overhead_samples.extend(&pair.overhead_ms);
                summary.errors += pair.errors.len();
                if let Some(stats) = &pair.store {
                    summary
                        .store
                        .get_or_insert_with(Default::default)
                        .add(stats);
                }
            }
            let memories = pairs.iter().flat_map(|p| p.memories.iter());
            let audit = super::audit::AuditSummary::of(memories);
            summary.audit = (audit.labelled > 0).then_some(audit);
            let totals: Vec<f64> = pairs
                .iter()
                .flat_map(|p| p.total_ms.iter().copied())
                .collect();
            summary.requests = totals.len();
            for (kind, work) in &summary.work {
                let tokens = work.prompt_tokens + work.completion_tokens;
                if kind == "chat" {
                    summary.chat_tokens += tokens;
                } else {
                    summary.memory_tokens += tokens;
                }
            }
            summary.overhead_p50_ms = percentile(&summary.overhead_samples, 0.5);
            summary.overhead_p95_ms = percentile(&summary.overhead_samples, 0.95);
            summary.total_p50_ms = percentile(&totals, 0.5);
            summary.total_p95_ms = percentile(&totals, 0.95);
            let settled: Vec<f64> = pairs
                .iter()
                .flat_map(|p| p.settle_ms.iter().copied())
                .collect();
            summary.settle_p50_ms = (!settled.is_empty()).then(|| percentile(&settled, 0.5));
            let probes: Vec<_> = pairs.iter().flat_map(|p| p.probes.iter()).collect();
            summary.probes = probes.len();
            summary.f1 = mean(probes.iter().map(|p| p.f1));
            summary.contains = mean(probes.iter().map(|p| f64::from(u8::from(p.contains))));
            let judged: Vec<f64> = probes
                .iter()
                .filter_map(|p| p.judge.map(|j| f64::from(u8::from(j))))
                .collect();
            summary.judge = (!judged.is_empty()).then(|| mean(judged.into_iter()));
            let evidence: Vec<f64> = probes
                .iter()
                .filter_map(|p| p.evidence_in_context)
                .collect();
            summary.evidence_in_context =
                (!evidence.is_empty()).then(|| mean(evidence.into_iter()));
            let mut categories: BTreeMap<String, Vec<_>> = BTreeMap::new();
            for probe in &probes {
                categories
                    .entry(probe.category.clone())
                    .or_default()
                    .push(*probe);
            }
            for (category, items) in categories {
                let judged: Vec<f64> = items
                    .iter()
                    .filter_map(|p| p.judge.map(|j| f64::from(u8::from(j))))
                    .collect();
                summary.by_category.insert(
                    category,
                    CategoryScore {
                        probes: items.len(),
                        f1: mean(items.iter().map(|p| p.f1)),
                        contains: mean(items.iter().map(|p| f64::from(u8::from(p.contains)))),
                        judge: (!judged.is_empty()).then(|| mean(judged.into_iter())),
                    },
                );
            }
            Some(summary)
        })
        .collect();
    let strategies = with_ceiling(strategies);
    Summary {
        dataset: dataset.to_owned(),
        model: args.model.clone(),
        judge_model: args.judge_model.clone(),
        upstream: args.upstream.clone(),
        pause_s: args.pause,
        strategies,
    }
}

/// Each strategy's F1 as a share of the `full-context` ceiling's.
fn with_ceiling(mut strategies: Vec<StrategySummary>) -> Vec<StrategySummary> {
    let ceiling = strategies
        .iter()
        .find(|s| s.strategy == super::ceiling::FULL_CONTEXT)
        .map(|s| s.f1)
        .filter(|f1| *f1 > 0.0);
    if let Some(ceiling) = ceiling {
        for strategy in &mut strategies {
            strategy.f1_of_ceiling = Some(strategy.f1 / ceiling);
        }
    }
    strategies
}

fn optional(value: Option<f64>) -> String {
    value.map_or_else(|| "-".to_owned(), |v| format!("{v:.3}"))
}

/// Kinds of upstream work that are memory work (all but the answer's own chat call).
const MEMORY_KINDS: [&str; 8] = [
    "agent_step",
    "rewarm",
    "extract",
    "reconcile",
    "summarize",
    "consolidate",
    "changed",
    "memory",
];

fn calls_of(summary: &StrategySummary, kinds: &[&str]) -> u64 {
    kinds
        .iter()
        .filter_map(|k| summary.work.get(*k))
        .map(|w| w.calls)
        .sum()
}

/// The rows of the main table (shared by the terminal and the HTML report).
fn rows(summary: &Summary) -> Vec<Vec<String>> {
    summary
        .strategies
        .iter()
        .map(|s| {
            vec![
                s.strategy.clone(),
                s.probes.to_string(),
                format!("{:.3}", s.f1),
                s.f1_of_ceiling
                    .map_or_else(|| "-".to_owned(), |share| format!("{:.0}%", share * 100.0)),
                format!("{:.3}", s.contains),
                optional(s.judge),
                optional(s.evidence_in_context),
                calls_of(s, &["chat"]).to_string(),
                calls_of(s, &MEMORY_KINDS).to_string(),
                s.chat_tokens.to_string(),
                s.memory_tokens.to_string(),
                format!("{:.1}/{:.1}", s.overhead_p50_ms, s.overhead_p95_ms),
                format!("{:.0}/{:.0}", s.total_p50_ms, s.total_p95_ms),
                s.errors.to_string(),
            ]
        })
        .collect()
}

const HEADER: [&str; 14] = [
    "strategy",
    "probes",
    "F1",
    "F1 of ceiling",
    "contains",
    "judge",
    "evidence",
    "chat calls",
    "memory calls",
    "chat tokens",
    "memory tokens",
    "overhead p50/p95 ms",
    "total p50/p95 ms",
    "errors",
];

fn markdown(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut text = format!(
        "| {} |\n|{}\n",
        header.join(" | "),
        "---|".repeat(header.len())
    );
    for row in rows {
        text.push_str(&format!("| {} |\n", row.join(" | ")));
    }
    text
}

fn category_rows(summary: &Summary) -> (Vec<String>, Vec<Vec<String>>) {
    let mut categories: Vec<String> = summary
        .strategies
        .iter()
        .flat_map(|s| s.by_category.keys().cloned())
        .collect();
    categories.sort();
    categories.dedup();
    let rows = summary
        .strategies
        .iter()
        .map(|s| {
            let mut row = vec![s.strategy.clone()];
            for category in &categories {
                row.push(s.by_category.get(category).map_or_else(
                    || "-".to_owned(),
                    |c| match c.judge {
                        Some(judge) => format!("{:.2} / {:.2}", c.f1, judge),
                        None => format!("{:.2} / {:.2}", c.f1, c.contains),
                    },
                ));
            }
            row
        })
        .collect();
    (categories, rows)
}

/// The memory-store table: what each fact-keeping strategy stored, retired and refused.
fn store_rows(summary: &Summary) -> Vec<Vec<String>> {
    summary
        .strategies
        .iter()
        .filter_map(|s| {
            let store = s.store.as_ref()?;
            let reasons: Vec<String> = store
                .rejected
                .iter()
                .map(|(reason, count)| format!("{reason} {count}"))
                .collect();
            Some(vec![
                s.strategy.clone(),
                store.stored.to_string(),
                store.updated.to_string(),
                store.retired.to_string(),
                store.duplicates.to_string(),
                store.rejected_total().to_string(),
                reasons.join(", "),
                format!(
                    "{} → {} ({} retired, {} new)",
                    store.before_consolidation(),
                    store.stored,
                    store.consolidation_retired,
                    store.consolidation_added
                ),
            ])
        })
        .collect()
}

const STORE_HEADER: [&str; 8] = [
    "strategy (memory store)",
    "stored",
    "updated",
    "retired",
    "duplicates",
    "rejected",
    "rejected by reason",
    "consolidation (live before → after)",
];

/// The per-turn table: what one client request cost in upstream work, and how much of the chat
/// prompts a prefix cache could reuse (and did, where the upstream reports it).
fn turn_rows(summary: &Summary) -> Vec<Vec<String>> {
    summary
        .strategies
        .iter()
        .filter(|s| s.requests > 0)
        .map(|s| {
            let mut chat = Work::default();
            for kind in ["chat", "agent_step"] {
                if let Some(work) = s.work.get(kind) {
                    chat.add(work);
                }
            }
            let requests = s.requests as f64;
            let share = |part: u64, whole: u64| {
                if whole == 0 {
                    "-".to_owned()
                } else {
                    format!("{:.0}%", 100.0 * part as f64 / whole as f64)
                }
            };
            let cached = if chat.cache_reported == 0 {
                "not reported".to_owned()
            } else {
                share(chat.cached_tokens, chat.prompt_tokens)
            };
            vec![
                s.strategy.clone(),
                format!("{:.2}", chat.calls as f64 / requests),
                format!("{:.0}", chat.prompt_tokens as f64 / requests),
                share(chat.shared_prefix_tokens, chat.prompt_text_tokens),
                cached,
                format!("{:.0}", s.total_p50_ms),
                s.settle_p50_ms
                    .map_or_else(|| "-".to_owned(), |ms| format!("{ms:.0}")),
                // Every call of the pair, the turn's own and its background work.
                format!(
                    "{:.1}",
                    s.work.values().map(|w| w.model_ms).sum::<f64>() / 1e3 / requests
                ),
            ]
        })
        .collect()
}

const TURN_HEADER: [&str; 8] = [
    "strategy (per client request)",
    "chat calls",
    "prompt tokens",
    "prompt shared with previous call",
    "served from upstream cache",
    "total p50 ms",
    "work after the turn p50 ms (--settle)",
    "model s (all calls)",
];

pub fn print(summary: &Summary) {
    println!(
        "\n{} — model {}",
        summary.dataset,
        summary.model.as_deref().unwrap_or("(upstream default)")
    );
    println!("{}", markdown(&HEADER, &rows(summary)));
    println!("{}", markdown(&TURN_HEADER, &turn_rows(summary)));
    let (categories, rows) = category_rows(summary);
    let mut header = vec!["strategy (F1 / judge or contains)"];
    header.extend(categories.iter().map(String::as_str));
    println!("{}", markdown(&header, &rows));
    let store = store_rows(summary);
    if !store.is_empty() {
        println!("{}", markdown(&STORE_HEADER, &store));
    }
    for strategy in &summary.strategies {
        if let Some(audit) = &strategy.audit {
            println!("fact-store audit, {}: {}", strategy.strategy, audit.line());
        }
    }
}

/// Escapes text for HTML (answers and questions are data, never markup).
pub fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

fn table_html(header: &[&str], rows: &[Vec<String>]) -> String {
    let head: String = header
        .iter()
        .map(|h| format!("<th>{}</th>", escape(h)))
        .collect();
    let body: String = rows
        .iter()
        .map(|row| {
            format!(
                "<tr>{}</tr>",
                row.iter()
                    .map(|c| format!("<td>{}</td>", escape(c)))
                    .collect::<String>()
            )
        })
        .collect();
    format!("<table><tr>{head}</tr>{body}</table>")
}

const COLORS: [&str; 6] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
];

/// Scatter: total tokens (chat + memory) per probe-bearing conversation vs F1, one dot per strategy.
fn tokens_vs_score(summary: &Summary) -> String {
    let (w, h, pad) = (560.0, 300.0, 50.0);
    let max_tokens = summary
        .strategies
        .iter()
        .map(|s| (s.chat_tokens + s.memory_tokens) as f64)
        .fold(1.0, f64::max);
    let mut svg = format!("<svg width=\"{w}\" height=\"{h}\" xmlns=\"http://www.w3.org/2000/svg\"><rect width=\"100%\" height=\"100%\" fill=\"white\"/>");
    svg.push_str(&format!("<line x1=\"{pad}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/><line x1=\"{pad}\" y1=\"20\" x2=\"{pad}\" y2=\"{}\" stroke=\"black\"/>", h - pad, w - 20.0, h - pad, h - pad));
    svg.push_str(&format!("<text x=\"{}\" y=\"{}\" font-size=\"12\">total tokens (max {max_tokens:.0})</text><text x=\"5\" y=\"15\" font-size=\"12\">F1</text>", w / 2.0 - 60.0, h - 15.0));
    for (i, s) in summary.strategies.iter().enumerate() {
        let x = pad + ((s.chat_tokens + s.memory_tokens) as f64 / max_tokens) * (w - pad - 40.0);
        let y = (h - pad) - s.f1.clamp(0.0, 1.0) * (h - pad - 30.0);
        let color = COLORS[i % COLORS.len()];
        // Labels near the right edge go to the left of their dot.
        let (label_x, anchor) = if x > w - 160.0 {
            (x - 8.0, "end")
        } else {
            (x + 8.0, "start")
        };
        svg.push_str(&format!("<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"6\" fill=\"{color}\"/><text x=\"{label_x:.1}\" y=\"{:.1}\" font-size=\"12\" text-anchor=\"{anchor}\">{} ({:.2})</text>", y - 6.0, escape(&s.strategy), s.f1));
    }
    svg.push_str("</svg>");
    svg
}

/// Box plot (p5, p25, p50, p75, p95) of memproxy's own time per request, per strategy.
fn latency_boxes(summary: &Summary) -> String {
    let row_height = 34.0;
    let (w, pad) = (560.0, 110.0);
    let h = 40.0 + row_height * summary.strategies.len() as f64;
    let max = summary
        .strategies
        .iter()
        .map(|s| percentile(&s.overhead_samples, 0.95))
        .fold(1.0, f64::max);
    let scale = |ms: f64| pad + (ms / max).min(1.0) * (w - pad - 20.0);
    let mut svg = format!("<svg width=\"{w}\" height=\"{h}\" xmlns=\"http://www.w3.org/2000/svg\"><rect width=\"100%\" height=\"100%\" fill=\"white\"/><text x=\"{pad}\" y=\"{}\" font-size=\"12\">memproxy's own time per request, ms (p5–p95; max {max:.1})</text>", h - 8.0);
    for (i, s) in summary.strategies.iter().enumerate() {
        let y = 15.0 + row_height * i as f64;
        let q = |p: f64| scale(percentile(&s.overhead_samples, p));
        let color = COLORS[i % COLORS.len()];
        svg.push_str(&format!(
            "<text x=\"5\" y=\"{:.1}\" font-size=\"12\">{}</text><line x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"{color}\"/><rect x=\"{:.1}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"20\" fill=\"{color}\" opacity=\"0.4\"/><line x1=\"{:.1}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"black\" stroke-width=\"2\"/>",
            y + 14.0, escape(&s.strategy), q(0.05), y + 10.0, q(0.95), y + 10.0, q(0.25), (q(0.75) - q(0.25)).max(1.0), q(0.5), q(0.5), y + 20.0
        ));
    }
    svg.push_str("</svg>");
    svg
}

pub fn html(summary: &Summary) -> String {
    let (categories, category_rows) = category_rows(summary);
    let mut category_header = vec!["strategy (F1 / judge or contains)"];
    category_header.extend(categories.iter().map(String::as_str));
    format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>memproxy eval: {title}</title><style>body{{font-family:sans-serif;margin:2em;max-width:70em}}table{{border-collapse:collapse;margin:1em 0}}td,th{{border:1px solid #ccc;padding:4px 8px;text-align:right}}td:first-child,th:first-child{{text-align:left}}</style></head><body>\
<h1>memproxy eval: {title}</h1><p>model: {model}; judge: {judge}; upstream: {upstream}</p>\
<h2>Strategies</h2>{main}<p>F1 and contains score the answers against the gold answers (for questions whose answer was never given: whether the answer says so). Evidence: share of the evidence turns that reached the model verbatim (retrieving strategies). Memory calls: extraction, reconciliation, summaries and extra agent steps. Overhead: memproxy's own time per request (total minus the LLM calls it waited for).</p>\
<h2>Per turn</h2>{turns}<p>Chat calls: the answer's and the agent's steps. Prompt shared: the part of each chat prompt (tools, then messages, cl100k tokens) byte-identical to the start of the previous chat call's, which an upstream prefix cache could reuse. Served from cache: what the upstream says it reused, where it says so.</p>\
<h2>By question category</h2>{categories}\
<h2>Memory store</h2>{store}<p>Stored: live facts after the replay; updated: rewritten in place; retired: kept as history, no longer true; duplicates: extracted facts already stored; rejected: extracted facts the gates refused; consolidation: live facts before and after background consolidation (junk and contained facts retired, similar facts merged).</p>\
<h2>Tokens vs score</h2>{scatter}<h2>Latency</h2>{boxes}</body></html>",
        title = escape(&summary.dataset),
        model = escape(summary.model.as_deref().unwrap_or("(upstream default)")),
        judge = escape(summary.judge_model.as_deref().unwrap_or("none")),
        upstream = escape(&summary.upstream),
        main = table_html(&HEADER, &rows(summary)),
        turns = table_html(&TURN_HEADER, &turn_rows(summary)),
        categories = table_html(&category_header, &category_rows),
        store = table_html(&STORE_HEADER, &store_rows(summary)),
        scatter = tokens_vs_score(summary),
        boxes = latency_boxes(summary),
    )
}
