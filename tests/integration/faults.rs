//! Faults injected at the upstream (issue 14), through every API surface in implicit mode: a
//! connection reset before the headers or mid-body, a stall before the first byte or mid-stream,
//! a truncated or invalid stream, an invalid JSON body, a 200 carrying an error, a 429 with
//! retry-after, a storm of 5xx, and a memory LLM that is very slow while the chat model is not.
//! For each: the client gets a clear error in its API's shape within the configured timeouts, and
//! memory stays consistent: the turns the client sent are kept, no half answer is stored, and a
//! retry that succeeds leaves exactly one copy of every turn.

use std::time::Duration;

use memproxy::mock::Reply;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::common::*;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Surface {
    Chat,
    Responses,
    Messages,
}

const SURFACES: [(Surface, bool); 6] = [
    (Surface::Chat, false),
    (Surface::Chat, true),
    (Surface::Responses, false),
    (Surface::Responses, true),
    (Surface::Messages, false),
    (Surface::Messages, true),
];

/// The request of the second turn on `surface` (the first exchange as history).
fn second_turn(surface: Surface, stream: bool, said: &str) -> (&'static str, Value) {
    let (path, mut body) = match surface {
        Surface::Chat => (
            "/implicit/v1/chat/completions",
            json!({"model": "mock-model", "messages": [
            {"role": "user", "content": "I keep bees in Braga."},
            {"role": "assistant", "content": "Lovely!"},
            {"role": "user", "content": said}]}),
        ),
        Surface::Responses => (
            "/implicit/v1/responses",
            json!({"model": "mock-model", "store": false, "input": [
            {"role": "user", "content": "I keep bees in Braga."},
            {"role": "assistant", "content": "Lovely!"},
            {"role": "user", "content": said}]}),
        ),
        Surface::Messages => (
            "/implicit/v1/messages",
            json!({"model": "mock-model", "max_tokens": 64, "messages": [
            {"role": "user", "content": "I keep bees in Braga."},
            {"role": "assistant", "content": "Lovely!"},
            {"role": "user", "content": said}]}),
        ),
    };
    if stream {
        body["stream"] = json!(true);
    }
    (path, body)
}

async fn send(
    h: &Harness,
    user: &str,
    surface: Surface,
    stream: bool,
    said: &str,
) -> reqwest::Response {
    let (path, body) = second_turn(surface, stream, said);
    let request = h
        .client
        .post(h.url(path))
        .header("x-memproxy-user", user)
        .header("x-memproxy-conversation", "c")
        .header("anthropic-version", "2023-06-01")
        .json(&body)
        .send();
    tokio::time::timeout(Duration::from_secs(20), request)
        .await
        .unwrap_or_else(|_| panic!("{surface:?} stream={stream} ({said}): no headers within 20 s"))
        .expect("an answer")
}

/// The whole body, read within 20 s (a hang fails the test).
async fn body_of(response: reqwest::Response, what: &str) -> String {
    tokio::time::timeout(Duration::from_secs(20), response.text())
        .await
        .unwrap_or_else(|_| panic!("{what}: the body did not end within 20 s"))
        .unwrap_or_default()
}

/// The error a client of `surface` sees: a refusal in its API's shape, or (for a stream already
/// under way) a last event that is an error in its API's shape. Returns the error's text.
async fn assert_clear_failure(
    response: reqwest::Response,
    surface: Surface,
    stream: bool,
) -> String {
    let what = format!("{surface:?} stream={stream}");
    let status = response.status().as_u16();
    let text = body_of(response, &what).await;
    if status >= 400 {
        let body: Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{what}: a {status} that is not JSON ({e}): {text}"));
        match surface {
            Surface::Messages => {
                assert_eq!(body["type"], "error", "{what}: {text}");
                assert!(
                    body["error"]["message"]
                        .as_str()
                        .is_some_and(|m| !m.is_empty()),
                    "{what}: {text}"
                );
            }
            _ => assert!(
                body["error"]["message"]
                    .as_str()
                    .is_some_and(|m| !m.is_empty()),
                "{what}: {text}"
            ),
        }
        return text;
    }
    assert!(stream, "{what}: a {status} for a failed upstream: {text}");
    let last = text
        .trim_end()
        .rsplit("\n\n")
        .next()
        .unwrap_or_default()
        .to_owned();
    let data = last
        .lines()
        .find_map(|l| l.strip_prefix("data: "))
        .unwrap_or_default();
    let event: Value =
        serde_json::from_str(data).unwrap_or_else(|e| panic!("{what}: last event {last:?}: {e}"));
    match surface {
        Surface::Chat => assert!(event["error"]["message"].is_string(), "{what}: {last}"),
        Surface::Responses => assert!(
            event["type"] == "error" || event["type"] == "response.failed",
            "{what}: {last}"
        ),
        Surface::Messages => assert_eq!(event["type"], "error", "{what}: {last}"),
    }
    last
}

