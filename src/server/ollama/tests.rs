use serde_json::{json, Map, Value};

use super::events::Translator;
use super::reply::Route;
use super::*;
use crate::openai::translate::{feed_chat, StreamTranslator};
use crate::strategy::{Placement, Plan};

fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

fn chat(request: Value) -> Value {
    let converted = from_chat(&object(request)).expect("translates");
    serde_json::to_value(crate::openai::neutral::chat_request(
        &converted.expect("a conversation"),
    ))
    .expect("json")
}

fn refusal(request: Value) -> String {
    match from_chat(&object(request)) {
        Ok(converted) => panic!("accepted: {converted:?}"),
        Err(error) => {
            assert_eq!(error.catalogue().0, 400);
            error.to_string()
        }
    }
}

#[test]
fn a_conversation_with_images_tools_and_options_becomes_chat_completions() {
    let converted = chat(json!({
        "model": "qwen2.5", "keep_alive": "5m", "think": false, "format": "json",
        "options": {"temperature": 0.1, "num_predict": 64, "num_ctx": 8192, "stop": ["END"],
                    "seed": 7},
        "tools": [{"type": "function", "function": {"name": "weather", "parameters": {}}}],
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "What is this?", "images": ["iVBORw0KGgoAAAA"]},
            {"role": "assistant", "content": "", "tool_calls": [
                {"function": {"name": "weather", "arguments": {"city": "Porto"}}},
                {"function": {"name": "time", "arguments": {}}}]},
            {"role": "tool", "tool_name": "time", "content": "noon"},
            {"role": "tool", "content": "21C"},
            {"role": "User", "content": "Thanks"}
        ]
    }));
    // Ollama streams unless the request says otherwise.
    assert_eq!(converted["stream"], true);
    assert_eq!(converted["stream_options"]["include_usage"], true);
    assert_eq!(converted["temperature"], 0.1);
    assert_eq!(converted["max_tokens"], 64);
    assert_eq!(converted["stop"], json!(["END"]));
    assert_eq!(converted["seed"], 7);
    assert_eq!(converted["response_format"], json!({"type": "json_object"}));
    assert!(converted.get("num_ctx").is_none() && converted.get("keep_alive").is_none());
    assert_eq!(converted["tools"][0]["function"]["name"], "weather");
    let messages = converted["messages"].as_array().expect("messages");
    assert_eq!(messages.len(), 6);
    assert_eq!(
        messages[1]["content"],
        json!([{"type": "text", "text": "What is this?"},
               {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgoAAAA"}}])
    );
    let calls = messages[2]["tool_calls"].as_array().expect("calls");
    assert_eq!(calls[0]["id"], "call_2_0");
    assert_eq!(calls[0]["function"]["arguments"], r#"{"city":"Porto"}"#);
    assert!(messages[2]["content"].is_null());
    // A result naming its tool answers that call; one naming none, the oldest unanswered.
    assert_eq!(messages[3]["tool_call_id"], "call_2_1");
    assert_eq!(messages[4]["tool_call_id"], "call_2_0");
    assert_eq!(messages[5], json!({"role": "user", "content": "Thanks"}));
}

#[test]
fn a_schema_format_and_a_whole_answer_are_asked_as_chat_completions_asks() {
    let converted = chat(json!({
        "model": "m", "stream": false, "format": {"type": "object"},
        "options": {"num_predict": -1},
        "messages": [{"role": "user", "content": "hi"}]
    }));
    assert!(converted.get("stream").is_none(), "{converted}");
    assert!(converted.get("max_tokens").is_none(), "{converted}");
    assert_eq!(converted["response_format"]["type"], "json_schema");
    assert_eq!(
        converted["response_format"]["json_schema"]["schema"],
        json!({"type": "object"})
    );
}

#[test]
fn generate_is_one_exchange_and_an_empty_request_only_loads() {
    let converted = from_generate(&object(json!({
        "model": "m", "prompt": "Why is the sky blue?", "system": "Be brief.", "stream": false
    })))
    .expect("translates")
    .expect("a conversation");
    let messages = serde_json::to_value(crate::openai::neutral::chat_request(&converted).messages)
        .expect("json");
    assert_eq!(
        messages,
        json!([{"role": "system", "content": "Be brief."},
               {"role": "user", "content": "Why is the sky blue?"}])
    );
    assert!(from_generate(&object(json!({"model": "m"})))
        .expect("reads")
        .is_none());
    assert!(from_chat(&object(json!({"model": "m", "messages": []})))
        .expect("reads")
        .is_none());
}

#[test]
fn what_has_no_counterpart_or_is_malformed_is_refused_by_name() {
    assert!(refusal(json!({"messages": []})).contains("model is required"));
    let raw = refusal(json!({"model": "m", "raw": true, "messages": []}));
    assert!(raw.contains("'raw'"), "{raw}");
    assert!(refusal(json!({"model": "m", "logprobs": true, "messages": []})).contains("logprobs"));
    // Defaults clients send are no use of the feature.
    assert!(
        from_chat(&object(json!({"model": "m", "raw": false, "template": "",
        "messages": [{"role": "user", "content": "x"}]})))
        .is_ok()
    );
    assert!(
        refusal(json!({"model": "m", "messages": [{"role": "robot", "content": "x"}]}))
            .contains("messages[0].role")
    );
    assert!(
        refusal(json!({"model": "m", "messages": [{"role": "tool", "content": "x"}]}))
            .contains("no earlier assistant message")
    );
    assert!(refusal(json!({"model": "m", "stream": "yes", "messages": []})).contains("stream"));
    assert!(refusal(json!({"model": "m", "format": 3,
        "messages": [{"role": "user", "content": "x"}]}))
    .contains("format"));
    // A setting of the wrong type is named here, not left for the upstream to puzzle over.
    let one = json!([{"role": "user", "content": "x"}]);
    assert!(
        refusal(json!({"model": "m", "options": {"top_k": "5"}, "messages": one}))
            .contains("'top_k' must be a number")
    );
    assert!(refusal(
        json!({"model": "m", "tools": [{"type": "function", "function": {}}],
        "messages": one})
    )
    .contains("tools[0].function.name"));
}

#[test]
fn the_surface_owns_its_paths_with_and_without_a_mode() {
    assert!(owns("/api/chat") && owns("/implicit/api/chat") && owns("/api/tags"));
    assert!(!owns("/v1/chat/completions") && !owns("/a/b/api/chat") && !owns("/apis/x"));
}

fn plan(first_kept: usize, placement: Option<Placement>) -> Plan {
    Plan {
        first_kept,
        block: placement.map(|p| ("<memory>B</memory>".to_owned(), p)),
    }
}

fn applied(request: Value, plan: &Plan) -> Value {
    let mut wire = object(request);
    let neutral = from_chat(&wire)
        .expect("reads")
        .expect("a conversation")
        .messages;
    native::apply_chat(&mut wire, &neutral, &[], plan);
    Value::Object(wire)
}

#[test]
fn a_plan_keeps_the_system_drops_old_turns_whole_and_places_the_block() {
    let request = json!({"model": "m", "options": {"num_ctx": 4096}, "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "old"},
        {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "t", "arguments": {}}}]},
        {"role": "tool", "content": "r"},
        {"role": "user", "content": "new"}]});
    // Cutting at the tool result would orphan it: the cut moves back to the user's turn.
    let kept = applied(request.clone(), &plan(3, Some(Placement::User)));
    assert_eq!(kept["options"], json!({"num_ctx": 4096}));
    let messages = kept["messages"].as_array().expect("messages");
    assert_eq!(messages.len(), 5);
    assert_eq!(messages[4]["content"], "<memory>B</memory>\n\nnew");
    let cut = applied(request.clone(), &plan(4, Some(Placement::System)));
    let messages = cut["messages"].as_array().expect("messages");
    assert_eq!(messages.len(), 2);
    assert_eq!(messages[0]["content"], "Be brief.\n\n<memory>B</memory>");
    assert_eq!(messages[1]["content"], "new");
    let history = applied(request, &plan(4, Some(Placement::History)));
    let messages = history["messages"].as_array().expect("messages");
    assert_eq!(messages[1]["content"], "<memory>B</memory>");
    assert_eq!(messages[2]["role"], "assistant");
    assert_eq!(messages[3]["content"], "new");
}

