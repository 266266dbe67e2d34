//! Messages and Responses relayed in their own shape to upstreams that speak them
//! (`[upstream.messages]`, `[upstream.responses]`; the mock serves both): byte for byte in
//! passthrough, the upstream's own key in its own header and never the client's proxy key, memory
//! applied in the API's shape in implicit mode, the streamed answer read into the recall log, and
//! one memory shared with the translated APIs.

use std::time::Duration;

use memproxy::config::Secret;
use memproxy::hooks::Outcome;
use memproxy::mock::Reply;
use memproxy::upstream::{ApiUpstream, AuthHeader};
use serde_json::{json, Value};

use crate::common::{closed_port_url, eventually, harness_with, implicit_chat, memories, Harness};

fn native(c: &mut memproxy::config::Config) {
    c.memory.extraction_debounce = Duration::ZERO;
    c.upstream.messages = Some(ApiUpstream {
        url: c.upstream.url.clone(),
        api_key: Some(Secret::new("sk-ant-upstream")),
        auth_header: None,
    });
    c.upstream.responses = Some(ApiUpstream {
        url: c.upstream.url.clone(),
        api_key: Some(Secret::new("sk-resp-upstream")),
        auth_header: Some(AuthHeader::Authorization),
    });
}

async fn post(h: &Harness, path: &str, user: &str, body: &str) -> reqwest::Response {
    h.client
        .post(h.url(path))
        .header("x-memproxy-user", user)
        .header("anthropic-version", "2023-06-01")
        .header("anthropic-beta", "prompt-caching-2024-07-31")
        .header("content-type", "application/json")
        .body(body.to_owned())
        .send()
        .await
        .expect("answer")
}

/// What the mock received on `path`, newest last.
fn upstream_saw(h: &Harness, path: &str) -> Vec<memproxy::mock::Received> {
    h.mock
        .requests()
        .into_iter()
        .filter(|r| r.path_and_query == path)
        .collect()
}

#[tokio::test]
async fn passthrough_relays_both_apis_byte_for_byte_with_the_upstreams_own_key() {
    let h = harness_with(|c| {
        native(c);
        c.auth.api_keys = vec![Secret::new("mp-proxy-key")];
    })
    .await;
    // Fields memproxy does not translate (thinking signatures, cache_control, a server tool)
    // and the client's own spacing all go as they are.
    let body = r#"{"model":"claude-x","max_tokens":64,  "system":[{"type":"text","text":"Be brief.","cache_control":{"type":"ephemeral"}}],
        "tools":[{"type":"web_search_20250305","name":"web_search"}],
        "messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":[{"type":"thinking","thinking":"hm","signature":"sig=="},{"type":"text","text":"Hello"}]},{"role":"user","content":"Tell me more"}]}"#;
    let raw = r#"{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"text","text":"More."}],"stop_reason":"end_turn","usage":{"input_tokens":9,"output_tokens":2}}"#;
    h.mock.push(Reply::Raw {
        status: 200,
        content_type: "application/json".to_owned(),
        body: raw.to_owned(),
    });
    let answer = h
        .client
        .post(h.url("/passthrough/v1/messages"))
        .header("x-api-key", "mp-proxy-key")
        .header("anthropic-version", "2023-06-01")
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .expect("answer");
    assert_eq!(answer.status(), 200);
    assert_eq!(answer.text().await.expect("body"), raw);
    let seen = upstream_saw(&h, "/v1/messages");
    let seen = seen.last().expect("relayed");
    assert_eq!(&seen.body[..], body.as_bytes());
    assert_eq!(seen.headers["x-api-key"], "sk-ant-upstream");
    assert_eq!(seen.headers["anthropic-version"], "2023-06-01");
    assert!(seen.headers.get("authorization").is_none());

    // The same for Responses, streamed: the events arrive as the upstream wrote them.
    let events = vec![
        "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_9\",\"status\":\"in_progress\",\"output\":[]}}\n\n".to_owned(),
        "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":1,\"delta\":\"Yes\"}\n\n".to_owned(),
        "event: response.completed\ndata: {\"type\":\"response.completed\",\"sequence_number\":2,\"response\":{\"id\":\"resp_9\",\"status\":\"completed\",\"output\":[{\"type\":\"message\",\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\",\"text\":\"Yes\"}]}],\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n".to_owned(),
    ];
    h.mock.push(Reply::RawStream(events.clone()));
    let body = r#"{"model":"gpt-x","stream":true,"input":"Ready?","tools":[{"type":"web_search"}],"include":["reasoning.encrypted_content"]}"#;
    let answer = h
        .client
        .post(h.url("/passthrough/v1/responses"))
        .bearer_auth("mp-proxy-key")
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .expect("answer");
    assert_eq!(answer.status(), 200);
    assert_eq!(answer.text().await.expect("body"), events.concat());
    let seen = upstream_saw(&h, "/v1/responses");
    let seen = seen.last().expect("relayed");
    assert_eq!(&seen.body[..], body.as_bytes());
    assert_eq!(seen.headers["authorization"], "Bearer sk-resp-upstream");
    assert!(seen.headers.get("x-api-key").is_none());

    // An upstream error comes back as the upstream sent it, status and shape.
    h.mock.push(Reply::Error {
        status: 529,
        message: "Overloaded".to_owned(),
        headers: Vec::new(),
    });
    let answer = h
        .client
        .post(h.url("/passthrough/v1/messages"))
        .header("x-api-key", "mp-proxy-key")
        .json(&json!({"model": "claude-x", "max_tokens": 8,
            "messages": [{"role": "user", "content": "Hi"}]}))
        .send()
        .await
        .expect("answer");
    assert_eq!(answer.status(), 529);
    let error: Value = answer.json().await.expect("json");
    assert_eq!(error["type"], "error");
    assert_eq!(error["error"]["message"], "Overloaded");
}