/// The turns stored for `user`'s conversation, `role: content`, in order (replaced ones left out).
async fn stored_turns(h: &Harness, user: &str) -> Vec<String> {
    let export = get_text(h, &format!("/memproxy/v1/users/{user}/export")).await;
    export
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|l| l["type"] == "message" && l["superseded"] != true)
        .map(|l| {
            format!(
                "{}: {}",
                l["role"].as_str().unwrap_or(""),
                l["content"].as_str().unwrap_or("")
            )
        })
        .collect()
}

const FIRST: [&str; 2] = ["user: I keep bees in Braga.", "assistant: Lovely!"];

/// What the log must hold after a failed second turn: the client's turns, nothing of the answer.
async fn assert_no_half_turn(h: &Harness, user: &str, said: &str, what: &str) {
    // The pre-processor's write is done before the upstream is called; wait for nothing else.
    let turns = stored_turns(h, user).await;
    let expected = [FIRST[0], FIRST[1], &format!("user: {said}")].map(str::to_owned);
    assert_eq!(turns, expected, "{what}: the log after a failed turn");
}

fn faulty(c: &mut memproxy::config::Config) {
    c.upstream.first_byte_timeout = Duration::from_millis(500);
    c.upstream.idle_timeout = Duration::from_millis(500);
}

/// The faults the scripted upstream makes, by name.
fn scripted_faults() -> Vec<(&'static str, Reply)> {
    let half = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Half\"}}]}\n\n";
    let json = |body: &str| Reply::Raw {
        status: 200,
        content_type: "application/json".into(),
        body: body.into(),
    };
    let error = |status: u16, message: &str, headers: Vec<(String, String)>| Reply::Error {
        status,
        message: message.into(),
        headers,
    };
    vec![
        (
            "stall before the first byte",
            Reply::Stall(
                Duration::from_secs(30),
                Box::new(Reply::Text("late".into())),
            ),
        ),
        (
            "stall mid-stream",
            Reply::StallingStream(vec!["Half an ".into()]),
        ),
        (
            "reset mid-stream",
            Reply::BrokenStream(vec!["Half an ".into(), "answer".into()]),
        ),
        (
            "invalid SSE, no end",
            Reply::RawStream(vec![half.into(), "data: {not json at all\n\n".into()]),
        ),
        (
            "an error inside the stream",
            Reply::RawStream(vec![
                half.into(),
                "data: {\"error\":{\"message\":\"overloaded\",\"type\":\"server_error\"}}\n\n"
                    .into(),
            ]),
        ),
        ("invalid JSON body", json("{\"id\": \"x\", \"choi")),
        (
            "200 carrying an error",
            json("{\"error\":{\"message\":\"model overloaded\",\"type\":\"server_error\"}}"),
        ),
        (
            "429 with retry-after",
            error(429, "Slow down.", vec![("retry-after".into(), "7".into())]),
        ),
        ("503", error(503, "Overloaded.", vec![])),
    ]
}

