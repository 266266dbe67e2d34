//! `memproxy eval --dataset …`: replays each conversation through each strategy, in process, on
//! fresh memory per (conversation, strategy), then asks the probe questions in new chats and
//! scores the answers. Finished pairs are appended to `runs.jsonl` at once, so an interrupted run
//! continues with `--resume`.

use std::collections::{BTreeMap, HashSet};
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{json, Value};
use tokio::net::TcpListener;

use super::dataset::{self, Conversation};
use super::pair::{PairResult, ProbeResult, RunArgs};
use super::score;
use super::tap::Tap;
use super::work::{account, account_memory};
use crate::config::Config;
use crate::dates;
use crate::mode::Mode;

use super::ceiling::{self, EvalStrategy};
use super::client::{book, drain, judge, upstream_key, Client, EVAL_USER};

/// A local-upstream measure's setting as the command line names it.
fn when_of(name: &str) -> crate::agent::Rewarm {
    match name {
        "always" => crate::agent::Rewarm::Always,
        "never" => crate::agent::Rewarm::Never,
        _ => crate::agent::Rewarm::Auto,
    }
}

fn config_for(args: &RunArgs, mode: Mode, data: &Path, taps: &Taps) -> Config {
    let tap = &taps.chat;
    let mut config = Config {
        data_dir: data.to_owned(),
        mode,
        ..Config::default()
    };
    config.upstream.url = tap.url.clone();
    config.upstream.api_key = upstream_key();
    config.upstream.first_byte_timeout = Duration::from_secs(1800);
    config.upstream.total_timeout = Duration::from_secs(1800);
    config.upstream.idle_timeout = Duration::from_secs(600);
    match &args.embeddings_url {
        Some(url) => {
            config.embedding.provider = crate::embed::EmbeddingProvider::Openai;
            config.embedding.url = url.clone();
            config.embedding.model = "eval-embed".to_owned();
            config.embedding.dimensions = 64;
        }
        None => {
            config.embedding.model_dir = Some(args.model_data_dir.join("models/all-MiniLM-L6-v2"));
            config.embedding.onnxruntime =
                Some(args.model_data_dir.join("lib/libonnxruntime.so.1.24.4"));
        }
    }
    config.memory.extraction_debounce = Duration::ZERO;
    // Consolidation runs after each session's extraction (the run waits for the queue).
    config.memory.consolidation_delay = Some(Duration::ZERO);
    // The run waits for the queue between sessions: a lost job must not stall it for long.
    config.memory.job_lease = Duration::from_secs(5 * 60);
    config.memory.preprocess_timeout = Duration::from_secs(120);
    config.memory.llm.max_tokens = Some(args.memory_max_tokens);
    // Through its own tap, so that its calls are booked too.
    config.memory.llm.url = taps.memory.as_ref().map(|t| t.url.clone());
    if args.core_memory_at.as_deref() == Some("system") {
        config.explicit.core_memory_at = crate::agent::CoreMemoryAt::System;
    }
    if let Some(when) = args.yield_to_turns.as_deref() {
        config.explicit.yield_to_turns = when_of(when);
    }
    if let Some(when) = args.save_in_prompt.as_deref() {
        config.explicit.save_in_prompt = when_of(when);
    }
    if let Some(window) = args.context_window {
        config.explicit.context_window_tokens = window;
    }
    config
}

fn system_prompt(conversation: &Conversation, time_ms: Option<i64>) -> String {
    match time_ms {
        Some(time) => format!(
            "{}\nToday is {}.",
            conversation.system,
            dates::ymd_weekday(time)
        ),
        None => conversation.system.clone(),
    }
}

/// The recording relays: in front of the upstream, and of the memory LLM's own upstream when it
/// has one (`--memory-upstream`).
pub(super) struct Taps {
    chat: Tap,
    memory: Option<Tap>,
}

