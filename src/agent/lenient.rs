//! Lenient reading of what small models emit as function calls: arguments that are almost JSON,
//! booleans written as strings, and tool calls written as plain text.
//!
//! Repairs are only those with one reading (fences, a missing closing brace, trailing commas,
//! Python literals); anything else is reported back to the model as a failed call.

use super::tools::names::SEND_MESSAGE;
use serde_json::{Map, Value};

/// The arguments object of a call; an empty string is an empty object.
pub fn arguments(text: &str) -> Result<Map<String, Value>, String> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Ok(Map::new());
    }
    if let Ok(value) = serde_json::from_str::<Value>(trimmed) {
        return object(value);
    }
    let repaired = repair(trimmed);
    match serde_json::from_str::<Value>(&repaired) {
        Ok(value) => object(value),
        Err(error) => Err(format!(
            "the arguments are not valid JSON ({error}): {}",
            trimmed.chars().take(200).collect::<String>()
        )),
    }
}

fn object(value: Value) -> Result<Map<String, Value>, String> {
    match value {
        Value::Object(map) => Ok(map),
        // Some models double-encode: "{\"label\": ...}".
        Value::String(inner) => match serde_json::from_str::<Value>(&inner) {
            Ok(Value::Object(map)) => Ok(map),
            _ => Err("the arguments must be a JSON object".to_owned()),
        },
        _ => Err("the arguments must be a JSON object".to_owned()),
    }
}

/// Fences and prose around the object, trailing commas, Python literals, missing closers.
fn repair(text: &str) -> String {
    let start = text.find('{').unwrap_or(0);
    let end = text.rfind('}').map_or(text.len(), |i| i + 1);
    let body = if end > start {
        &text[start..end]
    } else {
        &text[start..]
    };
    let mut out = String::with_capacity(body.len() + 4);
    let mut closers = Vec::new();
    let mut in_string = false;
    let mut escaped = false;
    let chars: Vec<char> = body.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if in_string {
            out.push(c);
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
            i += 1;
            continue;
        }
        match c {
            '"' => in_string = true,
            '{' => closers.push('}'),
            '[' => closers.push(']'),
            '}' | ']' => {
                closers.pop();
                // Drop a trailing comma before the closer.
                let trimmed_len = out.trim_end().len();
                if out[..trimmed_len].ends_with(',') {
                    out.truncate(trimmed_len - 1);
                }
            }
            _ => {}
        }
        let rest: String = chars[i..chars.len().min(i + 5)].iter().collect();
        let word = [("True", "true"), ("False", "false"), ("None", "null")]
            .into_iter()
            .find(|(python, _)| rest.starts_with(python));
        if let Some((python, json)) = word {
            out.push_str(json);
            i += python.len();
            continue;
        }
        out.push(c);
        i += 1;
    }
    if in_string {
        out.push('"');
    }
    while let Some(closer) = closers.pop() {
        out.push(closer);
    }
    out
}

/// `true`, `"true"`, `"True"`, `"yes"`, `1` all mean yes.
pub fn truthy(value: Option<&Value>) -> bool {
    match value {
        Some(Value::Bool(flag)) => *flag,
        Some(Value::String(text)) => {
            matches!(text.trim().to_lowercase().as_str(), "true" | "yes" | "1")
        }
        Some(Value::Number(number)) => number.as_f64().is_some_and(|n| n != 0.0),
        _ => false,
    }
}

/// A string argument; numbers and booleans are accepted as their text.
pub fn text_arg(arguments: &Map<String, Value>, name: &str) -> Option<String> {
    match arguments.get(name)? {
        Value::String(text) => Some(text.clone()),
        Value::Number(number) => Some(number.to_string()),
        Value::Bool(flag) => Some(flag.to_string()),
        _ => None,
    }
}

/// A page number: an integer or a string holding one; absent or null is page 0.
pub fn page_arg(arguments: &Map<String, Value>) -> Result<usize, String> {
    match arguments.get("page") {
        None | Some(Value::Null) => Ok(0),
        Some(Value::Number(n)) => n
            .as_u64()
            .map(|n| n as usize)
            .ok_or_else(|| "'page' must be a whole number from 0".to_owned()),
        Some(Value::String(s)) => s
            .trim()
            .parse()
            .map_err(|_| "'page' must be a whole number from 0".to_owned()),
        Some(_) => Err("'page' must be a whole number from 0".to_owned()),
    }
}