#[tokio::test]
async fn implicit_memory_goes_into_anthropics_own_shape_and_crosses_apis() {
    let h = harness_with(native).await;
    let told = post(
        &h,
        "/implicit/v1/messages",
        "nina",
        &json!({"model": "claude-x", "max_tokens": 64, "stream": true,
            "messages": [{"role": "user", "content": "My cat is called Miso."}]})
        .to_string(),
    )
    .await;
    assert_eq!(told.status(), 200);
    assert_eq!(told.headers()["x-memproxy-mode"], "implicit");
    let text = told.text().await.expect("stream");
    assert!(text.contains("event: message_stop"), "{text}");
    // The streamed answer was read into the exchange.
    let exchange = h.next_exchange().await;
    assert_eq!(exchange.outcome, Outcome::Completed);
    assert_eq!(exchange.replies[0].text, "echo: My cat is called Miso.");
    assert!(exchange.usage.is_some_and(|u| u.completion_tokens > 0));
    eventually("the fact is extracted", || async {
        memories(&h, "nina")
            .await
            .iter()
            .any(|m| m.contains("Miso"))
    })
    .await;

    // The next request: the memory block goes after the cached system block, which stays as it
    // was; the thinking block and its signature are untouched.
    let asked = json!({"model": "claude-x", "max_tokens": 64,
        "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {"role": "user", "content": "Hello"},
            {"role": "assistant", "content": [{"type": "thinking", "thinking": "greet", "signature": "c2ln"},
                                              {"type": "text", "text": "Hi!"}]},
            {"role": "user", "content": "What is my cat called?"}]});
    let answer = post(&h, "/implicit/v1/messages", "nina", &asked.to_string()).await;
    assert_eq!(answer.status(), 200);
    assert_ne!(answer.headers()["x-memproxy-memories"], "0");
    let body: Value = answer.json().await.expect("json");
    assert_eq!(body["type"], "message");
    let seen = upstream_saw(&h, "/v1/messages")
        .last()
        .expect("sent")
        .json();
    assert_eq!(seen["system"][0], asked["system"][0]);
    assert!(seen["system"][1]["text"]
        .as_str()
        .is_some_and(|t| t.contains("Miso")));
    assert_eq!(seen["messages"], asked["messages"]);
    assert_eq!(seen["max_tokens"], 64);

    // Told over native Messages, recalled over Chat Completions; never for another user.
    implicit_chat(
        &h,
        "nina",
        json!([{"role": "user", "content": "And my cat's name?"}]),
    )
    .await;
    let chat = h.mock.chat_requests(None).last().cloned().expect("chat");
    assert!(chat.to_string().contains("Miso"), "{chat}");
    post(
        &h,
        "/implicit/v1/messages",
        "omar",
        &json!({"model": "claude-x", "max_tokens": 64,
            "messages": [{"role": "user", "content": "What is my cat called?"}]})
        .to_string(),
    )
    .await;
    let seen = upstream_saw(&h, "/v1/messages")
        .last()
        .expect("sent")
        .json();
    assert!(!seen.to_string().contains("Miso"), "{seen}");
}

