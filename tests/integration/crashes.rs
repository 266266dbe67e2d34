//! Crashes (issue 14): a real `memproxy serve` process killed with SIGKILL at random moments while
//! it serves mixed traffic — implicit chats (and the extraction and reconciliation jobs they
//! queue), explicit turns whose every step calls a tool (with a context window small enough that
//! eviction and its summary run), memories added and users imported through the management API,
//! vector indexes saved and rebuilt — then started again on the same data. After every restart:
//! the consistency check finds no error, nothing acknowledged to a client is lost, and the queued
//! jobs run to the end.
//!
//! `MEMPROXY_CRASH_CYCLES` (default 5) and `MEMPROXY_CRASH_SEED` (default: the clock; printed)
//! make longer or repeated runs.

use std::collections::BTreeSet;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use memproxy::config::Config;
use memproxy::mock::MockUpstream;
use serde_json::{json, Value};

use crate::common::{import_file, test_config};
use crate::process::{free_port, Serving};

/// A small deterministic random source (xorshift), seeded and printed for reproduction.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// What the clients were told succeeded.
#[derive(Default)]
struct Acknowledged {
    /// `(user, text)` of management-API memories.
    memories: Vec<(String, String)>,
    /// `(user, text)` of imported turns.
    imported: Vec<(String, String)>,
    /// `(user, text)` filed by an explicit turn that was answered.
    filed: Vec<(String, String)>,
    /// `(user, text)` of implicit turns answered without degradation (stored before the upstream
    /// was called).
    said: Vec<(String, String)>,
}

fn config(mock: &MockUpstream, data: &std::path::Path) -> Config {
    let mut config = test_config(mock, data);
    config.listen = format!("127.0.0.1:{}", free_port())
        .parse()
        .expect("address");
    config.memory.extraction_debounce = Duration::ZERO;
    config.memory.job_lease = Duration::from_secs(2);
    // Small enough that explicit turns evict and summarise every few turns.
    config.explicit.context_window_tokens = 2_200;
    config
}

async fn start(config: &Config, file: &std::path::Path) -> Serving {
    let mut command = Command::new(env!("CARGO_BIN_EXE_memproxy"));
    command.arg("serve").arg("--config").arg(file);
    crate::common::child_log(&mut command, "crashes");
    if let Some(url) = &config.store.url {
        command.env("MEMPROXY_DATABASE_URL", url.expose());
    }
    Serving::start(command, &format!("http://{}", config.listen)).await
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("client")
}

/// One client's traffic until the server dies: each request's success is recorded only once its
/// whole answer has arrived.
async fn traffic(url: String, kind: u64, id: String, acked: Arc<Mutex<Acknowledged>>) {
    let client = client();
    let mut history: Vec<Value> = Vec::new();
    for n in 0.. {
        let text = format!("{id} fact {n}: I keep {n} hives in Braga.");
        let ok = match kind {
            0 => {
                history.push(json!({"role": "user", "content": text}));
                let answer = client
                    .post(format!("{url}/implicit/v1/chat/completions"))
                    .header("x-memproxy-user", &id)
                    .json(&json!({"model": "mock-model", "messages": history}))
                    .send()
                    .await;
                let Ok(answer) = answer else { return };
                let degraded = answer.headers().contains_key("x-memproxy-degraded");
                let Ok(body) = answer.json::<Value>().await else {
                    return;
                };
                let Some(reply) = body["choices"][0]["message"]["content"].as_str() else {
                    return;
                };
                history.push(json!({"role": "assistant", "content": reply}));
                if !degraded {
                    acked.lock().expect("lock").said.push((id.clone(), text));
                }
                continue;
            }
            1 => {
                let answer = client
                    .post(format!("{url}/explicit/v1/chat/completions"))
                    .header("x-memproxy-user", &id)
                    .json(&json!({"model": "mock-archivist", "messages": [{"role": "user", "content": text}]}))
                    .send()
                    .await;
                let Ok(answer) = answer else { return };
                let Ok(body) = answer.json::<Value>().await else {
                    return;
                };
                let reply = body["choices"][0]["message"]["content"]
                    .as_str()
                    .unwrap_or_default();
                if reply.starts_with("Not filed") {
                    eprintln!("crash test: {id}: the archival insert failed: {reply}");
                }
                reply == "Filed."
            }
            2 => {
                let answer = client
                    .post(format!("{url}/memproxy/v1/users/{id}/memories"))
                    .json(&json!({"text": text, "kind": "fact"}))
                    .send()
                    .await;
                matches!(answer, Ok(a) if a.status().is_success())
            }
            _ => {
                let user = format!("{id}-{n}");
                let turns: Vec<String> = (0..40)
                    .map(|position| format!("{user} imported turn {position} about the hives."))
                    .collect();
                let body = import_file(&turns);
                let answer = client
                    .post(format!("{url}/memproxy/v1/users/{user}/import"))
                    .body(body)
                    .send()
                    .await;
                if !matches!(answer, Ok(ref a) if a.status().is_success()) {
                    return;
                }
                let mut acked = acked.lock().expect("lock");
                for position in 0..40 {
                    acked.imported.push((
                        user.clone(),
                        format!("{user} imported turn {position} about the hives."),
                    ));
                }
                continue;
            }
        };
        if !ok {
            return;
        }
        let mut acked = acked.lock().expect("lock");
        match kind {
            1 => acked.filed.push((id.clone(), text)),
            _ => acked.memories.push((id.clone(), text)),
        }
    }
}

