//! What the recursive summary is made of, and what it must not be. Evicted messages become
//! summary material as the conversation the user had: what the user said, the replies the agent
//! gave, the app's function results; not memproxy's own tool traffic (a refused `send_message`
//! was never said, a memory write's acknowledgement says nothing, and raw call JSON is what a
//! small model then copies). A summary answer that copies the material's lines back (a small
//! model may, until the copy fills the window with the conversation's first exchange) is no
//! summary.

use serde_json::Value;

use super::lenient;
use super::tools::{Registry, SEND_MESSAGE, SENT};
use crate::dates;
use crate::store::StoredMessage;

/// The evicted messages as summary lines, `[when] role: text`, in order.
pub(super) fn material(evicted: &[StoredMessage]) -> Vec<String> {
    let ours = Registry::memory().with(Registry::messaging(&[]));
    let ours = ours.names();
    let mut failed: Vec<&str> = Vec::new();
    let mut app_calls: Vec<String> = Vec::new();
    for message in evicted {
        match message.role.as_str() {
            "tool" if message.content.starts_with(r#"{"status":"Failed""#) => {
                failed.extend(message.tool_call_id.as_deref())
            }
            "assistant" => {
                for call in calls(message) {
                    let name = call["function"]["name"].as_str().unwrap_or_default();
                    if !ours.contains(&name) {
                        app_calls.extend(call["id"].as_str().map(str::to_owned));
                    }
                }
            }
            _ => {}
        }
    }
    let mut lines = Vec::new();
    for message in evicted {
        let texts: Vec<String> = match message.role.as_str() {
            "user" => message.search_text.iter().cloned().collect(),
            "assistant" if message.tool_calls.is_none() => {
                let text = message.search_text.as_deref().unwrap_or(&message.content);
                vec![text.to_owned()]
            }
            // The replies the agent gave; its other calls are its own business.
            "assistant" => calls(message)
                .iter()
                .filter(|c| c["function"]["name"] == SEND_MESSAGE)
                .filter(|c| !c["id"].as_str().is_some_and(|id| failed.contains(&id)))
                .filter_map(|c| {
                    let arguments = c["function"]["arguments"].as_str()?;
                    lenient::text_arg(&lenient::arguments(arguments).ok()?, "message")
                })
                .collect(),
            // What the app's own functions returned is part of the conversation.
            "tool"
                if message
                    .tool_call_id
                    .as_ref()
                    .is_some_and(|id| app_calls.contains(id))
                    && !message.content.contains(SENT) =>
            {
                vec![crate::text::clip(&message.content, 300)]
            }
            _ => Vec::new(),
        };
        let when = dates::timestamp(message.created_at_ms);
        let role = if message.role == "tool" {
            "app"
        } else {
            &message.role
        };
        for text in texts.iter().map(|t| t.trim()).filter(|t| !t.is_empty()) {
            lines.push(format!("[{when}] {role}: {text}"));
        }
    }
    lines
}

fn calls(message: &StoredMessage) -> Vec<Value> {
    message
        .tool_calls
        .as_deref()
        .and_then(|calls| serde_json::from_str::<Vec<Value>>(calls).ok())
        .unwrap_or_default()
}

/// Whether a summary answer copies material lines back: two or more of its lines, or any line
/// when it has fewer than three, are lines of the material (or start like one, `[date] role:`).
pub(super) fn copies(answer: &str, material: &str) -> bool {
    let lines: Vec<&str> = answer
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let copied = lines
        .iter()
        .filter(|line| material.lines().any(|m| m.trim() == **line) || starts_like_material(line))
        .count();
    copied >= 2 || (copied >= 1 && lines.len() < 3)
}

/// `[2023-05-08 13:56:00 UTC] user:` and the like.
fn starts_like_material(line: &str) -> bool {
    let Some(rest) = line.strip_prefix('[') else {
        return false;
    };
    let Some((stamp, after)) = rest.split_once("] ") else {
        return false;
    };
    stamp.chars().next().is_some_and(|c| c.is_ascii_digit())
        && ["user:", "assistant:", "app:", "tool:"]
            .iter()
            .any(|role| after.starts_with(role))
}

const NOTE_END: &str =
    " earlier messages could not be summarised; search them with conversation_search.]";

