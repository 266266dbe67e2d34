//! A fact as the memory LLM writes it: the extraction's answer read into facts (bounded, any
//! wrapping), and each fact's source in the user's turns or the reason it has none.

use serde_json::{json, Value};

use super::grounding::Said;
use super::llm::json_object;
use crate::store::Source;

/// A fact as the memory LLM wrote it, before the gates, with what it said of its source.
#[derive(Debug, Default)]
pub struct Fact {
    pub text: String,
    pub kind: String,
    /// The words the model says the fact comes from.
    pub quote: Option<String>,
    /// How those words were said: statement, question or request.
    pub said_as: Option<String>,
    /// Whom the fact is about: "user", "assistant", or another person's name.
    pub about: Option<String>,
    /// Its source once checked ([`super::grounding`]): the turn and the words, or why the user
    /// never stated it. `None` for a fact the user stated as such (over MCP).
    pub grounding: Option<Result<(Source, super::grounding::Grounded), super::gates::Rejection>>,
    /// The whole user message it was grounded in: what the change check reads
    /// ([`super::changed`]).
    pub told: Option<String>,
}

impl Fact {
    /// Whom the fact is about: as grounding found it ([`super::grounding::subject_of`]), else as
    /// the extraction said ([`super::grounding::subject`]).
    pub fn subject(&self) -> Option<String> {
        match &self.grounding {
            Some(Ok((_, grounded))) => grounded.subject.clone(),
            _ => super::grounding::subject(self.about.as_deref(), self.kind == "commitment"),
        }
    }
}

/// Facts an extraction may return at most, and the longest fact (bounded answers: a small model
/// cannot repeat one fact until `max_tokens`).
const MAX_FACTS: usize = 12;
pub(super) const MAX_FACT_CHARS: usize = 300;

pub(super) fn facts_schema() -> Value {
    json!({"type": "object", "additionalProperties": false, "required": ["facts"],
    "properties": {"facts": {"type": "array", "maxItems": MAX_FACTS, "items": {
        "type": "object", "additionalProperties": false,
        "required": ["text", "kind", "quote", "said_as", "about"],
        // The fact first, then its source: asked for the source first, a small model writes
        // fewer facts, and recall falls (docs/eval-history.md, 2026-12-05).
        "properties": {
            "text": {"type": "string", "minLength": 10, "maxLength": MAX_FACT_CHARS},
            "kind": {"type": "string", "enum": ["fact", "preference", "event", "commitment"]},
            "quote": {"type": "string", "minLength": 2, "maxLength": MAX_FACT_CHARS},
            "said_as": {"type": "string", "enum": ["statement", "question", "request"]},
            "about": {"type": "string", "minLength": 2, "maxLength": 60}
        }}}}})
}

/// The facts of an extraction answer (any text: fenced, in prose, cut off), at most `MAX_FACTS`,
/// each non-empty and at most `MAX_FACT_CHARS` long.
pub fn parse_facts(answer: &str) -> Result<Vec<Fact>, String> {
    let object = json_object(answer).map_err(|e| e.to_string())?;
    let Some(items) = object["facts"].as_array() else {
        return Err(format!(
            "the extraction answer has no \"facts\" list: {object}"
        ));
    };
    let mut facts = Vec::new();
    for item in items {
        let field = |name: &str| {
            item.get(name)
                .and_then(Value::as_str)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        let fact = match item {
            Value::String(text) => Fact {
                text: text.trim().to_owned(),
                kind: "fact".to_owned(),
                ..Fact::default()
            },
            Value::Object(_) => Fact {
                text: field("text").unwrap_or_default(),
                kind: field("kind").unwrap_or_else(|| "fact".to_owned()),
                quote: field("quote"),
                said_as: field("said_as"),
                about: field("about"),
                ..Fact::default()
            },
            _ => continue,
        };
        if fact.text.is_empty() || fact.text.chars().count() > MAX_FACT_CHARS {
            continue;
        }
        // One fact, one memory: each statement of a fact is checked and stored on its own.
        let mut parts = super::gates::statements(&fact.text);
        if parts.len() > 1 {
            tracing::info!(fact = %fact.text, statements = parts.len(), "memory fact: read as its statements");
        }
        let Some(last) = parts.pop() else {
            continue;
        };
        for text in parts {
            facts.push(Fact {
                text,
                kind: fact.kind.clone(),
                quote: fact.quote.clone(),
                said_as: fact.said_as.clone(),
                about: fact.about.clone(),
                ..Fact::default()
            });
        }
        facts.push(Fact { text: last, ..fact });
    }
    facts.truncate(MAX_FACTS);
    Ok(facts)
}

/// The source of a fact in `said` (the user's turns, and the assistant's for its commitments),
/// or the rejection that says why it has none.
pub(super) fn grounded(
    fact: &Fact,
    said: &[Said<'_>],
    capitals: bool,
) -> Result<super::grounding::Grounded, super::gates::Rejection> {
    use super::grounding::{ground, Claim, SaidAs};
    let claim = Claim {
        text: &fact.text,
        quote: fact.quote.as_deref(),
        said_as: fact.said_as.as_deref().and_then(SaidAs::parse),
        about: fact.about.as_deref(),
        commitment: fact.kind == "commitment",
    };
    ground(&claim, said, &crate::dates::is_date_word, capitals).map_err(rejection)
}

/// The gates' name for why a fact has no source in the user's statements.
pub(super) fn rejection(why: super::grounding::Ungrounded) -> super::gates::Rejection {
    use super::gates::Rejection;
    use super::grounding::Ungrounded;
    match why {
        Ungrounded::AssistantsWords => Rejection::FromAssistant,
        Ungrounded::Asked => Rejection::FromQuestion,
        Ungrounded::WrongSubject => Rejection::NotTheUser,
        Ungrounded::NameNotSaid | Ungrounded::NoSource => Rejection::Ungrounded,
    }
}
