//! Memory over MCP, with the official `mcp` Python SDK as the client over Streamable HTTP: every
//! tool called, bad arguments and unknown tools refused as MCP errors, users isolated, a key
//! restricted to one user serving only them, a wrong key refused; and the round trip with the proxy: a turn learned through a chat is found over
//! MCP, and a fact saved over MCP is injected into the user's next implicit-mode chat, audited
//! as written via MCP.

use std::path::Path;
use std::process::Command;

use memproxy::config::Secret;
use memproxy::mock::Reply;
use serde_json::{json, Value};

use crate::common::{eventually, harness_with, run_checks, Harness};

const KEY: &str = "mp-mcp-key";
/// Restricted to user `ana`.
const ANA_KEY: &str = "mp-mcp-ana";
/// Another tenant's key.
const GLOBEX_KEY: &str = "mp-mcp-globex";

async fn chat(h: &Harness, user: &str, text: &str) {
    let response = h
        .client
        .post(h.url("/implicit/v1/chat/completions"))
        .bearer_auth(KEY)
        .header("x-memproxy-user", user)
        .json(&json!({"model": "mock-model", "messages": [{"role": "user", "content": text}]}))
        .send()
        .await
        .expect("answer");
    assert_eq!(response.status(), 200);
}

async fn management(h: &Harness, path: &str) -> Value {
    h.client
        .get(h.url(path))
        .bearer_auth(KEY)
        .send()
        .await
        .expect("answer")
        .json()
        .await
        .expect("json")
}

