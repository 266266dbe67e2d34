//! The mock's memory LLM: the answers a request that carries a memory marker gets when the test
//! scripted none (every new user message becomes a fact, a summary is the start of what left the
//! window, notes quote each user line).

use serde_json::{json, Value};

use super::state::Reply;

pub(super) const MARKERS: [&str; 7] = [
    "MEMPROXY-EXTRACT",
    "MEMPROXY-RECONCILE",
    "MEMPROXY-SUMMARIZE",
    "MEMPROXY-CONSOLIDATE",
    "MEMPROXY-CHANGED",
    "MEMPROXY-BOTH-TRUE",
    // The eval's fact-store judge.
    "MEMPROXY-AUDIT",
];

/// A naive but working memory LLM: every new user message becomes a fact, every fact is added,
/// a summary is the start of what the evicted messages said, in one line.
pub(super) fn memory_default(marker: &str, material: &str, body: &Value) -> Reply {
    match marker {
        "MEMPROXY-EXTRACT" => {
            let new = material.split("New messages:").nth(1).unwrap_or_default();
            let facts: Vec<Value> = new
                .lines()
                .filter_map(|line| {
                    line.split_once("] user: ").map(|(_, text)| {
                        // The user's line is the fact's source, as a model quotes it.
                        json!({"quote": text.trim(), "said_as": "statement", "about": "user",
                                "text": third_person(text.trim()), "kind": "fact"})
                    })
                })
                .collect();
            Reply::Text(json!({"facts": facts}).to_string())
        }
        "MEMPROXY-RECONCILE" => Reply::Text(json!({"decisions": []}).to_string()),
        "MEMPROXY-CONSOLIDATE" => Reply::Text(json!({"facts": []}).to_string()),
        // Nothing changes unless a test says so: the older note copied, both true.
        "MEMPROXY-CHANGED" => {
            // The note is quoted as a JSON string on its line.
            let older = material
                .strip_prefix("Older note: ")
                .and_then(|rest| rest.lines().next())
                .and_then(|line| serde_json::from_str::<String>(line).ok())
                .unwrap_or_default();
            Reply::Text(json!({ "now": older }).to_string())
        }
        "MEMPROXY-BOTH-TRUE" => Reply::Text(json!({"both_true": true}).to_string()),
        "MEMPROXY-AUDIT" => {
            Reply::Text(json!({"reason": "not scripted", "label": "correct"}).to_string())
        }
        _ if body["response_format"]["json_schema"]["name"] == "summary_notes" => {
            mock_notes(material, body)
        }
        _ => {
            let evicted = material
                .split("Messages leaving the window:")
                .nth(1)
                .unwrap_or(material);
            // What was said, in one line: not the material's lines copied back.
            let said: Vec<&str> = evicted
                .lines()
                .map(|line| line.split_once("] ").map_or(line, |(_, said)| said).trim())
                .filter(|said| !said.is_empty())
                .collect();
            Reply::Text(format!(
                "Summary: {}",
                said.join("; ").chars().take(300).collect::<String>()
            ))
        }
    }
}

/// Explicit mode's summary notes (`agent::notes`): a note for each user line of the evicted
/// messages, quoting its start; merging keeps the newest notes the schema allows.
fn mock_notes(material: &str, body: &Value) -> Reply {
    let most = body["response_format"]["json_schema"]["schema"]["properties"]["notes"]["maxItems"]
        .as_u64()
        .unwrap_or(8) as usize;
    let notes: Vec<Value> = if let Some(given) = material
        .split_once(":\n")
        .filter(|(head, _)| head.starts_with("Notes to merge"))
    {
        let lines: Vec<&str> = given.1.lines().filter(|l| !l.trim().is_empty()).collect();
        lines[lines.len().saturating_sub(most)..]
            .iter()
            .map(|line| json!({"day": "", "note": line.trim()}))
            .collect()
    } else {
        material
            .lines()
            .filter_map(|line| {
                let (stamp, said) = line.split_once("] user: ")?;
                let day: String = stamp.trim_start_matches('[').chars().take(10).collect();
                let start: Vec<&str> = said.split_whitespace().take(4).collect();
                Some(
                    json!({"day": day, "note": format!("The user wrote \"{}\".", start.join(" "))}),
                )
            })
            .take(most)
            .collect()
    };
    Reply::Text(json!({"notes": notes}).to_string())
}

/// The user's words as a fact about them, the way a memory LLM writes it ("My dog is called
/// Rex." → "The user's dog is called Rex."): word by word, for the mock's plain sentences.
fn third_person(text: &str) -> String {
    let words: Vec<String> = text
        .split(' ')
        .enumerate()
        .map(|(at, word)| {
            let (core, tail) = word.split_at(word.trim_end_matches(['.', ',', '!', '?']).len());
            let swapped = match core {
                "I" | "me" => "the user",
                "I'm" => "the user is",
                "I've" => "the user has",
                "My" | "my" => "the user's",
                "myself" => "themselves",
                "am" => "is",
                _ => core,
            };
            let swapped = if at == 0 {
                let mut chars = swapped.chars();
                chars
                    .next()
                    .map(|c| c.to_uppercase().chain(chars).collect())
                    .unwrap_or_default()
            } else {
                swapped.to_owned()
            };
            format!("{swapped}{tail}")
        })
        .collect();
    words.join(" ")
}
