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
use crate::language::content_words;

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
- changed_by: copy the user's words, said LATER than the source, that say it changed or is no \
longer true; \"\" when nothing the user said later changes it;
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

/// The answer's shape for entry `index` (0-based): only an earlier entry can be repeated.
fn verdict_schema(index: usize) -> Value {
    json!({"type": "object", "additionalProperties": false,
    "required": ["source", "speaker", "said_as", "right_person", "changed_by", "repeats"],
    "properties": {
        "source": {"type": "string", "maxLength": 300},
        "speaker": {"type": "string", "enum": ["user", "assistant", "nobody"]},
        "said_as": {"type": "string", "enum": ["statement", "question", "request"]},
        "right_person": {"type": "boolean"},
        "changed_by": {"type": "string", "maxLength": 300},
        "repeats": {"type": "integer", "minimum": 0, "maximum": index}
    }})
}

/// The turn that shares the most content words with `memory` (the first of equals), as
/// `(place, role)`: where the entry comes from when the judge's copy of its source is found
/// nowhere. A small judge often copies "The conversation" or the entry itself, and then names
/// a speaker at random; the words the entry holds tell better.
fn likeliest_source(conversation: &Conversation, memory: &str) -> Option<(usize, String)> {
    let words = content_words(memory);
    let mut best: Option<(usize, usize, &str)> = None;
    for (at, turn) in conversation
        .sessions
        .iter()
        .flat_map(|s| &s.turns)
        .enumerate()
    {
        let shared = content_words(&turn.content).intersection(&words).count();
        if shared > 0 && best.is_none_or(|(most, _, _)| shared > most) {
            best = Some((shared, at, turn.role.as_str()));
        }
    }
    best.map(|(_, at, role)| (at, role.to_owned()))
}

/// Where `words` are in the conversation: the place (in the order said) and role of the first
/// turn that holds them (compared after [`normalize`]), or `None` when no turn does.
fn found(conversation: &Conversation, words: &str) -> Option<(usize, String)> {
    let wanted = normalize(words);
    if wanted.split_whitespace().count() < 2 {
        return None;
    }
    conversation
        .sessions
        .iter()
        .flat_map(|s| &s.turns)
        .enumerate()
        .find(|(_, t)| normalize(&t.content).contains(&wanted))
        .map(|(at, t)| (at, t.role.clone()))
}

/// Whether `change` (the judge's copy of the words that changed the entry) is the user's, said
/// after the entry's source (at `source`): words said before the source, the source itself, or
/// words found nowhere changed nothing, whatever the judge says.
fn changed_by_user(conversation: &Conversation, change: &str, source: Option<usize>) -> bool {
    match found(conversation, change) {
        Some((at, role)) => role == "user" && source.is_none_or(|source| at > source),
        None => false,
    }
}

