//! Keys never leave where they belong: after chats on every API (one of them in explicit mode,
//! with its step trace), refused keys, stored responses, memory jobs and an upstream whose URL
//! carries credentials, no answer, header, export, trace, event, `/readyz` or `/metrics` holds a
//! proxy key, the admin key, the upstream key, the memory LLM's key or the URL's password, nor
//! does any file in the data directory (the database, the vector indexes). The upstream gets only
//! the key meant for it. `scripts/test` also searches the logs of the whole run for every test key.

use std::time::Duration;

use memproxy::config::Secret;
use serde_json::{json, Value};

use crate::common::{closed_port_url, eventually, harness_with, on_postgres, Harness};

const PROXY_KEY: &str = "sec-proxy-key-41";
const ADMIN_KEY: &str = "sec-admin-key-42";
const WRONG_KEY: &str = "sec-wrong-key-43";
const UPSTREAM_KEY: &str = "sk-sec-upstream-44";
const MEMORY_KEY: &str = "sk-sec-memory-45";
const URL_PASSWORD: &str = "sec-url-pass-46";
const ALL: [&str; 6] = [
    PROXY_KEY,
    ADMIN_KEY,
    WRONG_KEY,
    UPSTREAM_KEY,
    MEMORY_KEY,
    URL_PASSWORD,
];

/// What the client saw: status line, headers and body of every answer.
#[derive(Default)]
struct Seen(Vec<String>);

impl Seen {
    async fn send(&mut self, request: reqwest::RequestBuilder) -> (u16, String) {
        let response = request.send().await.expect("answer");
        let status = response.status().as_u16();
        let headers = format!("{:?}", response.headers());
        let body = response.text().await.expect("body");
        self.0.push(format!("{status} {headers} {body}"));
        (status, body)
    }

    fn assert_clean(&self) {
        for seen in &self.0 {
            for key in ALL {
                assert!(!seen.contains(key), "{key} in an answer: {seen}");
            }
        }
    }
}

fn as_ana(h: &Harness, path: &str, key: &str) -> reqwest::RequestBuilder {
    h.client
        .post(h.url(path))
        .bearer_auth(key)
        .header("x-memproxy-user", "ana")
}

