//! Requests that a client sends about a conversation rather than in it: Open WebUI, for one,
//! asks the same model for a title, tags and follow-up suggestions, each a single user message
//! that quotes the chat so far as a transcript (`USER: …` / `ASSISTANT: …` lines). They are the
//! client's housekeeping, not the user's words: stored, every quoted line would be recorded again
//! as something the user said (and the task's instructions with it), and retrieved memories would
//! only steer a title. Such a request is served as in `passthrough`.

use crate::conversation::request::Request;

/// Whether `request` is a task over a quoted conversation: it holds no assistant turn of its own
/// (a task is one request, not a conversation), and its newest user message quotes a dialogue,
/// a line opening with the user's role label and one with the assistant's, each before a colon.
/// The labels are the chat protocol's own role names, which clients use whatever the language
/// of the chat. A user who pastes such a transcript as a new chat's first message is served the
/// same way (nothing of a pasted transcript is theirs to store as said).
pub fn is_client_task(request: &Request) -> bool {
    if request.messages.iter().any(|m| m.role == "assistant") {
        return false;
    }
    let Some(newest) = request.messages.iter().rev().find(|m| m.role == "user") else {
        return false;
    };
    let text = newest.text();
    let (mut user, mut assistant) = (false, false);
    for line in text.lines() {
        let Some((label, _)) = line.trim_start().split_once(':') else {
            continue;
        };
        user |= label.eq_ignore_ascii_case("user");
        assistant |= label.eq_ignore_ascii_case("assistant");
    }
    user && assistant
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(messages: serde_json::Value) -> Request {
        let body = serde_json::json!({"model": "m", "messages": messages});
        crate::openai::ChatRequest::parse(body.to_string().as_bytes())
            .expect("a request")
            .neutral()
    }

    #[test]
    fn a_task_quoting_the_chat_is_the_clients_and_a_conversation_is_not() {
        let title = "### Task:\nGenerate a concise title.\n### Chat History:\n<chat_history>\n\
                     USER: My dog is called Rexford.\nASSISTANT: Noted.\n</chat_history>";
        assert!(is_client_task(&request(
            serde_json::json!([{"role": "user", "content": title}])
        )));
        // The same words inside a conversation are the user's.
        assert!(!is_client_task(&request(serde_json::json!([
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello!"},
            {"role": "user", "content": title},
        ]))));
        // One label is no dialogue: "User: Ada" is a line of a form, say.
        assert!(!is_client_task(&request(serde_json::json!([
            {"role": "user", "content": "User: Ada\nRole: admin\nPlease check my access."}
        ]))));
        assert!(!is_client_task(&request(serde_json::json!([
            {"role": "user", "content": "My dog is called Rexford."}
        ]))));
    }
}
