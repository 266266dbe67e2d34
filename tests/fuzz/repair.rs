//! The lenient readers of what models write: the agent loop's repair of almost-JSON tool
//! arguments, and the memory LLM's answer parser. Whatever the text: no panic; a repaired reading
//! read again is the same (repair is idempotent); valid JSON is never changed; the facts taken
//! from an answer are within their bounds.

use memproxy::agent::lenient;
use memproxy::postprocess::llm::json_object;
use proptest::prelude::*;
use serde_json::{Map, Value};

use crate::json;

/// A JSON object, as a model might wrap it: bare, fenced, in prose, with a trailing comma, with
/// Python literals, or with its last closers missing.
fn wrapped() -> impl Strategy<Value = (Map<String, Value>, String)> {
    let object = prop::collection::vec(("[a-z_]{1,8}", json::value()), 0..5)
        .prop_map(|pairs| pairs.into_iter().collect::<Map<String, Value>>());
    (object, 0u8..4, "[^{}`\"]{0,20}").prop_map(|(object, how, prose)| {
        let text = Value::Object(object.clone()).to_string();
        let text = match how {
            0 => text,
            1 => format!("```json\n{text}\n```"),
            2 => format!("{prose}{text}{prose}"),
            _ => format!("{prose}\n```\n{text}\n```\n"),
        };
        (object, text)
    })
}

#[test]
fn repaired_tool_arguments_read_the_same_again() {
    let strategy = prop_oneof![
        2 => json::text(),
        1 => "[{}\\[\\]\",: a-zTFN0-9]{0,40}",
        2 => wrapped().prop_map(|(_, text)| text),
        1 => wrapped().prop_map(|(_, text)| text.replacen('}', ",}", 1)),
        1 => (wrapped(), any::<usize>()).prop_map(|((_, text), cut)| {
            let end = text.char_indices().nth(cut % (text.chars().count() + 1)).map_or(text.len(), |(i, _)| i);
            text[..end].to_owned()
        }),
    ];
    crate::run("tool-arguments-repair", 5_000, strategy, |text| {
        if let Ok(object) = lenient::arguments(&text) {
            let again = lenient::arguments(&Value::Object(object.clone()).to_string());
            prop_assert_eq!(again, Ok(object));
        }
        Ok(())
    });
}

#[test]
fn valid_tool_arguments_are_read_as_they_are() {
    crate::run(
        "tool-arguments-valid",
        3_000,
        wrapped(),
        |(object, text)| {
            prop_assert_eq!(lenient::arguments(&text), Ok(object));
            Ok(())
        },
    );
}

#[test]
fn the_memory_llm_answer_parser_is_idempotent_and_bounded() {
    let strategy = prop_oneof![
        2 => json::text(),
        2 => wrapped().prop_map(|(_, text)| text),
        2 => (prop::collection::vec(json::value(), 0..20), any::<usize>(), "[^{}]{0,20}").prop_map(|(items, cut, prose)| {
            // An extraction answer, possibly cut off by max_tokens.
            let text = format!("{prose}{}", serde_json::json!({"facts": items}));
            let end = text.char_indices().nth(cut % (text.chars().count() + 1)).map_or(text.len(), |(i, _)| i);
            text[..end].to_owned()
        }),
    ];
    crate::run("memory-llm-answer", 5_000, strategy, |answer| {
        if let Ok(value) = json_object(&answer) {
            let again =
                json_object(&value.to_string()).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(again, value);
        }
        if let Ok(facts) = memproxy::postprocess::parse_facts(&answer) {
            prop_assert!(facts.len() <= 12, "{} facts", facts.len());
            for fact in &facts {
                prop_assert!(!fact.text.trim().is_empty());
                prop_assert!(
                    fact.text.chars().count() <= 300,
                    "{} chars",
                    fact.text.chars().count()
                );
            }
        }
        Ok(())
    });
}

/// A send_message written as text in the API's own call shape, cut anywhere from its arguments
/// on: the reply taken from it is never the call itself, nor the user's message said back
/// (whole, or cut to 12 characters or more).
#[test]
fn a_call_written_as_text_never_replies_with_the_call_or_the_users_words() {
    let strategy = ("[A-Za-z ,.!?']{12,60}", any::<usize>(), any::<bool>());
    crate::run(
        "plain-answer-api-call",
        3_000,
        strategy,
        |(said, cut, says_back)| {
            let message = if says_back {
                said.clone()
            } else {
                format!("Glad to hear it. {said}")
            };
            let arguments = serde_json::json!({ "message": message }).to_string();
            let call = serde_json::json!({"id": "call_1", "type": "function",
                "function": {"name": "send_message", "arguments": arguments}})
            .to_string();
            let start = call.find("\"arguments\"").unwrap_or(0);
            let end = start + cut % (call.len() - start + 1);
            let text = &call[..end];
            let normal = lenient::normal;
            if let lenient::PlainAnswer::Reply(reply) =
                lenient::plain_answer(text, std::slice::from_ref(&said))
            {
                prop_assert!(!reply.contains("\"function\""), "{reply}");
                prop_assert!(!reply.contains("call_1"), "{reply}");
                let (reply, said) = (normal(&reply), normal(&said));
                prop_assert!(
                    !(says_back && reply.chars().count() >= 12 && said.starts_with(&reply)),
                    "said back: {reply}"
                );
                prop_assert!(reply != said, "said back: {reply}");
            }
            Ok(())
        },
    );
}