/// Replays one conversation through one strategy on fresh memory.
async fn run_pair(
    args: &RunArgs,
    taps: &Taps,
    conversation: &Conversation,
    strategy: EvalStrategy,
    progress: &ProgressBar,
) -> anyhow::Result<PairResult> {
    let (mode, tap) = (strategy.mode(), &taps.chat);
    let memory_start = taps.memory.as_ref().map_or(0, Tap::len);
    let temporary = tempfile::tempdir()?;
    let data = if args.keep_data {
        let kept = args
            .out
            .join("data")
            .join(format!("{}-{strategy}", conversation.id));
        if kept.exists() {
            std::fs::remove_dir_all(&kept)?;
        }
        std::fs::create_dir_all(&kept)?;
        kept
    } else {
        temporary.path().to_owned()
    };
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let server = crate::server::start_on(
        listener,
        strategy.configure(config_for(args, mode, &data, taps)),
        Arc::new(crate::hooks::LogExchanges),
    )
    .await?;
    let client = Client {
        http: reqwest::Client::new(),
        base: server.url(),
        args,
        tap,
        mode,
    };
    let mut pair = PairResult {
        conversation: conversation.id.clone(),
        strategy: strategy.as_str().to_owned(),
        work: BTreeMap::new(),
        overhead_ms: Vec::new(),
        total_ms: Vec::new(),
        settle_ms: Vec::new(),
        probes: Vec::new(),
        errors: Vec::new(),
        store: None,
        memories: Vec::new(),
    };
    let start = tap.len();
    // Indices (in this pair's calls) where each client request's calls begin and end.
    let mut requests: Vec<(usize, usize)> = Vec::new();
    // The ceiling replays nothing: its probes carry the whole conversation.
    let replayed = match strategy {
        EvalStrategy::FullContext => &[][..],
        EvalStrategy::Memory(_)
        | EvalStrategy::AddOnly
        | EvalStrategy::Explicit2k
        | EvalStrategy::Switch { .. } => &conversation.sessions[..],
    };
    for (s, session) in replayed.iter().enumerate() {
        let chat = format!("{}-session-{}", conversation.id, s + 1);
        let mut history = vec![
            json!({"role": "system", "content": system_prompt(conversation, session.time_ms)}),
        ];
        for (t, turn) in session.turns.iter().enumerate() {
            history.push(json!({"role": turn.role, "content": turn.content}));
            if turn.role != "user" {
                continue;
            }
            let next_is_user = session
                .turns
                .get(t + 1)
                .is_none_or(|next| next.role == "user");
            let time = session.time_ms.map(|at| at + t as i64 * 60_000);
            // An agent's tool calls need room; other strategies' replies are mostly discarded.
            let cap = if mode == Mode::Explicit {
                args.answer_max_tokens
            } else {
                args.replay_max_tokens
            };
            let from = tap.len() - start;
            match client.send(&chat, time, history.clone(), true, cap).await {
                Ok(answer) => {
                    requests.push((from, tap.len() - start));
                    book(&mut pair, mode, &answer);
                    // A chat app keeps the model's reply when the dataset has none to put there.
                    if next_is_user && session.turns.get(t + 1).is_some() {
                        history.push(json!({"role": "assistant", "content": answer.text}));
                    }
                    if args.settle {
                        let started = std::time::Instant::now();
                        drain(&server).await?;
                        pair.settle_ms.push(started.elapsed().as_secs_f64() * 1e3);
                    }
                    if args.pause > 0.0 {
                        let pause = Duration::try_from_secs_f64(args.pause).unwrap_or_default();
                        tokio::time::sleep(pause).await;
                    }
                }
                Err(error) => {
                    pair.errors
                        .push(format!("session {} turn {}: {error}", s + 1, t + 1))
                }
            }
            progress.inc(1);
        }
        drain(&server).await?;
    }
    if matches!(mode, Mode::Implicit | Mode::Explicit) {
        let scope = crate::store::UserScope::new("default", EVAL_USER);
        let (stats, memories) = server
            .state
            .memory
            .blocking(move |store, _| {
                Ok((
                    super::store_stats::read(store, &scope)?,
                    super::audit::live_memories(store, &scope)?,
                ))
            })
            .await?;
        pair.store = Some(stats);
        pair.memories = memories;
        if args.audit {
            let model = args
                .judge_model
                .clone()
                .or_else(|| args.model.clone())
                .unwrap_or_default();
            super::audit_judge::Judge {
                http: reqwest::Client::new(),
                url: args.judge_upstream.as_deref().unwrap_or(&args.upstream),
                model: &model,
            }
            .audit(conversation, &mut pair.memories)
            .await;
        }
    }
    let evidence_text: BTreeMap<&str, String> = conversation
        .sessions
        .iter()
        .flat_map(|s| s.turns.iter())
        .map(|t| {
            (
                t.id.as_str(),
                score::normalize(&t.content.chars().take(160).collect::<String>()),
            )
        })
        .collect();
    let probes = conversation
        .probes
        .iter()
        .take(args.max_probes.unwrap_or(usize::MAX));
    // A switch asks in the other mode, on the memory the replay left.
    let asked = strategy.asked();
    let client = Client {
        mode: asked,
        ..client
    };
    for (index, probe) in probes.enumerate() {
        let mut messages =
            vec![json!({"role": "system", "content": system_prompt(conversation, probe.time_ms)})];
        if strategy == EvalStrategy::FullContext {
            messages.extend(ceiling::whole_conversation(conversation));
        }
        messages.push(json!({"role": "user", "content": probe.question}));
        tap.capture(true);
        let from = tap.len() - start;
        let sent = client
            .send(
                &format!("{}-probe-{}", conversation.id, index + 1),
                probe.time_ms,
                messages,
                false,
                args.answer_max_tokens,
            )
            .await;
        tap.capture(false);
        progress.inc(1);
        let answer = match sent {
            Ok(answer) => answer,
            Err(error) => {
                pair.errors.push(format!("probe {}: {error}", index + 1));
                continue;
            }
        };
        requests.push((from, tap.len() - start));
        book(&mut pair, asked, &answer);
        let seen: String = answer
            .calls
            .iter()
            .filter(|c| c.kind == "chat")
            .filter_map(|c| c.body.as_deref())
            .map(|body| {
                let parsed: Value = serde_json::from_str(body).unwrap_or(Value::Null);
                score::normalize(&parsed["messages"].to_string().replace("\\n", " "))
            })
            .collect::<Vec<_>>()
            .join(" ");
        let retrieves = matches!(asked, Mode::Implicit | Mode::Explicit);
        let evidence_in_context = (retrieves && !probe.evidence.is_empty()).then(|| {
            let found = probe
                .evidence
                .iter()
                .filter(|id| {
                    evidence_text
                        .get(id.as_str())
                        .is_some_and(|text| !text.is_empty() && seen.contains(text.as_str()))
                })
                .count();
            found as f64 / probe.evidence.len() as f64
        });
        let (f1, contains) = scored(&answer.text, &probe.answer, probe.abstain);
        let judge = match &args.judge_model {
            Some(model) => judge(args, model, &probe.question, &probe.answer, &answer.text).await,
            None => None,
        };
        pair.probes.push(ProbeResult {
            question: probe.question.clone(),
            gold: probe.answer.clone(),
            answer: answer.text,
            category: probe.category.clone(),
            abstain: probe.abstain,
            f1,
            contains,
            judge,
            evidence_in_context,
        });
    }
    drain(&server).await?;
    // An agent's steps are booked as such whichever half of a switch took them.
    let booked = if asked == Mode::Explicit { asked } else { mode };
    account(&mut pair.work, booked, &tap.since(start), &requests);
    if let Some(memory) = &taps.memory {
        account_memory(&mut pair.work, &memory.since(memory_start));
    }
    server.shutdown().await;
    Ok(pair)
}