/// A tool call written as the message text (`{"name": ..., "arguments": {...}}`), which small
/// models produce when they do not use the tool-call channel.
pub fn call_in_text(content: &str) -> Option<(String, String)> {
    let start = content.find('{')?;
    // Repaired like arguments: a call cut by the token limit still names its tool.
    let value = Value::Object(arguments(&content[start..]).ok()?);
    // `{"type": "<tool>", "arguments": ...}` is the same call with another key.
    let has_arguments = value.get("arguments").is_some() || value.get("parameters").is_some();
    let name = match value.get("name").and_then(Value::as_str) {
        Some(name) => name.to_owned(),
        None if has_arguments => value.get("type")?.as_str()?.to_owned(),
        None => return None,
    };
    let arguments = value
        .get("arguments")
        .or_else(|| value.get("parameters"))
        .cloned()
        .unwrap_or(Value::Object(Map::new()));
    let arguments = match arguments {
        Value::String(text) => text,
        other => other.to_string(),
    };
    Some((name, arguments))
}

/// What a plain-text answer (no tool call) amounts to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PlainAnswer {
    /// Nothing said.
    Empty,
    /// The model imitated one of the system's JSON envelopes instead of answering.
    Echo,
    /// A reply to the user.
    Reply(String),
}

/// `user_said`: the user's messages of this turn (an envelope repeating one of them is an echo;
/// one carrying other text is the model's reply in the envelope's shape).
pub fn plain_answer(content: &str, user_said: &[String]) -> PlainAnswer {
    let trimmed = content.trim();
    if trimmed.is_empty() {
        return PlainAnswer::Empty;
    }
    // A JSON object, bare or fenced (```json … ```).
    let object = if trimmed.starts_with('{') || trimmed.starts_with("```") {
        arguments(trimmed).ok()
    } else {
        None
    };
    if let Some(map) = &object {
        let kind = map.get("type").and_then(Value::as_str).unwrap_or_default();
        // A call in the API's own shape, as text (`{"id": "call_…", "type": "function",
        // "function": {"name", "arguments"}}`, as a small model may answer the plain
        // reply): a send_message's message is the reply, unless it says back what the user
        // said (whole, or cut by the token limit); any other call is no answer.
        if let Some(Value::Object(function)) = map.get("function") {
            let sends = function.get("name").and_then(Value::as_str) == Some(SEND_MESSAGE);
            let message = match function.get("arguments") {
                Some(Value::String(text)) => arguments(text).ok(),
                Some(Value::Object(arguments)) => Some(arguments.clone()),
                _ => None,
            }
            .and_then(|arguments| text_arg(&arguments, "message"))
            .map(|message| message.trim().to_owned());
            return match message {
                Some(message) if sends && !message.is_empty() && !cut_echo(&message, user_said) => {
                    PlainAnswer::Reply(message)
                }
                _ => PlainAnswer::Echo,
            };
        }
        // The system's own envelopes echoed back, or a tool call written as text (one that was
        // not taken as a call): neither is something to show the user.
        let has_arguments = map.contains_key("arguments") || map.contains_key("parameters");
        let call_like = has_arguments && (map.contains_key("name") || !kind.is_empty());
        if call_like || matches!(kind, "heartbeat" | "system_alert") {
            return PlainAnswer::Echo;
        }
        // The envelope of what the agent was sent (the user's, or another agent's), imitated:
        // the text in it is the reply unless it repeats what was said.
        if matches!(kind, "user_message" | "agent_message" | "agent_reply") {
            let said = map.get("message").and_then(Value::as_str).map(str::trim);
            return match said {
                Some(text) if !text.is_empty() && !user_said.iter().any(|u| u.trim() == text) => {
                    PlainAnswer::Reply(text.to_owned())
                }
                _ => PlainAnswer::Echo,
            };
        }
        // `{"message": "..."}`: a send_message without the call.
        if let Some(Value::String(message)) = map.get("message") {
            if echoes(message, user_said) {
                return PlainAnswer::Echo;
            }
            return PlainAnswer::Reply(message.trim().to_owned());
        }
    }
    // A call as text too broken to read (cut inside an escape): still not a thing to show.
    let head: String = trimmed.chars().take(160).collect();
    if object.is_none()
        && trimmed.starts_with('{')
        && (head.contains("\"function\"") || head.contains("\"arguments\""))
    {
        return PlainAnswer::Echo;
    }
    // A function result imitated in the chat template's own markup (Qwen's `<tool_response>`).
    if ["<tool_response>", "<tool_call>", "<|im_start|>"]
        .iter()
        .any(|tag| trimmed.starts_with(tag))
    {
        return PlainAnswer::Echo;
    }
    if echoes(trimmed, user_said) {
        return PlainAnswer::Echo;
    }
    PlainAnswer::Reply(trimmed.to_owned())
}

