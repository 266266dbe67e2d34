//! Real clients' requests, as captured from the clients themselves (`tests/fixtures/clients/`),
//! through every strategy with the default budgets: the newest user message reaches the upstream
//! as the user's turn, the client's system messages (Claude Code's trailing environment message
//! too; Codex CLI's developer messages and tools too) are kept, and memory is injected; a second
//! session recalls the first. Chat Completions clients (the Vercel AI SDK, Continue CLI) keep
//! their tools, and a step that carries a tool's result reaches the upstream with it intact.

use std::time::Duration;

use memproxy::config::Secret;
use memproxy::upstream::ApiUpstream;
use serde_json::{json, Value};

use crate::common::{eventually, harness_with, memories, Harness};

/// A captured request's body (not streamed), with the user's words `told` (as captured) replaced
/// by `said`, in the list of items at `list` (`messages` or `input`).
fn captured_saying(fixture: &str, list: &str, told: &str, said: &str) -> Value {
    let mut body = serde_json::from_str::<Value>(fixture).expect("fixture")["body"].clone();
    body["stream"] = Value::Bool(false);
    for item in body[list].as_array_mut().into_iter().flatten() {
        if item["content"] == told {
            item["content"] = Value::String(said.to_owned());
        }
        for block in item["content"].as_array_mut().into_iter().flatten() {
            if block["text"] == told {
                block["text"] = Value::String(said.to_owned());
            }
        }
    }
    body
}

/// The captured Claude Code 2.1.332 request: `[user(<system-reminder>…), user("My dog is called
/// Rexford."), system("# Environment…", about 9,500 characters)]` besides its top-level system.
fn claude_code_saying(said: &str) -> Value {
    let fixture = include_str!("../fixtures/clients/claude-code-2.1.332.json");
    captured_saying(fixture, "messages", "My dog is called Rexford.", said)
}

async fn send(h: &Harness, mode: &str, body: &Value) -> reqwest::Response {
    h.client
        .post(h.url(&format!("/{mode}/v1/messages")))
        .header("x-memproxy-user", "cc-user")
        .header("anthropic-version", "2023-06-01")
        .json(body)
        .send()
        .await
        .expect("answer")
}

/// The messages of the newest request the upstream got on `path` for the client: the memory
/// LLM's calls (marked `MEMPROXY-` in their system message) run in the background and may come
/// after it.
fn sent_messages(h: &Harness, path: &str) -> Vec<Value> {
    let request = h
        .mock
        .requests()
        .into_iter()
        .rev()
        .filter(|r| r.path_and_query.starts_with(path))
        .map(|r| r.json())
        .find(|body| {
            let first = body["messages"][0]["content"].as_str().unwrap_or_default();
            !first.contains("MEMPROXY-")
        })
        .expect("a request upstream");
    request["messages"].as_array().cloned().unwrap_or_default()
}

