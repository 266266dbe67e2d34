use serde_json::{json, Value};

use super::events::Translator;
use super::*;
use crate::openai::translate::feed_chat;

fn translated(request: Value) -> Value {
    let Value::Object(request) = request else {
        panic!("an object")
    };
    let out = translate(
        &request,
        vec![crate::conversation::request::Message::text_message(
            "user",
            "earlier".into(),
        )],
    )
    .expect("translates");
    serde_json::to_value(crate::openai::neutral::chat_request(&out.request)).expect("json")
}

#[test]
fn items_parts_and_settings_become_chat_completions() {
    let chat = translated(json!({
        "model": "m", "instructions": "Be brief.", "max_output_tokens": 30, "user": "u1",
        "text": {"format": {"type": "json_schema", "name": "answer", "schema": {"type": "object"}, "strict": true}},
        "tool_choice": {"type": "function", "name": "f"},
        "input": [
            {"role": "developer", "content": "Use metric units."},
            {"type": "message", "role": "user", "content": [
                {"type": "input_text", "text": "Look:"},
                {"type": "input_image", "image_url": "https://example.com/a.png", "detail": "low"}]},
            {"type": "reasoning", "id": "rs_1", "summary": []},
            {"role": "assistant", "content": [{"type": "output_text", "text": "Calling."}]},
            {"type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "call_1", "output": [{"type": "input_text", "text": "done"}]}
        ]
    }));
    assert_eq!(chat["max_tokens"], 30);
    assert_eq!(chat["user"], "u1");
    assert_eq!(
        chat["tool_choice"],
        json!({"type": "function", "function": {"name": "f"}})
    );
    assert_eq!(
        chat["response_format"],
        json!({"type": "json_schema", "json_schema": {"name": "answer", "schema": {"type": "object"}, "strict": true}})
    );
    let messages = chat["messages"].as_array().expect("messages");
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        roles,
        ["system", "user", "system", "user", "assistant", "tool"]
    );
    assert_eq!(
        messages[1]["content"], "earlier",
        "history after instructions"
    );
    assert_eq!(
        messages[3]["content"][1],
        json!({"type": "image_url", "image_url": {"url": "https://example.com/a.png", "detail": "low"}})
    );
    assert_eq!(messages[4]["content"], "Calling.");
    assert_eq!(messages[4]["tool_calls"][0]["id"], "call_1");
    assert_eq!(messages[5]["content"], "done");
}

#[test]
fn a_setting_of_the_wrong_type_is_refused_by_name() {
    let refused = |request: Value| {
        let Value::Object(request) = request else {
            panic!("an object")
        };
        match translate(&request, Vec::new()) {
            Ok(_) => panic!("accepted"),
            Err(error) => (error.catalogue().0.as_u16(), error.to_string()),
        }
    };
    let (status, message) = refused(json!({"model": "m", "input": "hi", "top_p": "high"}));
    assert_eq!(status, 400);
    assert!(message.contains("'top_p' must be a number"), "{message}");
    let (_, message) = refused(json!({"model": "m", "input": "hi", "parallel_tool_calls": 1}));
    assert!(message.contains("parallel_tool_calls"), "{message}");
    let (_, message) = refused(json!({"model": "m", "input": "hi",
        "tools": [{"type": "function", "name": "f", "strict": "yes"}]}));
    assert!(message.contains("tools[0].strict"), "{message}");
}

#[test]
fn a_stream_becomes_response_events_and_reports_the_finished_response() {
    let skeleton = reply::skeleton(
        &serde_json::from_value(json!({"model": "m"})).expect("map"),
        "resp_1",
        0,
    );
    let finished = std::sync::Arc::new(std::sync::Mutex::new(None));
    let sink = std::sync::Arc::clone(&finished);
    let mut translator = Translator::new(
        skeleton,
        Some(Box::new(move |done| {
            *sink.lock().expect("lock") = Some(done);
            Box::pin(async {})
        })),
    );
    let mut reader = crate::openai::reply::ChunkReader::default();
    let mut out = Vec::new();
    for chunk in [
        json!({"choices": [{"index": 0, "delta": {"content": "Hi "}}]}),
        json!({"choices": [{"index": 0, "delta": {"content": "there"}}]}),
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}),
        json!({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2}}),
    ] {
        out.extend(feed_chat(
            &mut translator,
            &mut reader,
            format!("data: {chunk}\n\n").as_bytes(),
        ));
    }
    out.extend(feed_chat(&mut translator, &mut reader, b"data: [DONE]\n\n"));
    let kinds: Vec<String> = out
        .iter()
        .map(|e| {
            String::from_utf8_lossy(e)
                .lines()
                .next()
                .unwrap_or_default()
                .trim_start_matches("event: ")
                .to_owned()
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.content_part.added",
            "response.output_text.delta",
            "response.output_text.delta",
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.incomplete"
        ]
    );
    let done = finished.lock().expect("lock").clone().expect("reported");
    assert_eq!(done["status"], "incomplete");
    assert_eq!(done["incomplete_details"]["reason"], "max_output_tokens");
    assert_eq!(done["output"][0]["content"][0]["text"], "Hi there");
    assert_eq!(done["usage"]["total_tokens"], 5);
    assert_eq!(
        reply::assistant_message(&done),
        json!({"role": "assistant", "content": "Hi there"})
    );
}

