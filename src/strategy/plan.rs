//! What a strategy does to a request, as steps any API can apply to its own form: the oldest
//! turns dropped, and a memory block placed. The strategy reads the neutral request and gives only
//! this; a form of messages with roles and content (the neutral one, for counting; Chat
//! Completions, on its way upstream) applies it here ([`Plan::apply`]), the APIs relayed in their
//! own shape apply it to their JSON (`messages::native::apply`, …), so one decision reaches every
//! upstream the same way.

use super::inject;
use crate::conversation::request::{is_system_role, Editable};

/// What the strategy did to the client's messages, by index into them.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// The first conversation turn kept: the messages before it are dropped, except system and
    /// developer messages, which stay wherever they are (none dropped when it is the first turn).
    pub first_kept: usize,
    /// The memory block to add, and where.
    pub block: Option<(String, super::Placement)>,
}

/// What a cut at `cut` keeps of the message at `at`: the turns from the cut on, and every
/// system or developer message wherever it is (it instructs, it is not a turn). Every form
/// applies this one rule: `Plan::apply`, and the relays to their own JSON.
pub fn cut_keeps(at: usize, cut: usize, system: bool) -> bool {
    at >= cut || system
}

impl Plan {
    /// The messages with the plan applied: the leading system messages, any system message among
    /// the dropped turns, the turns from `first_kept` on; then the block in place.
    pub fn apply<M: Editable>(&self, messages: &[M]) -> Vec<M> {
        let system = |message: &M| is_system_role(message.role());
        let leading = messages.iter().take_while(|m| system(m)).count();
        let mut kept: Vec<M> = messages
            .iter()
            .enumerate()
            .filter(|&(at, message)| cut_keeps(at, self.first_kept, system(message)))
            .map(|(_, message)| message.clone())
            .collect();
        if let Some((text, placement)) = &self.block {
            inject::place(&mut kept, text, *placement, leading);
        }
        kept
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::strategy::Placement;

    use crate::openai::ChatMessage;

    fn message(role: &str, text: &str) -> ChatMessage {
        serde_json::from_value(serde_json::json!({"role": role, "content": text})).expect("message")
    }

    fn texts(messages: &[ChatMessage]) -> Vec<String> {
        messages
            .iter()
            .map(|m| format!("{}:{}", m.role, m.text()))
            .collect()
    }

    #[test]
    fn dropped_turns_go_and_every_system_message_stays_in_its_place() {
        let messages = vec![
            message("system", "Be brief."),
            message("user", "old question"),
            message("developer", "Mid-chat rule."),
            message("assistant", "old answer"),
            message("user", "new question"),
            message("system", "Trailing environment."),
        ];
        let plan = Plan {
            first_kept: 4,
            block: None,
        };
        assert_eq!(
            texts(&plan.apply(&messages)),
            [
                "system:Be brief.",
                "developer:Mid-chat rule.",
                "user:new question",
                "system:Trailing environment."
            ]
        );
        let nothing = Plan {
            first_kept: 1,
            block: None,
        };
        assert_eq!(nothing.apply(&messages), messages);
    }

    #[test]
    fn the_block_goes_where_its_placement_says_after_the_leading_system_messages() {
        let messages = vec![
            message("system", "Be brief."),
            message("user", "old"),
            message("user", "new"),
        ];
        let plan = |placement| Plan {
            first_kept: 2,
            block: Some(("[memories]".to_owned(), placement)),
        };
        let history = plan(Placement::History).apply(&messages);
        assert_eq!(
            texts(&history),
            [
                "system:Be brief.",
                "user:[memories]",
                "assistant:Noted.",
                "user:new"
            ]
        );
        let system = plan(Placement::System).apply(&messages);
        assert!(system[0].text().contains("[memories]"), "{system:?}");
        assert_eq!(system.len(), 2);
    }
}
