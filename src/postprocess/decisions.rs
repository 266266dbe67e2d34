//! The reconcile call: the memory LLM decides per new fact whether it is new (ADD), refines a
//! stored memory (UPDATE), makes one untrue (INVALIDATE) or is already known (NOOP). Stored
//! memories are numbered M0, M1, ... in the prompt; a decision naming no real memory is an ADD.

use serde_json::{json, Value};

use super::fact::{Fact, MAX_FACT_CHARS};
use super::llm::{json_object, Answer};
use super::PostProcessor;
use crate::strategy::inject::quoted;

pub(super) enum Decision {
    Add,
    Update(i64, String),
    Invalidate(i64),
    Noop(Option<i64>),
}

/// One reconcile call for all new facts. Stored memories are shown as M0, M1, ... (small numbers:
/// models copy them reliably, unlike database ids), each text quoted: a memory is data.
pub(super) async fn decide(
    pp: &PostProcessor,
    model: &str,
    facts: &[&Fact],
    candidates: &[(i64, String, i64)],
) -> Result<Vec<Decision>, String> {
    let stored: Vec<String> = candidates
        .iter()
        .enumerate()
        .map(|(i, (_, text, at))| format!("M{i} [{}] {}", crate::dates::ymd(*at), quoted(text)))
        .collect();
    let new: Vec<String> = facts
        .iter()
        .enumerate()
        .map(|(i, f)| format!("F{i} {}", quoted(&f.text)))
        .collect();
    let material = format!(
        "Stored memories:\n{}\n\nNew facts:\n{}\n",
        stored.join("\n"),
        new.join("\n")
    );
    let answer = pp
        .llm
        .complete(
            model,
            &pp.prompts.reconcile,
            &material,
            Answer::Json("decisions", &decisions_schema(facts.len())),
        )
        .await
        .map_err(|e| e.to_string())?;
    let object = json_object(&answer).map_err(|e| e.to_string())?;
    let Some(items) = object["decisions"].as_array() else {
        return Err(format!(
            "the reconcile answer has no \"decisions\" list: {object}"
        ));
    };
    let index = |value: &Value| -> Option<usize> {
        match value {
            Value::Number(n) => n.as_u64().map(|n| n as usize),
            Value::String(s) => s.trim_start_matches(['M', 'F', 'm', 'f']).parse().ok(),
            _ => None,
        }
    };
    // A fact the model skipped, or a decision naming no real memory, is simply added.
    let mut decisions: Vec<Decision> = facts.iter().map(|_| Decision::Add).collect();
    for item in items {
        let Some(fact) = index(&item["fact"]).filter(|f| *f < facts.len()) else {
            continue;
        };
        let memory = index(&item["memory"])
            .and_then(|m| candidates.get(m))
            .map(|(id, _, _)| *id);
        let action = item["action"]
            .as_str()
            .unwrap_or("ADD")
            .to_ascii_uppercase();
        decisions[fact] = match (action.as_str(), memory) {
            ("UPDATE", Some(id)) => {
                let text = item["text"]
                    .as_str()
                    .map(str::trim)
                    .filter(|t| !t.is_empty())
                    .unwrap_or(&facts[fact].text);
                Decision::Update(id, text.to_owned())
            }
            ("INVALIDATE" | "DELETE", Some(id)) => Decision::Invalidate(id),
            ("NOOP" | "NONE", memory) => Decision::Noop(memory),
            _ => Decision::Add,
        };
    }
    Ok(decisions)
}

fn decisions_schema(facts: usize) -> Value {
    json!({"type": "object", "additionalProperties": false, "required": ["decisions"],
    "properties": {"decisions": {"type": "array", "maxItems": facts, "items": {
        "type": "object", "additionalProperties": false,
        "required": ["fact", "action", "memory", "text"],
        "properties": {
            "fact": {"type": "integer", "minimum": 0},
            "action": {"type": "string", "enum": ["ADD", "UPDATE", "INVALIDATE", "NOOP"]},
            "memory": {"type": ["integer", "null"], "minimum": 0},
            "text": {"type": ["string", "null"], "maxLength": MAX_FACT_CHARS + 100}
        }}}}})
}