/// Every line of a user's export.
async fn export(url: &str, user: &str) -> Vec<Value> {
    let text = client()
        .get(format!("{url}/memproxy/v1/users/{user}/export"))
        .send()
        .await
        .expect("export")
        .text()
        .await
        .expect("text");
    text.lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

async fn verify(url: &str, acked: &Acknowledged) {
    let users: BTreeSet<&String> = acked
        .memories
        .iter()
        .chain(&acked.imported)
        .chain(&acked.filed)
        .chain(&acked.said)
        .map(|(user, _)| user)
        .collect();
    for user in users {
        let lines = export(url, user).await;
        let has = |kind: &str, field: &str, text: &str| {
            lines
                .iter()
                .any(|l| l["type"] == kind && l[field].as_str().is_some_and(|t| t.contains(text)))
        };
        for (_, text) in acked.memories.iter().filter(|(u, _)| u == user) {
            assert!(
                has("memory", "text", text),
                "an acknowledged memory of {user} is lost: {text}"
            );
        }
        for (_, text) in acked.imported.iter().filter(|(u, _)| u == user) {
            assert!(
                has("message", "content", text),
                "an acknowledged import of {user} is lost: {text}"
            );
        }
        for (_, text) in acked.filed.iter().filter(|(u, _)| u == user) {
            assert!(
                has("passage", "text", text),
                "an answered explicit turn of {user} lost its passage: {text}\n{}",
                lines
                    .iter()
                    .filter(|l| l["type"] != "message")
                    .map(Value::to_string)
                    .collect::<Vec<_>>()
                    .join("\n")
            );
        }
        for (_, text) in acked.said.iter().filter(|(u, _)| u == user) {
            assert!(
                has("message", "content", text),
                "an answered implicit turn of {user} is lost: {text}"
            );
        }
    }
}

#[tokio::test]
async fn kill_9_at_random_moments_loses_nothing_acknowledged() {
    let cycles: u64 = std::env::var("MEMPROXY_CRASH_CYCLES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(5);
    let seed: u64 = std::env::var("MEMPROXY_CRASH_SEED")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| memproxy::store::now_ms() as u64 | 1);
    eprintln!("crash test: {cycles} cycles, MEMPROXY_CRASH_SEED={seed}");
    let mut random = Random(seed);
    let mock = MockUpstream::start().await.expect("mock");
    let data = tempfile::tempdir().expect("data");
    let config = config(&mock, data.path());
    let file = data.path().join("memproxy.toml");
    std::fs::write(&file, toml::to_string(&config).expect("toml")).expect("write");
    let acked = Arc::new(Mutex::new(Acknowledged::default()));
    let mut server = start(&config, &file).await;
    for cycle in 0..cycles {
        let clients: Vec<_> = (0..6u64)
            .map(|k| {
                let kind = k % 4;
                let id = format!("c{cycle}-k{kind}-{k}");
                tokio::spawn(traffic(server.url.clone(), kind, id, Arc::clone(&acked)))
            })
            .collect();
        // Anywhere from mid start-up work to well into the traffic.
        tokio::time::sleep(Duration::from_millis(50 + random.below(1_500))).await;
        server.child.kill().expect("SIGKILL");
        server.child.wait().expect("reaped");
        for client in clients {
            let _ = client.await;
        }
        server = start(&config, &file).await;
        let errors = server.check_errors().await;
        assert!(
            errors.is_empty(),
            "cycle {cycle} (seed {seed}): the check found {errors:#?}"
        );
        let acked_now = std::mem::take(&mut *acked.lock().expect("lock"));
        verify(&server.url, &acked_now).await;
        let mut kept = acked.lock().expect("lock");
        kept.memories.extend(acked_now.memories);
        kept.imported.extend(acked_now.imported);
        kept.filed.extend(acked_now.filed);
        kept.said.extend(acked_now.said);
    }
    // Everything queued before the last crash runs to its end.
    let url = server.url.clone();
    let pending = || async {
        let mut pending = Vec::new();
        for state in ["queued", "running"] {
            let jobs: Value = client()
                .get(format!("{url}/memproxy/v1/jobs?state={state}"))
                .send()
                .await
                .expect("jobs")
                .json()
                .await
                .expect("json");
            pending.extend(jobs["data"].as_array().cloned().unwrap_or_default());
        }
        pending
    };
    let mut left = pending().await;
    for _ in 0..600 {
        if left.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        left = pending().await;
    }
    assert!(left.is_empty(), "jobs left after a minute: {left:#?}");
    let acked = std::mem::take(&mut *acked.lock().expect("lock"));
    verify(&server.url, &acked).await;
    eprintln!(
        "crash test: {cycles} kill -9 cycles; acknowledged and found again: {} memories, {} imported turns, {} explicit turns, {} implicit turns",
        acked.memories.len(),
        acked.imported.len(),
        acked.filed.len(),
        acked.said.len()
    );
}