fn planned(request: Value, first_kept: usize, block: Option<crate::strategy::Placement>) -> Value {
    let Value::Object(mut wire) = request else {
        panic!("an object")
    };
    let translated = translate(&wire, Vec::new()).expect("translates");
    let plan = crate::strategy::Plan {
        first_kept,
        block: block.map(|placement| ("<memory>m</memory>".to_owned(), placement)),
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
fn a_plan_edits_the_request_in_the_responses_shape() {
    use crate::strategy::Placement;
    let text = planned(
        json!({"model": "m", "input": "hi"}),
        0,
        Some(Placement::User),
    );
    assert_eq!(text["input"], "<memory>m</memory>\n\nhi");
    let text = planned(
        json!({"model": "m", "input": "hi"}),
        0,
        Some(Placement::History),
    );
    assert_eq!(text["input"][0]["content"], "<memory>m</memory>");
    assert_eq!(text["input"][2]["content"], "hi");
    let system = planned(
        json!({"model": "m", "instructions": "Be brief.", "input": "hi"}),
        1,
        Some(Placement::System),
    );
    assert_eq!(system["instructions"], "Be brief.\n\n<memory>m</memory>");

    let items = json!([
        {"role": "user", "content": "old"},
        {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c", "output": "42"},
        {"role": "user", "content": [{"type": "input_text", "text": "new"}]}]);
    // Neutral: user "old", assistant call, tool output, user "new". A cut at the output moves
    // back to the message before the call.
    let cut = planned(
        json!({"model": "m", "input": items}),
        2,
        Some(Placement::User),
    );
    assert_eq!(cut["input"][0], items[0]);
    assert_eq!(cut["input"][3]["content"][0]["text"], "<memory>m</memory>");
    let cut = planned(json!({"model": "m", "input": items}), 3, None);
    assert_eq!(cut["input"], json!([items[3]]));
    // With previous_response_id the upstream holds the chain: nothing is dropped.
    let chained = planned(
        json!({"model": "m", "previous_response_id": "resp_1", "input": items}),
        3,
        None,
    );
    assert_eq!(chained["input"], items);
}

#[test]
fn a_developer_message_before_the_cut_stays_as_on_every_other_form() {
    use crate::strategy::Placement;
    let items = json!([
        {"role": "developer", "content": "Answer in French."},
        {"role": "user", "content": "old"},
        {"role": "system", "content": "Mid-chat rule."},
        {"role": "assistant", "content": "old answer"},
        {"role": "user", "content": "new"}]);
    let cut = planned(
        json!({"model": "m", "input": items}),
        4,
        Some(Placement::User),
    );
    assert_eq!(
        cut["input"],
        json!([items[0], items[2],
            {"role": "user", "content": "<memory>m</memory>\n\nnew"}])
    );
}

mod plan_properties {
    use proptest::prelude::*;
    use serde_json::{json, Value};

    use crate::strategy::{Placement, Plan};

    fn items(kinds: &[u8]) -> Vec<Value> {
        let mut items = Vec::new();
        for (n, kind) in kinds.iter().enumerate() {
            items.push(json!({"role": "user", "content": format!("user {n}")}));
            match kind {
                0 => items.push(json!({"role": "assistant", "content": format!("reply {n}")})),
                1 => {
                    items.push(json!({"type": "reasoning", "id": format!("rs{n}"), "summary": []}));
                    items.push(json!({"type": "function_call", "call_id": format!("c{n}"), "name": "f", "arguments": "{}"}));
                    items.push(json!({"type": "function_call_output", "call_id": format!("c{n}"), "output": "ok"}));
                    items.push(json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "done"}]}));
                }
                _ => {
                    items.push(json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "calling"}]}));
                    items.push(json!({"type": "function_call", "call_id": format!("c{n}"), "name": "f", "arguments": "{}"}));
                    items.push(json!({"type": "function_call_output", "call_id": format!("c{n}"), "output": "ok"}));
                }
            }
        }
        items.push(json!({"role": "user", "content": [{"type": "input_text", "text": "newest"}]}));
        items
    }

    proptest! {
        /// Whatever the cut and the placement: no panic; kept input starts at a message; every
        /// call output follows its call; the newest item and the block survive; a chained
        /// request loses nothing.
        #[test]
        fn any_plan_leaves_a_valid_responses_request(
            kinds in proptest::collection::vec(0u8..3, 0..6),
            cut in 0usize..40,
            place in 0u8..4,
            chained in any::<bool>(),
        ) {
            let input = items(&kinds);
            let mut request = json!({"model": "m", "instructions": "S", "input": input});
            if chained {
                request["previous_response_id"] = json!("resp_1");
            }
            let Value::Object(mut wire) = request.clone() else { unreachable!() };
            let translated = super::super::translate(&wire, Vec::new()).expect("translates");
            let plan = Plan {
                first_kept: cut.min(translated.request.messages.len()),
                block: match place {
                    0 => None,
                    1 => Some(Placement::System),
                    2 => Some(Placement::User),
                    _ => Some(Placement::History),
                }
                .map(|p| ("<memory>B</memory>".to_owned(), p)),
            };
            super::super::native::apply(&mut wire, &translated.request.messages, &translated.origin, &plan);
            let out = Value::Object(wire);
            let sent = out["input"].as_array().expect("input");
            let first = &sent[0];
            prop_assert!(first.get("role").is_some(), "starts at a message: {}", out);
            for (i, item) in sent.iter().enumerate() {
                if item["type"] == "function_call_output" {
                    let called = sent[..i].iter().any(|c| c["type"] == "function_call" && c["call_id"] == item["call_id"]);
                    prop_assert!(called, "an output without its call: {}", out);
                }
            }
            let text = out.to_string();
            prop_assert!(text.contains("newest"));
            prop_assert_eq!(text.matches("<memory>B</memory>").count(), usize::from(plan.block.is_some()));
            if chained && plan.block.as_ref().is_none_or(|(_, p)| *p != Placement::History) {
                prop_assert_eq!(sent.len(), input.len());
            }
        }
    }
}