/// Scripted faults: each on every surface, then a retry that succeeds.
#[tokio::test]
async fn scripted_upstream_faults_give_clear_errors_and_leave_memory_consistent() {
    let h = harness_with(faulty).await;
    let faults = scripted_faults();
    let mut n = 0;
    for (fault, reply) in &faults {
        for (surface, stream) in SURFACES {
            n += 1;
            let user = format!("fault-{n}");
            let what = format!("{fault}, {surface:?} stream={stream}");
            let said = format!("Fault case {n}: what do I keep?");
            h.mock.push(reply.clone());
            let response = send(&h, &user, surface, stream, &said).await;
            let status = response.status().as_u16();
            let retry_after = response.headers().get("retry-after").cloned();
            let error = assert_clear_failure(response, surface, stream).await;
            if *fault == "429 with retry-after" {
                assert_eq!(status, 429, "{what}: {error}");
                assert_eq!(
                    retry_after.as_ref().map(|v| v.as_bytes()),
                    Some(&b"7"[..]),
                    "{what}"
                );
                if surface == Surface::Messages {
                    assert!(error.contains("rate_limit_error"), "{what}: {error}");
                }
            }
            assert_no_half_turn(&h, &user, &said, &what).await;
            // The client retries; the upstream answers this time.
            let retry = send(&h, &user, surface, stream, &said).await;
            assert_eq!(retry.status(), 200, "{what}: the retry");
            let answer = body_of(retry, &what).await;
            let mut expected: Vec<String> = FIRST.iter().map(|t| (*t).to_owned()).collect();
            expected.push(format!("user: {said}"));
            eventually(
                &format!("{what}: the retry's answer is stored once"),
                || async {
                    let turns = stored_turns(&h, &user).await;
                    turns.len() == 4
                        && turns[..3] == expected[..]
                        && turns[3].starts_with("assistant: ")
                },
            )
            .await;
            assert!(!answer.is_empty());
        }
    }
    assert_eq!(
        h.client
            .get(h.url("/healthz"))
            .send()
            .await
            .expect("health")
            .status(),
        200
    );
}

/// A storm of 5xx: every request relayed as the error it is, the server unharmed, nothing stored
/// of any answer, and the next request served.
#[tokio::test]
async fn a_storm_of_server_errors_is_relayed_and_survived() {
    let h = harness_with(faulty).await;
    for _ in 0..60 {
        h.mock.push(Reply::Error {
            status: 502,
            message: "Bad gateway.".into(),
            headers: vec![],
        });
    }
    let requests = (0..60).map(|i| {
        let (surface, stream) = SURFACES[i % SURFACES.len()];
        let h = &h;
        async move {
            let response = send(h, &format!("storm-{i}"), surface, stream, "Storm?").await;
            assert_eq!(response.status(), 502, "{surface:?} stream={stream}");
            assert_clear_failure(response, surface, stream).await;
        }
    });
    futures_util::future::join_all(requests).await;
    for i in 0..60 {
        assert_no_half_turn(&h, &format!("storm-{i}"), "Storm?", "storm").await;
    }
    let after = send(&h, "storm-after", Surface::Chat, false, "Still there?").await;
    assert_eq!(after.status(), 200);
}

/// Raw TCP faults the scripted upstream cannot make: the connection reset (RST) right after the
/// request arrives, or after a response head promising more body than comes.
#[derive(Clone, Copy, Debug)]
enum Cut {
    BeforeHeaders,
    MidBody,
}

async fn cutting_upstream(cut: Cut) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buffer = [0u8; 4096];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match socket.read(&mut buffer).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buffer[..n]),
                    }
                }
                if let Cut::MidBody = cut {
                    let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 4000\r\n\r\n{\"id\":\"chatcmpl-1\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"Half";
                    let _ = socket.write_all(head.as_bytes()).await;
                    let _ = socket.flush().await;
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                // A zero linger makes the close a reset (RST); with zero it does not block.
                #[allow(deprecated)]
                let _ = socket.set_linger(Some(Duration::ZERO));
                drop(socket);
            });
        }
    });
    format!("http://{addr}/v1")
}

#[tokio::test]
async fn connection_resets_give_clear_errors_and_leave_memory_consistent() {
    for cut in [Cut::BeforeHeaders, Cut::MidBody] {
        let url = cutting_upstream(cut).await;
        let h = harness_with(|c| {
            faulty(c);
            c.upstream.url = url;
        })
        .await;
        for (n, (surface, stream)) in SURFACES.into_iter().enumerate() {
            let user = format!("reset-{n}");
            let what = format!("{cut:?}, {surface:?} stream={stream}");
            let response = send(&h, &user, surface, stream, "Are you there?").await;
            let status = response.status().as_u16();
            let error = assert_clear_failure(response, surface, stream).await;
            assert!(status == 502 || status == 200, "{what}: {status} {error}");
            assert_no_half_turn(&h, &user, "Are you there?", &what).await;
        }
    }
}

