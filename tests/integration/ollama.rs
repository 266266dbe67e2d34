//! Ollama's own API over real HTTP: translated to the scripted Chat Completions upstream, or
//! relayed to the scripted Ollama server (`[upstream.ollama]`); one memory across APIs and
//! isolated per user, explicit mode with the client's tools, NDJSON streams, images, and errors
//! in Ollama's shape. (The official `ollama` client runs in `sdk.rs`.)

use std::time::Duration;

use memproxy::config::Secret;
use memproxy::upstream::ApiUpstream;
use serde_json::{json, Value};

use crate::common::{eventually, harness_with, implicit_chat, memories, Harness};
use crate::explicit::{call, send};

async fn ollama(h: &Harness, path: &str, user: &str, body: Value) -> reqwest::Response {
    h.client
        .post(h.url(path))
        .header("x-memproxy-user", user)
        .json(&body)
        .send()
        .await
        .expect("answer")
}

fn ask(text: &str) -> Value {
    json!({"model": "llama-test", "stream": false,
           "messages": [{"role": "user", "content": text}]})
}

/// The NDJSON lines of a streamed answer, each one JSON object.
async fn lines(response: reqwest::Response) -> Vec<Value> {
    assert_eq!(response.headers()["content-type"], "application/x-ndjson");
    let text = response.text().await.expect("body");
    text.lines()
        .map(|line| serde_json::from_str(line).expect("one JSON object per line"))
        .collect()
}

/// The newest chat the scripted Ollama server got.
fn ollama_server_got(h: &Harness) -> Value {
    h.mock
        .requests()
        .into_iter()
        .rfind(|r| r.path_and_query == "/api/chat")
        .expect("relayed to the Ollama server")
        .json()
}

fn ollama_upstream(c: &mut memproxy::config::Config) {
    let root = c.upstream.url.trim_end_matches("/v1").to_owned();
    c.upstream.ollama = Some(ApiUpstream {
        url: root,
        ..ApiUpstream::default()
    });
}

#[tokio::test]
async fn a_fact_told_over_ollama_is_recalled_over_chat_completions_and_back_for_that_user_only() {
    let h = harness_with(|c| c.memory.extraction_debounce = Duration::ZERO).await;
    let told = ollama(
        &h,
        "/implicit/api/chat",
        "mira",
        ask("My dog is called Pixel."),
    )
    .await;
    assert_eq!(told.status(), 200);
    assert_eq!(told.headers()["x-memproxy-mode"], "implicit");
    let body: Value = told.json().await.expect("json");
    assert_eq!(body["model"], "llama-test");
    assert_eq!(body["message"]["content"], "echo: My dog is called Pixel.");
    assert_eq!(body["done"], true);
    assert_eq!(body["done_reason"], "stop");
    eventually("the fact is extracted", || async {
        memories(&h, "mira")
            .await
            .iter()
            .any(|m| m.contains("Pixel"))
    })
    .await;

    let asked = implicit_chat(
        &h,
        "mira",
        json!([{"role": "user", "content": "What is my dog called?"}]),
    )
    .await;
    assert_eq!(asked.status(), 200);
    let seen = h.mock.chat_requests(None).last().cloned().expect("request");
    assert!(seen.to_string().contains("Pixel"), "injected: {seen}");

    // Back over Ollama's API, streamed as Ollama streams by default; another user sees none of it.
    let mut streamed = ask("Where does my dog sleep?");
    streamed.as_object_mut().map(|o| o.remove("stream"));
    let answer = ollama(&h, "/implicit/api/chat", "mira", streamed.clone()).await;
    let got = lines(answer).await;
    assert_eq!(got.last().map(|l| l["done"].clone()), Some(json!(true)));
    let seen = h.mock.chat_requests(None).last().cloned().expect("request");
    assert!(seen.to_string().contains("Pixel"), "injected: {seen}");
    ollama(&h, "/implicit/api/chat", "other", streamed).await;
    let seen = h.mock.chat_requests(None).last().cloned().expect("request");
    assert!(!seen.to_string().contains("Pixel"), "isolated: {seen}");
    assert!(memories(&h, "other")
        .await
        .iter()
        .all(|m| !m.contains("Pixel")));
}

