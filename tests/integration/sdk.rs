//! Conformance with the official `openai` Python SDK against a running memproxy.
//!
//! `scripts/setup-sdk-venv` installs the pinned SDK into a venv (idempotent; the README's test
//! command runs it first, and this test runs it again so `cargo test` alone works too).

use std::path::Path;
use std::process::Command;

use memproxy::config::Secret;

use crate::common::harness_with;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn official_python_sdk_works_through_memproxy() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let setup = Command::new(root.join("scripts/setup-sdk-venv"))
        .status()
        .expect("run scripts/setup-sdk-venv");
    assert!(setup.success(), "scripts/setup-sdk-venv failed");
    let venv = std::env::var("MEMPROXY_SDK_VENV").unwrap_or_else(|_| "target/sdk-venv".into());
    let python = root.join(venv).join("bin/python");

    let h = harness_with(|c| c.auth.api_keys = vec![Secret::new("mp-sdk-key")]).await;
    let script = root.join("tests/sdk/conformance.py");
    let base_url = h.url("/v1");
    let output = tokio::task::spawn_blocking(move || {
        Command::new(python)
            .arg(script)
            .arg(base_url)
            .arg("mp-sdk-key")
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
    for check in [
        "create",
        "stream",
        "tools",
        "stream-tools",
        "rate-limit",
        "bad-request",
        "auth",
        "explicit",
    ] {
        assert!(
            stdout.contains(&format!("ok {check}")),
            "missing check {check}:\n{stdout}"
        );
    }
}