pub async fn run(args: RunArgs) -> anyhow::Result<()> {
    let path = args
        .dataset
        .clone()
        .ok_or_else(|| anyhow::anyhow!("--dataset is required"))?;
    let mut dataset = dataset::load(&path, args.format, args.include_adversarial)?;
    if let Some(limit) = args.limit {
        dataset.conversations.truncate(limit);
    }
    if let Some(sessions) = args.max_sessions {
        for conversation in &mut dataset.conversations {
            conversation.keep_first_sessions(sessions);
        }
    }
    std::fs::create_dir_all(&args.out)?;
    let runs_path = args.out.join("runs.jsonl");
    let mut done: HashSet<(String, String)> = HashSet::new();
    if args.resume {
        // Rewrite with the complete lines only: a line cut by a crash must not swallow the next.
        // Kept answers are scored again: a resumed run reports every pair with one scorer.
        let mut kept = read_runs(&runs_path)?;
        for probe in kept.iter_mut().flat_map(|pair| pair.probes.iter_mut()) {
            (probe.f1, probe.contains) = scored(&probe.answer, &probe.gold, probe.abstain);
        }
        let mut text = String::new();
        for pair in &kept {
            text.push_str(&serde_json::to_string(pair)?);
            text.push('\n');
            done.insert((pair.conversation.clone(), pair.strategy.clone()));
        }
        std::fs::write(&runs_path, text)?;
    } else if runs_path.exists() {
        std::fs::remove_file(&runs_path)?;
    }
    let taps = Taps {
        chat: Tap::start(&args.upstream).await?,
        memory: match &args.memory_upstream {
            Some(url) => Some(Tap::start(url).await?),
            None => None,
        },
    };
    let per_conversation = |c: &Conversation| {
        let turns: usize = c
            .sessions
            .iter()
            .map(|s| s.turns.iter().filter(|t| t.role == "user").count())
            .sum();
        (turns + c.probes.len().min(args.max_probes.unwrap_or(usize::MAX))) as u64
    };
    let total: u64 = dataset
        .conversations
        .iter()
        .map(|c| {
            per_conversation(c)
                * args
                    .strategies
                    .iter()
                    .filter(|m| !done.contains(&(c.id.clone(), m.as_str().to_owned())))
                    .count() as u64
        })
        .sum();
    let progress = ProgressBar::new(total);
    progress.set_style(
        ProgressStyle::with_template(
            "{elapsed_precise} [{bar:30}] {pos}/{len} requests, eta {eta} {msg}",
        )?
        .progress_chars("=> "),
    );
    let mut order: Vec<(&Conversation, EvalStrategy)> = Vec::new();
    if args.by_strategy {
        for &strategy in &args.strategies {
            order.extend(dataset.conversations.iter().map(|c| (c, strategy)));
        }
    } else {
        for conversation in &dataset.conversations {
            order.extend(args.strategies.iter().map(|&s| (conversation, s)));
        }
    }
    for (conversation, strategy) in order {
        if done.contains(&(conversation.id.clone(), strategy.as_str().to_owned())) {
            continue;
        }
        progress.set_message(format!("{} / {strategy}", conversation.id));
        let pair = run_pair(&args, &taps, conversation, strategy, &progress).await?;
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&runs_path)?;
        writeln!(file, "{}", serde_json::to_string(&pair)?)?;
    }
    progress.finish_and_clear();
    let runs = read_runs(&runs_path)?;
    let summary = super::report::summarize(&dataset.name, &args, &runs);
    super::report::print(&summary);
    std::fs::write(
        args.out.join("results.json"),
        serde_json::to_vec_pretty(&summary)?,
    )?;
    std::fs::write(args.out.join("report.html"), super::report::html(&summary))?;
    eprintln!(
        "wrote {}/results.json and {}/report.html",
        args.out.display(),
        args.out.display()
    );
    Ok(())
}

/// `(F1, contains)` of an answer; for a question whose answer was never given, whether it
/// abstained.
fn scored(answer: &str, gold: &str, abstain: bool) -> (f64, bool) {
    if abstain {
        let abstained = score::abstains(answer);
        (if abstained { 1.0 } else { 0.0 }, abstained)
    } else {
        (score::token_f1(answer, gold), score::contains(answer, gold))
    }
}

pub fn read_runs(path: &Path) -> anyhow::Result<Vec<PairResult>> {
    if !path.exists() {
        return Ok(Vec::new());
    }
    let text = std::fs::read_to_string(path)?;
    // A line cut by a crash mid-write is skipped (that pair runs again on resume).
    Ok(text
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect())
}
