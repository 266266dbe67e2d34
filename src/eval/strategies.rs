//! `memproxy eval strategies`: one long LoCoMo conversation replayed turn by turn, as a chat app
//! would send it (the whole history every time), through each strategy. Reports the prompt tokens
//! sent upstream, and for `implicit` whether the evidence of each question reaches the model when
//! the question is asked in a new chat, next to the memory layer's own recall@10.
//!
//! The upstream is the scripted mock: it answers each turn with the conversation's real next turn
//! and plays a naive memory LLM (every user message becomes a fact), so the figures measure
//! memproxy, not a model. The embeddings are the real local model.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;

use super::locomo_data::{Question, Turn};
use serde_json::{json, Value};
use tokio::net::TcpListener;

use crate::config::Config;
use crate::hooks::LogExchanges;
use crate::memory::RetrievalRequest;
use crate::mock::{MockUpstream, Reply};
use crate::mode::Mode;
use crate::store::{Corpus, UserScope};

#[derive(Args, Clone)]
pub struct StrategiesEval {
    /// Path to locomo10.json.
    #[arg(long)]
    locomo: PathBuf,
    /// Which conversation (index in the file).
    #[arg(long, default_value_t = 0)]
    conversation: usize,
    /// Strategies to replay, comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "passthrough,window,summary,implicit"
    )]
    modes: Vec<Mode>,
    /// Where the local model is installed (scripts/fetch-model).
    #[arg(long, default_value = "./.memproxy")]
    model_data_dir: PathBuf,
    /// Also write the figures as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
}

const SYSTEM: &str = "You are a friendly companion chatting with the user.";
const USER: &str = "locomo-user";

struct Replay {
    tokens_after: Vec<usize>,
}

async fn start(
    mode: Mode,
    mock: &MockUpstream,
    model_dir: &std::path::Path,
    data: &std::path::Path,
) -> anyhow::Result<crate::server::RunningServer> {
    let mut config = Config {
        data_dir: data.to_owned(),
        mode,
        ..Config::default()
    };
    config.upstream.url = mock.base_url();
    config.upstream.api_key = None;
    config.embedding.model_dir = Some(model_dir.join("models/all-MiniLM-L6-v2"));
    config.embedding.onnxruntime = Some(model_dir.join("lib/libonnxruntime.so.1.24.4"));
    config.memory.extraction_debounce = Duration::ZERO;
    config.memory.preprocess_timeout = Duration::from_secs(30);
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    crate::server::start_on(listener, config, Arc::new(LogExchanges)).await
}