#[tokio::test]
async fn the_official_mcp_sdk_uses_the_same_memory_as_the_proxy() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let python = crate::sdk::sdk_python();
    let h = harness_with(|c| {
        c.auth.api_keys = vec![
            Secret::new(format!("acme:{KEY}")),
            Secret::new(format!("acme/ana:{ANA_KEY}")),
            Secret::new(format!("globex:{GLOBEX_KEY}")),
        ]
    })
    .await;

    // A turn learned through the proxy.
    h.mock.push(Reply::Text("Lisbon is lovely.".into()));
    chat(&h, "ana", "I moved to Lisbon last spring.").await;
    eventually("the turn is recorded", || async {
        management(&h, "/memproxy/v1/users/ana/conversations").await["data"]
            .as_array()
            .is_some_and(|rows| !rows.is_empty())
    })
    .await;

    // Ana's explicit-mode agent, set up before its first turn by a block (which creates it with
    // its starting memory) and an archival passage.
    for (method, path, body) in [
        (
            "PUT",
            "agents/coach/blocks/human",
            json!({"value": "Name: Ana."}),
        ),
        (
            "POST",
            "agents/coach/archival",
            json!({"text": "Ana's marathon plan: 16 weeks."}),
        ),
    ] {
        let url = h.url(&format!("/memproxy/v1/users/ana/{path}"));
        let method = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
        let response = h
            .client
            .request(method, url)
            .bearer_auth(KEY)
            .json(&body)
            .send();
        let status = response.await.expect("answer").status();
        assert!(status.is_success(), "{path}: {status}");
    }

    let agents = management(&h, "/memproxy/v1/users/ana/agents").await;
    assert!(agents.to_string().contains("\"coach\""), "{agents}");
    let blocks = management(&h, "/memproxy/v1/users/ana/agents/coach/blocks").await;
    let labels: Vec<&str> = blocks["data"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|b| b["label"].as_str())
        .collect();
    assert!(
        labels.contains(&"persona") && labels.contains(&"human"),
        "{blocks}"
    );

    // Ana's turn has been learned (so no extraction of hers asks the memory LLM later; her
    // agent's `human` line is one of her facts already), then the memory LLM's answers to the
    // two reconciliations of Cyd's facts: an update, and a failure.
    eventually("the turn is learned", || async {
        management(&h, "/memproxy/v1/users/ana/memories").await["data"]
            .as_array()
            .is_some_and(|rows| rows.iter().any(|r| r.to_string().contains("Lisbon")))
    })
    .await;
    h.mock.push_marked(
        "MEMPROXY-RECONCILE",
        Reply::Text(
            json!({"decisions": [{"fact": 0, "action": "UPDATE", "memory": 0,
                "text": "Cyd works as a teacher in Leeds."}]})
            .to_string(),
        ),
    );
    h.mock.push_marked(
        "MEMPROXY-RECONCILE",
        Reply::Error {
            status: 500,
            message: "the memory model crashed".into(),
            headers: Vec::new(),
        },
    );
    let script = root.join("tests/sdk/mcp_memory.py");
    let base = h.url("");
    let mut command = Command::new(python);
    command
        .arg(script)
        .arg(base)
        .arg(KEY)
        .arg(ANA_KEY)
        .arg(GLOBEX_KEY);
    run_checks(
        command,
        "MCP SDK test",
        &[
            "reconcile-add",
            "reconcile-update",
            "reconcile-list",
            "reconcile-llm-down",
            "reconcile-too-long",
            "list-tools",
            "schemas",
            "add",
            "duplicate",
            "search",
            "update",
            "list",
            "delete",
            "search-conversations",
            "core-get",
            "core-edit",
            "core-edit-unknown",
            "archival",
            "resources-list",
            "resources-recent",
            "resources-core",
            "resources-templates",
            "resources-unknown",
            "isolation-core",
            "isolation-resources",
            "isolation-recent",
            "isolation-resource-core",
            "bad-arguments",
            "unknown-id",
            "empty-query",
            "unknown-tool",
            "isolation",
            "isolation-list",
            "no-user",
            "user-key",
            "user-key-other",
            "isolation-tenant",
            "wrong-key",
        ],
    )
    .await;

    // Cyd's second fact was put to the memory LLM beside the memory it changes, with the model
    // of the latest chat (no `memory.llm.model` here).
    let reconciles = h.mock.chat_requests(Some("MEMPROXY-RECONCILE"));
    let asked = reconciles
        .iter()
        .find(|r| r.to_string().contains("Cyd now works as a teacher"))
        .expect("Cyd's fact was reconciled");
    let material = asked["messages"][1]["content"].as_str().unwrap_or_default();
    assert!(
        material.contains("M0") && material.contains("Cyd works as a nurse in Leeds."),
        "{material}"
    );
    assert_eq!(asked["model"], "mock-model");

    // The management API sees the MCP writes, audited as such.
    let memories = management(&h, "/memproxy/v1/users/ana/memories").await;
    let texts: Vec<&str> = memories["data"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["text"].as_str())
        .collect();
    assert!(
        texts.contains(&"Ana keeps two hives of bees on her roof."),
        "{texts:?}"
    );
    let events = management(&h, "/memproxy/v1/users/ana/events").await;
    let via: Vec<&str> = events["data"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["cause"] == "via MCP")
        .filter_map(|e| e["action"].as_str())
        .collect();
    for action in ["add", "update", "delete"] {
        assert!(
            via.iter().any(|a| a.starts_with(action)),
            "{action} in {via:?}\n{events}"
        );
    }
    let blocks = management(&h, "/memproxy/v1/users/ana/agents/coach/blocks").await;
    assert!(
        blocks.to_string().contains("Name: Ana. Keeps bees."),
        "{blocks}"
    );
    assert!(
        management(&h, "/memproxy/v1/users/bob/memories").await["data"]
            .as_array()
            .is_none_or(Vec::is_empty)
    );

    // The fact saved over MCP is in Ana's next implicit-mode chat.
    h.mock.push(Reply::Text("Two hives.".into()));
    chat(&h, "ana", "What do I keep on my roof?").await;
    let requests = h.mock.chat_requests(None);
    let last = requests.last().map(Value::to_string).unwrap_or_default();
    assert!(
        last.contains("Ana keeps two hives of bees on her roof."),
        "{last}"
    );

    // `memproxy mcp` over stdio, launched by the SDK, works on the same data directory.
    let config = h.data.path().join("mcp.toml");
    std::fs::write(
        &config,
        format!(
            "data_dir = {data:?}\n[upstream]\nurl = {url:?}\n[embedding]\nprovider = \"openai\"\nurl = {url:?}\nmodel = \"mock-embed\"\ndimensions = 64\n[memory.llm]\nmodel = \"mock-memory\"\n",
            data = h.data.path().display().to_string(),
            url = h.mock.base_url(),
        ),
    )
    .expect("write config");
    let (script, binary) = (
        root.join("tests/sdk/mcp_stdio.py"),
        env!("CARGO_BIN_EXE_memproxy"),
    );
    let python = crate::sdk::sdk_python();
    let mut command = Command::new(python);
    command.arg(script).arg(binary).arg(config);
    if let Some(url) = &h.config.store.url {
        // The same database (the URL goes by environment, never into a file).
        command.env("MEMPROXY_DATABASE_URL", url.expose());
    }
    run_checks(
        command,
        "MCP stdio test",
        &[
            "stdio-tools",
            "stdio-same-memory",
            "stdio-add",
            "stdio-resources",
        ],
    )
    .await;
    let memories = management(&h, "/memproxy/v1/users/ana/memories").await;
    assert!(
        memories
            .to_string()
            .contains("Ana plays the viola in a quartet."),
        "{memories}"
    );

    // Without a valid key the endpoint answers 401 before any MCP message is read.
    let refused = h
        .client
        .post(h.url("/mcp"))
        .bearer_auth("wrong")
        .header("accept", "application/json, text/event-stream")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
        .send()
        .await
        .expect("answer");
    assert_eq!(refused.status(), 401);
}