fn text_of(message: &Value) -> String {
    match &message["content"] {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// The question arrived as the user's turn, and the client's instructions (a system or developer
/// message holding `kept`) were not dropped.
fn assert_reaches(messages: &[Value], question: &str, kept: &str, mode: &str) {
    let users: Vec<String> = messages
        .iter()
        .filter(|m| m["role"] == "user")
        .map(text_of)
        .collect();
    assert!(
        users.iter().any(|t| t.trim_end().ends_with(question)),
        "{mode}: the question is not a user turn upstream: {users:?}"
    );
    assert!(
        kept.is_empty()
            || messages
                .iter()
                .any(|m| m["role"] != "user" && text_of(m).contains(kept)),
        "{mode}: the client's '{kept}' message was dropped"
    );
}

/// Claude Code's trailing environment message.
const ENVIRONMENT: &str = "# Environment";
/// Codex CLI's developer instructions.
const CODEX_INSTRUCTIONS: &str = "You are a coding agent";

#[tokio::test]
async fn claude_codes_question_reaches_the_model_in_every_strategy() {
    let h = harness_with(|c| c.memory.extraction_debounce = Duration::ZERO).await;
    for mode in ["passthrough", "window", "summary", "implicit"] {
        let response = send(&h, mode, &claude_code_saying("My dog is called Rexford.")).await;
        assert_eq!(
            response.status(),
            200,
            "{mode}: {:?}",
            response.text().await
        );
        let degraded = response.headers().get("x-memproxy-degraded").cloned();
        assert!(degraded.is_none(), "{mode}: {degraded:?}");
        let messages = sent_messages(&h, "/v1/chat/completions");
        assert_reaches(&messages, "My dog is called Rexford.", ENVIRONMENT, mode);
    }
    // A second session recalls the first: the fact is stored, and injected for the new question.
    eventually("the fact is stored", || async {
        memories(&h, "cc-user")
            .await
            .iter()
            .any(|m| m.contains("Rexford"))
    })
    .await;
    let response = send(
        &h,
        "implicit",
        &claude_code_saying("What is my dog called?"),
    )
    .await;
    assert_eq!(response.status(), 200);
    let messages = sent_messages(&h, "/v1/chat/completions");
    assert_reaches(
        &messages,
        "What is my dog called?",
        ENVIRONMENT,
        "implicit, later",
    );
    let all: String = messages.iter().map(text_of).collect::<Vec<_>>().join("\n");
    assert!(
        all.contains("<memory>") && all.contains("Rexford"),
        "no memory injected"
    );
}

#[tokio::test]
async fn claude_codes_question_reaches_a_native_messages_upstream() {
    let h = harness_with(|c| {
        c.upstream.messages = Some(ApiUpstream {
            url: c.upstream.url.clone(),
            api_key: Some(Secret::new("sk-ant-upstream")),
            auth_header: None,
        });
    })
    .await;
    for mode in ["window", "summary", "implicit"] {
        let response = send(&h, mode, &claude_code_saying("My dog is called Rexford.")).await;
        assert_eq!(
            response.status(),
            200,
            "{mode}: {:?}",
            response.text().await
        );
        let messages = sent_messages(&h, "/v1/messages");
        assert_reaches(&messages, "My dog is called Rexford.", ENVIRONMENT, mode);
    }
}

/// The captured Codex CLI 0.171.0 request: three developer messages (about 19,000 characters),
/// the environment context and the user's words, nine tools, `store: false`.
fn codex_saying(said: &str) -> Value {
    let fixture = include_str!("../fixtures/clients/codex-0.171.0.json");
    captured_saying(fixture, "input", "My favourite editor is Helix.", said)
}

async fn send_responses(h: &Harness, mode: &str, body: &Value) -> reqwest::Response {
    h.client
        .post(h.url(&format!("/{mode}/v1/responses")))
        .header("x-memproxy-user", "codex-user")
        .json(body)
        .send()
        .await
        .expect("answer")
}

#[tokio::test]
async fn codexs_question_reaches_the_model_in_every_strategy_and_is_recalled() {
    let h = harness_with(|c| c.memory.extraction_debounce = Duration::ZERO).await;
    for mode in ["passthrough", "window", "summary", "implicit"] {
        let response =
            send_responses(&h, mode, &codex_saying("My favourite editor is Helix.")).await;
        assert_eq!(
            response.status(),
            200,
            "{mode}: {:?}",
            response.text().await
        );
        let messages = sent_messages(&h, "/v1/chat/completions");
        assert_reaches(
            &messages,
            "My favourite editor is Helix.",
            CODEX_INSTRUCTIONS,
            mode,
        );
        let tools = h
            .mock
            .chat_requests(None)
            .last()
            .map(|r| r["tools"].as_array().map_or(0, Vec::len))
            .unwrap_or(0);
        assert!(
            tools > 0,
            "{mode}: Codex's function tools reach the upstream"
        );
    }
    eventually("the fact is stored", || async {
        memories(&h, "codex-user")
            .await
            .iter()
            .any(|m| m.contains("Helix"))
    })
    .await;
    let response = send_responses(&h, "implicit", &codex_saying("Which editor do I like?")).await;
    assert_eq!(response.status(), 200);
    let messages = sent_messages(&h, "/v1/chat/completions");
    assert_reaches(
        &messages,
        "Which editor do I like?",
        CODEX_INSTRUCTIONS,
        "implicit, later",
    );
    let all: String = messages.iter().map(text_of).collect::<Vec<_>>().join("\n");
    assert!(
        all.contains("<memory>") && all.contains("Helix"),
        "no memory injected"
    );
}

/// Chat Completions clients' captured requests: the client, the fixture, the user's words as
/// captured. The Vercel AI SDK's is the second step of a tool call (`[system, user,
/// assistant(tool_calls), tool]`); Continue CLI's has its system prompt and nine tools; Open
/// WebUI's has no system prompt and 36 built-in tools.
const CHAT_CLIENTS: [(&str, &str, &str); 3] = [
    (
        "vercel-ai",
        include_str!("../fixtures/clients/vercel-ai-7.0.173.json"),
        "I live in Lisbon. What is the weather like here?",
    ),
    (
        "continue",
        include_str!("../fixtures/clients/continue-cli-1.5.47.json"),
        "My favourite colour is teal.",
    ),
    (
        "open-webui",
        include_str!("../fixtures/clients/open-webui-0.12.4.json"),
        "My dog is called Rexford.",
    ),
];

async fn send_chat(h: &Harness, mode: &str, user: &str, body: &Value) -> reqwest::Response {
    h.client
        .post(h.url(&format!("/{mode}/v1/chat/completions")))
        .header("x-memproxy-user", user)
        .json(body)
        .send()
        .await
        .expect("answer")
}

/// The messages of `sent` that are not the user's or system's: the assistant's tool calls and
/// the tools' results, which must reach the upstream exactly as the client sent them.
fn tool_traffic(messages: &[Value]) -> Vec<Value> {
    messages
        .iter()
        .filter(|m| m["role"] == "tool" || m.get("tool_calls").is_some())
        .map(|m| {
            json!({"role": m["role"], "tool_call_id": m["tool_call_id"],
            "tool_calls": m["tool_calls"], "content": m["content"]})
        })
        .collect()
}

#[tokio::test]
async fn chat_clients_keep_their_tools_and_tool_results_in_every_strategy_and_recall() {
    let h = harness_with(|c| c.memory.extraction_debounce = Duration::ZERO).await;
    for (client, fixture, told) in CHAT_CLIENTS {
        let body = captured_saying(fixture, "messages", told, "My dog is called Rexford.");
        let system = body["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|m| m["role"] == "system")
            .and_then(|m| m["content"].as_str());
        let kept: String = system.unwrap_or_default().chars().take(40).collect();
        for mode in ["passthrough", "window", "summary", "implicit"] {
            let response = send_chat(&h, mode, client, &body).await;
            let status = response.status();
            assert_eq!(status, 200, "{client} {mode}: {:?}", response.text().await);
            let messages = sent_messages(&h, "/v1/chat/completions");
            assert_reaches(
                &messages,
                "My dog is called Rexford.",
                &kept,
                &format!("{client} {mode}"),
            );
            let sent = h.mock.chat_requests(None).pop().unwrap_or(Value::Null);
            assert_eq!(
                sent["tools"], body["tools"],
                "{client} {mode}: the tools changed on the way"
            );
            assert_eq!(
                tool_traffic(&messages),
                tool_traffic(body["messages"].as_array().map_or(&[][..], Vec::as_slice)),
                "{client} {mode}: tool calls or results changed on the way"
            );
        }
        eventually("the fact is stored", || async {
            memories(&h, client)
                .await
                .iter()
                .any(|m| m.contains("Rexford"))
        })
        .await;
        let later = captured_saying(fixture, "messages", told, "What is my dog called?");
        let response = send_chat(&h, "implicit", client, &later).await;
        assert_eq!(response.status(), 200);
        let messages = sent_messages(&h, "/v1/chat/completions");
        assert_reaches(&messages, "What is my dog called?", &kept, client);
        let all: String = messages.iter().map(text_of).collect::<Vec<_>>().join("\n");
        assert!(
            all.contains("<memory>") && all.contains("Rexford"),
            "{client}: no memory injected"
        );
    }
}

/// Open WebUI's own tasks beside the chat: each quotes the chat so far in one user message.
const OPEN_WEBUI_TASKS: [&str; 2] = [
    include_str!("../fixtures/clients/open-webui-0.12.4-title.json"),
    include_str!("../fixtures/clients/open-webui-0.12.4-follow-ups.json"),
];

#[tokio::test]
async fn open_webuis_title_and_follow_up_tasks_are_relayed_as_they_are_and_not_remembered() {
    let h = harness_with(|c| c.memory.extraction_debounce = Duration::ZERO).await;
    for mode in ["implicit", "explicit", "summary"] {
        for fixture in OPEN_WEBUI_TASKS {
            let body = serde_json::from_str::<Value>(fixture).expect("fixture")["body"].clone();
            let response = send_chat(&h, mode, "owui-user", &body).await;
            assert_eq!(response.status(), 200, "{mode}");
            assert_eq!(
                response.headers()["x-memproxy-mode"],
                "passthrough",
                "{mode}: a client's task is served as passthrough"
            );
            let sent = h.mock.chat_requests(None).pop().unwrap_or(Value::Null);
            assert_eq!(
                sent["messages"], body["messages"],
                "{mode}: the task reached the upstream changed"
            );
        }
    }
    // Nothing of the quoted chat was stored as the user's: a turn of the user's own after the
    // tasks is remembered, and it alone.
    let told = json!({"model": "mock-model",
        "messages": [{"role": "user", "content": "I live in Lisbon."}]});
    assert_eq!(
        send_chat(&h, "implicit", "owui-user", &told).await.status(),
        200
    );
    eventually("the user's own fact is stored", || async {
        memories(&h, "owui-user")
            .await
            .iter()
            .any(|m| m.contains("Lisbon"))
    })
    .await;
    let stored = memories(&h, "owui-user").await;
    assert!(
        stored
            .iter()
            .all(|m| !m.contains("Rexford") && !m.contains("Task")),
        "a task's quoted chat was stored: {stored:?}"
    );
}
