//! Claude Code and Codex CLI themselves (the pinned versions `scripts/setup-clients` installs
//! from npm) against a test proxy in implicit mode, each with its own memproxy key: what one
//! client is told, the other recalls in a new session, and the other user's client sees none of
//! it. The scripted upstream answers `echo: <the user's message as it arrived>`, so each client's
//! printed answer shows that its question reached the model as the user's turn.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use memproxy::config::Secret;
use serde_json::Value;

use crate::common::{harness_with, Harness};

const PAT_KEY: &str = "mp-real-clients-pat";
const SAM_KEY: &str = "mp-real-clients-sam";

/// The installed clients' binaries (installed here too, so `cargo test` alone works).
fn clients() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let setup = Command::new(root.join("scripts/setup-clients"))
        .status()
        .expect("run scripts/setup-clients");
    assert!(setup.success(), "scripts/setup-clients failed");
    root.join("target/clients/node_modules/.bin")
}

/// Runs one client to completion (two minutes at most) and returns what it printed.
async fn run(mut command: Command, what: &str) -> String {
    let what = what.to_owned();
    let ran = tokio::task::spawn_blocking(move || {
        let mut child = command
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("start the client");
        let deadline = std::time::Instant::now() + Duration::from_secs(120);
        while child.try_wait().expect("wait").is_none() {
            if std::time::Instant::now() > deadline {
                let _ = child.kill();
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        child.wait_with_output().expect("the client's output")
    })
    .await
    .expect("join");
    let stdout = String::from_utf8_lossy(&ran.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&ran.stderr);
    assert!(
        ran.status.success(),
        "{what} failed ({:?}):\n{stdout}\n{stderr}",
        ran.status
    );
    stdout
}

/// `claude -p <prompt>` with a fresh home, speaking Messages to the proxy's implicit route.
fn claude(h: &Harness, home: &Path, key: &str, prompt: &str) -> Command {
    let mut command = Command::new(clients().join("claude"));
    command
        .args(["-p", prompt])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("ANTHROPIC_BASE_URL", h.url("/implicit"))
        .env("ANTHROPIC_API_KEY", key)
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .current_dir(home);
    command
}

/// `codex exec <prompt>` with its own config, speaking Responses to the proxy's implicit route
/// (the key from the environment, sent as `Authorization: Bearer`).
fn codex(h: &Harness, home: &Path, key: &str, prompt: &str) -> Command {
    let config = format!(
        "model = \"mock-model\"\nmodel_provider = \"memproxy\"\n\n[model_providers.memproxy]\n\
         name = \"memproxy\"\nbase_url = \"{}\"\nwire_api = \"responses\"\nenv_key = \"MEMPROXY_KEY\"\n",
        h.url("/implicit/v1")
    );
    std::fs::write(home.join("config.toml"), config).expect("codex config");
    let mut command = Command::new(clients().join("codex"));
    command
        .args(["exec", "--skip-git-repo-check", prompt])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("CODEX_HOME", home)
        .env("MEMPROXY_KEY", key)
        .current_dir(home);
    command
}

/// The text of every message of the newest chat request upstream whose last user turn asked
/// `question` (the memory LLM's requests in between are not it; Claude Code puts a system message
/// after the user's).
fn upstream_prompt_for(h: &Harness, question: &str) -> String {
    let text = |m: &Value| match &m["content"] {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    };
    let request = h
        .mock
        .chat_requests(None)
        .into_iter()
        .rev()
        .find(|r| {
            let messages = r["messages"].as_array().cloned().unwrap_or_default();
            let last_user = messages.iter().rev().find(|m| m["role"] == "user");
            last_user.is_some_and(|m| text(m).trim_end().ends_with(question))
        })
        .unwrap_or_else(|| panic!("no upstream request asked '{question}'"));
    request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .map(text)
        .collect::<Vec<_>>()
        .join("\n")
}

async fn memories_of(h: &Harness, key: &str, user: &str) -> Vec<String> {
    let list: Value = h
        .client
        .get(h.url(&format!("/memproxy/v1/users/{user}/memories")))
        .bearer_auth(key)
        .send()
        .await
        .expect("memories")
        .json()
        .await
        .expect("a list");
    list["data"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["text"].as_str().map(str::to_owned))
        .collect()
}

async fn stored(h: &Harness, key: &str, user: &str, word: &str) {
    for _ in 0..100 {
        if memories_of(h, key, user)
            .await
            .iter()
            .any(|m| m.contains(word))
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{user}'s memory never held '{word}'");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_and_codex_remember_across_each_other_and_only_for_their_user() {
    let h = harness_with(|c| {
        c.memory.extraction_debounce = Duration::ZERO;
        c.auth.api_keys = vec![
            Secret::new(format!("team/pat:{PAT_KEY}")),
            Secret::new(format!("team/sam:{SAM_KEY}")),
        ];
    })
    .await;
    let homes = tempfile::tempdir().expect("homes");
    let home = |name: &str| {
        let dir = homes.path().join(name);
        std::fs::create_dir_all(&dir).expect("home");
        dir
    };

    // Told in Claude Code; the answer echoes the question: it reached the model as the user's turn.
    let said = run(
        claude(&h, &home("cc-1"), PAT_KEY, "My dog is called Rexford."),
        "claude -p",
    )
    .await;
    assert!(said.contains("My dog is called Rexford."), "{said}");
    stored(&h, PAT_KEY, "pat", "Rexford").await;

    // Recalled in Codex, a new session of another client on another API.
    let said = run(
        codex(&h, &home("codex-1"), PAT_KEY, "What is my dog called?"),
        "codex exec",
    )
    .await;
    assert!(said.contains("echo: What is my dog called?"), "{said}");
    let prompt = upstream_prompt_for(&h, "What is my dog called?");
    assert!(
        prompt.contains("<memory>") && prompt.contains("Rexford"),
        "Codex's request carried no memory of Claude Code's session: {prompt}"
    );

    // Told in Codex; recalled in a new Claude Code session.
    run(
        codex(
            &h,
            &home("codex-2"),
            PAT_KEY,
            "My favourite editor is Helix.",
        ),
        "codex exec",
    )
    .await;
    stored(&h, PAT_KEY, "pat", "Helix").await;
    let said = run(
        claude(&h, &home("cc-2"), PAT_KEY, "Which editor do I like?"),
        "claude -p",
    )
    .await;
    assert!(said.contains("Which editor do I like?"), "{said}");
    let prompt = upstream_prompt_for(&h, "Which editor do I like?");
    assert!(
        prompt.contains("Helix"),
        "Claude Code's request carried no memory of Codex's session: {prompt}"
    );

    // Another user's clients see none of it.
    for (command, question) in [
        (
            claude(&h, &home("cc-sam"), SAM_KEY, "Am I a dog person?"),
            "Am I a dog person?",
        ),
        (
            codex(&h, &home("codex-sam"), SAM_KEY, "Do I use an editor?"),
            "Do I use an editor?",
        ),
    ] {
        run(command, "sam's client").await;
        let prompt = upstream_prompt_for(&h, question);
        assert!(
            !prompt.contains("Rexford") && !prompt.contains("Helix"),
            "pat's memory reached sam: {prompt}"
        );
    }
    assert!(memories_of(&h, SAM_KEY, "sam").await.is_empty());
}