#[tokio::test]
async fn the_window_cuts_an_anthropic_history_at_a_turn_never_between_a_tool_call_and_its_result() {
    let h = harness_with(|c| {
        native(c);
        c.memory.history_budget_tokens = 60;
    })
    .await;
    let long = "filler ".repeat(80);
    let messages = json!([
        {"role": "user", "content": long},
        {"role": "assistant", "content": long},
        {"role": "user", "content": "Look up the weather."},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "weather", "input": {"city": "Oslo"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": long},
                                     {"type": "text", "text": "And now?"}]}
    ]);
    let answer = post(
        &h,
        "/window/v1/messages",
        "pia",
        &json!({"model": "claude-x", "max_tokens": 16, "messages": messages}).to_string(),
    )
    .await;
    assert_eq!(answer.status(), 200);
    let seen = upstream_saw(&h, "/v1/messages")
        .last()
        .expect("sent")
        .json();
    let sent = seen["messages"].as_array().expect("messages");
    assert!(sent.len() < 5, "the oldest turns are dropped: {seen}");
    assert_eq!(
        sent[0], messages[2],
        "it starts at the user turn before the call"
    );
    assert_eq!(sent.last(), messages.as_array().and_then(|m| m.last()));
}

#[tokio::test]
async fn the_window_keeps_a_responses_requests_developer_instructions_as_every_api_does() {
    let h = harness_with(|c| {
        native(c);
        c.memory.history_budget_tokens = 60;
    })
    .await;
    let long = "filler ".repeat(80);
    let input = json!([
        {"role": "developer", "content": "Answer in French."},
        {"role": "user", "content": long},
        {"role": "assistant", "content": long},
        {"role": "user", "content": "What is the capital of Peru?"}
    ]);
    let answer = post(
        &h,
        "/window/v1/responses",
        "rosa",
        &json!({"model": "gpt-x", "input": input}).to_string(),
    )
    .await;
    assert_eq!(answer.status(), 200);
    let seen = upstream_saw(&h, "/v1/responses")
        .last()
        .expect("sent")
        .json();
    assert_eq!(
        seen["input"],
        json!([input[0], input[3]]),
        "the old turns go, the developer's instruction stays"
    );
}

