//! The test harness: a scripted upstream, a memproxy in front of it, and a hook that hands every
//! finished exchange to the test.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use memproxy::config::Config;
use memproxy::hooks::{Exchange, ExchangeHook};
use memproxy::mock::MockUpstream;
use memproxy::server::RunningServer;
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, Mutex};

pub struct Harness {
    /// The proxy's data directory (removed when the harness is dropped).
    pub data: tempfile::TempDir,
    pub mock: MockUpstream,
    pub proxy: RunningServer,
    pub client: reqwest::Client,
    pub exchanges: Mutex<mpsc::UnboundedReceiver<Exchange>>,
    pub config: Config,
}

struct ChannelHook(mpsc::UnboundedSender<Exchange>);

#[async_trait]
impl ExchangeHook for ChannelHook {
    async fn on_exchange(&self, exchange: Exchange) {
        let _ = self.0.send(exchange);
    }
}

pub async fn harness() -> Harness {
    harness_with(|_| {}).await
}

/// A memproxy on an ephemeral port in front of a fresh mock; `adjust` edits the config first.
pub async fn harness_with(adjust: impl FnOnce(&mut Config)) -> Harness {
    let mock = MockUpstream::start().await.expect("mock upstream starts");
    let data = tempfile::tempdir().expect("data dir");
    let mut config = test_config(&mock, data.path());
    adjust(&mut config);
    config.validate().expect("test config is valid");
    let (proxy, exchanges) = start_proxy(&config).await;
    Harness {
        data,
        mock,
        proxy,
        client: reqwest::Client::new(),
        exchanges,
        config,
    }
}

/// The config of a test proxy: data in `data`, upstream and embeddings from `mock`.
pub fn test_config(mock: &MockUpstream, data: &std::path::Path) -> Config {
    let mut config = Config {
        data_dir: data.to_owned(),
        ..Config::default()
    };
    config.upstream.url = mock.base_url();
    config.upstream.api_key = None;
    // Proxy tests embed through the mock's /v1/embeddings: fast and deterministic.
    config.embedding.provider = memproxy::embed::EmbeddingProvider::Openai;
    config.embedding.url = mock.base_url();
    config.embedding.model = "mock-embed".to_owned();
    config.embedding.dimensions = 64;
    config.server.shutdown_grace = Duration::from_secs(5);
    // Consolidation jobs would sit in the queue of every test; its own tests turn it on.
    config.memory.consolidation_delay = None;
    // Likewise the background save of explicit turns (it would answer from the mock's script).
    config.explicit.background_save = false;
    // And the re-warming of the mock's prompt cache after a plain reply (the mock is local).
    config.explicit.rewarm_cache = memproxy::agent::Rewarm::Never;
    // And giving way to turns, which would hold each test's background work while a turn of
    // another runs; its own tests turn it on (explicit_yield.rs).
    config.explicit.yield_to_turns = memproxy::agent::Rewarm::Never;
    config.explicit.evict_after_turn = false;
    // MEMPROXY_TEST_STORE=postgres runs every test on a fresh PostgreSQL database instead.
    (crate::backends::selected().configure)(&mut config);
    config
}

/// Whether this run's tests are on PostgreSQL (`MEMPROXY_TEST_STORE=postgres`): a test of
/// something only SQLite has (its file, usearch index files, start-up requeueing) skips itself.
pub fn on_postgres() -> bool {
    std::env::var("MEMPROXY_TEST_STORE").as_deref() == Ok("postgres")
}

/// Skips the calling test on PostgreSQL, saying why.
#[macro_export]
macro_rules! sqlite_only {
    ($why:expr) => {
        if $crate::common::on_postgres() {
            eprintln!("skipped on PostgreSQL: {}", $why);
            return;
        }
    };
}

/// A hook that ignores every exchange (for proxies a test starts by hand).
pub struct NoHook;

#[async_trait]
impl ExchangeHook for NoHook {
    async fn on_exchange(&self, _exchange: Exchange) {}
}

