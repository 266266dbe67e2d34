//! Generated JSON: arbitrary values whose keys and strings lean on the words the APIs use (so
//! random objects reach past the first type check), and mutations of realistic bodies (so most
//! cases are almost valid and reach the translation code behind the parser).

use proptest::prelude::*;
use serde_json::{json, Map, Value};

/// Keys and string values of the three chat APIs and memproxy's own bodies.
const WORDS: &[&str] = &[
    "model",
    "messages",
    "role",
    "content",
    "type",
    "text",
    "tools",
    "tool_calls",
    "function",
    "name",
    "arguments",
    "stream",
    "stream_options",
    "include_usage",
    "input",
    "instructions",
    "max_tokens",
    "max_output_tokens",
    "system",
    "tool_choice",
    "tool_use_id",
    "tool_call_id",
    "id",
    "image_url",
    "url",
    "previous_response_id",
    "store",
    "metadata",
    "user",
    "n",
    "temperature",
    "thinking",
    "signature",
    "cache_control",
    "call_id",
    "output",
    "parameters",
    "input_schema",
    "tool_result",
    "tool_use",
    "function_call",
    "function_call_output",
    "message",
    "input_text",
    "output_text",
    "developer",
    "assistant",
    "tool",
    "image",
    "source",
    "data",
    "memproxy",
    "mode",
    "conversation",
    "agent",
    "refusal",
    "reasoning",
    "auto",
    "none",
    "required",
    "any",
    "is_error",
    "ephemeral",
    "background",
    "truncation",
    "include",
    "parallel_tool_calls",
    "response_format",
    "json_schema",
    "stop",
    "web_search",
    "mcp",
    "namespace",
    "summary",
];

fn word() -> impl Strategy<Value = String> {
    prop::sample::select(WORDS).prop_map(str::to_owned)
}

/// Any string: API words, short unicode, control characters, long repetitions.
pub fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => word(),
        4 => "\\PC{0,24}",
        1 => "[\\x00-\\x1f\"\\\\{}\\[\\]:,]{0,8}",
        1 => ("\\PC{1,3}", 50usize..600).prop_map(|(s, n)| s.repeat(n)),
    ]
}

fn number() -> impl Strategy<Value = Value> {
    prop_oneof![
        (-3i64..40).prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        // Short binary fractions: they print and read back exactly (serde_json's default float reading
        // is not exact to the last bit for every number, which is not what is tested here).
        (any::<i16>(), 0u32..4).prop_map(|(n, e)| Value::from(f64::from(n) / f64::from(1u32 << e))),
        Just(json!(u64::MAX)),
        Just(json!(1e300)),
    ]
}

