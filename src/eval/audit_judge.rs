//! The audit's judge: one memory at a time, the judge answers narrow questions in a fixed JSON
//! shape (the words it comes from, who said them, how, about whom, whether the user later changed
//! it, which earlier entry it repeats), and the label follows from the answers by fixed rules.
//! Small models answer such questions more reliably than they pick among six labels; who said
//! the source words is checked against the conversation itself.

use serde_json::{json, Value};

use super::audit::{AuditedMemory, Label};
use super::dataset::Conversation;
use super::score::normalize;
use crate::dates::ymd_weekday;

/// The judge's fixed prompt (system). The user message carries the conversation, every stored
/// entry, and the one to judge, last, so that a server's prompt cache serves the rest.
pub const AUDIT_PROMPT: &str = "MEMPROXY-AUDIT
You check one entry of the long-term memory a personal assistant kept about its user. You get \
the whole conversation it was learned from (the user's and the assistant's messages, dated), \
every entry of the memory, numbered, and the entry to check. Answer these questions about it:
- source: copy the words of the conversation that the entry comes from;
- speaker: who wrote those words: \"user\", \"assistant\", or \"nobody\" when no message says it;
- said_as: were those words a \"statement\", a \"question\" or a \"request\" (asking the \
assistant to do something)? A user's reply that accepts a suggestion (\"let's do that\") is a \
statement;
- right_person: does the entry say it of the same person the words say it of (not the user's \
teacher's age given to the user, say)? true or false;
- changed_later: did the user say later in the conversation that it changed or is no longer \
true? true or false;
- repeats: the number of an EARLIER entry (lower number) that says the same thing, or 0.
Answer with JSON only.";

/// The judge's user message: the conversation, the numbered entries, and the one to judge.
pub fn audit_material(
    conversation: &Conversation,
    memories: &[AuditedMemory],
    index: usize,
) -> String {
    let mut text = String::from("Conversation:\n");
    for session in &conversation.sessions {
        let date = session
            .time_ms
            .map_or_else(|| "undated".to_owned(), ymd_weekday);
        for turn in &session.turns {
            text.push_str(&format!(
                "[{date}] {}: {}\n",
                turn.role,
                turn.content.trim()
            ));
        }
    }
    text.push_str("\nMemory entries:\n");
    for (number, memory) in memories.iter().enumerate() {
        text.push_str(&format!("{}. {}\n", number + 1, memory.text));
    }
    text.push_str(&format!(
        "\nEntry to check: {}. {}\n",
        index + 1,
        memories[index].text
    ));
    text
}

fn verdict_schema() -> Value {
    json!({"type": "object", "additionalProperties": false,
    "required": ["source", "speaker", "said_as", "right_person", "changed_later", "repeats"],
    "properties": {
        "source": {"type": "string", "maxLength": 300},
        "speaker": {"type": "string", "enum": ["user", "assistant", "nobody"]},
        "said_as": {"type": "string", "enum": ["statement", "question", "request"]},
        "right_person": {"type": "boolean"},
        "changed_later": {"type": "boolean"},
        "repeats": {"type": "integer", "minimum": 0, "maximum": 200}
    }})
}

/// Who wrote `source` in the conversation: the role of the first turn that holds it (compared
/// after [`normalize`]), or `None` when no turn does.
fn speaker_of(conversation: &Conversation, source: &str) -> Option<String> {
    let wanted = normalize(source);
    if wanted.split_whitespace().count() < 2 {
        return None;
    }
    conversation
        .sessions
        .iter()
        .flat_map(|s| &s.turns)
        .find(|t| normalize(&t.content).contains(&wanted))
        .map(|t| t.role.clone())
}

/// The label and reason of a judge's answer for entry `index` (0-based); `None` when the answer
/// has neither a label nor the questions' answers. A direct `label` is taken as given.
pub fn parse_verdict(
    answer: &str,
    conversation: &Conversation,
    index: usize,
) -> Option<(Label, String)> {
    let object = crate::postprocess::llm::json_object(answer).ok()?;
    if let Ok(label) = serde_json::from_value::<Label>(object["label"].clone()) {
        let reason = object["reason"].as_str().unwrap_or_default().trim();
        return Some((label, reason.to_owned()));
    }
    let source = object["source"].as_str().unwrap_or_default();
    // Who said the words is read from the conversation where they can be found.
    let speaker = speaker_of(conversation, source)
        .or_else(|| object["speaker"].as_str().map(str::to_owned))?;
    let said_as = object["said_as"].as_str()?;
    let right_person = object["right_person"].as_bool()?;
    let changed_later = object["changed_later"].as_bool()?;
    let repeats = object["repeats"].as_u64().unwrap_or(0) as usize;
    let label = if speaker != "user" {
        Label::Misattributed
    } else if said_as != "statement" {
        Label::NotAFact
    } else if !right_person {
        Label::WrongSubject
    } else if changed_later {
        Label::Stale
    } else if repeats >= 1 && repeats <= index {
        Label::Duplicate
    } else {
        Label::Correct
    };
    let reason = format!(
        "source {source:?} by {speaker}, a {said_as}; right person {right_person}; changed later \
         {changed_later}; repeats {repeats}"
    );
    Some((label, reason))
}