/// With `MEMPROXY_TEST_LOG_DIR` set (`scripts/test` sets it), every in-process proxy logs at debug
/// level into one file there, so the run's logs can be searched for the test keys afterwards.
fn log_to_test_dir() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let Some(dir) = std::env::var_os("MEMPROXY_TEST_LOG_DIR") else {
            return;
        };
        let path =
            std::path::Path::new(&dir).join(format!("integration-{}.log", std::process::id()));
        let Ok(file) = std::fs::File::create(&path) else {
            return;
        };
        let _ = tracing_subscriber::fmt()
            .with_env_filter("memproxy=debug,tower_http=debug")
            .with_writer(std::sync::Mutex::new(file))
            .with_ansi(false)
            .try_init();
    });
}

/// Where a memproxy process a test starts writes its output: a file in `MEMPROXY_TEST_LOG_DIR`
/// (searched for the test keys after the run), at debug level; else nowhere.
pub fn child_log(command: &mut std::process::Command, name: &str) {
    use std::process::Stdio;
    static COUNT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = COUNT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let file = std::env::var_os("MEMPROXY_TEST_LOG_DIR").and_then(|dir| {
        let path =
            std::path::Path::new(&dir).join(format!("{name}-{}-{n}.log", std::process::id()));
        let file = std::fs::File::create(path).ok()?;
        Some((file.try_clone().ok()?, file))
    });
    match file {
        Some((out, err)) => {
            command
                .stdout(Stdio::from(out))
                .stderr(Stdio::from(err))
                .env("RUST_LOG", "memproxy=debug,info");
        }
        None => {
            command.stdout(Stdio::null()).stderr(Stdio::null());
        }
    }
}

async fn start_proxy(config: &Config) -> (RunningServer, Mutex<mpsc::UnboundedReceiver<Exchange>>) {
    log_to_test_dir();
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let (sender, receiver) = mpsc::unbounded_channel();
    let proxy = memproxy::server::start_on(listener, config.clone(), Arc::new(ChannelHook(sender)))
        .await
        .expect("proxy starts");
    (proxy, Mutex::new(receiver))
}

/// Stops the proxy (gracefully) and starts a new one on the same data directory and upstream.
pub async fn restart(h: Harness) -> Harness {
    restart_after(h, |_| {}).await
}

/// [`restart`], with `between` run on the data directory while no proxy runs.
pub async fn restart_after(h: Harness, between: impl FnOnce(&std::path::Path)) -> Harness {
    let Harness {
        data,
        mock,
        proxy,
        client,
        config,
        ..
    } = h;
    proxy.shutdown().await;
    between(data.path());
    let (proxy, exchanges) = start_proxy(&config).await;
    Harness {
        data,
        mock,
        proxy,
        client,
        exchanges,
        config,
    }
}

impl Harness {
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.proxy.url())
    }

    pub async fn post_chat(&self, body: &Value) -> reqwest::Response {
        self.client
            .post(self.url("/v1/chat/completions"))
            .json(body)
            .send()
            .await
            .expect("proxy answers")
    }

    /// The next exchange handed to the post-processing hook.
    pub async fn next_exchange(&self) -> Exchange {
        let mut receiver = self.exchanges.lock().await;
        tokio::time::timeout(Duration::from_secs(10), receiver.recv())
            .await
            .expect("an exchange reaches the hook within 10 s")
            .expect("hook channel open")
    }
}

pub fn chat(text: &str) -> Value {
    json!({"model": "mock-model", "messages": [{"role": "user", "content": text}]})
}

pub fn stream_chat(text: &str) -> Value {
    let mut body = chat(text);
    body["stream"] = json!(true);
    body
}

/// Reads a whole SSE body and returns its `data:` payloads.
pub async fn sse_data(response: reqwest::Response) -> Vec<String> {
    let text = response.text().await.expect("stream body");
    text.split("\n\n")
        .filter_map(|event| event.strip_prefix("data: "))
        .map(str::to_owned)
        .collect()
}

/// The concatenated `delta.content` of parsed chunks.
pub fn streamed_content(data: &[String]) -> String {
    data.iter()
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter_map(|c| {
            c["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_owned)
        })
        .collect()
}

/// An address on which nothing listens.
pub async fn closed_port_url() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    drop(listener);
    format!("http://{addr}/v1")
}