#[tokio::test]
async fn no_key_reaches_an_answer_a_trace_an_export_or_the_data_directory() {
    let h = harness_with(|c| {
        c.auth.api_keys = vec![Secret::new(format!("acme:{PROXY_KEY}"))];
        c.auth.admin_key = Some(Secret::new(ADMIN_KEY));
        c.upstream.api_key = Some(Secret::new(UPSTREAM_KEY));
        c.memory.llm.api_key = Some(Secret::new(MEMORY_KEY));
        c.memory.extraction_debounce = Duration::ZERO;
    })
    .await;
    let mut seen = Seen::default();
    let said = json!([{"role": "user", "content": "My locker code is 4471 and I cycle to work."}]);
    let chat = json!({"model": "mock-model", "messages": said});
    let (status, _) = seen
        .send(as_ana(&h, "/implicit/v1/chat/completions", PROXY_KEY).json(&chat))
        .await;
    assert_eq!(status, 200);
    let mut streamed = chat.clone();
    streamed["stream"] = json!(true);
    seen.send(as_ana(&h, "/implicit/v1/chat/completions", PROXY_KEY).json(&streamed))
        .await;
    let (status, _) = seen
        .send(as_ana(&h, "/implicit/v1/chat/completions", WRONG_KEY).json(&chat))
        .await;
    assert_eq!(status, 401);
    let (status, body) = seen
        .send(
            as_ana(&h, "/implicit/v1/responses", PROXY_KEY)
                .json(&json!({"model": "mock-model", "input": "I have two cats.", "store": true})),
        )
        .await;
    assert_eq!(status, 200);
    let id = serde_json::from_str::<Value>(&body).expect("json")["id"]
        .as_str()
        .map(str::to_owned)
        .expect("id");
    seen.send(
        h.client
            .get(h.url(&format!("/v1/responses/{id}")))
            .bearer_auth(PROXY_KEY)
            .header("x-memproxy-user", "ana"),
    )
    .await;
    let (status, _) = seen
        .send(
            h.client
                .post(h.url("/implicit/v1/messages"))
                .header("x-api-key", PROXY_KEY)
                .header("x-memproxy-user", "ana")
                .json(&json!({"model": "mock-model", "max_tokens": 20, "messages": said})),
        )
        .await;
    assert_eq!(status, 200);
    let (status, _) = seen
        .send(
            as_ana(&h, "/explicit/v1/chat/completions", PROXY_KEY)
                .header("x-memproxy-agent", "clerk")
                .json(&json!({"model": "mock-archivist", "messages": said})),
        )
        .await;
    assert_eq!(status, 200);
    eventually("the memory jobs ran", || async {
        let jobs: Value = h
            .client
            .get(h.url("/memproxy/v1/jobs?state=done"))
            .bearer_auth(ADMIN_KEY)
            .header("x-memproxy-tenant", "acme")
            .send()
            .await
            .expect("answer")
            .json()
            .await
            .expect("json");
        jobs["data"].as_array().is_some_and(|jobs| jobs.len() >= 2)
    })
    .await;
    for path in [
        "/memproxy/v1/users/ana/export",
        "/memproxy/v1/users/ana/events",
        "/memproxy/v1/users/ana/memories",
        "/memproxy/v1/users/ana/agents/clerk/steps",
        "/memproxy/v1/users/ana/agents/clerk",
        "/memproxy/v1/jobs",
        "/memproxy/v1/check",
        "/readyz",
        "/metrics",
    ] {
        let (status, _) = seen
            .send(
                h.client
                    .get(h.url(path))
                    .bearer_auth(ADMIN_KEY)
                    .header("x-memproxy-tenant", "acme"),
            )
            .await;
        assert_eq!(status, 200, "{path}");
    }
    let export = seen.0.iter().find(|s| s.contains("memproxy-export"));
    assert!(
        export.is_some_and(|e| e.contains("4471") && e.contains("\"type\":\"memory\"")),
        "the export holds the chat and what memory learned"
    );
    seen.assert_clean();

    // The upstream got its own key, the memory LLM its own, and never the proxy's.
    for received in h.mock.requests() {
        let text = format!(
            "{:?} {}",
            received.headers,
            String::from_utf8_lossy(&received.body)
        );
        for key in [PROXY_KEY, ADMIN_KEY, WRONG_KEY] {
            assert!(!text.contains(key), "{key} went upstream: {text}");
        }
    }
    let memory_calls = h.mock.chat_requests(Some("MEMPROXY-EXTRACT")).len();
    assert!(memory_calls > 0, "the memory LLM was called");

    // Nothing on disk holds a key either.
    let data = h.data.path().to_owned();
    h.proxy.shutdown().await;
    let mut files = 0;
    for entry in walk(&data) {
        let bytes = std::fs::read(&entry).expect("read");
        files += 1;
        for key in ALL {
            assert!(
                !bytes.windows(key.len()).any(|w| w == key.as_bytes()),
                "{key} stored in {}",
                entry.display()
            );
        }
    }
    // On PostgreSQL the memory is in the database (checked through the export above) and the
    // remote embedder leaves no files.
    assert!(files > 0 || on_postgres(), "the data directory has files");
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(walk(&path));
        } else {
            found.push(path);
        }
    }
    found
}

#[tokio::test]
async fn an_upstream_url_with_credentials_is_not_shown_when_it_fails() {
    let closed = closed_port_url().await;
    let with_password = closed.replace("http://", &format!("http://ops:{URL_PASSWORD}@"));
    let h = harness_with(|c| c.upstream.url = with_password).await;
    let mut seen = Seen::default();
    let (status, body) = seen
        .send(
            h.client
                .post(h.url("/v1/chat/completions"))
                .json(&json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]})),
        )
        .await;
    assert_eq!(status, 502, "{body}");
    assert!(body.contains("upstream_unreachable"), "{body}");
    let (status, _) = seen
        .send(h.client
                .post(h.url("/v1/messages"))
                .json(&json!({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]})))
        .await;
    assert_eq!(status, 502);
    seen.send(h.client.get(h.url("/readyz"))).await;
    seen.assert_clean();
}