/// What the user said, said back whole or cut short (a reply stopped by the token limit).
fn cut_echo(text: &str, user_said: &[String]) -> bool {
    let text = normal(text);
    !text.is_empty()
        && user_said.iter().any(|said| {
            let said = normal(said);
            said == text || (text.chars().count() >= 12 && said.starts_with(&text))
        })
}

/// `text` trimmed of quotes and spaces, lowercased, its spacing made single: how replies are
/// compared. Idempotent (quotes and spaces are trimmed together, so `" 'a'"` loses both quotes
/// at once), which the comparisons rely on: a text normalised once or twice compares the same.
pub fn normal(text: &str) -> String {
    text.trim_matches(|c: char| {
        c.is_whitespace() || ['"', '\'', '\u{201c}', '\u{201d}'].contains(&c)
    })
    .split_whitespace()
    .map(str::to_lowercase)
    .collect::<Vec<_>>()
    .join(" ")
}

/// Whether `text` is one of the user's messages of this turn said back (case, spacing and
/// quotes aside): a small model may answer "Miso ate some grass this morning." with those very
/// words, and a question with the question.
pub fn echoes(text: &str, user_said: &[String]) -> bool {
    let text = normal(text);
    !text.is_empty() && user_said.iter().any(|said| normal(said) == text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_function_result_in_template_markup_is_an_echo() {
        let seen = "<tool_response>\n{\"status\":\"OK\",\"message\":\"Block 'human' updated (46 characters).\"}\n</tool_response>";
        assert_eq!(plain_answer(seen, &[]), PlainAnswer::Echo);
        assert_eq!(
            plain_answer("Use <tool_response> tags.", &[]),
            PlainAnswer::Reply("Use <tool_response> tags.".to_owned())
        );
    }

    #[test]
    fn the_users_message_said_back_is_an_echo() {
        let said = vec!["Miso ate some grass this morning.".to_owned()];
        assert_eq!(
            plain_answer("miso ate some  grass this morning.", &said),
            PlainAnswer::Echo
        );
        assert_eq!(
            plain_answer("\"Miso ate some grass this morning.\"", &said),
            PlainAnswer::Echo
        );
        assert_eq!(
            plain_answer(r#"{"message": "Miso ate some grass this morning."}"#, &said),
            PlainAnswer::Echo
        );
        assert_eq!(
            plain_answer("Miso ate some grass? Cats often do.", &said),
            PlainAnswer::Reply("Miso ate some grass? Cats often do.".to_owned())
        );
    }
    use serde_json::json;

    #[test]
    fn repairs_what_has_one_reading() {
        let plain = arguments(r#"{"label": "human", "content": "likes tea"}"#).expect("plain");
        assert_eq!(plain["label"], "human");
        let fenced = arguments("```json\n{\"label\": \"human\"}\n```").expect("fenced");
        assert_eq!(fenced["label"], "human");
        let unclosed = arguments(r#"{"message": "hi", "x": [1, 2"#).expect("unclosed");
        assert_eq!(unclosed["x"], json!([1, 2]));
        let commas = arguments(r#"{"a": 1, "b": [1, 2,],}"#).expect("commas");
        assert_eq!(commas["b"], json!([1, 2]));
        let python =
            arguments(r#"{"request_heartbeat": True, "note": "True story"}"#).expect("python");
        assert_eq!(python["request_heartbeat"], true);
        assert_eq!(python["note"], "True story");
        let double = arguments(r#""{\"label\": \"persona\"}""#).expect("double encoded");
        assert_eq!(double["label"], "persona");
        assert!(arguments("label = human").is_err());
        assert!(arguments("[1, 2]").is_err());
        assert!(arguments("").expect("empty").is_empty());
    }

    #[test]
    fn booleans_pages_and_text_calls() {
        assert!(truthy(Some(&json!(true))));
        assert!(truthy(Some(&json!("true"))));
        assert!(truthy(Some(&json!("True"))));
        assert!(!truthy(Some(&json!("false"))));
        assert!(!truthy(None));
        let args = arguments(r#"{"page": "2"}"#).expect("args");
        assert_eq!(page_arg(&args), Ok(2));
        assert!(page_arg(&arguments(r#"{"page": -1}"#).expect("args")).is_err());
        let call = call_in_text(r#"{"name": "send_message", "arguments": {"message": "Hi!"}}"#)
            .expect("call");
        assert_eq!(call.0, "send_message");
        assert_eq!(call.1, r#"{"message":"Hi!"}"#);
        assert!(call_in_text("Just a normal answer.").is_none());
        let cut = call_in_text(
            r#"{"name": "send_message", "arguments": {"message": "You hiked on Satur"#,
        )
        .expect("a call cut by the token limit");
        assert_eq!(
            cut,
            (
                "send_message".to_owned(),
                r#"{"message":"You hiked on Satur"}"#.to_owned()
            )
        );
        let said = ["I moved.".to_owned()];
        assert_eq!(plain_answer("  ", &said), PlainAnswer::Empty);
        assert_eq!(
            plain_answer(
                r#"{"type":"user_message","message":"I moved.","time":"x"}"#,
                &said
            ),
            PlainAnswer::Echo
        );
        // The model's own answer in the envelope's shape is its reply.
        assert_eq!(
            plain_answer(
                r#"{"type":"user_message","message":"Where to?","time":"x"}"#,
                &said
            ),
            PlainAnswer::Reply("Where to?".to_owned())
        );
        assert_eq!(
            plain_answer(
                r#"{"type": "core_memory_append", "arguments": {"label": "human"}}"#,
                &said
            ),
            PlainAnswer::Echo
        );
        assert_eq!(
            call_in_text(r#"{"type": "core_memory_append", "arguments": {"label": "human"}}"#),
            Some((
                "core_memory_append".to_owned(),
                r#"{"label":"human"}"#.to_owned()
            ))
        );
        assert_eq!(
            call_in_text(r#"{"type": "user_message", "message": "x"}"#),
            None
        );
        assert_eq!(
            plain_answer(
                r#"{"name": "conversation_search", "arguments": {"query": "x"}}"#,
                &said
            ),
            PlainAnswer::Echo
        );
        assert_eq!(
            plain_answer(
                r#"{"name": "archival_memory_search", "arguments": {"query": "hik"#,
                &said
            ),
            PlainAnswer::Echo
        );
        assert_eq!(
            plain_answer(r#"{"message": "Hi Zoe!"}"#, &said),
            PlainAnswer::Reply("Hi Zoe!".to_owned())
        );
        assert_eq!(
            plain_answer(" Hello. ", &said),
            PlainAnswer::Reply("Hello.".to_owned())
        );
        // A call in the API's own shape: a send_message's message is the reply; cut by the
        // token limit, or saying back the user's message (even cut), it is no answer.
        let told = ["Hey Mel! I wanted to tell you about my school event last week.".to_owned()];
        let api_call = |arguments: &str| {
            format!(
                r#"{{"id":"call_4dbd48c9_1_0","type":"function","function":{{"name":"send_message","arguments":{arguments}}}}}"#
            )
        };
        assert_eq!(
            plain_answer(
                &api_call(r#""{\"message\":\"That sounds great!\"}""#),
                &told
            ),
            PlainAnswer::Reply("That sounds great!".to_owned())
        );
        let cut = r#"{"id":"call_4dbd48c9_1_0","type":"function","function":{"name":"send_message","arguments":"{\"message\":\"Hey Mel! I wanted to tell you about my sch"#;
        assert_eq!(plain_answer(cut, &told), PlainAnswer::Echo);
        assert_eq!(
            plain_answer(
                &api_call(
                    r#"{"message":"hey mel! i wanted to tell you about my school event last week."}"#
                ),
                &told
            ),
            PlainAnswer::Echo
        );
        assert_eq!(
            plain_answer(
                r#"{"type":"function","function":{"name":"conversation_search","arguments":"{}"}}"#,
                &told
            ),
            PlainAnswer::Echo
        );
        // Another agent's envelope imitated, fenced: its text is the reply, the echo is not.
        let fenced = "```json\n{\"type\": \"agent_message\", \"from\": \"alice\", \"message\": \"Not telling.\"}\n```";
        assert_eq!(
            plain_answer(fenced, &said),
            PlainAnswer::Reply("Not telling.".to_owned())
        );
        assert_eq!(
            plain_answer(
                r#"{"type":"agent_message","from":"alice","message":"I moved."}"#,
                &said
            ),
            PlainAnswer::Echo
        );
    }
}
