//! Replies a small model writes that are no answer to show the user: a reply it already gave, the
//! user's own message said back (this turn's, or one still in view), its own persona text, or a
//! lesson on its memory functions ("To update your memory, call `core_memory_replace` with …"),
//! a question said back in other words ("I understand that you want to know how you take your
//! coffee."), or a refusal ("I'm sorry, but I can't assist with that.", which a small model
//! may answer "Is that normal for an old cat?" with, offered functions).
//! Each is asked again with a notice saying what went wrong (as plain text) or refused as a
//! failed `send_message` (the same failure-as-feedback MemGPT uses).

use super::lenient::{self, normal};
use super::state::Turn;
use super::tools::Registry;

/// Words from which a reply said again word for word counts as a repeat ("You're welcome!" may
/// well be said twice), or a reply found in the persona block counts as copied from it.
const REPEAT_MIN_WORDS: usize = 6;

/// Words from which an earlier message of the user's said back is an echo ("Yes" may answer a
/// question now as it did before).
const ECHO_MIN_WORDS: usize = 4;

/// Why a reply is not shown to the user.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unusable {
    /// One of the agent's last three replies, word for word.
    Repeat,
    /// A message of the user's said back (this turn's or an earlier one in view).
    Echo,
    /// The agent's own persona text said back.
    Persona,
    /// Names one of the agent's own functions: it described a call instead of making it.
    NamesTool,
    /// The user's question said back in other words, with nothing that answers it.
    Restates,
    /// A refusal ("I can't assist with that"): small models offered functions refuse harmless
    /// questions, and a refusal in view begets more. A refusal the plain reply (no functions)
    /// repeats stands.
    Refuses,
}

impl Unusable {
    /// The step trace's label for the unused answer.
    pub fn label(self) -> &'static str {
        match self {
            Unusable::Repeat => "(repeat)",
            Unusable::Echo | Unusable::Persona => "(echo)",
            Unusable::NamesTool => "(tools)",
            Unusable::Restates => "(restates)",
            Unusable::Refuses => "(refuses)",
        }
    }

    /// What went wrong, said to the agent.
    pub fn feedback(self) -> &'static str {
        match self {
            Unusable::Repeat => "You said exactly that before",
            Unusable::Echo => "That is the user's own message",
            Unusable::Persona => "That is your persona text, not an answer",
            Unusable::NamesTool => {
                "The user must never see function names: call a function, or answer in plain words"
            }
            Unusable::Restates => {
                "That only says the user's question back. Answer it from your memory, or say that the user has not told you"
            }
            Unusable::Refuses => {
                "Nothing stops you answering. If your memory does not say, tell the user they have not told you"
            }
        }
    }
}

