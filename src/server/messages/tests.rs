use serde_json::{json, Value};

use super::events::Translator;
use super::*;
use crate::openai::translate::feed_chat;

fn chat(request: Value) -> Value {
    let converted = translate(request.to_string().as_bytes()).expect("translates");
    serde_json::to_value(crate::openai::neutral::chat_request(&converted.request)).expect("json")
}

fn refusal(request: Value) -> String {
    match translate(request.to_string().as_bytes()) {
        Ok(converted) => panic!("accepted: {:?}", converted.request),
        Err(error) => {
            assert_eq!(error.catalogue().0, 400);
            error.to_string()
        }
    }
}

#[test]
fn a_conversation_with_tools_becomes_chat_completions() {
    let converted = chat(json!({
        "model": "claude-x", "max_tokens": 100, "temperature": 0.2, "stop_sequences": ["END"],
        "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
        "metadata": {"user_id": "ada"},
        "tools": [{"name": "weather", "description": "Weather now", "input_schema": {"type": "object"}}],
        "tool_choice": {"type": "any", "disable_parallel_tool_use": true},
        "messages": [
            {"role": "user", "content": "Weather in Porto?"},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "...", "signature": "s"},
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Porto"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "21C"}]},
                {"type": "text", "text": "And tomorrow?"}]},
            {"role": "system", "content": [{"type": "text", "text": "Answer in Celsius."}]}
        ]
    }));
    assert_eq!(converted["model"], "claude-x");
    assert_eq!(converted["max_tokens"], 100);
    assert_eq!(converted["stop"], json!(["END"]));
    assert_eq!(converted["user"], "ada");
    let session = chat(json!({"model": "m", "max_tokens": 5,
        "metadata": {"user_id": "{\"device_id\":\"d\",\"session_id\":\"s\"}"},
        "messages": [{"role": "user", "content": "hi"}]}));
    assert!(session.get("user").is_none(), "{session}");
    assert_eq!(converted["tool_choice"], "required");
    assert_eq!(converted["parallel_tool_calls"], false);
    assert_eq!(
        converted["tools"][0],
        json!({"type": "function", "function": {"name": "weather", "description": "Weather now", "parameters": {"type": "object"}}})
    );
    let messages = converted["messages"].as_array().expect("messages");
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        roles,
        ["system", "user", "assistant", "tool", "user", "system"]
    );
    assert_eq!(messages[5]["content"], "Answer in Celsius.");
    assert_eq!(messages[0]["content"], "Be brief.");
    assert_eq!(messages[2]["content"], "Checking.");
    assert_eq!(
        messages[2]["tool_calls"][0]["function"],
        json!({"name": "weather", "arguments": "{\"city\":\"Porto\"}"})
    );
    assert_eq!(
        messages[3],
        json!({"role": "tool", "tool_call_id": "toolu_1", "content": "21C"})
    );
    assert_eq!(messages[4]["content"], "And tomorrow?");
}

