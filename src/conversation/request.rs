//! The request in no API's shape: the conversation's messages (who said what, the calls the
//! assistant made and the results that answer them), the model, whether the answer streams, and
//! the user the request names. Each API surface reads its wire request into one; identity, the
//! strategies, the recall log and the hooks read only this. What memory changes goes back to each
//! API's own request as a `strategy::Plan`, so nothing here has to carry a wire's unknown fields.

use serde::Serialize;
use serde_json::{Number, Value};

use super::content::Content;
use super::reply::Call;

/// One message of the conversation.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Message {
    /// `system`, `developer`, `user`, `assistant` or `tool`.
    pub role: String,
    /// What it says; `None`: nothing (an assistant message of tool calls only, or `null`).
    pub content: Option<Content>,
    /// The name of the participant, where the client gives one.
    pub name: Option<String>,
    /// The tool calls of an assistant message (`Some(vec![])`: an empty list the client sent).
    pub calls: Option<Vec<Call>>,
    /// The call a tool result answers.
    pub call_id: Option<String>,
}

impl Message {
    /// A message of `role` saying `text`.
    pub fn text_message(role: &str, text: String) -> Message {
        Message {
            role: role.to_owned(),
            content: Some(Content::Text(text)),
            ..Message::default()
        }
    }

    /// The text of the message: a string content, or the text parts of content parts (one per
    /// line).
    pub fn text(&self) -> String {
        self.content.as_ref().map(Content::text).unwrap_or_default()
    }

    /// A system or developer message: instructions, not a turn of the conversation.
    pub fn is_system(&self) -> bool {
        is_system_role(&self.role)
    }

    /// The tool calls as the recall log stores them (JSON, one object per call with `id`, `type`
    /// and `function: {name, arguments}`, the form every stored row has had).
    pub fn stored_calls(&self) -> Option<String> {
        #[derive(Serialize)]
        struct Function<'a> {
            name: &'a str,
            arguments: &'a str,
        }
        #[derive(Serialize)]
        struct Stored<'a> {
            id: &'a str,
            #[serde(rename = "type")]
            kind: &'static str,
            function: Function<'a>,
        }
        let calls = self.calls.as_ref()?;
        let stored: Vec<Stored> = calls
            .iter()
            .map(|call| Stored {
                id: &call.id,
                kind: "function",
                function: Function {
                    name: &call.name,
                    arguments: &call.arguments,
                },
            })
            .collect();
        serde_json::to_string(&stored).ok()
    }
}

/// A message memory's plan can edit, in any API's form that has roles and a string-or-parts
/// content (the neutral [`Message`], Chat Completions' message): what the memory block's
/// placement needs, so the one placement rule serves every form.
pub trait Editable: Clone {
    fn role(&self) -> &str;
    /// Adds `text` before or after what the message says ([`Content::add_text`]).
    fn add_text(&mut self, text: &str, before: bool);
    /// A new message of `role` saying `text`.
    fn saying(role: &str, text: String) -> Self;
}

impl Editable for Message {
    fn role(&self) -> &str {
        &self.role
    }
    fn add_text(&mut self, text: &str, before: bool) {
        Content::add_text(&mut self.content, text, before);
    }
    fn saying(role: &str, text: String) -> Self {
        Message::text_message(role, text)
    }
}

/// Whether a role gives instructions rather than taking a turn.
pub fn is_system_role(role: &str) -> bool {
    matches!(role, "system" | "developer")
}

/// A request of the conversation.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Request {
    pub model: Option<String>,
    pub messages: Vec<Message>,
    /// The answer streams.
    pub stream: bool,
    /// The end user the request names (Chat Completions' `user`, Anthropic's
    /// `metadata.user_id`), if any.
    pub user: Option<String>,
    /// The functions the client offers the model (the client runs them).
    pub tools: Vec<Tool>,
    /// Whether and which tool the model must call; `None`: the API's default.
    pub tool_choice: Option<ToolChoice>,
    /// How the model samples, where it stops, and the shape of its answer.
    pub parameters: Parameters,
}

/// A function the client offers the model.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Tool {
    pub name: String,
    pub description: Option<String>,
    /// The JSON schema of its arguments.
    pub parameters: Option<Value>,
    /// The arguments must keep to the schema exactly (where the API has the setting).
    pub strict: Option<bool>,
}

/// Whether and which tool the model must call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ToolChoice {
    /// The model decides.
    Auto,
    /// No tool.
    None,
    /// Some tool.
    Required,
    /// This tool.
    Named(String),
}

/// The shape the answer must have.
#[derive(Clone, Debug, PartialEq)]
pub enum Format {
    /// Any JSON object.
    Json,
    /// JSON that keeps to a schema.
    Schema {
        name: String,
        schema: Value,
        strict: Option<bool>,
    },
}

/// The settings of a request: numbers as the client wrote them (`1` stays `1`, not `1.0`),
/// `None` where the client left the upstream's default.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Parameters {
    /// The longest answer, in tokens.
    pub max_tokens: Option<Number>,
    pub temperature: Option<Number>,
    pub top_p: Option<Number>,
    pub top_k: Option<Number>,
    pub min_p: Option<Number>,
    pub seed: Option<Number>,
    pub presence_penalty: Option<Number>,
    pub frequency_penalty: Option<Number>,
    /// Text that ends the answer where the model writes it.
    pub stop: Vec<String>,
    /// `Some(false)`: at most one tool call per answer.
    pub parallel_tool_calls: Option<bool>,
    pub format: Option<Format>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_calls_keep_the_form_every_stored_row_has() {
        let message = Message {
            role: "assistant".into(),
            calls: Some(vec![Call {
                id: "call_1".into(),
                name: "weather".into(),
                arguments: "{\"city\":\"Porto\"}".into(),
            }]),
            ..Message::default()
        };
        assert_eq!(
            message.stored_calls().as_deref(),
            Some(
                r#"[{"id":"call_1","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Porto\"}"}}]"#
            )
        );
        let empty = Message {
            calls: Some(Vec::new()),
            ..Message::default()
        };
        assert_eq!(empty.stored_calls().as_deref(), Some("[]"));
        assert_eq!(Message::default().stored_calls(), None);
    }
}
