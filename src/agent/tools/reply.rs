//! `send_message`: the only way the user sees anything from the agent; it ends the turn.

use async_trait::async_trait;
use serde_json::{json, Map, Value};

use super::kit::{function, required, Effect, Tool, ToolOutcome, ToolScope};
use super::names::{SEND_MESSAGE, SENT};

pub struct SendMessage;

#[async_trait]
impl Tool for SendMessage {
    fn name(&self) -> &str {
        SEND_MESSAGE
    }

    fn schema(&self) -> Value {
        function(
            SEND_MESSAGE,
            "Send a message to the user. This is the only way the user sees anything from you; it ends your turn.",
            json!({"message": {"type": "string", "description": "The message, in your own voice."}}),
            &["message"],
        )
    }

    async fn execute(&self, _: &ToolScope<'_>, arguments: &Map<String, Value>) -> ToolOutcome {
        match required(arguments, "message") {
            Ok(message) => ToolOutcome::ok(SENT).with(Effect::Reply(message)),
            Err(failed) => failed,
        }
    }
}
