//! The web console in a real headless Chromium: log in, search a memory, render hostile memory
//! text inertly, page through memories, edit a core memory block, run the context simulator, read
//! eval results. Screenshots go to
//! `target/ui-screenshots/`. `scripts/setup-browser` installs Chromium and playwright-core (the
//! README's test command runs it first; this test runs it again so `cargo test` alone works).

use std::path::Path;
use std::process::Command;

use memproxy::config::Secret;
use memproxy::mock::Reply;
use serde_json::json;

use crate::common::harness_with;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_works_in_a_real_browser() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let setup = Command::new(root.join("scripts/setup-browser"))
        .status()
        .expect("run scripts/setup-browser");
    assert!(setup.success(), "scripts/setup-browser failed");

    let h = harness_with(|c| {
        c.auth.admin_key = Some(Secret::new("admin-secret"));
        c.memory.extraction_debounce = std::time::Duration::ZERO;
    })
    .await;
    // A fact learned from a chat: the console shows the user's words it comes from.
    let told = crate::common::implicit_chat(
        &h,
        "lisa",
        json!([{"role": "user", "content": "My sister Zelda moved to Lisbon."}]),
    )
    .await;
    assert_eq!(told.status(), 200);
    crate::common::eventually("lisa's fact is stored", || async {
        let listed: serde_json::Value = h
            .client
            .get(h.url("/memproxy/v1/users/lisa/memories"))
            .bearer_auth("admin-secret")
            .send()
            .await
            .expect("list")
            .json()
            .await
            .unwrap_or_default();
        listed["data"][0]["sources"][0]["quote"] == "My sister Zelda moved to Lisbon"
    })
    .await;
    let add = |user: &str, text: &str| {
        h.client
            .post(h.url(&format!("/memproxy/v1/users/{user}/memories")))
            .bearer_auth("admin-secret")
            .json(&json!({"text": text, "kind": "fact"}))
            .send()
    };
    assert_eq!(
        add("ana", "Ana is allergic to peanuts.")
            .await
            .expect("add")
            .status(),
        201
    );
    for hostile in [
        r#"<img src=x onerror="window.__xss=1;alert(1)">"#,
        "<script>window.__xss=2</script>",
    ] {
        assert_eq!(add("mallory", hostile).await.expect("add").status(), 201);
    }
    // More memories than one console page holds.
    for n in 0..105 {
        let text = format!("Bulk note number {n}.");
        assert_eq!(add("bulk", &text).await.expect("add").status(), 201);
    }
    // An agent for ana, made by one explicit-mode turn, in which it messages ana's other agent.
    let helper = h
        .client
        .put(h.url("/memproxy/v1/users/ana/agents/helper/tags"))
        .bearer_auth("admin-secret")
        .json(&json!({"tags": ["team"]}))
        .send()
        .await
        .expect("tags");
    assert_eq!(helper.status(), 200);
    h.mock.push(Reply::ToolCalls(vec![
        (
            "send_message_to_agent_async".to_owned(),
            json!({"agent": "helper", "message": "Ana says hello."}).to_string(),
        ),
        (
            "send_message".to_owned(),
            json!({"message": "Hi Ana!"}).to_string(),
        ),
    ]));
    h.mock.push(Reply::ToolCalls(vec![(
        "send_message".to_owned(),
        json!({"message": "Hello back to Ana."}).to_string(),
    )]));
    let turn = h
        .client
        .post(h.url("/explicit/v1/chat/completions"))
        .header("x-memproxy-user", "ana")
        .json(&json!({"model": "m", "messages": [{"role": "user", "content": "Hello!"}]}))
        .send()
        .await
        .expect("turn");
    assert_eq!(turn.status(), 200);
    crate::common::eventually("the helper's reply", || async {
        let log = h
            .client
            .get(h.url("/memproxy/v1/users/ana/agents/default/messages"))
            .bearer_auth("admin-secret")
            .send()
            .await
            .expect("log")
            .text()
            .await
            .unwrap_or_default();
        log.contains("agent_reply")
    })
    .await;

    let shots = root.join("target/ui-screenshots");
    let script = root.join("tests/ui/console.mjs");
    let base = h.url("");
    let mut command = Command::new("node");
    command
        .current_dir(root)
        .arg(script)
        .arg(base)
        .arg("admin-secret")
        .arg(shots);
    crate::common::run_checks(
        command,
        "browser test",
        &[
            "login",
            "memory-search",
            "invalidate",
            "restore",
            "xss-inert",
            "source-quote",
            "paging",
            "edit-block",
            "agent-conversations",
            "tags",
            "shared-block",
            "simulator",
            "eval-results",
        ],
    )
    .await;
    // The block edit reached the store.
    let blocks: serde_json::Value = h
        .client
        .get(h.url("/memproxy/v1/users/ana/agents/default/blocks"))
        .bearer_auth("admin-secret")
        .send()
        .await
        .expect("blocks")
        .json()
        .await
        .expect("json");
    assert!(blocks.to_string().contains("Loves Thai food."), "{blocks}");
    let agents: serde_json::Value = h
        .client
        .get(h.url("/memproxy/v1/users/ana/agents"))
        .bearer_auth("admin-secret")
        .send()
        .await
        .expect("agents")
        .json()
        .await
        .expect("json");
    assert!(
        agents.to_string().contains(r#""tags":["lead","team"]"#),
        "{agents}"
    );
    // The shared block made and attached in the console is one block with both agents.
    let shared: serde_json::Value = h
        .client
        .get(h.url("/memproxy/v1/users/ana/blocks"))
        .bearer_auth("admin-secret")
        .send()
        .await
        .expect("shared blocks")
        .json()
        .await
        .expect("json");
    assert_eq!(shared["data"][0]["name"], "household", "{shared}");
    assert_eq!(
        shared["data"][0]["value"],
        "Ana lives with two cats and a dog."
    );
    assert_eq!(shared["data"][0]["agents"], json!(["default", "helper"]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_of_another_origin_can_neither_read_nor_write_memory() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let setup = Command::new(root.join("scripts/setup-browser"))
        .status()
        .expect("run scripts/setup-browser");
    assert!(setup.success(), "scripts/setup-browser failed");
    // The default local install: no keys.
    let h = harness_with(|_| {}).await;
    let mut command = Command::new("node");
    command
        .current_dir(root)
        .arg(root.join("tests/ui/foreign_page.mjs"))
        .arg(h.url(""))
        .arg(root.join("target/ui-screenshots"));
    crate::common::run_checks(
        command,
        "foreign page test",
        &[
            "cross-origin-read-blocked",
            "cors-json-blocked",
            "form-post-refused",
            "form-import-refused",
            "rebinding-refused",
            "same-origin-write",
        ],
    )
    .await;
    assert!(
        crate::common::memories(&h, "default").await.is_empty(),
        "the page stored nothing"
    );
    assert!(
        h.mock.chat_requests(None).is_empty(),
        "the page chatted with nobody"
    );
    assert_eq!(crate::common::memories(&h, "console-user").await.len(), 1);
}
