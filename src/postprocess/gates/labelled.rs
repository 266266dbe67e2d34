//! The subject gate against what a person decided: the memories of the audit's tuning half that
//! were labelled by hand (`examples/audit/labels.jsonl`), each put to the gate with every message
//! its user wrote in that conversation. A memory labelled correct is never refused as another's;
//! the held-out half is not read here, so that it stays unseen by whoever changes the gate.

use std::collections::HashMap;

use serde_json::Value;

const AUDIT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/audit");

/// Each tuning conversation's user messages, by the conversation's id.
fn tuning_conversations() -> HashMap<String, Vec<String>> {
    let mut conversations = HashMap::new();
    let folder = std::fs::read_dir(format!("{AUDIT}/tuning")).expect("the tuning half");
    for entry in folder {
        let path = entry.expect("an entry").path();
        let text = std::fs::read_to_string(&path).expect("a conversation");
        let conversation: Value = serde_json::from_str(&text).expect("json");
        let said = conversation["sessions"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|session| session["turns"].as_array().into_iter().flatten())
            .filter_map(|turn| turn["user"].as_str())
            .filter(|text| !text.is_empty())
            .map(str::to_owned)
            .collect();
        let id = conversation["id"].as_str().expect("an id").to_owned();
        conversations.insert(id, said);
    }
    conversations
}

#[test]
fn no_memory_a_person_found_correct_is_refused_as_someone_elses() {
    let conversations = tuning_conversations();
    let labels = std::fs::read_to_string(format!("{AUDIT}/labels.jsonl")).expect("labels");
    let (mut correct, mut refused) = (0, Vec::new());
    for line in labels.lines() {
        let label: Value = serde_json::from_str(line).expect("a label");
        let Some(said) = label["conversation"]
            .as_str()
            .and_then(|id| conversations.get(id))
        else {
            continue;
        };
        if label["label"] != "correct" {
            continue;
        }
        correct += 1;
        let memory = label["memory"].as_str().expect("a memory");
        let said: Vec<&str> = said.iter().map(String::as_str).collect();
        if let Some(whose) = super::someone_else(memory, &said, &[]) {
            refused.push(format!("{memory} (as {whose}'s)"));
        }
    }
    assert!(correct >= 50, "only {correct} correct memories labelled");
    assert!(refused.is_empty(), "refused: {refused:#?}");
}