/// A memory LLM that takes 30 s per answer: chat answers do not wait for it, and the extraction
/// it owes is still queued (not lost) when the chat is long done.
#[tokio::test]
async fn a_slow_memory_llm_never_slows_the_chat() {
    let h = harness_with(|c| c.memory.extraction_debounce = Duration::ZERO).await;
    for _ in 0..4 {
        h.mock.push_marked(
            "MEMPROXY-EXTRACT",
            Reply::Stall(
                Duration::from_secs(30),
                Box::new(facts(&["The user keeps bees."])),
            ),
        );
    }
    for i in 0..4 {
        let said = format!("Turn {i}: I keep bees.");
        let request = implicit_chat(&h, "slow-llm", json!([{"role": "user", "content": said}]));
        // Functional bound: the memory LLM stalls for 30 s, the chat must not.
        let response = tokio::time::timeout(Duration::from_secs(10), request)
            .await
            .expect("the chat answered while the memory LLM stalled");
        assert_eq!(response.status(), 200);
    }
    eventually(
        "an extraction job is running against the stalled memory LLM",
        || async {
            let jobs = get_json(&h, "/memproxy/v1/jobs?state=running").await;
            jobs["data"].as_array().is_some_and(|j| !j.is_empty())
        },
    )
    .await;
}

/// The agent log of `user`'s default agent as `role: content` lines.
async fn agent_log(h: &Harness, user: &str) -> Vec<String> {
    let log = get_json(
        h,
        &format!("/memproxy/v1/users/{user}/agents/default/messages?limit=1000"),
    )
    .await;
    log["data"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| {
            format!(
                "{}: {}",
                m["role"].as_str().unwrap_or(""),
                m["content"].as_str().unwrap_or("")
            )
        })
        .collect()
}

/// Explicit mode: a fault in any step of the agent's turn is a clear error to the client, and
/// the agent's log keeps nothing of the failed turn's answer; the retried turn is there once.
#[tokio::test]
async fn faults_in_an_explicit_turn_leave_the_agent_log_consistent() {
    let h = harness_with(faulty).await;
    let wanted = [
        "stall before the first byte",
        "reset mid-stream",
        "invalid JSON body",
        "429 with retry-after",
        "503",
    ];
    let faults = scripted_faults()
        .into_iter()
        .filter(|(name, _)| wanted.contains(name));
    for (n, (fault, reply)) in faults.into_iter().enumerate() {
        for stream in [false, true] {
            let user = format!("xf-{n}-{stream}");
            let mut body = json!({"model": "mock-model", "messages": [{"role": "user", "content": "I keep bees in Braga."}]});
            if stream {
                body["stream"] = json!(true);
            }
            let turn = |body: &Value| {
                h.client
                    .post(h.url("/explicit/v1/chat/completions"))
                    .header("x-memproxy-user", &user)
                    .json(body)
                    .send()
            };
            let first = turn(&body).await.expect("answer");
            assert_eq!(first.status(), 200, "{fault}");
            body_of(first, fault).await;
            let before = agent_log(&h, &user).await;
            h.mock.push(reply.clone());
            body["messages"] = json!([{"role": "user", "content": "I keep bees in Braga."}, {"role": "assistant", "content": "ok"},
                {"role": "user", "content": "What do I keep?"}]);
            let failed = tokio::time::timeout(Duration::from_secs(20), turn(&body))
                .await
                .expect("no hang")
                .expect("answer");
            assert_clear_failure(failed, Surface::Chat, stream).await;
            // A turn is saved whole or not at all: the failed one left nothing.
            assert_eq!(
                agent_log(&h, &user).await,
                before,
                "{fault} stream={stream}"
            );
            let retry = turn(&body).await.expect("answer");
            assert_eq!(retry.status(), 200, "{fault}: the retry");
            body_of(retry, fault).await;
            let after = agent_log(&h, &user).await;
            let asked = after
                .iter()
                .filter(|l| l.starts_with("user: ") && l.contains("What do I keep?"))
                .count();
            assert_eq!(asked, 1, "{fault} stream={stream}: {after:#?}");
            // The app's "ok" is not the reply the agent gave: it is recorded as said, once.
            assert_eq!(
                after.len(),
                before.len() + 3,
                "{fault} stream={stream}: {after:#?}"
            );
            assert_eq!(
                after.iter().filter(|l| *l == "assistant: ok").count(),
                1,
                "{fault} stream={stream}: {after:#?}"
            );
        }
    }
}
