//! The Anthropic Messages API over real HTTP, translated to the scripted Chat Completions
//! upstream: one memory across APIs and isolated per user, explicit mode, streams, and errors in
//! Anthropic's shape with Anthropic's statuses. (The official `anthropic` SDK runs in `sdk.rs`.)

use std::time::Duration;

use memproxy::config::Secret;
use serde_json::{json, Value};

use crate::common::{eventually, harness_with, implicit_chat, memories, Harness};
use crate::explicit::send;

async fn messages(h: &Harness, path: &str, user: &str, body: Value) -> reqwest::Response {
    h.client
        .post(h.url(path))
        .header("x-memproxy-user", user)
        .header("anthropic-version", "2023-06-01")
        .json(&body)
        .send()
        .await
        .expect("answer")
}

fn ask(text: &str) -> Value {
    json!({"model": "claude-test", "max_tokens": 64,
           "messages": [{"role": "user", "content": text}]})
}

fn assert_anthropic_error(body: &Value, kind: &str) {
    assert_eq!(body["type"], "error", "{body}");
    assert_eq!(body["error"]["type"], kind, "{body}");
    assert!(body["error"]["message"]
        .as_str()
        .is_some_and(|m| !m.is_empty()));
}

#[tokio::test]
async fn a_fact_told_over_messages_is_recalled_over_chat_completions_for_that_user_only() {
    let h = harness_with(|c| c.memory.extraction_debounce = Duration::ZERO).await;
    let told = messages(
        &h,
        "/implicit/v1/messages",
        "mira",
        ask("My dog is called Pixel."),
    )
    .await;
    assert_eq!(told.status(), 200);
    assert_eq!(told.headers()["x-memproxy-mode"], "implicit");
    let body: Value = told.json().await.expect("json");
    assert_eq!(body["type"], "message");
    assert_eq!(body["model"], "claude-test");
    assert_eq!(body["content"][0]["text"], "echo: My dog is called Pixel.");
    assert_eq!(body["stop_reason"], "end_turn");
    assert!(body["usage"]["input_tokens"].as_u64() > Some(0));
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

    // The other way round: a Messages client sees what a chat app's user told, and another
    // user sees none of it.
    messages(
        &h,
        "/implicit/v1/messages",
        "mira",
        ask("Where does my dog sleep?"),
    )
    .await;
    let seen = h.mock.chat_requests(None).last().cloned().expect("request");
    assert!(seen.to_string().contains("Pixel"));
    messages(
        &h,
        "/implicit/v1/messages",
        "other",
        ask("What is my dog called?"),
    )
    .await;
    let seen = h.mock.chat_requests(None).last().cloned().expect("request");
    assert!(!seen.to_string().contains("Pixel"), "isolated: {seen}");
    assert!(memories(&h, "other")
        .await
        .iter()
        .all(|m| !m.contains("Pixel")));
}

#[tokio::test]
async fn explicit_mode_answers_in_anthropic_shape_whole_and_streamed() {
    let h = harness_with(|_| {}).await;
    h.mock.push(send("Hello from the agent."));
    let whole = messages(&h, "/explicit/v1/messages", "eli", ask("Hi, I am Eli.")).await;
    assert_eq!(whole.status(), 200);
    assert_eq!(whole.headers()["x-memproxy-mode"], "explicit");
    let body: Value = whole.json().await.expect("json");
    assert_eq!(
        body["content"],
        json!([{"type": "text", "text": "Hello from the agent."}])
    );
    assert!(body["id"].as_str().is_some_and(|id| id.starts_with("msg_")));

    h.mock.push(send("Streamed hello."));
    let mut streamed = ask("Stream it please.");
    streamed["stream"] = json!(true);
    let response = messages(&h, "/explicit/v1/messages", "eli", streamed).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let text = response.text().await.expect("body");
    let mut names = Vec::new();
    let mut reply = String::new();
    for event in text.split("\n\n").filter(|e| e.starts_with("event: ")) {
        let name = event
            .lines()
            .next()
            .unwrap_or_default()
            .trim_start_matches("event: ");
        names.push(name.to_owned());
        let data: Value = event
            .lines()
            .find_map(|l| l.strip_prefix("data: "))
            .and_then(|d| serde_json::from_str(d).ok())
            .unwrap_or(Value::Null);
        if let Some(piece) = data["delta"]["text"].as_str() {
            reply.push_str(piece);
        }
    }
    assert_eq!(reply, "Streamed hello.");
    assert_eq!(names.first().map(String::as_str), Some("message_start"));
    assert_eq!(names.last().map(String::as_str), Some("message_stop"));
    assert!(names.contains(&"message_delta".to_owned()));
    // The agent got the user's words through the translation.
    let seen = h.mock.chat_requests(None).last().cloned().expect("request");
    assert!(seen.to_string().contains("Stream it please."));
}