#[test]
fn a_system_message_among_the_dropped_turns_stays_as_on_every_other_form() {
    let request = json!({"model": "m", "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "old"},
        {"role": "system", "content": "Mid-chat rule."},
        {"role": "assistant", "content": "old answer"},
        {"role": "user", "content": "new"}]});
    let kept = applied(request, &plan(4, Some(Placement::User)));
    let texts: Vec<&str> = kept["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| m["content"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(
        texts,
        ["Be brief.", "Mid-chat rule.", "<memory>B</memory>\n\nnew"]
    );
}

fn stream_lines(events: &[&str], route: Route) -> Vec<Value> {
    let mut translator = Translator::new(route, "m", std::time::Instant::now());
    let mut reader = crate::openai::reply::ChunkReader::default();
    let mut out = Vec::new();
    for event in events {
        out.extend(feed_chat(&mut translator, &mut reader, event.as_bytes()));
    }
    out.extend(translator.end_of_input());
    out.iter()
        .map(|line| {
            assert!(line.ends_with(b"\n"));
            serde_json::from_slice(line).expect("one JSON object per line")
        })
        .collect()
}

#[test]
fn a_chat_stream_becomes_ndjson_with_the_calls_whole_and_a_final_object() {
    let lines = stream_lines(
        &[
            r#"data: {"id":"c","choices":[{"index":0,"delta":{"content":"Hel"}}]}"#,
            ": keep-alive",
            r#"data: {"id":"c","choices":[{"index":0,"delta":{"content":"lo"}}]}"#,
            r#"data: {"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","function":{"name":"t","arguments":"{\"x\""}}]}}]}"#,
            r#"data: {"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":":1}"}}]}}]}"#,
            r#"data: {"id":"c","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
            r#"data: {"id":"c","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":3}}"#,
            "data: [DONE]",
        ],
        Route::Chat,
    );
    assert_eq!(lines.len(), 4, "{lines:?}");
    assert_eq!(lines[0]["message"]["content"], "Hel");
    assert_eq!(lines[0]["done"], false);
    assert_eq!(lines[1]["message"]["content"], "lo");
    let call = &lines[2]["message"]["tool_calls"][0];
    assert_eq!(call["function"]["name"], "t");
    assert_eq!(call["function"]["arguments"], json!({"x": 1}));
    assert_eq!(lines[3]["done"], true);
    assert_eq!(lines[3]["done_reason"], "stop");
    assert_eq!(lines[3]["prompt_eval_count"], 9);
    assert_eq!(lines[3]["eval_count"], 3);
    assert!(lines[3]["total_duration"].as_u64().is_some());
}

