//! The gates against what a person decided: the memories of the audit's tuning half that were
//! labelled by hand (`examples/audit/labels.jsonl`), each put to the subject gate with every
//! message its user wrote in that conversation, and to every gate with the whole conversation. A
//! memory labelled correct is never refused; the held-out half is not read here, so that it stays
//! unseen by whoever changes the gates.

use std::collections::HashMap;

use serde_json::Value;

const AUDIT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/audit");

/// Each tuning conversation's user messages, by the conversation's id.
fn tuning_conversations() -> HashMap<String, Vec<String>> {
    tuning_turns()
        .into_iter()
        .map(|(id, (turns, _))| {
            let said = turns
                .into_iter()
                .filter(|(role, text)| role == "user" && !text.is_empty())
                .map(|(_, text)| text)
                .collect();
            (id, said)
        })
        .collect()
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

/// Each tuning conversation's turns as (role, text), and when its last session was.
fn tuning_turns() -> HashMap<String, (Vec<(String, String)>, i64)> {
    let mut conversations = HashMap::new();
    let folder = std::fs::read_dir(format!("{AUDIT}/tuning")).expect("the tuning half");
    for entry in folder {
        let text = std::fs::read_to_string(entry.expect("an entry").path()).expect("a file");
        let conversation: Value = serde_json::from_str(&text).expect("json");
        let (mut turns, mut last) = (Vec::new(), 0);
        for session in conversation["sessions"].as_array().into_iter().flatten() {
            last = session["date"]
                .as_str()
                .and_then(crate::dates::parse_time)
                .expect("a session date");
            for turn in session["turns"].as_array().into_iter().flatten() {
                for role in ["user", "assistant"] {
                    if let Some(said) = turn[role].as_str() {
                        turns.push((role.to_owned(), said.to_owned()));
                    }
                }
            }
        }
        let id = conversation["id"].as_str().expect("an id").to_owned();
        conversations.insert(id, (turns, last));
    }
    conversations
}

/// Every gate, not the subject gate alone: a memory a person found correct passes them all with
/// its whole conversation as the evidence; of those labelled another person's, the count refused.
#[test]
fn no_memory_a_person_found_correct_is_refused_by_any_gate() {
    let conversations = tuning_turns();
    let labels = std::fs::read_to_string(format!("{AUDIT}/labels.jsonl")).expect("labels");
    let (mut correct, mut refused, mut others, mut caught) = (0, Vec::new(), 0, 0);
    for line in labels.lines() {
        let label: Value = serde_json::from_str(line).expect("a label");
        let Some((turns, at)) = label["conversation"]
            .as_str()
            .and_then(|id| conversations.get(id))
        else {
            continue;
        };
        let evidence =
            super::Evidence::new(turns.iter().map(|(r, t)| (r.as_str(), t.as_str()))).said_at(*at);
        let memory = label["memory"].as_str().expect("a memory");
        let verdict = evidence.check(memory);
        match label["label"].as_str() {
            Some("correct") => {
                correct += 1;
                if let Err(reason) = verdict {
                    refused.push(format!("{memory} ({})", reason.as_str()));
                }
            }
            Some("wrong_subject") => {
                others += 1;
                caught += usize::from(verdict.is_err());
            }
            _ => {}
        }
    }
    assert!(correct >= 50, "only {correct} correct memories labelled");
    assert!(refused.is_empty(), "refused: {refused:#?}");
    // Each of the tuning half's wrong-subject memories is another's act told as the user's.
    assert_eq!(
        caught, others,
        "{caught} of {others} wrong-subject memories refused"
    );
}