/// `text`'s words, lowercased, without punctuation (a sentence cut from a longer text matches).
fn bare(text: &str) -> String {
    text.split(|c: char| !c.is_alphanumeric() && c != '\'')
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The text of the compiled memory's `<persona …>` section, if it has one.
fn persona_of(system: &str) -> Option<&str> {
    let open = system.find("<persona")?;
    let body = &system[open..];
    let start = body.find('>')? + 1;
    let end = body.find("</persona>")?;
    body.get(start..end)
}

/// Whether `text` is one of the agent's last three replies in `queue` (quotes, spacing and case
/// aside).
pub(super) fn among_last_replies(queue: &[crate::store::StoredMessage], text: &str) -> bool {
    let text = normal(text);
    queue
        .iter()
        .rev()
        .filter(|m| m.role == "assistant")
        .filter_map(|m| m.search_text.as_deref())
        .filter(|t| !t.trim().is_empty())
        .take(3)
        .any(|t| normal(t) == text)
}

impl Turn {
    /// Whether `reply` says word for word what one of the agent's last three replies in view
    /// said: a small model that once answered off the point ("I'm sorry, but I don't know what
    /// you're asking.") copies that answer into every later turn. A turn resumed with the app's
    /// function results answers from them, and may well say the same as before ("It is sunny in
    /// Lisbon").
    pub fn repeats_a_reply(&self, reply: &str) -> bool {
        if self.resumed {
            return false;
        }
        normal(reply).split(' ').count() >= REPEAT_MIN_WORDS
            && among_last_replies(&self.view.queue, reply)
    }

    /// Why `reply` may not be shown to the user; `None`: it may.
    pub fn unusable(&self, reply: &str) -> Option<Unusable> {
        if self.repeats_a_reply(reply) {
            return Some(Unusable::Repeat);
        }
        let long = |text: &&String| normal(text).split(' ').count() >= ECHO_MIN_WORDS;
        let earlier: Vec<String> = self
            .view
            .queue
            .iter()
            .filter(|m| m.role == "user")
            .filter_map(|m| m.search_text.as_ref())
            .filter(long)
            .cloned()
            .collect();
        if lenient::echoes(reply, &self.said) || lenient::echoes(reply, &earlier) {
            return Some(Unusable::Echo);
        }
        let text = bare(reply);
        let persona = self.view.system.as_deref().and_then(persona_of).map(bare);
        if text.split(' ').count() >= REPEAT_MIN_WORDS
            && persona.is_some_and(|persona| persona.contains(&text))
        {
            return Some(Unusable::Persona);
        }
        if !self.resumed && self.said.last().is_some_and(|q| restates(reply, q)) {
            return Some(Unusable::Restates);
        }
        if refuses(reply) {
            return Some(Unusable::Refuses);
        }
        let own = Registry::memory()
            .names()
            .into_iter()
            .chain(self.offered.registry.names())
            .filter(|name| !self.offered.client.offers(name))
            .any(|name| reply.contains(name));
        own.then_some(Unusable::NamesTool)
    }
}

/// Whether `reply` to the `question` (one that asks for something: "what", "how", …) says
/// nothing the question did not: every content word of the reply is the question's, or a word
/// that frames it ("I understand that you want to know how to take your coffee. Is there
/// anything else you would like to know?"). A reply with a number, a negation or "n't" says
/// something.
pub(super) fn restates(reply: &str, question: &str) -> bool {
    let lower = question.trim().to_lowercase();
    let opening: Vec<&str> = lower
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .take(2)
        .collect();
    if !lower.ends_with('?')
        || !opening
            .iter()
            .any(|w| crate::language::words().unusable_asking.contains(w))
    {
        return false;
    }
    let said = reply.to_lowercase().replace('’', "'");
    let negated = said.contains("n't")
        || said
            .split(|c: char| !c.is_alphanumeric())
            .any(|w| crate::language::words().unusable_negations.contains(&w));
    if negated || said.chars().any(|c| c.is_ascii_digit()) {
        return false;
    }
    use crate::language::content_words;
    let framing: std::collections::HashSet<String> =
        content_words(&crate::language::words().unusable_framing.join(" "))
            .into_iter()
            .collect();
    let asked = content_words(question);
    content_words(reply)
        .iter()
        .all(|w| asked.contains(w) || framing.contains(w))
}

/// Whether `reply` declines to answer ("I'm sorry, but I can't assist with that.").
pub(super) fn refuses(reply: &str) -> bool {
    let said = reply.to_lowercase().replace('’', "'");
    [
        "can't assist",
        "cannot assist",
        "unable to assist",
        "can't help with that",
        "cannot help with that",
        "not able to help with that",
    ]
    .iter()
    .any(|phrase| said.contains(phrase))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_persona_section_is_read_from_the_compiled_memory() {
        let system = "Core memory:\n<persona characters=\"40/2000\">\nI am a helpful assistant.\n</persona>\n<human characters=\"0/2000\">\n\n</human>";
        assert_eq!(persona_of(system), Some("\nI am a helpful assistant.\n"));
        assert_eq!(persona_of("no blocks"), None);
        assert_eq!(normal("  \"Hello   There\" "), "hello there");
        assert_eq!(
            bare("I keep notes, and use them."),
            "i keep notes and use them"
        );
    }

    #[test]
    fn a_question_said_back_in_other_words_is_no_answer() {
        let asked = "How do I take my coffee?";
        for reply in [
            "I understand that you want to know how to take your coffee. Is there anything else you would like to know?",
            "You want to know how you take your coffee.",
            "Coffee!",
        ] {
            assert!(restates(reply, asked), "{reply}");
        }
        for reply in [
            "Black, no sugar.",
            "You take it black.",
            "You haven't told me how you take your coffee.",
            "I don't know.",
            "Two cups before noon.",
        ] {
            assert!(!restates(reply, asked), "{reply}");
        }
        // A question `yes` or `no` answers may be answered in its own words.
        assert!(!restates("You eat meat.", "Do I eat meat?"));
        assert!(!restates("You have 2 cats.", "How many cats do I have?"));
        // Not a question: an acknowledgement is an answer.
        assert!(!restates(
            "I understand that you take your coffee black.",
            "I take my coffee black."
        ));
    }

    #[test]
    fn a_refusal_is_recognised() {
        assert!(refuses("I'm sorry, but I can’t assist with that."));
        assert!(!refuses("You have not told me which vet you take Miso to."));
    }
}