/// Waits until the post-processing queue is empty (the replay must not outrun it).
async fn drain(server: &crate::server::RunningServer) -> anyhow::Result<()> {
    for _ in 0..600 {
        let pending = server
            .state
            .memory
            .blocking(|store, _| {
                let queued = store
                    .list_jobs(Some("queued"), crate::store::Page::default())?
                    .len();
                let running = store
                    .list_jobs(Some("running"), crate::store::Page::default())?
                    .len();
                Ok(queued + running)
            })
            .await?;
        if pending == 0 {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    anyhow::bail!("post-processing did not finish")
}

pub async fn run(options: StrategiesEval) -> anyhow::Result<()> {
    let samples: Vec<Value> = serde_json::from_slice(&std::fs::read(&options.locomo)?)?;
    let sample = samples
        .get(options.conversation)
        .ok_or_else(|| anyhow::anyhow!("no conversation {}", options.conversation))?;
    let conversation = &sample["conversation"];
    let speaker_a = conversation["speaker_a"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let mut turns: Vec<Turn> = Vec::new();
    for session in 1.. {
        let Some(list) = conversation.get(format!("session_{session}")) else {
            break;
        };
        turns.extend(serde_json::from_value::<Vec<Turn>>(list.clone())?);
    }
    let questions: Vec<Question> = serde_json::from_value(sample["qa"].clone())?;
    let role = |turn: &Turn| {
        if turn.speaker == speaker_a {
            "user"
        } else {
            "assistant"
        }
    };
    println!(
        "LoCoMo conversation {}: {} turns, {} questions",
        options.conversation,
        turns.len(),
        questions.len()
    );

    let mock = MockUpstream::start().await?;
    let client = reqwest::Client::new();
    let mut report =
        json!({"conversation": options.conversation, "turns": turns.len(), "modes": {}});
    let mut passthrough_last: Option<f64> = None;
    println!(
        "\n{:<12} {:>9} {:>14} {:>16} {:>14}",
        "mode", "requests", "total tokens", "last-10 avg", "vs passthrough"
    );
    for mode in &options.modes {
        let data = tempfile::tempdir()?;
        let server = start(*mode, &mock, &options.model_data_dir, data.path()).await?;
        let url = format!("{}/v1/chat/completions", server.url());
        let mut replay = Replay {
            tokens_after: Vec::new(),
        };
        let mut history = vec![json!({"role": "system", "content": SYSTEM})];
        for (i, turn) in turns.iter().enumerate() {
            history.push(json!({"role": role(turn), "content": turn.content()}));
            let next = turns.get(i + 1);
            let answered = role(turn) == "user" && next.is_some_and(|n| role(n) == "assistant");
            let Some(next) = next.filter(|_| answered) else {
                continue;
            };
            mock.push(Reply::Text(next.content()));
            let response = client
                .post(&url)
                .header("x-memproxy-user", USER)
                .header("x-memproxy-conversation", "replay")
                .json(&json!({"model": "mock-model", "messages": history}))
                .send()
                .await?;
            let header = |name: &str| crate::bench::header_number(&response, name) as usize;
            // Passthrough sends the history as is (and does not tokenize it, so count here).
            let sent = match mode {
                Mode::Passthrough => {
                    let messages: Vec<crate::openai::ChatMessage> =
                        serde_json::from_value(Value::Array(history.clone()))?;
                    let neutral: Vec<_> = messages.iter().map(|m| m.neutral()).collect();
                    crate::strategy::compact::total_tokens(&neutral)
                }
                _ => header("x-memproxy-prompt-tokens-after"),
            };
            replay.tokens_after.push(sent);
            anyhow::ensure!(
                response.headers().get("x-memproxy-degraded").is_none(),
                "{mode}: a request was degraded"
            );
            response.bytes().await?;
            drain(&server).await?;
        }
        let total: usize = replay.tokens_after.iter().sum();
        let tail = &replay.tokens_after[replay.tokens_after.len().saturating_sub(10)..];
        let last = tail.iter().sum::<usize>() as f64 / tail.len().max(1) as f64;
        if *mode == Mode::Passthrough {
            passthrough_last = Some(last);
        }
        let saving = passthrough_last.map(|p| 100.0 * (1.0 - last / p));
        println!(
            "{:<12} {:>9} {:>14} {:>16.0} {:>13}",
            mode.as_str(),
            replay.tokens_after.len(),
            total,
            last,
            saving.map_or("-".to_owned(), |s| format!("{s:.1}% less"))
        );
        let mut entry = json!({"requests": replay.tokens_after.len(), "total_prompt_tokens": total,
            "last_10_avg_prompt_tokens": last, "prompt_tokens_per_request": replay.tokens_after});
        if *mode == Mode::Implicit {
            entry["recall"] = recall(&server, &mock, &client, &url, &turns, &questions).await?;
        }
        report["modes"][mode.as_str()] = entry;
        server.shutdown().await;
    }
    if let Some(path) = options.json {
        std::fs::write(&path, serde_json::to_vec_pretty(&report)?)?;
        println!("\nwrote {}", path.display());
    }
    Ok(())
}

/// Each question asked in a new chat: does the evidence reach the model? Compared with the memory
/// layer's own top-10 retrieval for the same question. Questions are asked with
/// `x-memproxy-record: false`, so none becomes a memory that later questions would retrieve.
async fn recall(
    server: &crate::server::RunningServer,
    mock: &MockUpstream,
    client: &reqwest::Client,
    url: &str,
    turns: &[Turn],
    questions: &[Question],
) -> anyhow::Result<Value> {
    let text_of = |dia: &str| turns.iter().find(|t| t.dia_id == dia).map(Turn::content);
    let asked: Vec<(&Question, Vec<String>)> = questions
        .iter()
        .filter(|q| (1..=4).contains(&q.category))
        .map(|q| {
            (
                q,
                q.evidence
                    .iter()
                    .filter_map(|d| text_of(d.trim()))
                    .collect::<Vec<_>>(),
            )
        })
        .filter(|(_, evidence)| !evidence.is_empty())
        .collect();
    let found = |evidence: &[String], within: &dyn Fn(&str) -> bool| {
        evidence.iter().filter(|e| within(e)).count() as f64 / evidence.len() as f64
    };
    let mut layer_sum = 0.0;
    for (question, evidence) in &asked {
        let request = RetrievalRequest {
            query: question.question.clone(),
            corpora: vec![Corpus::Message],
            top_k: 10,
            min_similarity: -1.0,
            ..RetrievalRequest::default()
        };
        let hits = server
            .state
            .memory
            .retrieve(&UserScope::new("default", USER), request)
            .await?;
        layer_sum += found(evidence, &|e| hits.iter().any(|h| h.text == e));
    }
    let mut injected_sum = 0.0;
    for (i, (question, evidence)) in asked.iter().enumerate() {
        let response = client
            .post(url)
            .header("x-memproxy-user", USER)
            .header("x-memproxy-conversation", format!("question-{i}"))
            // Questions must not become memories that later questions retrieve.
            .header("x-memproxy-record", "false")
            .json(&json!({"model": "mock-model", "messages": [
                {"role": "system", "content": SYSTEM}, {"role": "user", "content": question.question}]}))
            .send()
            .await?;
        response.bytes().await?;
        let seen = last_prompt_text(mock);
        injected_sum += found(evidence, &|e| seen.contains(e));
    }
    let n = asked.len().max(1) as f64;
    println!(
        "implicit: {} questions asked in new chats; evidence reaching the model {:.3}, memory layer recall@10 {:.3}",
        asked.len(),
        injected_sum / n,
        layer_sum / n
    );
    Ok(
        json!({"questions": asked.len(), "evidence_in_prompt": injected_sum / n, "memory_layer_recall_at_10": layer_sum / n}),
    )
}

/// The text of every message of the last chat request the upstream received (not memory calls).
fn last_prompt_text(mock: &MockUpstream) -> String {
    let Some(request) = mock.chat_requests(None).pop() else {
        return String::new();
    };
    request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["content"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}
