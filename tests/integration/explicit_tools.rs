//! Explicit mode with the client's own tools: a call of one pauses the agent's turn and reaches
//! the client as an ordinary `tool_calls` answer (whole and streamed); the client's results resume
//! the turn (across a restart too); results that do not match are refused; a conversation that
//! goes on without them closes the pause.

use memproxy::mock::Reply;
use serde_json::{json, Value};

use crate::common::{get_json, harness_with, restart, sse_data, Harness};
use crate::explicit::{call, model_requests, send, statuses, steps, tool_results};

fn weather_tool() -> Value {
    json!({"type": "function", "function": {
        "name": "get_weather",
        "description": "Current weather of a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    }})
}

const QUESTION: &str = "What's the weather in Lisbon? I fly there on Friday.";

/// One explicit-mode request of user `ana` with the client's tools.
async fn ask_with(h: &Harness, messages: Value, extra: Value) -> reqwest::Response {
    let mut body = json!({"model": "mock-model", "messages": messages, "tools": [weather_tool()]});
    for (key, value) in extra.as_object().into_iter().flatten() {
        body[key] = value.clone();
    }
    h.client
        .post(h.url("/explicit/v1/chat/completions"))
        .header("x-memproxy-user", "ana")
        .json(&body)
        .send()
        .await
        .expect("answer")
}

/// The first request: the question, with the client's tools (and `extra` fields).
async fn ask_question(h: &Harness, extra: Value) -> reqwest::Response {
    ask_with(h, json!([{"role": "user", "content": QUESTION}]), extra).await
}

/// Asks the question; the answer is a call of the client's tool: its message and the call's id.
async fn paused_on_a_call(h: &Harness) -> (Value, String) {
    let first = ask_question(h, json!({})).await;
    let body: Value = first.json().await.expect("json");
    let message = body["choices"][0]["message"].clone();
    let id = message["tool_calls"][0]["id"]
        .as_str()
        .expect("id")
        .to_owned();
    (message, id)
}

/// The script of a turn: save a fact, call the weather tool; after its result, save another
/// fact, then answer.
fn script_turn(h: &Harness) {
    h.mock.push(call(
        "core_memory_append",
        json!({"label": "human", "content": "The user flies to Lisbon on Friday.", "request_heartbeat": true}),
    ));
    h.mock.push(call("get_weather", json!({"city": "Lisbon"})));
    h.mock.push(call(
        "core_memory_append",
        json!({"label": "human", "content": "The user wants the weather where they travel.", "request_heartbeat": true}),
    ));
    h.mock.push(send("Sunny and 24°C in Lisbon: pack light."));
}

/// The client's second request: its question, the assistant's tool calls, one result.
fn resumed(first_answer: &Value, results: &[(&str, &str)]) -> Value {
    let mut messages = vec![
        json!({"role": "user", "content": QUESTION}),
        first_answer.clone(),
    ];
    for (id, content) in results {
        messages.push(json!({"role": "tool", "tool_call_id": id, "content": content}));
    }
    Value::Array(messages)
}

fn human_block(agent: &Value) -> String {
    agent["blocks"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|b| b["label"] == "human")
        .and_then(|b| b["value"].as_str())
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test]
async fn a_client_tool_call_pauses_the_turn_and_its_result_resumes_it() {
    let h = harness_with(|_| {}).await;
    script_turn(&h);
    let first = ask_question(&h, json!({})).await;
    assert_eq!(first.status(), 200);
    assert_eq!(first.headers()["x-memproxy-stop"], "client_tool_calls");
    let turn = first.headers()["x-memproxy-turn"].clone();
    let body: Value = first.json().await.expect("json");
    let choice = &body["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls");
    assert_eq!(choice["message"]["content"], Value::Null);
    let calls = choice["message"]["tool_calls"].as_array().expect("calls");
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["function"]["name"], "get_weather");
    let arguments: Value =
        serde_json::from_str(calls[0]["function"]["arguments"].as_str().expect("text"))
            .expect("json");
    assert_eq!(arguments, json!({"city": "Lisbon"}));
    let id = calls[0]["id"].as_str().expect("id").to_owned();

    // The agent was offered its memory tools and the client's, send_message last.
    let offered: Vec<String> = model_requests(&h)[0]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
        .collect();
    assert!(
        offered.contains(&"core_memory_append".to_owned()),
        "{offered:?}"
    );
    assert_eq!(
        offered[offered.len() - 2..],
        ["get_weather", "send_message"]
    );
    // Nothing of the paused turn is in the log yet.
    let log = get_json(&h, "/memproxy/v1/users/ana/agents/default/messages").await;
    assert_eq!(log["data"].as_array().map(Vec::len), Some(0), "{log}");

    let second = ask_with(
        &h,
        resumed(&choice["message"], &[(&id, "sunny, 24°C")]),
        json!({}),
    )
    .await;
    assert_eq!(second.status(), 200);
    assert_eq!(
        second.headers()["x-memproxy-turn"],
        turn,
        "the same turn goes on"
    );
    let body: Value = second.json().await.expect("json");
    assert_eq!(body["choices"][0]["finish_reason"], "stop");
    assert_eq!(
        body["choices"][0]["message"]["content"],
        "Sunny and 24°C in Lisbon: pack light."
    );
    // The agent saw the client's result as the answer to its call.
    let requests = model_requests(&h);
    assert_eq!(requests.len(), 4);
    let results = tool_results(&requests[2]);
    assert_eq!(
        results.last().map(|r| r["message"].clone()),
        Some(json!("sunny, 24°C"))
    );
    let answered = requests[2]["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .any(|m| m["role"] == "tool" && m["tool_call_id"] == id.as_str());
    assert!(answered, "the result names its call");
    // And was told what to do with it, as after any call that returns control.
    let last = requests[2]["messages"]
        .as_array()
        .and_then(|m| m.last().cloned());
    assert!(
        last.is_some_and(|m| m["content"].to_string().contains("The app ran get_weather")),
        "a heartbeat follows the result"
    );

    // Memory tools before and after the client's tool both worked.
    let agent = get_json(&h, "/memproxy/v1/users/ana/agents/default").await;
    let human = human_block(&agent);
    assert!(human.contains("flies to Lisbon on Friday"), "{human}");
    assert!(human.contains("wants the weather"), "{human}");
    assert_eq!(
        statuses(&steps(&h, "ana", "default").await),
        [
            "core_memory_append:ok",
            "get_weather:client",
            "get_weather:client_result",
            "core_memory_append:ok",
            "send_message:reply"
        ]
    );
    // The whole turn is in the log, each call with its result.
    let log = get_json(&h, "/memproxy/v1/users/ana/agents/default/messages").await;
    let roles: Vec<&str> = log["data"]
        .as_array()
        .expect("log")
        .iter()
        .filter_map(|m| m["role"].as_str())
        .collect();
    assert_eq!(
        roles,
        [
            "user",
            "assistant",
            "tool",
            "user",
            "assistant",
            "tool",
            "user",
            "assistant",
            "tool",
            "user",
            "assistant",
            "tool"
        ]
    );
}

/// Tool-call deltas of a streamed answer, put together as the SDKs do: `(id, name, arguments)`.
fn streamed_calls(data: &[String]) -> (Vec<(String, String, String)>, Option<String>) {
    let mut calls: Vec<(String, String, String)> = Vec::new();
    let mut finish = None;
    for line in data.iter().filter(|l| *l != "[DONE]") {
        let chunk: Value = serde_json::from_str(line).expect("chunk");
        let choice = &chunk["choices"][0];
        if let Some(reason) = choice["finish_reason"].as_str() {
            finish = Some(reason.to_owned());
        }
        for delta in choice["delta"]["tool_calls"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let index = delta["index"].as_u64().expect("index") as usize;
            if index == calls.len() {
                calls.push(Default::default());
            }
            let call = &mut calls[index];
            if let Some(id) = delta["id"].as_str() {
                call.0 = id.to_owned();
            }
            if let Some(name) = delta["function"]["name"].as_str() {
                call.1.push_str(name);
            }
            if let Some(arguments) = delta["function"]["arguments"].as_str() {
                call.2.push_str(arguments);
            }
        }
    }
    (calls, finish)
}

#[tokio::test]
async fn streamed_tool_calls_and_a_resume_after_a_restart() {
    let h = harness_with(|_| {}).await;
    script_turn(&h);
    let stream = json!({"stream": true});
    let first = ask_question(&h, stream.clone()).await;
    assert_eq!(first.status(), 200);
    let (calls, finish) = streamed_calls(&sse_data(first).await);
    assert_eq!(finish.as_deref(), Some("tool_calls"));
    assert_eq!(calls.len(), 1);
    let (id, name, arguments) = calls[0].clone();
    assert_eq!(
        (name.as_str(), arguments.as_str()),
        ("get_weather", r#"{"city":"Lisbon"}"#)
    );

    // The pause is durable: a restart between the two requests loses nothing.
    let h = restart(h).await;
    let assistant = json!({"role": "assistant", "content": null, "tool_calls": [
        {"id": id, "type": "function", "function": {"name": name, "arguments": arguments}}]});
    let second = ask_with(&h, resumed(&assistant, &[(&id, "sunny, 24°C")]), stream).await;
    assert_eq!(second.status(), 200);
    let data = sse_data(second).await;
    assert_eq!(
        crate::common::streamed_content(&data),
        "Sunny and 24°C in Lisbon: pack light."
    );
    let human = human_block(&get_json(&h, "/memproxy/v1/users/ana/agents/default").await);
    assert!(human.contains("wants the weather"), "{human}");
}

#[tokio::test]
async fn results_that_do_not_match_the_waiting_calls_are_refused() {
    let h = harness_with(|_| {}).await;
    script_turn(&h);
    let (message, id) = paused_on_a_call(&h).await;

    let refused = |response: reqwest::Response| async move {
        assert_eq!(response.status(), 400);
        let body: Value = response.json().await.expect("json");
        assert_eq!(body["error"]["type"], "invalid_request_error", "{body}");
        assert_eq!(body["error"]["param"], "messages", "{body}");
        body["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    // A result for a call the agent did not make.
    let wrong = ask_with(&h, resumed(&message, &[("call_other", "rain")]), json!({})).await;
    let text = refused(wrong).await;
    assert!(text.contains("call_other") && text.contains(&id), "{text}");
    // The call answered twice.
    let twice = ask_with(
        &h,
        resumed(&message, &[(&id, "rain"), (&id, "sun")]),
        json!({}),
    )
    .await;
    assert!(refused(twice).await.contains("more than one"));
    // The assistant's calls with no result at all.
    let missing = ask_with(&h, resumed(&message, &[]), json!({})).await;
    assert!(refused(missing)
        .await
        .contains("no tool message answers them"));
    // Another user's agent waits for nothing: the results are refused there too.
    let stranger = h
        .client
        .post(h.url("/explicit/v1/chat/completions"))
        .header("x-memproxy-user", "bo")
        .json(&json!({"model": "mock-model", "messages": resumed(&message, &[(&id, "sunny")]), "tools": [weather_tool()]}))
        .send()
        .await
        .expect("answer");
    assert!(refused(stranger).await.contains("not waiting"));
    // Only the first request reached the model; the refusals left the pause as it was.
    assert_eq!(model_requests(&h).len(), 2);
    let good = ask_with(&h, resumed(&message, &[(&id, "sunny, 24°C")]), json!({})).await;
    assert_eq!(good.status(), 200);
    let body: Value = good.json().await.expect("json");
    assert_eq!(body["choices"][0]["finish_reason"], "stop");
}

#[tokio::test]
async fn a_conversation_that_goes_on_without_the_results_closes_the_pause() {
    let h = harness_with(|_| {}).await;
    h.mock.push(call("get_weather", json!({"city": "Lisbon"})));
    let first = ask_question(&h, json!({})).await;
    assert_eq!(first.headers()["x-memproxy-stop"], "client_tool_calls");
    // The app forgot the call and the user asks something else.
    h.mock.push(send("Hello again."));
    let next = ask_with(
        &h,
        json!([{"role": "user", "content": "Never mind. Hi!"}]),
        json!({}),
    )
    .await;
    assert_eq!(next.status(), 200);
    let body: Value = next.json().await.expect("json");
    assert_eq!(body["choices"][0]["message"]["content"], "Hello again.");
    // The agent's context holds the call with a "not run" result: a valid history.
    let requests = model_requests(&h);
    let results = tool_results(&requests[1]);
    assert!(
        results.iter().any(|r| r["status"] == "Failed"
            && r["message"]
                .as_str()
                .unwrap_or_default()
                .contains("did not run")),
        "{results:?}"
    );
    let messages = requests[1]["messages"].as_array().expect("messages");
    let call_index = messages
        .iter()
        .position(|m| m["tool_calls"][0]["function"]["name"] == "get_weather")
        .expect("the call is in context");
    assert_eq!(messages[call_index + 1]["role"], "tool");
}

#[tokio::test]
async fn tool_choice_names_and_parallel_calls_are_respected() {
    let h = harness_with(|_| {}).await;
    // A client tool named like a memory tool is offered under another name; the client sees its
    // own name.
    let shadow = json!({"type": "function", "function": {"name": "send_message",
        "parameters": {"type": "object", "properties": {"to": {"type": "string"}}}}});
    h.mock.push(Reply::ToolCalls(vec![
        (
            "app_send_message".to_owned(),
            json!({"to": "Bo"}).to_string(),
        ),
        (
            "get_weather".to_owned(),
            json!({"city": "Oslo"}).to_string(),
        ),
    ]));
    let first = ask_with(
        &h,
        json!([{"role": "user", "content": "Text Bo and check Oslo's weather."}]),
        json!({"tools": [weather_tool(), shadow], "parallel_tool_calls": false,
               "tool_choice": "required"}),
    )
    .await;
    assert_eq!(first.status(), 200);
    let body: Value = first.json().await.expect("json");
    let calls = body["choices"][0]["message"]["tool_calls"]
        .as_array()
        .expect("calls")
        .clone();
    // One call at a time: the second waits for the first one's result.
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0]["function"]["name"], "send_message");
    let request = &model_requests(&h)[0];
    let offered: Vec<&str> = request["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    assert_eq!(offered.iter().filter(|n| **n == "send_message").count(), 1);
    assert!(offered.contains(&"app_send_message"), "{offered:?}");

    // tool_choice "none": the client's tools are not offered.
    h.mock.push(send("Fine."));
    let id = calls[0]["id"].as_str().expect("id").to_owned();
    let messages = json!([
        {"role": "user", "content": "Text Bo and check Oslo's weather."},
        body["choices"][0]["message"],
        {"role": "tool", "tool_call_id": id, "content": "sent"},
    ]);
    let second = ask_with(&h, messages, json!({"tool_choice": "none"})).await;
    assert_eq!(second.status(), 200);
    let request = model_requests(&h).last().cloned().expect("request");
    assert!(
        !request["tools"].to_string().contains("get_weather"),
        "{}",
        request["tools"]
    );
    // The refused parallel call is in the agent's context with its reason.
    let refused = tool_results(&request);
    assert!(
        refused.iter().any(|r| r["message"]
            .as_str()
            .unwrap_or_default()
            .contains("one function call at a time")),
        "{refused:?}"
    );
}

/// A client tool written without `"type"` (as lenient servers such as llama.cpp take it) is a
/// function tool: offered to the agent, and its call reaches the client.
#[tokio::test]
async fn a_client_tool_without_a_type_is_offered_as_a_function() {
    let h = harness_with(|_| {}).await;
    let mut untyped = weather_tool();
    untyped.as_object_mut().expect("an object").remove("type");
    h.mock.push(call("get_weather", json!({"city": "Lisbon"})));
    let response = ask_with(
        &h,
        json!([{"role": "user", "content": QUESTION}]),
        json!({"tools": [untyped]}),
    )
    .await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.expect("json");
    assert_eq!(
        body["choices"][0]["message"]["tool_calls"][0]["function"]["name"], "get_weather",
        "{body}"
    );
    let offered = model_requests(&h)[0]["tools"].to_string();
    assert!(offered.contains("get_weather"), "{offered}");
}

/// Seen from the 0.5B model: after the app's result, the agent calls the same function with the
/// same arguments again. The app is not asked twice; the agent is told why, and its next step
/// must reply.
#[tokio::test]
async fn the_same_client_call_right_after_its_result_is_not_sent_again() {
    let h = harness_with(|_| {}).await;
    h.mock.push(call("get_weather", json!({"city": "Lisbon"})));
    let (message, id) = paused_on_a_call(&h).await;
    h.mock.push(call("get_weather", json!({"city": "Lisbon"})));
    h.mock.push(send("Sunny and 24°C in Lisbon."));
    let second = ask_with(&h, resumed(&message, &[(&id, "sunny, 24°C")]), json!({})).await;
    assert_eq!(second.status(), 200);
    let body: Value = second.json().await.expect("json");
    assert_eq!(body["choices"][0]["finish_reason"], "stop", "{body}");
    assert_eq!(
        body["choices"][0]["message"]["content"],
        "Sunny and 24°C in Lisbon."
    );
    let last = model_requests(&h).last().cloned().expect("request");
    let refused = tool_results(&last);
    assert!(
        refused.iter().any(|r| r["message"]
            .as_str()
            .unwrap_or_default()
            .contains("was not run again")),
        "{refused:?}"
    );
    // The step after it must reply.
    assert_eq!(
        last["tool_choice"]["function"]["name"], "send_message",
        "{}",
        last["tool_choice"]
    );
}

/// The same call again is the user's to ask for: when the client's next request carries the
/// result and a new message of the user's ("Check again, please."), the repeat reaches the app.
#[tokio::test]
async fn the_same_client_call_after_the_user_asks_again_is_sent() {
    let h = harness_with(|_| {}).await;
    h.mock.push(call("get_weather", json!({"city": "Lisbon"})));
    let (message, id) = paused_on_a_call(&h).await;
    h.mock.push(call("get_weather", json!({"city": "Lisbon"})));
    let mut messages = resumed(&message, &[(&id, "sunny, 24°C")]);
    if let Some(list) = messages.as_array_mut() {
        list.push(json!({"role": "user", "content": "Check again, please."}));
    }
    let second = ask_with(&h, messages, json!({})).await;
    assert_eq!(second.status(), 200);
    let body: Value = second.json().await.expect("json");
    assert_eq!(body["choices"][0]["finish_reason"], "tool_calls", "{body}");
    assert_eq!(
        body["choices"][0]["message"]["tool_calls"][0]["function"]["name"],
        "get_weather"
    );
}