#[tokio::test]
async fn responses_keep_their_chain_upstream_and_memory_goes_into_instructions() {
    let h = harness_with(native).await;
    let first = post(
        &h,
        "/implicit/v1/responses",
        "quin",
        &json!({"model": "gpt-x", "input": "My bike is a red Bianchi."}).to_string(),
    )
    .await;
    assert_eq!(first.status(), 200);
    let first: Value = first.json().await.expect("json");
    let id = first["id"].as_str().expect("id").to_owned();
    assert!(id.starts_with("resp_mock_"), "the upstream's own id: {id}");
    eventually("the fact is extracted", || async {
        memories(&h, "quin")
            .await
            .iter()
            .any(|m| m.contains("Bianchi"))
    })
    .await;

    let asked = json!({"model": "gpt-x", "previous_response_id": id, "instructions": "Be brief.",
        "stream": true,
        "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "What bike do I ride?"}]}]});
    let answer = post(&h, "/implicit/v1/responses", "quin", &asked.to_string()).await;
    assert_eq!(answer.status(), 200);
    let text = answer.text().await.expect("stream");
    assert!(text.contains("response.completed"), "{text}");
    let seen = upstream_saw(&h, "/v1/responses")
        .last()
        .expect("sent")
        .json();
    assert_eq!(seen["previous_response_id"], id);
    assert_eq!(seen["input"], asked["input"]);
    let instructions = seen["instructions"].as_str().expect("instructions");
    assert!(instructions.starts_with("Be brief.\n\n") && instructions.contains("Bianchi"));

    // The exchange saw the chain memproxy logged: the first turn, then the new one.
    let exchanges = [h.next_exchange().await, h.next_exchange().await];
    let second = &exchanges[1].request;
    let said: Vec<String> = second.messages.iter().map(|m| m.text()).collect();
    assert!(
        said.iter().any(|t| t.contains("red Bianchi"))
            && said.iter().any(|t| t.contains("What bike")),
        "{said:?}"
    );

    // Stored responses live upstream, and are reached only by the user who made them: the
    // upstream keeps every tenant's under one key.
    let get_as = |user: &'static str| {
        h.client
            .get(h.url(&format!("/v1/responses/{id}")))
            .header("x-memproxy-user", user)
            .send()
    };
    let other = get_as("mallory").await.expect("answer");
    assert_eq!(other.status(), 404);
    assert!(upstream_saw(&h, &format!("/v1/responses/{id}")).is_empty());
    let got = get_as("quin").await.expect("answer");
    assert_eq!(got.status(), 200);
    let got: Value = got.json().await.expect("json");
    assert_eq!(got["id"], id);
    let asked = upstream_saw(&h, &format!("/v1/responses/{id}"));
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].method, "GET");
    assert_eq!(asked[0].headers["authorization"], "Bearer sk-resp-upstream");
}

#[tokio::test]
async fn what_memproxy_cannot_read_goes_as_it_is_and_explicit_mode_runs_its_loop_on_chat() {
    let h = harness_with(native).await;
    // An MCP connector has no neutral form: relayed untouched, without memory, and said so.
    let body = json!({"model": "claude-x", "max_tokens": 16,
        "mcp_servers": [{"type": "url", "url": "https://mcp.example/sse", "name": "x"}],
        "messages": [{"role": "user", "content": "Use the connector."}]})
    .to_string();
    let answer = post(&h, "/implicit/v1/messages", "rosa", &body).await;
    assert_eq!(answer.status(), 200);
    assert!(answer.headers()["x-memproxy-degraded"]
        .to_str()
        .is_ok_and(|why| why.contains("mcp_servers")));
    let seen = upstream_saw(&h, "/v1/messages");
    assert_eq!(&seen.last().expect("relayed").body[..], body.as_bytes());

    // Explicit mode: the agent loop runs on the Chat Completions upstream, the answer comes
    // back in Anthropic's shape.
    h.mock.push(Reply::ToolCalls(vec![(
        "send_message".to_owned(),
        r#"{"message":"Hello from the agent."}"#.to_owned(),
    )]));
    let answer = post(
        &h,
        "/explicit/v1/messages",
        "rosa",
        &json!({"model": "claude-x", "max_tokens": 64,
            "messages": [{"role": "user", "content": "Hi"}]})
        .to_string(),
    )
    .await;
    assert_eq!(answer.status(), 200);
    let body: Value = answer.json().await.expect("json");
    assert_eq!(body["content"][0]["text"], "Hello from the agent.");
    assert_eq!(upstream_saw(&h, "/v1/messages").len(), 1);
}