/// An arbitrary JSON value, at most a few levels deep.
pub fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        number(),
        text().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((prop_oneof![3 => word(), 1 => text()], inner), 0..6)
                .prop_map(|pairs| Value::Object(pairs.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// One change to a body: at the `at`-th place (of all places, depth first), set a value, remove
/// it, or wrap it in an array.
#[derive(Clone, Debug)]
pub enum Mutation {
    Set(usize, Value),
    Remove(usize),
    Wrap(usize),
}

pub fn mutations() -> impl Strategy<Value = Vec<Mutation>> {
    let one = prop_oneof![
        3 => (any::<usize>(), value()).prop_map(|(at, v)| Mutation::Set(at, v)),
        1 => any::<usize>().prop_map(Mutation::Remove),
        1 => any::<usize>().prop_map(Mutation::Wrap),
    ];
    prop::collection::vec(one, 0..4)
}

/// Applies the mutations in order.
pub fn mutate(mut body: Value, mutations: &[Mutation]) -> Value {
    for mutation in mutations {
        let at = match mutation {
            Mutation::Set(at, _) | Mutation::Remove(at) | Mutation::Wrap(at) => *at,
        };
        let count = places(&body);
        let target = at % count.max(1);
        let mut seen = 0;
        visit(&mut body, target, &mut seen, mutation);
    }
    body
}

fn places(value: &Value) -> usize {
    1 + match value {
        Value::Array(items) => items.iter().map(places).sum(),
        Value::Object(fields) => fields.values().map(places).sum(),
        _ => 0,
    }
}

/// Finds the `target`-th place; `Remove` takes it out of its parent (the root becomes null).
fn visit(value: &mut Value, target: usize, seen: &mut usize, mutation: &Mutation) -> bool {
    if *seen == target {
        match mutation {
            Mutation::Set(_, new) => *value = new.clone(),
            Mutation::Remove(_) => *value = Value::Null,
            Mutation::Wrap(_) => *value = Value::Array(vec![value.take()]),
        }
        return true;
    }
    *seen += 1;
    match value {
        Value::Array(items) => {
            for index in 0..items.len() {
                let before = *seen;
                if visit(&mut items[index], target, seen, mutation) {
                    if matches!(mutation, Mutation::Remove(_)) && before == target {
                        items.remove(index);
                    }
                    return true;
                }
            }
        }
        Value::Object(fields) => {
            let keys: Vec<String> = fields.keys().cloned().collect();
            for key in keys {
                let before = *seen;
                if let Some(child) = fields.get_mut(&key) {
                    if visit(child, target, seen, mutation) {
                        if matches!(mutation, Mutation::Remove(_)) && before == target {
                            fields.remove(&key);
                        }
                        return true;
                    }
                }
            }
        }
        _ => {}
    }
    false
}

/// Realistic Chat Completions bodies: plain, streaming, tools with calls and results, parts.
pub fn chat_seeds() -> Vec<Value> {
    vec![
        json!({"model": "m", "messages": [{"role": "user", "content": "Hi, I live in Porto."}]}),
        json!({"model": "m", "stream": true, "stream_options": {"include_usage": true},
            "messages": [{"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Hello"}, {"role": "assistant", "content": "Hi!"},
                {"role": "user", "content": "What is my name?"}]}),
        json!({"model": "m", "tools": [{"type": "function", "function": {"name": "get_weather",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}],
            "tool_choice": "auto",
            "messages": [{"role": "user", "content": "Weather in Porto?"},
                {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
                    "function": {"name": "get_weather", "arguments": "{\"city\":\"Porto\"}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "14°C, rain"}]}),
        json!({"model": "m", "n": 2, "max_tokens": 20, "messages": [{"role": "user", "content": [
            {"type": "text", "text": "Look:"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]}]}),
    ]
}

/// Realistic Responses API bodies.
pub fn responses_seeds() -> Vec<Value> {
    vec![
        json!({"model": "m", "input": "I have a cat named Miso."}),
        json!({"model": "m", "instructions": "Be brief.", "stream": true, "store": false,
            "input": [{"role": "user", "content": [{"type": "input_text", "text": "Hello"}]},
                {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Hi"}]},
                {"role": "user", "content": "And now?"}]}),
        json!({"model": "m", "tools": [{"type": "function", "name": "lookup",
                "parameters": {"type": "object", "properties": {}}}],
            "input": [{"role": "user", "content": "Look it up"},
                {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c1", "output": "found"}]}),
        json!({"model": "m", "previous_response_id": "resp_unknown", "input": "More."}),
    ]
}

/// Realistic Anthropic Messages bodies.
pub fn messages_seeds() -> Vec<Value> {
    vec![
        json!({"model": "m", "max_tokens": 64, "messages": [{"role": "user", "content": "Hi, I'm Ana."}]}),
        json!({"model": "m", "max_tokens": 64, "stream": true,
            "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
            "messages": [{"role": "user", "content": [{"type": "text", "text": "Hello"}]},
                {"role": "assistant", "content": [{"type": "thinking", "thinking": "hm", "signature": "s"},
                    {"type": "text", "text": "Hi"}]},
                {"role": "user", "content": "Again"}]}),
        json!({"model": "m", "max_tokens": 64, "tools": [{"name": "get_weather",
                "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}],
            "messages": [{"role": "user", "content": "Weather?"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "get_weather",
                    "input": {"city": "Porto"}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "rain"},
                    {"type": "text", "text": "thanks"}]}]}),
    ]
}

/// A body: a mutated seed (mostly), or an arbitrary value.
pub fn body(seeds: Vec<Value>) -> impl Strategy<Value = Value> {
    prop_oneof![
        5 => (prop::sample::select(seeds), mutations()).prop_map(|(seed, m)| mutate(seed, &m)),
        1 => value(),
    ]
}

/// The bytes sent: the body's JSON (mostly), cut short, with a byte changed, or not JSON at all.
pub fn bytes(seeds: Vec<Value>) -> impl Strategy<Value = Vec<u8>> {
    (
        body(seeds),
        0u8..10,
        any::<usize>(),
        any::<u8>(),
        prop::collection::vec(any::<u8>(), 0..64),
    )
        .prop_map(|(body, how, at, byte, noise)| {
            let mut raw = serde_json::to_vec(&body).unwrap_or_default();
            match how {
                0 => raw.truncate(at % (raw.len() + 1)),
                1 if !raw.is_empty() => {
                    let index = at % raw.len();
                    raw[index] = byte;
                }
                2 => raw = noise,
                _ => {}
            }
            raw
        })
}
