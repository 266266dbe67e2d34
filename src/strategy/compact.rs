//! History compaction: keep the system prompt and the newest turns that fit a token budget.
//!
//! Turns are grouped into units that must stay together: an assistant message that calls tools
//! and the tool results answering it (an upstream rejects a tool result without its call, or a call
//! without its results). Units are kept newest first while they fit; the newest user turn is kept
//! even when it alone exceeds the budget (dropping it would change the question).

use crate::conversation::request::Message;
use crate::tokens;

/// The result of compaction, by index into the original messages.
#[derive(Debug, Clone, PartialEq)]
pub struct Window {
    /// Leading system/developer messages (kept as they are).
    pub system: Vec<usize>,
    /// Messages kept after those, in order: the newest turns that fit, and every system or
    /// developer message further down (a client's trailing environment message, say).
    pub kept: Vec<usize>,
    /// Conversation messages that were dropped (the oldest), in order.
    pub dropped: Vec<usize>,
    /// The first conversation message kept (the messages' count when none is).
    pub first_turn_kept: usize,
    /// What had to be kept (the newest user turn and what answers it) is over the budget: sent
    /// whole all the same.
    pub over_budget: Option<(usize, usize)>,
}

pub fn is_system(message: &Message) -> bool {
    message.is_system()
}
pub fn message_tokens(message: &Message) -> usize {
    let calls = message.calls.as_ref().map_or(0, |calls| {
        calls
            .iter()
            .map(|c| tokens::count(&c.name) + tokens::count(&c.arguments) + 3)
            .sum()
    });
    tokens::count_message(&message.role, &message.text()) + calls
}

/// Splits the conversation part (after the leading system messages) into units that must be kept
/// or dropped together: an assistant message with tool calls plus the tool results after it.
fn units(messages: &[Message], start: usize) -> Vec<std::ops::Range<usize>> {
    let mut units = Vec::new();
    let mut index = start;
    while index < messages.len() {
        let begin = index;
        index += 1;
        let calls_tools = messages[begin]
            .calls
            .as_ref()
            .is_some_and(|c| !c.is_empty());
        if calls_tools || messages[begin].role == "tool" {
            while index < messages.len() && messages[index].role == "tool" {
                index += 1;
            }
        }
        units.push(begin..index);
    }
    units
}

/// Keeps the newest units within `budget` tokens. System and developer messages are never
/// dropped, wherever they are, and do not count against the budget (the history budget is for
/// the conversation). The newest user message and everything after it (the tool calls and results
/// that answer it) are always kept: without them the upstream would answer another question.
pub fn window(messages: &[Message], budget: usize) -> Window {
    let system_end = messages.iter().take_while(|m| is_system(m)).count();
    let units = units(messages, system_end);
    let newest_user = messages
        .iter()
        .rposition(|m| m.role == "user")
        .filter(|&at| at >= system_end);
    let must_keep = newest_user
        .and_then(|at| units.iter().position(|unit| unit.contains(&at)))
        .unwrap_or(units.len().saturating_sub(1));
    let mut used = 0;
    let mut first_kept = units.len();
    for (position, unit) in units.iter().enumerate().rev() {
        let cost: usize = messages[unit.clone()]
            .iter()
            .filter(|m| !is_system(m))
            .map(message_tokens)
            .sum();
        if used + cost > budget && position < must_keep {
            break;
        }
        used += cost;
        first_kept = position;
    }
    let split = units.get(first_kept).map_or(messages.len(), |u| u.start);
    let (older_system, dropped): (Vec<usize>, Vec<usize>) =
        (system_end..split).partition(|&i| is_system(&messages[i]));
    Window {
        system: (0..system_end).collect(),
        kept: older_system
            .into_iter()
            .chain(split..messages.len())
            .collect(),
        dropped,
        first_turn_kept: split,
        over_budget: (used > budget).then_some((used, budget)),
    }
}

/// Total tokens of a message list, as memproxy reports them before/after rewriting.
pub fn total_tokens(messages: &[Message]) -> usize {
    messages.iter().map(message_tokens).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wire(value: serde_json::Value) -> Message {
        serde_json::from_value::<crate::openai::ChatMessage>(value)
            .expect("message")
            .neutral()
    }

    fn message(role: &str, text: &str) -> Message {
        wire(serde_json::json!({"role": role, "content": text}))
    }

    fn call(id: &str) -> Message {
        wire(serde_json::json!({"role": "assistant", "content": null,
            "tool_calls": [{"id": id, "type": "function", "function": {"name": "lookup", "arguments": "{\"q\":\"x\"}"}}]}))
    }

    fn result(id: &str, text: &str) -> Message {
        wire(serde_json::json!({"role": "tool", "tool_call_id": id, "content": text}))
    }

    #[test]
    fn keeps_newest_turns_within_budget_and_the_system_prompt() {
        let long = "word ".repeat(100);
        let messages = vec![
            message("system", "be brief"),
            message("user", &long),
            message("assistant", &long),
            message("user", "short question"),
            message("assistant", "short answer"),
            message("user", "newest"),
        ];
        let window = window(&messages, 60);
        assert_eq!(window.system, [0]);
        assert_eq!(window.kept, [3, 4, 5]);
        assert_eq!(window.dropped, [1, 2]);
        let kept: usize = window
            .kept
            .iter()
            .map(|&i| message_tokens(&messages[i]))
            .sum();
        assert!(kept <= 60);
    }

    #[test]
    fn never_splits_a_tool_call_from_its_results() {
        let messages = vec![
            message("user", "look it up"),
            call("c1"),
            result("c1", &"data ".repeat(30)),
            result("c1", "more"),
            message("assistant", "done"),
            message("user", "thanks"),
        ];
        for budget in 0..120 {
            let window = window(&messages, budget);
            let first = window.kept[0];
            assert_ne!(
                messages[first].role, "tool",
                "budget {budget}: a result without its call"
            );
            if window.kept.contains(&1) {
                assert!(
                    window.kept.contains(&2) && window.kept.contains(&3),
                    "budget {budget}"
                );
            }
        }
    }

    #[test]
    fn the_newest_turn_stays_even_over_budget() {
        let messages = vec![
            message("user", "old"),
            message("user", &"huge ".repeat(500)),
        ];
        assert_eq!(window(&messages, 10).kept, [1]);
    }

    #[test]
    fn a_trailing_system_message_never_pushes_out_the_users_question() {
        // Claude Code's shape: the user's message, then a long environment system message.
        let environment = "Environment line. ".repeat(600);
        let messages = vec![
            message("user", "What is my dog called?"),
            message("system", &environment),
        ];
        let window = window(&messages, 50);
        assert_eq!(window.kept, [0, 1]);
        assert!(window.dropped.is_empty());
        assert_eq!(window.over_budget, None, "system text is not history");
    }

    #[test]
    fn interleaved_system_messages_stay_and_the_answered_turn_is_kept_whole() {
        let long = "word ".repeat(100);
        let messages = vec![
            message("user", &long),
            message("developer", "Use metric units."),
            message("assistant", &long),
            message("user", &long),
            call("c1"),
            result("c1", &long),
        ];
        let window = window(&messages, 10);
        assert_eq!(window.system, Vec::<usize>::new());
        assert_eq!(
            window.kept,
            [1, 3, 4, 5],
            "the developer message and the newest turn"
        );
        assert_eq!(window.dropped, [0, 2]);
        let (used, budget) = window.over_budget.expect("over budget");
        assert!(used > budget && budget == 10);
    }
}