/// The label and reason of a judge's answer for entry `index` (0-based); `None` when the answer
/// has neither a label nor the questions' answers. A direct `label` is taken as given.
pub fn parse_verdict(
    answer: &str,
    conversation: &Conversation,
    memory: &str,
    index: usize,
) -> Option<(Label, String)> {
    let object = crate::postprocess::llm::json_object(answer).ok()?;
    if let Ok(label) = serde_json::from_value::<Label>(object["label"].clone()) {
        let reason = object["reason"].as_str().unwrap_or_default().trim();
        return Some((label, reason.to_owned()));
    }
    let source = object["source"].as_str().unwrap_or_default();
    // Who said the words is read from the conversation where they can be found.
    let place = found(conversation, source).or_else(|| likeliest_source(conversation, memory));
    let speaker = place
        .as_ref()
        .map(|(_, role)| role.clone())
        .or_else(|| object["speaker"].as_str().map(str::to_owned))?;
    let said_as = object["said_as"].as_str()?;
    let right_person = object["right_person"].as_bool()?;
    let change = object["changed_by"].as_str()?;
    let changed_later = changed_by_user(conversation, change, place.map(|(at, _)| at));
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
        "source {source:?} by {speaker}, a {said_as}; right person {right_person}; changed by \
         {change:?} ({changed_later}); repeats {repeats}"
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
                    "json_schema": {"name": "verdict", "strict": true,
                        "schema": verdict_schema(index)}}});
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
                .and_then(|text| parse_verdict(text, conversation, &memories[index].text, index))
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
                    turn("D1:3", "user", "Dorota turned 72 last week, still playing!"),
                ],
            }],
            probes: Vec::new(),
        }
    }

    #[test]
    fn the_label_follows_from_the_answers() {
        let c = conversation();
        let teacher = "My teacher Dorota is 71";
        let later = "Dorota turned 72 last week";
        // (source, the judge's speaker, said as, right person, the words that changed it,
        // repeats, entry index) → label
        let cases = [
            // The words are found in the assistant's line, whatever the judge said of the speaker.
            (
                ("Try York or Whitby", "user", "statement"),
                (true, "", 0, 0),
                Label::Misattributed,
            ),
            (
                ("Any ideas for a weekend?", "user", "question"),
                (true, "", 0, 0),
                Label::NotAFact,
            ),
            (
                (teacher, "user", "statement"),
                (false, "", 0, 0),
                Label::WrongSubject,
            ),
            (
                (teacher, "user", "statement"),
                (true, later, 0, 0),
                Label::Stale,
            ),
            // A change is the user's words after the source: not the source itself, not the
            // assistant's, not words found nowhere.
            (
                (teacher, "user", "statement"),
                (true, teacher, 0, 0),
                Label::Correct,
            ),
            (
                (teacher, "user", "statement"),
                (true, "Try York or Whitby", 0, 0),
                Label::Correct,
            ),
            (
                (teacher, "user", "statement"),
                (true, "she has retired from teaching", 0, 0),
                Label::Correct,
            ),
            // Only an earlier entry makes a duplicate.
            (
                (teacher, "user", "statement"),
                (true, "", 1, 1),
                Label::Duplicate,
            ),
            (
                (teacher, "user", "statement"),
                (true, "", 2, 1),
                Label::Correct,
            ),
        ];
        let memory = "The user's teacher Dorota is 71.";
        for ((source, speaker, said_as), (right, changed, repeats, index), want) in cases {
            let answer = json!({"source": source, "speaker": speaker, "said_as": said_as,
                "right_person": right, "changed_by": changed, "repeats": repeats});
            let got = parse_verdict(&answer.to_string(), &c, memory, index).map(|(l, _)| l);
            assert_eq!(got, Some(want), "{answer}");
        }
        // A source found nowhere ("The conversation", as a small judge writes): the turn with
        // most of the entry's words is its source, whatever the judge said of the speaker; with
        // no such turn, the judge's speaker stands.
        let nowhere = |speaker: &str| {
            json!({"source": "The conversation", "speaker": speaker, "said_as": "statement",
                "right_person": true, "changed_by": "", "repeats": 0})
            .to_string()
        };
        let label =
            |answer: String, memory: &str| parse_verdict(&answer, &c, memory, 0).map(|(l, _)| l);
        assert_eq!(label(nowhere("assistant"), memory), Some(Label::Correct));
        assert_eq!(
            label(nowhere("user"), "The user will visit Whitby."),
            Some(Label::Misattributed)
        );
        assert_eq!(
            label(nowhere("nobody"), "The user sails dinghies."),
            Some(Label::Misattributed)
        );
        // A direct label (a judge asked for one) is taken as given.
        let direct = json!({"reason": "x", "label": "stale"}).to_string();
        assert_eq!(
            parse_verdict(&direct, &c, memory, 0).map(|(l, _)| l),
            Some(Label::Stale)
        );
        assert_eq!(parse_verdict("no json", &c, memory, 0), None);
    }
}