#[test]
fn images_become_image_url_parts_and_streams_ask_for_usage() {
    let converted = chat(json!({
        "model": "m", "max_tokens": 5, "stream": true,
        "messages": [{"role": "user", "content": [
            {"type": "text", "text": "What is this?"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}]}]
    }));
    assert_eq!(converted["stream"], true);
    assert_eq!(converted["stream_options"]["include_usage"], true);
    assert_eq!(
        converted["messages"][0]["content"][1],
        json!({"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}})
    );
}

#[test]
fn bad_and_untranslatable_requests_are_refused_precisely() {
    let message = json!([{"role": "user", "content": "hi"}]);
    assert!(refusal(json!({"max_tokens": 5, "messages": message})).contains("model"));
    assert!(refusal(json!({"model": "m", "messages": message})).contains("max_tokens"));
    assert!(
        refusal(json!({"model": "m", "max_tokens": 0, "messages": message})).contains("max_tokens")
    );
    assert!(refusal(json!({"model": "m", "max_tokens": 5, "messages": []})).contains("messages"));
    assert!(refusal(json!({"model": "m", "max_tokens": 5,
        "messages": [{"role": "tool", "content": "x"}]}))
    .contains("messages.0.role"));
    let translated = translate(
        json!({"model": "m", "max_tokens": 5, "messages": message,
            "tools": [{"type": "web_search_20250305", "name": "web_search"}]})
        .to_string()
        .as_bytes(),
    )
    .expect("server tools are left out, not refused");
    assert_eq!(translated.dropped_tools, ["web_search"]);
    assert!(translated.request.tools.is_empty());
    let document = refusal(
        json!({"model": "m", "max_tokens": 5, "messages": [{"role": "user",
        "content": [{"type": "document", "source": {}}]}]}),
    );
    assert!(document.contains("'document'") && document.contains("messages.0.content.0"));
    assert!(
        refusal(json!({"model": "m", "max_tokens": 5, "messages": message,
        "mcp_servers": []}))
        .contains("mcp_servers")
    );
    assert!(translate(b"[1]").is_err() && translate(b"{").is_err());
    let hot = refusal(json!({"model": "m", "max_tokens": 5, "messages": message,
        "temperature": "hot"}));
    assert!(
        hot.contains("temperature") && hot.contains("number"),
        "{hot}"
    );
    assert!(
        refusal(json!({"model": "m", "max_tokens": 5, "messages": message,
        "stop_sequences": "END"}))
        .contains("stop_sequences")
    );
}

#[test]
fn errors_have_anthropic_types() {
    assert_eq!(
        error_body(429, "slow down"),
        json!({"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}})
    );
    assert_eq!(error_type(401), "authentication_error");
    assert_eq!(error_type(502), "api_error");
}

#[test]
fn a_whole_completion_becomes_a_message() {
    let completion = json!({"id": "chatcmpl-abc", "choices": [{"index": 0, "finish_reason": "tool_calls",
        "message": {"role": "assistant", "content": "Let me look.", "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Porto\"}"}}]}}],
        "usage": {"prompt_tokens": 12, "completion_tokens": 7, "total_tokens": 19,
            "prompt_tokens_details": {"cached_tokens": 10}}});
    let said = crate::openai::reply::completion(completion.to_string().as_bytes());
    let message = reply::message(&said.expect("a completion"), "claude-x");
    assert_eq!(message["id"], "msg_abc");
    assert_eq!(message["model"], "claude-x");
    assert_eq!(message["stop_reason"], "tool_use");
    assert_eq!(
        message["content"][0],
        json!({"type": "text", "text": "Let me look."})
    );
    assert_eq!(message["content"][1]["input"], json!({"city": "Porto"}));
    assert_eq!(
        message["usage"],
        json!({"input_tokens": 12, "output_tokens": 7, "cache_read_input_tokens": 10})
    );
}

/// `(event name, data)` of translated events.
fn parsed(events: &[bytes::Bytes]) -> Vec<(String, Value)> {
    events
        .iter()
        .map(|raw| {
            let text = String::from_utf8_lossy(raw);
            let name = text
                .lines()
                .find_map(|l| l.strip_prefix("event: "))
                .unwrap_or_default()
                .to_owned();
            let data = text
                .lines()
                .find_map(|l| l.strip_prefix("data: "))
                .and_then(|d| serde_json::from_str(d).ok())
                .unwrap_or(Value::Null);
            (name, data)
        })
        .collect()
}

#[test]
fn a_stream_becomes_anthropic_events() {
    let mut translator = Translator::new("claude-x");
    let mut reader = crate::openai::reply::ChunkReader::default();
    let mut out = Vec::new();
    let chunks = [
        json!({"id": "chatcmpl-1", "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}),
        json!({"id": "chatcmpl-1", "choices": [{"index": 0, "delta": {"content": "Hel"}}]}),
        json!({"id": "chatcmpl-1", "choices": [{"index": 0, "delta": {"content": "lo"}}]}),
        json!({"id": "chatcmpl-1", "choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "id": "call_9", "function": {"name": "weather", "arguments": "{\"ci"}}]}}]}),
        json!({"id": "chatcmpl-1", "choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "function": {"arguments": "ty\":\"Porto\"}"}}]}}]}),
        json!({"id": "chatcmpl-1", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
        json!({"id": "chatcmpl-1", "choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 4}}),
    ];
    out.extend(feed_chat(&mut translator, &mut reader, b": keep-alive\n\n"));
    for chunk in chunks {
        out.extend(feed_chat(
            &mut translator,
            &mut reader,
            format!("data: {chunk}\n\n").as_bytes(),
        ));
    }
    out.extend(feed_chat(&mut translator, &mut reader, b"data: [DONE]\n\n"));
    assert_eq!(out[0].as_ref(), b": keep-alive\n\n");
    let events = parsed(&out[1..]);
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "message_start",
            "ping",
            "content_block_start",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ]
    );
    assert_eq!(events[0].1["message"]["id"], "msg_1");
    assert_eq!(
        events[3].1["delta"],
        json!({"type": "text_delta", "text": "Hel"})
    );
    assert_eq!(
        events[6].1["content_block"],
        json!({"type": "tool_use", "id": "call_9", "name": "weather", "input": {}})
    );
    assert_eq!(events[7].1["index"], 1);
    assert_eq!(events[7].1["delta"]["partial_json"], "{\"city\":\"Porto\"}");
    assert_eq!(events[9].1["delta"]["stop_reason"], "tool_use");
    assert_eq!(events[9].1["usage"]["output_tokens"], 4);
    assert!(translator.finish().is_empty(), "closed once");
}

