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
async fn run_script(script: &str, base_path: &str, checks: &[&str]) {
    run_script_on(script, base_path, checks, false).await;
}

/// The same against a memproxy with an upstream per API (the mock speaks Messages and Responses
/// too): the same-API relay, with the script's `native` argument.
async fn run_script_on(script: &str, base_path: &str, checks: &[&str], native: bool) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let setup = Command::new(root.join("scripts/setup-sdk-venv"))
        .status()
        .expect("run scripts/setup-sdk-venv");
    assert!(setup.success(), "scripts/setup-sdk-venv failed");
    let venv = std::env::var("MEMPROXY_SDK_VENV").unwrap_or_else(|_| "target/sdk-venv".into());
    let python = root.join(venv).join("bin/python");

    let h = harness_with(|c| {
        c.auth.api_keys = vec![Secret::new("mp-sdk-key")];
        if native {
            let upstream = ApiUpstream {
                url: c.upstream.url.clone(),
                ..ApiUpstream::default()
            };
            c.upstream.messages = Some(upstream.clone());
            c.upstream.responses = Some(upstream);
        }
    })
    .await;
    let script = root.join("tests/sdk").join(script);
    let base_url = h.url(base_path);
    let output = tokio::task::spawn_blocking(move || {
        Command::new(python)
            .arg(script)
            .arg(base_url)
            .arg("mp-sdk-key")
            .args(native.then_some("native"))
            .output()
    })
    .await
    .expect("join")
    .expect("run the conformance script");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "SDK conformance failed:\n{stdout}\n{stderr}"
    );
    for check in checks {
        assert!(
            stdout.contains(&format!("ok {check}")),
            "missing check {check}:\n{stdout}"
        );
    }
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