#[test]
fn a_generate_stream_says_response_and_a_cut_stream_ends_with_an_error_line() {
    let lines = stream_lines(
        &[r#"data: {"id":"c","choices":[{"index":0,"delta":{"content":"Blue"}}]}"#],
        Route::Generate,
    );
    assert_eq!(lines[0]["response"], "Blue");
    assert!(lines[0].get("message").is_none());
    assert!(lines[1]["error"]
        .as_str()
        .is_some_and(|e| e.contains("ended")));
    let failed = stream_lines(
        &[r#"data: {"error":{"message":"overloaded"}}"#],
        Route::Chat,
    );
    assert_eq!(failed, vec![json!({"error": "overloaded"})]);
}

#[test]
fn a_whole_ollama_answer_and_its_stream_read_into_the_same_reply() {
    let (replies, usage) = native::whole(
        br#"{"model":"m","message":{"role":"assistant","content":"Hi",
            "tool_calls":[{"function":{"name":"t","arguments":{"x":1}}}]},
            "done":true,"done_reason":"stop","prompt_eval_count":5,"eval_count":2}"#,
    );
    use crate::conversation::reply::Finish;
    assert_eq!(replies[0].text, "Hi");
    assert_eq!(replies[0].calls[0].arguments, r#"{"x":1}"#);
    assert_eq!(replies[0].finish, Some(Finish::ToolCalls));
    assert_eq!(usage.map(|u| u.total()), Some(7));
    use crate::server::core::watch::Watch;
    let mut watch = native::OllamaWatch::default();
    watch.observe(r#"{"message":{"role":"assistant","content":"H"},"done":false}"#);
    assert!(!watch.finished());
    watch.observe(r#"{"message":{"role":"assistant","content":"i"},"done":false}"#);
    watch.observe(r#"{"message":{"role":"assistant","content":""},"done":true,"done_reason":"length","eval_count":2}"#);
    assert!(watch.finished());
    assert_eq!(watch.replies()[0].text, "Hi");
    assert_eq!(watch.replies()[0].finish, Some(Finish::Length));
}