/// The summary after `count` messages left without one: the previous summary with one note
/// counting every such message (not one note per eviction).
pub(super) fn unsummarised(previous: &str, count: usize) -> String {
    let trimmed = previous.trim_end();
    if let Some(body) = trimmed.strip_suffix(NOTE_END) {
        if let Some(start) = body.rfind('[') {
            if let Ok(before) = body[start + 1..].parse::<usize>() {
                let kept = body[..start].trim_end();
                return format!("{kept}\n[{}{NOTE_END}", before + count)
                    .trim()
                    .to_owned();
            }
        }
    }
    format!("{trimmed}\n[{count}{NOTE_END}").trim().to_owned()
}

/// A stored message of the agent's log, for tests.
#[cfg(test)]
pub(super) fn stored_message(role: &str, content: &str) -> StoredMessage {
    StoredMessage {
        id: 1,
        conversation: "agent:default".to_owned(),
        position: 1,
        role: role.to_owned(),
        content: content.to_owned(),
        name: None,
        tool_calls: None,
        tool_call_id: None,
        created_at_ms: 0,
        token_count: 0,
        superseded: false,
        search_text: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::stored_message as message;

    fn called(id: &str, name: &str, arguments: &str, content: &str) -> StoredMessage {
        let mut m = message("assistant", content);
        m.tool_calls = Some(
            serde_json::json!([{"id": id, "type": "function",
                "function": {"name": name, "arguments": arguments}}])
            .to_string(),
        );
        m
    }

    fn result(id: &str, content: &str) -> StoredMessage {
        let mut m = message("tool", content);
        m.tool_call_id = Some(id.to_owned());
        m
    }

    #[test]
    fn the_material_is_the_conversation_without_memproxys_tool_traffic() {
        let mut user = message("user", r#"{"type":"user_message","message":"I moved."}"#);
        user.search_text = Some("I moved to Porto.".to_owned());
        let evicted = [
            user,
            // An echo the agent sent and was refused, with the call's imitation as content.
            called(
                "c1",
                SEND_MESSAGE,
                r#"{"message":"I moved to Porto."}"#,
                r#"{"name": "send_message", "arguments": {"message": "I moved to Porto."}}"#,
            ),
            result(
                "c1",
                r#"{"status":"Failed","message":"not sent. That is the user's own message."}"#,
            ),
            called(
                "c2",
                "core_memory_append",
                r#"{"label":"human","content":"x"}"#,
                "",
            ),
            result(
                "c2",
                r#"{"status":"OK","message":"Block 'human' updated (1 characters)."}"#,
            ),
            called("c3", SEND_MESSAGE, r#"{"message":"Porto is lovely."}"#, ""),
            result("c3", &format!(r#"{{"status":"OK","message":"{SENT}"}}"#)),
            called("c4", "get_weather", r#"{"city":"Porto"}"#, ""),
            result("c4", r#"{"temperature": 21}"#),
        ];
        let lines = material(&evicted);
        let when = dates::timestamp(0);
        assert_eq!(
            lines,
            [
                format!("[{when}] user: I moved to Porto."),
                format!("[{when}] assistant: Porto is lovely."),
                format!("[{when}] app: {{\"temperature\": 21}}"),
            ]
        );
    }

    #[test]
    fn an_answer_that_copies_the_material_is_no_summary() {
        let material = "[2023-05-08 13:56:00 UTC] user: Hey Mel! How have you been?\n\
                        [2023-05-08 13:58:00 UTC] user: I went to a support group.\n";
        assert!(copies(
            "### Summary\n[2023-05-08 13:56:00 UTC] user: Hey Mel! How have you been?\n[2023-05-08 13:58:00 UTC] user: I went to a support group.",
            material
        ));
        assert!(copies(
            "Current summary:\n[2023-05-08 13:56:00 UTC] user: Hey Mel!",
            material
        ));
        assert!(!copies(
            "On 2023-05-08 the user (Caroline) greeted Mel and said she went to an LGBTQ support group the day before.",
            material
        ));
        assert!(!copies(
            "The user went to a support group on 2023-05-07.\nThey felt accepted.\n[Dates are in UTC.]",
            material
        ));
    }

    #[test]
    fn messages_left_unsummarised_are_counted_in_one_note() {
        let once = unsummarised("The user lives in Porto.", 4);
        assert_eq!(once, format!("The user lives in Porto.\n[4{NOTE_END}"));
        assert_eq!(
            unsummarised(&once, 3),
            format!("The user lives in Porto.\n[7{NOTE_END}")
        );
        assert_eq!(unsummarised("", 2), format!("[2{NOTE_END}"));
        assert_eq!(
            unsummarised(&unsummarised("", 2), 1),
            format!("[3{NOTE_END}")
        );
    }
}