/// Where the judge is asked, and as which model.
pub struct Judge<'a> {
    pub http: reqwest::Client,
    /// Base URL ending in /v1.
    pub url: &'a str,
    pub model: &'a str,
}

impl Judge<'_> {
    /// Labels every memory in place (a memory the judge gives no label stays unlabelled).
    pub async fn audit(&self, conversation: &Conversation, memories: &mut [AuditedMemory]) {
        for index in 0..memories.len() {
            let body = json!({"model": self.model, "temperature": 0, "max_tokens": 200,
                "messages": [
                    {"role": "system", "content": AUDIT_PROMPT},
                    {"role": "user", "content": audit_material(conversation, memories, index)},
                ],
                "response_format": {"type": "json_schema",
                    "json_schema": {"name": "verdict", "strict": true, "schema": verdict_schema()}}});
            let mut request = self
                .http
                .post(format!(
                    "{}/chat/completions",
                    self.url.trim_end_matches('/')
                ))
                .json(&body);
            if let Some(key) = super::client::upstream_key() {
                request = request.bearer_auth(key.expose());
            }
            let answer = match request.send().await {
                Ok(response) => response.json::<Value>().await.unwrap_or(Value::Null),
                Err(error) => {
                    tracing::warn!(%error, "the audit judge is unreachable");
                    continue;
                }
            };
            if let Some((label, reason)) = answer["choices"][0]["message"]["content"]
                .as_str()
                .and_then(|text| parse_verdict(text, conversation, index))
            {
                memories[index].label = Some(label);
                memories[index].reason = Some(reason);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::dataset::{Session, Turn};

    fn conversation() -> Conversation {
        let turn = |id: &str, role: &str, content: &str| Turn {
            id: id.to_owned(),
            role: role.to_owned(),
            content: content.to_owned(),
        };
        Conversation {
            id: "c".to_owned(),
            system: String::new(),
            sessions: vec![Session {
                time_ms: None,
                turns: vec![
                    turn(
                        "D1:1",
                        "user",
                        "My teacher Dorota is 71. Any ideas for a weekend?",
                    ),
                    turn("D1:2", "assistant", "Try York or Whitby."),
                ],
            }],
            probes: Vec::new(),
        }
    }

    #[test]
    fn the_label_follows_from_the_answers() {
        let c = conversation();
        let teacher = "My teacher Dorota is 71";
        // (source, the judge's speaker, said as, right person, changed later, repeats, entry
        // index) → label
        let cases = [
            // The words are found in the assistant's line, whatever the judge said of the speaker.
            (
                ("Try York or Whitby", "user", "statement"),
                (true, false, 0, 0),
                Label::Misattributed,
            ),
            (
                ("Any ideas for a weekend?", "user", "question"),
                (true, false, 0, 0),
                Label::NotAFact,
            ),
            (
                (teacher, "user", "statement"),
                (false, false, 0, 0),
                Label::WrongSubject,
            ),
            (
                (teacher, "user", "statement"),
                (true, true, 0, 0),
                Label::Stale,
            ),
            // Only an earlier entry makes a duplicate.
            (
                (teacher, "user", "statement"),
                (true, false, 1, 1),
                Label::Duplicate,
            ),
            (
                (teacher, "user", "statement"),
                (true, false, 2, 1),
                Label::Correct,
            ),
            // Words found nowhere: the judge's speaker stands.
            (
                ("nothing like this", "nobody", "statement"),
                (true, false, 0, 0),
                Label::Misattributed,
            ),
        ];
        for ((source, speaker, said_as), (right, changed, repeats, index), want) in cases {
            let answer = json!({"source": source, "speaker": speaker, "said_as": said_as,
                "right_person": right, "changed_later": changed, "repeats": repeats});
            let got = parse_verdict(&answer.to_string(), &c, index).map(|(l, _)| l);
            assert_eq!(got, Some(want), "{answer}");
        }
        // A direct label (a judge asked for one) is taken as given.
        let direct = json!({"reason": "x", "label": "stale"}).to_string();
        assert_eq!(
            parse_verdict(&direct, &c, 0).map(|(l, _)| l),
            Some(Label::Stale)
        );
        assert_eq!(parse_verdict("no json", &c, 0), None);
    }
}