#[test]
fn an_error_in_the_stream_becomes_an_error_event() {
    let mut translator = Translator::new("m");
    let mut reader = crate::openai::reply::ChunkReader::default();
    let events = feed_chat(
        &mut translator,
        &mut reader,
        br#"data: {"error": {"message": "upstream timed out", "type": "server_error"}}

"#,
    );
    let events = parsed(&events);
    assert_eq!(events[0].0, "error");
    assert_eq!(events[0].1["error"]["message"], "upstream timed out");
    assert!(translator.finish().is_empty());
}

/// Applies a plan the way the native relay does: translate, then edit the request itself.
fn planned(request: Value, first_kept: usize, block: Option<crate::strategy::Placement>) -> Value {
    let translated = translate(request.to_string().as_bytes()).expect("translates");
    let plan = crate::strategy::Plan {
        first_kept,
        block: block.map(|placement| ("<memory>m</memory>".to_owned(), placement)),
    };
    let Value::Object(mut wire) = request else {
        panic!("an object")
    };
    native::apply(
        &mut wire,
        &translated.request.messages,
        &translated.origin,
        &plan,
    );
    Value::Object(wire)
}

#[test]
fn a_plan_edits_the_request_in_anthropics_shape() {
    use crate::strategy::Placement;
    let request = json!({"model": "m", "max_tokens": 8, "system": "Be brief.", "messages": [
        {"role": "user", "content": "old"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "42"},
                                     {"type": "text", "text": "new"}]}]});
    // Neutral: system, user "old", assistant call, tool result, user "new".
    let system = planned(request.clone(), 1, Some(Placement::System));
    assert_eq!(system["system"], "Be brief.\n\n<memory>m</memory>");
    assert_eq!(system["messages"], request["messages"]);

    // In front of the user's words, after the tool results that must come first.
    let user = planned(request.clone(), 1, Some(Placement::User));
    assert_eq!(user["messages"][2]["content"][0]["type"], "tool_result");
    assert_eq!(
        user["messages"][2]["content"][1]["text"],
        "<memory>m</memory>"
    );
    assert_eq!(user["messages"][2]["content"][2]["text"], "new");

    // A cut inside the call's turn moves back to the user turn before it; the history block
    // goes in front of what is kept.
    let cut = planned(request.clone(), 3, Some(Placement::History));
    let messages = cut["messages"].as_array().expect("messages");
    assert_eq!(messages[0]["content"], "<memory>m</memory>");
    assert_eq!(messages[1]["content"], "Noted.");
    assert_eq!(messages[2], request["messages"][0]);

    let mut plain = request.clone();
    plain["messages"][0]["content"] = json!("first");
    plain["messages"][1] = json!({"role": "assistant", "content": "ok"});
    plain["messages"][2] = json!({"role": "user", "content": "second"});
    let cut = planned(plain.clone(), 3, None);
    assert_eq!(cut["messages"], json!([plain["messages"][2]]));
    let mut bare = plain.clone();
    bare.as_object_mut().map(|o| o.remove("system"));
    let user = planned(bare, 1, Some(Placement::User));
    assert_eq!(
        user["messages"][2]["content"],
        "<memory>m</memory>\n\nsecond"
    );
}

mod plan_properties {
    use proptest::prelude::*;
    use serde_json::{json, Value};

    use crate::strategy::{Placement, Plan};

