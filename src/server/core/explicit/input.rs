//! What an agent turn takes from the client's request, read in its neutral form: the new user
//! messages (after the last assistant message), that message's text, the results of the tool
//! calls that message made (resuming a paused turn), the client's system prompt and its own
//! tools; and, as the Chat Completions upstream takes them, its sampling parameters.

use serde_json::{Map, Value};

use crate::agent::{ClientToolsAsked, ToolResult, TurnInput};
use crate::conversation::request::Request;
use crate::error::ProxyError;
use crate::identity::Scope;
use crate::store::UserScope;

pub fn turn_input(
    request: &Request,
    mut params: Map<String, Value>,
    scope: &Scope,
) -> Result<TurnInput, ProxyError> {
    // What shapes the request (its messages, tools, format) is read from the neutral request.
    params.retain(|key, _| crate::agent::passes_through(key));
    let last_assistant = request.messages.iter().rposition(|m| m.role == "assistant");
    let start = last_assistant.map_or(0, |i| i + 1);
    let tail = &request.messages[start..];
    let mut tool_results = Vec::new();
    for (offset, message) in tail.iter().enumerate() {
        if message.role != "tool" {
            continue;
        }
        let Some(call_id) = message.call_id.clone().filter(|id| !id.is_empty()) else {
            return Err(ProxyError::invalid(
                "A tool message needs the 'tool_call_id' of the call it answers.",
                Some(&format!("messages[{}].tool_call_id", start + offset)),
            ));
        };
        tool_results.push(ToolResult {
            call_id,
            content: message.text(),
        });
    }
    let calls = last_assistant
        .and_then(|i| request.messages[i].calls.as_ref())
        .filter(|calls| !calls.is_empty());
    match (calls, tool_results.is_empty()) {
        (Some(calls), true) => {
            let ids: Vec<&str> = calls.iter().map(|c| c.id.as_str()).collect();
            return Err(ProxyError::invalid(
                format!(
                    "The last assistant message calls tools ({}) but no tool message answers them: send one 'tool' message per call, with its tool_call_id.",
                    ids.join(", ")
                ),
                Some("messages"),
            ));
        }
        (None, false) => {
            return Err(ProxyError::invalid(
                "Tool messages must follow the assistant message whose tool calls they answer.",
                Some("messages"),
            ));
        }
        _ => {}
    }
    let user_messages: Vec<String> = tail
        .iter()
        .filter(|m| m.role == "user")
        .map(|m| m.text())
        .filter(|text| !text.trim().is_empty())
        .collect();
    if user_messages.is_empty() && tool_results.is_empty() {
        return Err(ProxyError::invalid(
            "Explicit mode needs a new user message after the last assistant message.",
            Some("messages"),
        ));
    }
    let system: Vec<String> = request
        .messages
        .iter()
        .filter(|m| m.is_system())
        .map(|m| m.text())
        .filter(|text| !text.trim().is_empty())
        .collect();
    Ok(TurnInput {
        scope: UserScope::from(scope),
        agent: scope.agent.clone(),
        model: request.model.clone().unwrap_or_default(),
        client_system: (!system.is_empty()).then(|| system.join("\n\n")),
        user_messages,
        app_reply: last_assistant
            .filter(|_| calls.is_none())
            .map(|i| request.messages[i].text())
            .filter(|text| !text.trim().is_empty()),
        tool_results,
        params,
        client_tools: ClientToolsAsked {
            tools: request.tools.clone(),
            choice: request.tool_choice.clone(),
            parallel: request.parameters.parallel_tool_calls,
        },
        clock: scope.time_ms,
        record: scope.record,
        from_agent: None,
        chain: Vec::new(),
        depth: 0,
    })
}
