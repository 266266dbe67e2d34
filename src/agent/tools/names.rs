//! The name and the result of `send_message`, which the loop, the lenient reader of a small
//! model's answers and the context layout all know: plain constants, below the tools.

pub const SEND_MESSAGE: &str = "send_message";
/// The result of a `send_message` call: it says nothing the reply does not.
pub const SENT: &str = "Sent message successfully.";
