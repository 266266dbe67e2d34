//! Conformance with the official `openai` and `anthropic` Python SDKs against a running memproxy.
//!
//! `scripts/setup-sdk-venv` installs the pinned SDKs into a venv (idempotent; the README's test
//! command runs it first, and these tests run it again so `cargo test` alone works too).

use std::path::Path;
use std::process::Command;

use memproxy::config::Secret;
use memproxy::upstream::ApiUpstream;

use crate::common::harness_with;

/// Runs `tests/sdk/<script>` against a memproxy with one proxy key, and checks that it printed
/// `ok <check>` for each of `checks`.
/// The venv's Python with the official SDKs (installed by `scripts/setup-sdk-venv` if needed).
pub fn sdk_python() -> std::path::PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let setup = Command::new(root.join("scripts/setup-sdk-venv"))
        .status()
        .expect("run scripts/setup-sdk-venv");
    assert!(setup.success(), "scripts/setup-sdk-venv failed");
    let venv = std::env::var("MEMPROXY_SDK_VENV").unwrap_or_else(|_| "target/sdk-venv".into());
    root.join(venv).join("bin/python")
}

async fn run_script(script: &str, base_path: &str, checks: &[&str]) {
    run_script_on(script, base_path, checks, false).await;
}

async fn run_script_on(script: &str, base_path: &str, checks: &[&str], native: bool) {
    run_prepared(script, base_path, checks, native, |_| {}).await;
}

/// The same against a memproxy with an upstream per API (the mock speaks Messages and Responses
/// too): the same-API relay, with the script's `native` argument; `prepare` scripts the mock
/// before the script runs.
async fn run_prepared(
    script: &str,
    base_path: &str,
    checks: &[&str],
    native: bool,
    prepare: impl FnOnce(&crate::common::Harness),
) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let python = sdk_python();

    let h = harness_with(|c| {
        c.auth.api_keys = vec![Secret::new("mp-sdk-key")];
        if native {
            let upstream = ApiUpstream {
                url: c.upstream.url.clone(),
                ..ApiUpstream::default()
            };
            c.upstream.messages = Some(upstream.clone());
            c.upstream.responses = Some(upstream.clone());
            // Ollama's API lives at the server's root, not under /v1.
            c.upstream.ollama = Some(ApiUpstream {
                url: upstream.url.trim_end_matches("/v1").to_owned(),
                ..upstream
            });
        }
    })
    .await;
    prepare(&h);
    let script = root.join("tests/sdk").join(script);
    let base_url = h.url(base_path);
    let mut command = Command::new(python);
    command
        .arg(script)
        .arg(base_url)
        .arg("mp-sdk-key")
        .args(native.then_some("native"));
    crate::common::run_checks(command, "SDK conformance", checks).await;
    if native {
        let paths: Vec<String> = h
            .mock
            .requests()
            .into_iter()
            .map(|r| r.path_and_query)
            .collect();
        assert!(
            !paths.iter().any(|p| p == "/v1/chat/completions"),
            "translated instead of relayed: {paths:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn official_python_sdk_works_through_memproxy() {
    run_script(
        "conformance.py",
        "/v1",
        &[
            "create",
            "stream",
            "tools",
            "stream-tools",
            "rate-limit",
            "bad-request",
            "auth",
            "explicit",
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn official_anthropic_sdk_works_through_memproxy() {
    run_script("anthropic_conformance.py", "", &ANTHROPIC_CHECKS).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn official_python_sdk_responses_api_works_through_memproxy() {
    run_script("responses_conformance.py", "/v1", &RESPONSES_CHECKS).await;
}

/// A standard tool-calling loop of the official SDK, unchanged, against explicit mode: the agent
/// (scripted) saves a fact, calls the app's function, and answers with its result; whole, then
/// streamed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn official_python_sdk_tool_loop_works_in_explicit_mode() {
    use crate::explicit::{call, send};
    use serde_json::json;
    run_prepared("explicit_tools.py", "/explicit/v1", &["whole", "stream"], false, |h| {
        for _ in 0..2 {
            h.mock.push(call(
                "core_memory_append",
                json!({"label": "human", "content": "The user travels to Lisbon.", "request_heartbeat": true}),
            ));
            h.mock.push(call("get_weather", json!({"city": "Lisbon"})));
            h.mock.push(send("It is sunny in Lisbon, 24 degrees."));
        }
    })
    .await;
}

/// The same with the official Anthropic SDK's and the Responses API's tool loops (the client's
/// tools reach the agent through each API's translation, and its calls come back in that API's
/// shape).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn official_sdks_tool_loops_work_in_explicit_mode_on_messages_and_responses() {
    use crate::explicit::{call, send};
    use serde_json::json;
    let checks = [
        "messages",
        "messages-stream",
        "responses",
        "responses-stream",
    ];
    run_prepared("explicit_tools_apis.py", "", &checks, false, |h| {
        for _ in 0..4 {
            h.mock.push(call(
                "core_memory_append",
                json!({"label": "human", "content": "The user travels to Lisbon.", "request_heartbeat": true}),
            ));
            h.mock.push(call("get_weather", json!({"city": "Lisbon"})));
            h.mock.push(send("It is sunny there, 24 degrees."));
        }
    })
    .await;
}

const ANTHROPIC_CHECKS: [&str; 10] = [
    "create",
    "stream",
    "tools",
    "stream-tools",
    "tool-result",
    "models",
    "count-tokens",
    "rate-limit",
    "bad-request",
    "auth",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn official_anthropic_sdk_works_through_the_same_api_relay() {
    run_script_on("anthropic_conformance.py", "", &ANTHROPIC_CHECKS, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn official_python_sdk_responses_api_works_through_the_same_api_relay() {
    run_script_on("responses_conformance.py", "/v1", &RESPONSES_CHECKS, true).await;
}

const RESPONSES_CHECKS: [&str; 10] = [
    "create",
    "previous-response",
    "stream",
    "stream-events",
    "tools",
    "stream-tools",
    "retrieve-delete",
    "bad-request",
    "rate-limit",
    "auth",
];

const OLLAMA_CHECKS: [&str; 11] = [
    "chat",
    "stream",
    "tools",
    "stream-tools",
    "tool-result",
    "generate",
    "models",
    "embed",
    "rate-limit",
    "bad-request",
    "auth",
];

/// The official `ollama` client, as Ollama's apps use it, against Ollama's API translated to the
/// Chat Completions upstream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn official_ollama_client_works_through_memproxy() {
    run_script("ollama_conformance.py", "/implicit", &OLLAMA_CHECKS).await;
}

/// The same against an Ollama server upstream (`[upstream.ollama]`): chat and generate relayed
/// in Ollama's shape with memory, the model routes relayed as they are. (Ollama itself judges a
/// malformed request there, so no bad-request check.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn official_ollama_client_works_through_an_ollama_upstream() {
    let checks: Vec<&str> = OLLAMA_CHECKS
        .into_iter()
        .filter(|check| *check != "bad-request")
        .collect();
    run_script_on("ollama_conformance.py", "/implicit", &checks, true).await;
}