#[tokio::test]
async fn a_broken_or_unreachable_native_upstream_gives_an_error_in_the_apis_shape() {
    let h = harness_with(native).await;
    // The stream stops before message_stop: the client gets Anthropic's error event at the end,
    // and the exchange is recorded as failed with what had arrived.
    h.mock.push(Reply::RawStream(vec![
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n".to_owned(),
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n".to_owned(),
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Half\"}}\n\n".to_owned(),
    ]));
    let body = json!({"model": "claude-x", "max_tokens": 16, "stream": true,
        "messages": [{"role": "user", "content": "Tell me a story."}]});
    let answer = post(&h, "/implicit/v1/messages", "sven", &body.to_string()).await;
    assert_eq!(answer.status(), 200);
    let text = answer.text().await.expect("stream");
    assert!(text.contains("\"text\":\"Half\""), "{text}");
    let last = text.trim_end().rsplit("\n\n").next().unwrap_or_default();
    assert!(
        last.starts_with("event: error\ndata: {\"type\":\"error\""),
        "{last}"
    );
    let exchange = h.next_exchange().await;
    assert!(
        matches!(exchange.outcome, Outcome::UpstreamFailed { .. }),
        "{:?}",
        exchange.outcome
    );
    assert_eq!(exchange.replies[0].text, "Half");

    // The Responses upstream cannot be reached: a 502 in the OpenAI shape this API uses.
    let closed = closed_port_url().await;
    let h = harness_with(|c| {
        native(c);
        if let Some(responses) = c.upstream.responses.as_mut() {
            responses.url = closed;
        }
    })
    .await;
    let answer = post(
        &h,
        "/implicit/v1/responses",
        "sven",
        &json!({"model": "m", "input": "Hi"}).to_string(),
    )
    .await;
    assert_eq!(answer.status(), 502);
    let error: Value = answer.json().await.expect("json");
    assert_eq!(error["error"]["code"], "upstream_unreachable", "{error}");
    // The exchange is a failed one, with no answer.
    let exchange = h.next_exchange().await;
    assert!(matches!(exchange.outcome, Outcome::UpstreamFailed { .. }));
    assert!(exchange.replies.is_empty());
}

/// A client's task over a quoted conversation (a title, as Open WebUI asks one) is no turn of the
/// user's on the same-API relay either: served as passthrough, relayed untouched, nothing stored.
#[tokio::test]
async fn a_clients_task_over_a_quoted_chat_is_passthrough_on_the_native_relay_too() {
    let h = harness_with(native).await;
    let task = json!({"model": "claude-x", "max_tokens": 50, "messages": [{"role": "user",
        "content": "### Task:\nGenerate a concise title for the chat.\n### Chat History:\nUSER: My dog Rexford is ill.\nASSISTANT: I am sorry to hear that."}]})
    .to_string();
    let response = post(&h, "/implicit/v1/messages", "task-user", &task).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["x-memproxy-mode"], "passthrough");
    let sent = upstream_saw(&h, "/v1/messages");
    assert_eq!(
        sent.last().map(|r| r.body.clone()).unwrap_or_default(),
        task.as_bytes(),
        "relayed byte for byte"
    );
    let told = json!({"model": "claude-x", "max_tokens": 50,
        "messages": [{"role": "user", "content": "I live in Lisbon."}]})
    .to_string();
    assert_eq!(
        post(&h, "/implicit/v1/messages", "task-user", &told)
            .await
            .status(),
        200
    );
    eventually("the user's own fact is stored", || async {
        memories(&h, "task-user")
            .await
            .iter()
            .any(|m| m.contains("Lisbon"))
    })
    .await;
    let stored = memories(&h, "task-user").await;
    assert!(
        stored.iter().all(|m| !m.contains("Rexford")),
        "the task's quoted chat was stored: {stored:?}"
    );
}