pub fn assert_openai_error(body: &Value, code: &str) {
    let error = &body["error"];
    assert!(error.is_object(), "not an OpenAI error: {body}");
    for field in ["message", "type", "param", "code"] {
        assert!(error.get(field).is_some(), "error lacks '{field}': {body}");
    }
    assert!(error["message"].as_str().is_some_and(|m| !m.is_empty()));
    assert_eq!(error["code"], code, "{body}");
}

/// The data directory holding the real local model, installed once by `scripts/fetch-model`
/// (the README's test command runs it first; this runs it again so `cargo test` alone works).
pub fn model_data_dir() -> std::path::PathBuf {
    static READY: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    READY
        .get_or_init(|| {
            let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
            let dir = root.join("target/test-data");
            let status = std::process::Command::new(root.join("scripts/fetch-model"))
                .arg("--data-dir")
                .arg(&dir)
                .status()
                .expect("run scripts/fetch-model");
            assert!(status.success(), "scripts/fetch-model failed");
            dir
        })
        .clone()
}

/// One real local embedder for the whole test binary (loading the model once).
pub fn local_embedder() -> memproxy::embed::SharedEmbedder {
    static EMBEDDER: std::sync::OnceLock<memproxy::embed::SharedEmbedder> =
        std::sync::OnceLock::new();
    EMBEDDER
        .get_or_init(|| {
            let config = memproxy::embed::EmbeddingConfig::default();
            Arc::new(
                memproxy::embed::LocalEmbedder::load(&config, &model_data_dir())
                    .expect("the local model loads"),
            )
        })
        .clone()
}

/// A memory service on a fresh data directory with the real local model.
pub fn memory_in(dir: &std::path::Path) -> memproxy::memory::MemoryService {
    memproxy::memory::MemoryService::open(dir, local_embedder()).expect("memory opens")
}

/// An export file of one conversation `c` whose turns are these user messages (for imports).
pub fn import_file(turns: &[String]) -> String {
    let mut lines = vec![
        json!({"type": "header", "format": "memproxy-export", "version": 1}),
        json!({"type": "conversation", "id": "c", "agent": "default"}),
    ];
    for (position, said) in turns.iter().enumerate() {
        lines.push(
            json!({"type": "message", "conversation": "c", "position": position,
            "role": "user", "content": said, "created_at_ms": 1_000 + position as i64}),
        );
    }
    lines.iter().map(|line| format!("{line}\n")).collect()
}

/// POST a JSON body to a path of the proxy and parse the JSON answer.
pub async fn post_json(h: &Harness, path: &str, body: &Value) -> Value {
    h.client
        .post(h.url(path))
        .json(body)
        .send()
        .await
        .expect("answer")
        .json()
        .await
        .expect("json")
}

/// PUT `body` to a path of the proxy; the answer must be 200.
pub async fn put_ok(h: &Harness, path: &str, body: &Value) {
    let answer = h
        .client
        .put(h.url(path))
        .json(body)
        .send()
        .await
        .expect("answer");
    assert_eq!(answer.status(), 200, "PUT {path}");
}

/// GET a path of the proxy and parse the JSON answer.
pub async fn get_json(h: &Harness, path: &str) -> Value {
    h.client
        .get(h.url(path))
        .send()
        .await
        .expect("answer")
        .json()
        .await
        .expect("json")
}

/// A GET's body as text (`/metrics`).
pub async fn get_text(h: &Harness, path: &str) -> String {
    h.client
        .get(h.url(path))
        .send()
        .await
        .expect("answer")
        .text()
        .await
        .expect("text")
}

/// The user most memory-layer tests act for.
pub fn alice() -> memproxy::store::UserScope {
    memproxy::store::UserScope::new("acme", "alice")
}

/// A retrieval of the top 5 for `text`, everything else default.
pub fn query(text: &str) -> memproxy::memory::RetrievalRequest {
    memproxy::memory::RetrievalRequest {
        query: text.to_owned(),
        top_k: 5,
        ..memproxy::memory::RetrievalRequest::default()
    }
}

/// A plain chat turn at `position`, dated by it.
pub fn turn(position: i64, role: &str, content: &str) -> memproxy::store::NewMessage {
    memproxy::store::NewMessage {
        position,
        role: role.into(),
        content: content.into(),
        name: None,
        tool_calls: None,
        tool_call_id: None,
        created_at_ms: 1_700_000_000_000 + position,
    }
}