    /// One exchange of a generated conversation: 0 plain, 1 a tool call answered (with the user's
    /// next words in the same message or not), 2 an assistant message with text and thinking.
    fn conversation(kinds: &[(u8, bool)]) -> Vec<Value> {
        let mut messages = Vec::new();
        for (n, (kind, words_with_result)) in kinds.iter().enumerate() {
            let user = json!({"type": "text", "text": format!("user words {n}")});
            match kind {
                0 => {
                    messages.push(json!({"role": "user", "content": format!("plain {n}")}));
                    messages.push(json!({"role": "assistant", "content": format!("reply {n}")}));
                }
                1 => {
                    messages.push(json!({"role": "user", "content": [user]}));
                    messages.push(json!({"role": "assistant", "content": [
                        {"type": "tool_use", "id": format!("t{n}"), "name": "f", "input": {"n": n}}]}));
                    let mut result = vec![
                        json!({"type": "tool_result", "tool_use_id": format!("t{n}"), "content": "ok"}),
                    ];
                    if *words_with_result {
                        result.push(json!({"type": "text", "text": format!("more {n}")}));
                    }
                    messages.push(json!({"role": "user", "content": result}));
                    messages.push(json!({"role": "assistant", "content": "done"}));
                }
                _ => {
                    messages.push(json!({"role": "user", "content": format!("think {n}")}));
                    messages.push(json!({"role": "assistant", "content": [
                        {"type": "thinking", "thinking": "hm", "signature": "c2ln"},
                        {"type": "text", "text": format!("thought {n}")}]}));
                }
            }
        }
        messages.push(json!({"role": "user", "content": "newest"}));
        messages
    }

    fn placement(n: u8) -> Option<Placement> {
        match n {
            0 => None,
            1 => Some(Placement::System),
            2 => Some(Placement::User),
            _ => Some(Placement::History),
        }
    }

    proptest! {
        /// Whatever the cut and the placement: no panic; the request still begins at a user
        /// turn; every tool result follows its call; the newest message and the block survive.
        #[test]
        fn any_plan_leaves_a_valid_anthropic_request(
            kinds in proptest::collection::vec((0u8..3, any::<bool>()), 0..6),
            cut in 0usize..40,
            place in 0u8..4,
            system in any::<bool>(),
        ) {
            let messages = conversation(&kinds);
            let mut request = json!({"model": "m", "max_tokens": 8, "messages": messages});
            if system {
                request["system"] = json!([{"type": "text", "text": "S", "cache_control": {"type": "ephemeral"}}]);
            }
            let translated = super::super::translate(request.to_string().as_bytes()).expect("translates");
            let first_kept = cut.min(translated.request.messages.len());
            let plan = Plan {
                first_kept,
                block: placement(place).map(|p| ("<memory>B</memory>".to_owned(), p)),
            };
            let Value::Object(mut wire) = request.clone() else { unreachable!() };
            super::super::native::apply(&mut wire, &translated.request.messages, &translated.origin, &plan);
            let out = Value::Object(wire);
            let sent = out["messages"].as_array().expect("messages");
            prop_assert!(!sent.is_empty());
            let first = &sent[0];
            prop_assert_eq!(&first["role"], "user");
            prop_assert!(first["content"].as_array().is_none_or(|b| b[0]["type"] != "tool_result"));
            for (i, message) in sent.iter().enumerate() {
                for block in message["content"].as_array().into_iter().flatten() {
                    if block["type"] == "tool_result" {
                        let id = &block["tool_use_id"];
                        let called = i > 0 && sent[i - 1]["content"].as_array().is_some_and(|b| {
                            b.iter().any(|c| c["type"] == "tool_use" && &c["id"] == id)
                        });
                        prop_assert!(called, "a result without its call: {}", out);
                    }
                }
            }
            let text = out.to_string();
            prop_assert!(text.contains("newest"));
            prop_assert_eq!(text.matches("<memory>B</memory>").count(), usize::from(plan.block.is_some()));
            if system {
                prop_assert_eq!(&out["system"][0], &request["system"][0]);
            }
            // Thinking blocks that stay are untouched.
            for message in sent {
                if let Some(blocks) = message["content"].as_array() {
                    for block in blocks.iter().filter(|b| b["type"] == "thinking") {
                        prop_assert_eq!(&block["signature"], "c2ln");
                    }
                }
            }
        }
    }
}