#[tokio::test]
async fn explicit_mode_offers_a_messages_clients_own_tool_to_the_agent_and_hands_its_call_back() {
    let h = harness_with(|_| {}).await;
    h.mock.push(crate::explicit::call(
        "get_weather",
        json!({"city": "Lisbon"}),
    ));
    let mut asked = ask("Weather in Lisbon?");
    asked["tools"] = json!([
        {"name": "get_weather", "description": "The weather in a city now.",
         "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}},
        {"name": "send_message", "description": "The app's own send_message.",
         "input_schema": {"type": "object"}},
        {"type": "web_search_20250305", "name": "web_search"}
    ]);
    asked["tool_choice"] = json!({"type": "auto", "disable_parallel_tool_use": true});
    let answer = messages(&h, "/explicit/v1/messages", "eli", asked).await;
    assert_eq!(answer.status(), 200);
    let body: Value = answer.json().await.expect("json");
    assert_eq!(body["stop_reason"], "tool_use", "{body}");
    let used: Vec<&Value> = body["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|b| b["type"] == "tool_use")
        .collect();
    assert_eq!(used.len(), 1, "{body}");
    assert_eq!(used[0]["name"], "get_weather");
    assert_eq!(used[0]["input"], json!({"city": "Lisbon"}));
    // The agent was offered the client's functions in the upstream's shape, with their
    // descriptions; the one named like a memory tool under another name; the server tool not.
    let seen = h.mock.chat_requests(None).last().cloned().expect("request");
    let offered: Vec<&Value> = seen["tools"].as_array().into_iter().flatten().collect();
    let named = |name: &str| {
        offered
            .iter()
            .find(|t| t["function"]["name"] == name)
            .copied()
    };
    let weather = named("get_weather").expect("the client's tool");
    assert_eq!(
        weather["function"]["description"],
        "The weather in a city now."
    );
    assert_eq!(
        weather["function"]["parameters"]["properties"]["city"]["type"],
        "string"
    );
    assert_eq!(
        named("app_send_message").map(|t| t["function"]["description"].clone()),
        Some(json!("The app's own send_message."))
    );
    assert!(named("web_search").is_none(), "{seen}");
}

#[tokio::test]
async fn errors_come_back_in_anthropic_shape_with_anthropic_statuses() {
    let h = harness_with(|c| {
        c.auth.api_keys = vec![Secret::new("mp-key")];
        c.server.max_body_bytes = 4096;
    })
    .await;
    let post = |body: reqwest::Body, key: Option<&'static str>| {
        let mut request = h
            .client
            .post(h.url("/v1/messages"))
            .header("content-type", "application/json")
            .body(body);
        if let Some(key) = key {
            request = request.header("x-api-key", key);
        }
        request.send()
    };
    let cases: Vec<(reqwest::Body, Option<&'static str>, u16, &str)> = vec![
        (
            ask("hi").to_string().into(),
            None,
            401,
            "authentication_error",
        ),
        (
            ask("hi").to_string().into(),
            Some("wrong"),
            401,
            "authentication_error",
        ),
        ("{".into(), Some("mp-key"), 400, "invalid_request_error"),
        (
            json!({"model": "m", "messages": []}).to_string().into(),
            Some("mp-key"),
            400,
            "invalid_request_error",
        ),
        (
            "x".repeat(10_000).into(),
            Some("mp-key"),
            413,
            "request_too_large",
        ),
    ];
    for (body, key, status, kind) in cases {
        let response = post(body, key).await.expect("answer");
        assert_eq!(response.status(), status);
        let body: Value = response.json().await.expect("json");
        assert_anthropic_error(&body, kind);
    }
    // An upstream error keeps its status and message.
    let mut limited = ask("hi");
    limited["model"] = json!("mock-error-429");
    let response = post(limited.to_string().into(), Some("mp-key"))
        .await
        .expect("answer");
    assert_eq!(response.status(), 429);
    let body: Value = response.json().await.expect("json");
    assert_anthropic_error(&body, "rate_limit_error");
    // Unknown mode prefixes are unknown routes, in the same shape.
    let response = h
        .client
        .post(h.url("/nosuchmode/v1/messages"))
        .header("x-api-key", "mp-key")
        .json(&ask("hi"))
        .send()
        .await
        .expect("answer");
    assert_eq!(response.status(), 404);
    assert_anthropic_error(&response.json().await.expect("json"), "not_found_error");
}

#[tokio::test]
async fn the_memproxy_key_in_x_api_key_selects_the_tenant_and_never_goes_upstream() {
    let h = harness_with(|c| c.auth.api_keys = vec![Secret::new("mp-secret")]).await;
    let response = h
        .client
        .post(h.url("/v1/messages"))
        .header("x-api-key", "mp-secret")
        .header("anthropic-version", "2023-06-01")
        .header("anthropic-beta", "some-beta")
        .json(&ask("hello"))
        .send()
        .await
        .expect("answer");
    assert_eq!(response.status(), 200);
    let received = h.mock.requests();
    let last = received.last().expect("upstream request");
    let names: Vec<&str> = last.headers.keys().map(|n| n.as_str()).collect();
    assert!(
        !names
            .iter()
            .any(|n| *n == "x-api-key" || n.starts_with("anthropic-")),
        "{names:?}"
    );
    assert!(
        !last
            .headers
            .values()
            .any(|v| v.to_str().unwrap_or_default().contains("mp-secret")),
        "the memproxy key reached the upstream"
    );
}

#[tokio::test]
async fn count_tokens_counts_the_translated_prompt() {
    let h = harness_with(|_| {}).await;
    let short = messages(
        &h,
        "/v1/messages/count_tokens",
        "c",
        json!({"model": "m",
        "messages": [{"role": "user", "content": "hi"}]}),
    )
    .await;
    assert_eq!(short.status(), 200);
    let short: Value = short.json().await.expect("json");
    let long = messages(
        &h,
        "/v1/messages/count_tokens",
        "c",
        json!({"model": "m",
        "system": "You are a careful assistant who answers in full sentences.",
        "messages": [{"role": "user", "content": "hi there, how are you today?"}]}),
    )
    .await;
    let long: Value = long.json().await.expect("json");
    assert!(short["input_tokens"].as_u64() > Some(0));
    assert!(long["input_tokens"].as_u64() > short["input_tokens"].as_u64());
    assert!(h.mock.requests().is_empty(), "counted locally");
}

#[tokio::test]
async fn client_context_in_front_of_a_message_is_not_stored_as_the_users_words() {
    let h = harness_with(|c| c.memory.extraction_debounce = Duration::ZERO).await;
    let told = messages(
        &h,
        "/implicit/v1/messages",
        "kai",
        ask("<system-reminder>\nToday's date is 2026-12-01.\n</system-reminder>\n\n\nKiki is my parrot."),
    )
    .await;
    assert_eq!(told.status(), 200);
    // The scripted memory LLM makes each stored user message a fact: what it got is the user's
    // words alone.
    eventually("the fact is extracted", || async {
        memories(&h, "kai").await == ["Kiki is the user's parrot."]
    })
    .await;
    // The chat model still got the whole message.
    let seen = h
        .mock
        .chat_requests(None)
        .first()
        .cloned()
        .expect("request");
    assert!(seen.to_string().contains("Today's date is 2026-12-01."));
}

#[tokio::test]
async fn an_anthropic_client_lists_models_in_its_shape_under_a_mode_prefix_too() {
    let h = harness_with(|_| {}).await;
    for path in ["/v1/models", "/implicit/v1/models"] {
        let listed: Value = h
            .client
            .get(h.url(path))
            .header("anthropic-version", "2023-06-01")
            .send()
            .await
            .expect("answer")
            .json()
            .await
            .expect("json");
        assert_eq!(listed["data"][0]["type"], "model", "{path}: {listed}");
        assert_eq!(listed["first_id"], "mock-model");
        assert_eq!(listed["data"][0]["created_at"], "1970-01-01T00:00:00Z");
    }
    // Without the header: the upstream's own list, relayed.
    let relayed: Value = h
        .client
        .get(h.url("/implicit/v1/models"))
        .send()
        .await
        .expect("answer")
        .json()
        .await
        .expect("json");
    assert_eq!(relayed["object"], "list");
    let unknown = h
        .client
        .get(h.url("/telepathy/v1/models"))
        .header("anthropic-version", "2023-06-01")
        .send()
        .await
        .expect("answer");
    assert_eq!(unknown.status(), 404);
    assert_eq!(
        unknown.json::<Value>().await.expect("json")["error"]["type"],
        "not_found_error"
    );
}

/// A translated request is checked like a client's own Chat Completions request: with no messages
/// at all (and none from a system prompt) it is refused in the API's own shape, before any
/// upstream call.
#[tokio::test]
async fn a_request_with_no_messages_is_refused_in_each_apis_shape() {
    let h = crate::common::harness_with(|_| {}).await;
    let refused = messages(
        &h,
        "/v1/messages",
        "empty",
        json!({"model": "m", "max_tokens": 10, "messages": []}),
    )
    .await;
    assert_eq!(refused.status(), 400);
    let body: Value = refused.json().await.expect("json");
    assert_eq!(body["type"], "error", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("messages"),
        "{body}"
    );
    let refused = h
        .client
        .post(h.url("/v1/responses"))
        .header("x-memproxy-user", "empty")
        .json(&json!({"model": "m", "input": []}))
        .send()
        .await
        .expect("send");
    assert_eq!(refused.status(), 400);
    let body: Value = refused.json().await.expect("json");
    assert!(body["error"]["message"].is_string(), "{body}");
    assert!(
        h.mock.chat_requests(None).is_empty(),
        "nothing went upstream"
    );
}

/// The `input_tokens` of a stream's `message_start` (its first data line).
async fn message_start_input_tokens(response: reqwest::Response) -> u64 {
    let text = response.text().await.expect("stream");
    let start = text
        .lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .filter_map(|data| serde_json::from_str::<Value>(data).ok())
        .find(|event| event["type"] == "message_start")
        .unwrap_or_else(|| panic!("no message_start in {text}"));
    start["message"]["usage"]["input_tokens"]
        .as_u64()
        .unwrap_or_else(|| panic!("no input_tokens in {start}"))
}

#[tokio::test]
async fn a_streams_message_start_counts_the_prompt_memproxy_sent() {
    let h = harness_with(|c| c.memory.extraction_debounce = Duration::ZERO).await;
    let told = messages(
        &h,
        "/implicit/v1/messages",
        "noor",
        ask("My cat is called Saffron."),
    );
    assert_eq!(told.await.status(), 200);
    eventually("the fact is extracted", || async {
        memories(&h, "noor")
            .await
            .iter()
            .any(|m| m.contains("Saffron"))
    })
    .await;

    let mut asked = ask("What is my cat called?");
    asked["stream"] = json!(true);
    // Passthrough: nothing added, the prompt as the client sent it.
    let bare = messages(&h, "/passthrough/v1/messages", "noor", asked.clone()).await;
    assert!(!bare
        .headers()
        .contains_key("x-memproxy-prompt-tokens-after"));
    let bare = message_start_input_tokens(bare).await;
    assert!(bare > 0);
    // Implicit: the memory block is part of the prompt, and message_start says so, with the
    // count memproxy reports in its header.
    let recalled = messages(&h, "/implicit/v1/messages", "noor", asked).await;
    assert_eq!(recalled.status(), 200);
    let reported: u64 = recalled.headers()["x-memproxy-prompt-tokens-after"]
        .to_str()
        .expect("header")
        .parse()
        .expect("a count");
    let seen = h.mock.chat_requests(None).last().cloned().expect("request");
    assert!(seen.to_string().contains("Saffron"), "injected: {seen}");
    let counted = message_start_input_tokens(recalled).await;
    assert_eq!(counted, reported);
    assert!(counted > bare, "{counted} with memory, {bare} without");
}

/// The neutral request carries what a client offers and asks for: the hooks see a Messages
/// request's tools, tool choice and settings in no API's shape, and the Chat Completions upstream
/// gets them under its own names, written once from that neutral request.
#[tokio::test]
async fn a_messages_requests_tools_and_settings_reach_the_hooks_neutral_and_the_upstream_as_chat() {
    use memproxy::conversation::request::ToolChoice;
    let h = harness_with(|_| {}).await;
    let mut body = ask("What is the weather in Porto?");
    body["temperature"] = json!(0.25);
    body["top_k"] = json!(5);
    body["stop_sequences"] = json!(["END"]);
    body["tools"] = json!([{"name": "weather", "description": "The weather of a city.",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}]);
    body["tool_choice"] = json!({"type": "tool", "name": "weather",
        "disable_parallel_tool_use": true});
    let answered = messages(&h, "/passthrough/v1/messages", "mira", body).await;
    assert_eq!(answered.status(), 200);

    let exchange = h.next_exchange().await;
    let request = &exchange.request;
    assert_eq!(request.tools.len(), 1);
    assert_eq!(request.tools[0].name, "weather");
    assert_eq!(
        request.tools[0].description.as_deref(),
        Some("The weather of a city.")
    );
    assert_eq!(
        request.tool_choice,
        Some(ToolChoice::Named("weather".into()))
    );
    let settings = &request.parameters;
    assert_eq!(settings.max_tokens, Some(64.into()));
    assert_eq!(settings.top_k, Some(5.into()));
    assert_eq!(
        settings.temperature.as_ref().and_then(|t| t.as_f64()),
        Some(0.25)
    );
    assert_eq!(settings.stop, ["END"]);
    assert_eq!(settings.parallel_tool_calls, Some(false));

    let seen = h.mock.chat_requests(None).last().cloned().expect("request");
    assert_eq!(seen["tools"][0]["type"], "function");
    assert_eq!(seen["tools"][0]["function"]["name"], "weather");
    assert_eq!(
        seen["tools"][0]["function"]["parameters"]["properties"]["city"]["type"],
        "string"
    );
    assert_eq!(
        seen["tool_choice"],
        json!({"type": "function", "function": {"name": "weather"}})
    );
    assert_eq!(
        (&seen["max_tokens"], &seen["top_k"], &seen["temperature"]),
        (&json!(64), &json!(5), &json!(0.25))
    );
    assert_eq!(
        (&seen["stop"], &seen["parallel_tool_calls"]),
        (&json!(["END"]), &json!(false))
    );
}