/// Polls `check` until it holds (post-processing runs in the background).
pub async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..100 {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("timed out waiting for: {what}");
}

/// A scripted extraction answer with these facts.
pub fn facts(texts: &[&str]) -> memproxy::mock::Reply {
    let facts: Vec<Value> = texts
        .iter()
        .map(|t| json!({"text": t, "kind": "fact"}))
        .collect();
    memproxy::mock::Reply::Text(json!({ "facts": facts }).to_string())
}

pub async fn memories(h: &Harness, user: &str) -> Vec<String> {
    let list = get_json(h, &format!("/memproxy/v1/users/{user}/memories")).await;
    list["data"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["text"].as_str().map(str::to_owned))
        .collect()
}

/// The texts of a user's retired memories (kept as history), oldest first.
pub async fn retired(h: &Harness, user: &str) -> Vec<String> {
    let all = get_json(
        h,
        &format!("/memproxy/v1/users/{user}/memories?include_invalid=true"),
    )
    .await;
    all["data"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| !m["valid_until_ms"].is_null())
        .filter_map(|m| m["text"].as_str().map(str::to_owned))
        .collect()
}

/// A chat request of `user` in implicit mode (the scripted chat model answers `echo: …`).
pub async fn implicit_chat(h: &Harness, user: &str, messages: Value) -> reqwest::Response {
    h.client
        .post(h.url("/implicit/v1/chat/completions"))
        .header("x-memproxy-user", user)
        .json(&json!({"model": "mock-model", "messages": messages}))
        .send()
        .await
        .expect("answer")
}

/// Runs a check script (an official SDK or a browser driving memproxy) to its end and asserts
/// that it succeeded and printed `ok <check>` for each of `checks`; returns its output.
pub async fn run_checks(mut command: std::process::Command, what: &str, checks: &[&str]) -> String {
    let output = tokio::task::spawn_blocking(move || command.output())
        .await
        .expect("join")
        .unwrap_or_else(|error| panic!("run the {what}: {error}"));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "{what} failed:\n{stdout}\n{stderr}"
    );
    for check in checks {
        assert!(
            stdout.lines().any(|line| line == format!("ok {check}")),
            "{what}: missing check {check}:\n{stdout}"
        );
    }
    stdout
}

/// A proxy that embeds with the real local model and extracts at once (no debounce, no
/// consolidation), adjusted by `adjust`: for the rules that read real vectors.
pub async fn harness_local_facts(adjust: impl FnOnce(&mut Config)) -> Harness {
    harness_with(|c| {
        c.memory.extraction_debounce = std::time::Duration::ZERO;
        c.memory.consolidation_delay = None;
        c.embedding.provider = memproxy::embed::EmbeddingProvider::Local;
        c.embedding.model_dir = Some(model_data_dir().join("models/all-MiniLM-L6-v2"));
        c.embedding.onnxruntime = Some(model_data_dir().join("lib/libonnxruntime.so.1.24.4"));
        adjust(c);
    })
    .await
}

/// `user` says `said` in implicit mode, the scripted memory LLM extracting `facts`; waits for
/// the `done`-th extraction and returns every extraction's report, oldest first.
pub async fn tell_facts(
    h: &Harness,
    user: &str,
    said: &str,
    facts: Vec<Value>,
    done: usize,
) -> Vec<String> {
    h.mock.push_marked(
        "MEMPROXY-EXTRACT",
        memproxy::mock::Reply::Text(json!({ "facts": facts }).to_string()),
    );
    let response = implicit_chat(h, user, json!([{"role": "user", "content": said}])).await;
    assert_eq!(response.status(), 200);
    let reports = || async {
        let jobs = get_json(h, "/memproxy/v1/jobs?state=done").await;
        let mut reports: Vec<(i64, String)> = jobs["data"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|j| j["kind"] == "extract")
            .map(|j| {
                let report = j["report"].as_str().unwrap_or_default().to_owned();
                (j["id"].as_i64().unwrap_or_default(), report)
            })
            .collect();
        reports.sort();
        reports.into_iter().map(|(_, r)| r).collect::<Vec<String>>()
    };
    eventually("the extraction is done", || async {
        reports().await.len() >= done
    })
    .await;
    reports().await
}