#[tokio::test]
async fn explicit_mode_runs_its_loop_and_hands_the_clients_own_tool_call_back_in_ollama_shape() {
    let h = harness_with(|_| {}).await;
    h.mock.push(send("Hello from the agent."));
    let whole = ollama(&h, "/explicit/api/chat", "eli", ask("Hi, I am Eli.")).await;
    assert_eq!(whole.status(), 200);
    assert_eq!(whole.headers()["x-memproxy-mode"], "explicit");
    let body: Value = whole.json().await.expect("json");
    assert_eq!(body["message"]["content"], "Hello from the agent.");

    // The client's own tool: the agent calls it, the client gets Ollama's tool call, streamed.
    h.mock.push(call("get_weather", json!({"city": "Lisbon"})));
    let tools = json!([{"type": "function", "function": {"name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]);
    let asked = json!({"model": "llama-test", "tools": tools,
        "messages": [{"role": "user", "content": "Weather in Lisbon?"}]});
    let got = lines(ollama(&h, "/explicit/api/chat", "eli", asked).await).await;
    let calls: Vec<&Value> = got
        .iter()
        .filter_map(|l| l["message"]["tool_calls"].as_array())
        .flatten()
        .collect();
    assert_eq!(calls.len(), 1, "{got:?}");
    assert_eq!(calls[0]["function"]["name"], "get_weather");
    assert_eq!(calls[0]["function"]["arguments"], json!({"city": "Lisbon"}));
    let offered = h.mock.chat_requests(None).last().cloned().expect("request");
    assert!(offered["tools"]
        .as_array()
        .is_some_and(|t| t.iter().any(|t| t["function"]["name"] == "get_weather")));

    // Its result goes back as Ollama's clients send it, by tool name, and the agent answers.
    h.mock.push(send("It is sunny in Lisbon."));
    let followed = json!({"model": "llama-test", "stream": false, "tools": tools, "messages": [
        {"role": "user", "content": "Weather in Lisbon?"},
        {"role": "assistant", "content": "", "tool_calls": [calls[0].clone()]},
        {"role": "tool", "tool_name": "get_weather", "content": "24 degrees, sunny"}]});
    let answer = ollama(&h, "/explicit/api/chat", "eli", followed).await;
    let body: Value = answer.json().await.expect("json");
    assert_eq!(body["message"]["content"], "It is sunny in Lisbon.");
    let seen = h.mock.chat_requests(None).last().cloned().expect("request");
    assert!(seen.to_string().contains("24 degrees, sunny"), "{seen}");
}

#[tokio::test]
async fn images_generate_and_options_reach_a_chat_completions_upstream_translated() {
    let h = harness_with(|_| {}).await;
    let png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk";
    let asked = json!({"model": "llava", "stream": false, "options": {"num_predict": 32,
        "temperature": 0.3, "num_ctx": 2048}, "keep_alive": "10m",
        "messages": [{"role": "user", "content": "What is this?", "images": [png]}]});
    let answer = ollama(&h, "/passthrough/api/chat", "ida", asked).await;
    assert_eq!(answer.status(), 200);
    let seen = h.mock.chat_requests(None).last().cloned().expect("request");
    assert_eq!(seen["max_tokens"], 32);
    assert_eq!(seen["temperature"], 0.3);
    assert!(seen.get("num_ctx").is_none() && seen.get("keep_alive").is_none());
    let url = &seen["messages"][0]["content"][1]["image_url"]["url"];
    assert_eq!(url, &json!(format!("data:image/png;base64,{png}")));

    let generated = json!({"model": "m", "prompt": "Why is the sky blue?", "system": "Short."});
    let got = lines(ollama(&h, "/passthrough/api/generate", "ida", generated).await).await;
    let text: String = got.iter().filter_map(|l| l["response"].as_str()).collect();
    assert_eq!(text, "echo: Why is the sky blue?");
    assert!(got.iter().all(|l| l.get("message").is_none()));
    let seen = h.mock.chat_requests(None).last().cloned().expect("request");
    assert_eq!(
        seen["messages"][0],
        json!({"role": "system", "content": "Short."})
    );

    // A request with nothing to say only loads the model, as Ollama answers it.
    let loaded = ollama(
        &h,
        "/api/chat",
        "ida",
        json!({"model": "m", "messages": []}),
    )
    .await;
    let body: Value = loaded.json().await.expect("json");
    assert_eq!(
        (body["done"].clone(), body["done_reason"].clone()),
        (json!(true), json!("load"))
    );
    let version: Value = h
        .client
        .get(h.url("/api/version"))
        .send()
        .await
        .expect("answer")
        .json()
        .await
        .expect("json");
    assert!(version["version"].as_str().is_some_and(|v| v.contains('.')));
}

#[tokio::test]
async fn errors_come_back_in_ollama_shape_with_their_statuses() {
    let h = harness_with(|c| {
        c.auth.api_keys = vec![Secret::new("mp-key")];
        c.server.max_body_bytes = 4096;
    })
    .await;
    let post = |path: &'static str, body: String, key: Option<&'static str>| {
        let mut request = h
            .client
            .post(h.url(path))
            .header("content-type", "application/json")
            .body(body);
        if let Some(key) = key {
            request = request.bearer_auth(key);
        }
        request.send()
    };
    let hi = ask("hi").to_string();
    let cases: Vec<(&str, String, Option<&str>, u16, &str)> = vec![
        ("/api/chat", hi.clone(), None, 401, "key"),
        ("/api/chat", "{".into(), Some("mp-key"), 400, "JSON"),
        (
            "/api/chat",
            json!({"messages": []}).to_string(),
            Some("mp-key"),
            400,
            "model is required",
        ),
        (
            "/api/generate",
            json!({"model": "m", "prompt": "x", "raw": true}).to_string(),
            Some("mp-key"),
            400,
            "'raw'",
        ),
        (
            "/api/chat",
            "x".repeat(10_000),
            Some("mp-key"),
            413,
            "limit",
        ),
        ("/bogus/api/chat", hi.clone(), Some("mp-key"), 404, "bogus"),
        (
            "/api/pull",
            json!({"model": "m"}).to_string(),
            Some("mp-key"),
            404,
            "/api/pull",
        ),
    ];
    for (path, body, key, status, says) in cases {
        let response = post(path, body, key).await.expect("answer");
        assert_eq!(response.status(), status, "{path}");
        let body: Value = response.json().await.expect("json");
        let message = body["error"].as_str().unwrap_or_default();
        assert!(message.contains(says), "{path}: {body}");
    }
    // An upstream error keeps its status, its message and its retry-after.
    let mut limited = ask("hi");
    limited["model"] = json!("mock-error-429");
    let response = post("/api/chat", limited.to_string(), Some("mp-key"))
        .await
        .expect("answer");
    assert_eq!(response.status(), 429);
    assert_eq!(response.headers()["retry-after"], "7");
    let body: Value = response.json().await.expect("json");
    assert!(
        body["error"].as_str().is_some_and(|m| !m.is_empty()),
        "{body}"
    );
}

#[tokio::test]
async fn an_ollama_upstream_gets_memory_in_its_own_shape_and_everything_else_byte_for_byte() {
    let h = harness_with(|c| {
        c.memory.extraction_debounce = Duration::ZERO;
        ollama_upstream(c);
    })
    .await;
    let told = ollama(
        &h,
        "/implicit/api/chat",
        "noa",
        ask("My cat is called Miso."),
    )
    .await;
    assert_eq!(told.status(), 200);
    let body: Value = told.json().await.expect("json");
    assert_eq!(body["message"]["content"], "echo: My cat is called Miso.");
    eventually("the fact is extracted", || async {
        memories(&h, "noa").await.iter().any(|m| m.contains("Miso"))
    })
    .await;

    // The next request carries the memory, placed in Ollama's own JSON; the client's own
    // fields (options, keep_alive, think) are as it sent them.
    let asked = json!({"model": "qwen3:1b", "keep_alive": "10m", "think": false,
        "options": {"num_ctx": 8192, "temperature": 0.2},
        "messages": [{"role": "system", "content": "Be kind."},
                     {"role": "user", "content": "What is my cat called?"}]});
    let got = lines(ollama(&h, "/implicit/api/chat", "noa", asked).await).await;
    assert_eq!(got.last().map(|l| l["done"].clone()), Some(json!(true)));
    let sent = ollama_server_got(&h);
    assert!(sent.to_string().contains("Miso"), "memory applied: {sent}");
    assert_eq!(
        sent["options"],
        json!({"num_ctx": 8192, "temperature": 0.2})
    );
    assert_eq!(
        (sent["keep_alive"].clone(), sent["think"].clone()),
        (json!("10m"), json!(false))
    );
    assert!(sent.get("stream_options").is_none(), "{sent}");
    // Not translated to the Chat Completions upstream (the memory LLM's own calls go there, under
    // the latest chat's model, and are left out: `chat_requests(None)` holds no memory question).
    assert!(!h
        .mock
        .chat_requests(None)
        .iter()
        .any(|r| r["model"] == "qwen3:1b"));

    // In passthrough the client's bytes go as they are.
    let exact = r#"{"model":"qwen3:1b","stream":false,"messages":[{"role":"user","content":"hi"}],"options":{"seed":1}}"#;
    let answer = h
        .client
        .post(h.url("/passthrough/api/chat"))
        .header("content-type", "application/json")
        .body(exact)
        .send()
        .await
        .expect("answer");
    assert_eq!(answer.status(), 200);
    let relayed = h
        .mock
        .requests()
        .into_iter()
        .rfind(|r| r.path_and_query == "/api/chat");
    assert_eq!(
        relayed.map(|r| r.body.to_vec()),
        Some(exact.as_bytes().to_vec())
    );

    // Model routes are the Ollama server's own answers.
    let tags: Value = h
        .client
        .get(h.url("/implicit/api/tags"))
        .send()
        .await
        .expect("answer")
        .json()
        .await
        .expect("json");
    assert_eq!(tags["models"][0]["details"]["quantization_level"], "Q4_K_M");
    let ps = h.client.get(h.url("/api/ps")).send().await.expect("answer");
    assert_eq!(ps.status(), 404);
    assert!(h
        .mock
        .requests()
        .iter()
        .any(|r| r.path_and_query == "/api/ps"));
}

#[tokio::test]
async fn the_window_keeps_an_ollama_chats_system_messages_on_the_ollama_upstream() {
    let h = harness_with(|c| {
        ollama_upstream(c);
        c.memory.history_budget_tokens = 60;
    })
    .await;
    let long = "filler ".repeat(80);
    let messages = json!([
        {"role": "system", "content": "Be kind."},
        {"role": "user", "content": long},
        {"role": "system", "content": "Answer in French."},
        {"role": "assistant", "content": long},
        {"role": "user", "content": "What is the capital of Peru?"}
    ]);
    let body = json!({"model": "qwen3:1b", "stream": false, "messages": messages});
    let answer = ollama(&h, "/window/api/chat", "ines", body).await;
    assert_eq!(answer.status(), 200);
    let sent = ollama_server_got(&h);
    assert_eq!(
        sent["messages"],
        json!([messages[0], messages[2], messages[4]]),
        "the old turns go, every system message stays"
    );
}
