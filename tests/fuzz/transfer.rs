//! The export/import reader: any file either imports or is refused naming its line, and a refused
//! import changes nothing; a generated user's memory exports, imports into another user and
//! exports again identically (on SQLite, the store every install starts with).

use memproxy::memory::transfer::{parse_jsonl, to_jsonl};
use memproxy::store::prelude::*;
use memproxy::store::sqlite::SqliteStore;
use memproxy::store::UserScope;
use proptest::prelude::*;
use serde_json::{json, Value};

use crate::json;

fn conversation_lines() -> impl Strategy<Value = Vec<Value>> {
    // c0 is a root; c1 and c2 may branch from an earlier one.
    prop::collection::vec(
        (
            any::<bool>(),
            0i64..4,
            prop::option::of(0i64..6),
            prop::sample::select(vec!["default", "helper"]),
        ),
        1..4,
    )
    .prop_map(|specs| {
        specs
            .into_iter()
            .enumerate()
            .map(|(n, (branch, fork, extracted, agent))| {
                let mut line =
                    json!({"type": "conversation", "id": format!("c{n}"), "agent": agent});
                if branch && n > 0 {
                    line["parent"] = json!(format!("c{}", n - 1));
                    line["fork_position"] = json!(fork);
                }
                if let Some(through) = extracted {
                    line["extracted_through"] = json!(through);
                }
                line
            })
            .collect()
    })
}

fn user_text() -> impl Strategy<Value = String> {
    prop_oneof![json::text(), "[A-Za-z ,.'é😀]{1,60}"]
        .prop_filter("not blank", |t| !t.trim().is_empty())
}

/// A whole export of one user: the header, conversations, their turns, memories, blocks, passages
/// and summaries.
fn export_file() -> impl Strategy<Value = String> {
    (
        conversation_lines(),
        prop::collection::vec((0usize..4, prop::sample::select(vec!["user", "assistant", "tool"]), user_text(), any::<bool>()), 0..10),
        prop::collection::vec((user_text(), prop::sample::select(vec!["fact", "preference", "event", "commitment"]), prop::option::of(1i64..9_000)), 0..6),
        prop::collection::vec((prop::sample::select(vec!["human", "persona", "notes"]), user_text(), any::<bool>()), 0..3),
        prop::collection::vec(user_text(), 0..3),
        prop::option::of(user_text()),
    )
        .prop_map(|(conversations, turns, memories, blocks, passages, summary)| {
            let mut lines = vec![json!({"type": "header", "format": "memproxy-export", "version": 1, "tenant": "t", "user": "u"})];
            let count = conversations.len();
            lines.extend(conversations);
            let mut next = vec![0i64; count];
            for (at, role, text, superseded) in turns {
                let c = at % count;
                let mut line = json!({"type": "message", "conversation": format!("c{c}"), "position": next[c],
                    "role": role, "content": text, "created_at_ms": 1_000 + next[c]});
                if superseded && next[c] > 0 {
                    line["superseded"] = json!(true);
                }
                next[c] += 1;
                lines.push(line);
            }
            for (n, (text, kind, until)) in memories.into_iter().enumerate() {
                lines.push(json!({"type": "memory", "text": text, "kind": kind,
                    "sources": [{"conversation": "c0", "position": 0}],
                    "created_at_ms": 2_000 + n as i64, "updated_at_ms": 2_000 + n as i64, "valid_until_ms": until}));
            }
            let mut labels = std::collections::HashSet::new();
            for (label, value, read_only) in blocks {
                if labels.insert(label) {
                    lines.push(json!({"type": "core_block", "agent": "default", "label": label, "value": value,
                        "char_limit": 5_000, "read_only": read_only, "updated_at_ms": 3_000}));
                }
            }
            for (n, text) in passages.into_iter().enumerate() {
                lines.push(json!({"type": "passage", "agent": "default", "text": text, "created_at_ms": 4_000 + n as i64}));
            }
            if let Some(text) = summary {
                lines.push(json!({"type": "summary", "conversation": "c0", "text": text, "through_position": 0, "updated_at_ms": 5_000}));
            }
            lines.iter().map(|l| format!("{l}\n")).collect()
        })
}

/// A file cut, with a line changed, or with lines in another order.
fn damaged_file() -> impl Strategy<Value = String> {
    (export_file(), 0u8..4, any::<usize>(), json::value()).prop_map(|(file, how, at, value)| {
        let mut lines: Vec<String> = file.lines().map(str::to_owned).collect();
        let index = at % lines.len().max(1);
        match how {
            0 => {
                let end = file
                    .char_indices()
                    .nth(at % (file.chars().count() + 1))
                    .map_or(file.len(), |(i, _)| i);
                return file[..end].to_owned();
            }
            1 => {
                if let Some(line) = lines.get_mut(index) {
                    let parsed: Value = serde_json::from_str(line).unwrap_or(Value::Null);
                    let changed = json::mutate(parsed, &[json::Mutation::Set(at / 7, value)]);
                    *line = changed.to_string();
                }
            }
            2 => lines.reverse(),
            _ => lines.insert(index, value.to_string()),
        }
        lines.join("\n")
    })
}

fn export(store: &SqliteStore, scope: &UserScope) -> Result<String, TestCaseError> {
    let bundle = store
        .export_user(scope)
        .map_err(|e| TestCaseError::fail(format!("export: {e}")))?
        .unwrap_or_default();
    to_jsonl(scope, &bundle).map_err(|e| TestCaseError::fail(format!("write: {e}")))
}

#[test]
fn export_import_export_is_identical() {
    crate::run("export-round-trip", 300, export_file(), |file| {
        let dir = tempfile::tempdir().map_err(|e| TestCaseError::fail(e.to_string()))?;
        let store = SqliteStore::open(&dir.path().join("m.db"))
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        let (ana, bob) = (UserScope::new("t", "ana"), UserScope::new("t", "bob"));
        let bundle = parse_jsonl(&file)
            .map_err(|e| TestCaseError::fail(format!("a generated file is refused: {e}")))?;
        store
            .import_user(&ana, &bundle)
            .map_err(|e| TestCaseError::fail(format!("import: {e}")))?;
        let first = export(&store, &ana)?;
        let again = parse_jsonl(&first)
            .map_err(|e| TestCaseError::fail(format!("an export is refused: {e}")))?;
        store
            .import_user(&bob, &again)
            .map_err(|e| TestCaseError::fail(format!("re-import: {e}")))?;
        let second = export(&store, &bob)?;
        prop_assert_eq!(
            first.replace("\"user\":\"ana\"", "\"user\":\"bob\""),
            second
        );
        Ok(())
    });
}

#[test]
fn a_refused_import_changes_nothing() {
    crate::run(
        "import-reader",
        500,
        (export_file(), damaged_file()),
        |(good, damaged)| {
            let dir = tempfile::tempdir().map_err(|e| TestCaseError::fail(e.to_string()))?;
            let store = SqliteStore::open(&dir.path().join("m.db"))
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            let ana = UserScope::new("t", "ana");
            let bundle = parse_jsonl(&good).map_err(|e| TestCaseError::fail(e.to_string()))?;
            store
                .import_user(&ana, &bundle)
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            let before = export(&store, &ana)?;
            match parse_jsonl(&damaged) {
                Err(error) => {
                    let message = error.to_string();
                    prop_assert!(
                        message.contains("line "),
                        "the refusal names no line: {message}"
                    );
                }
                Ok(bundle) => {
                    if store.import_user(&ana, &bundle).is_err() {
                        prop_assert_eq!(
                            export(&store, &ana)?,
                            before,
                            "a failed import changed the memory"
                        );
                    }
                }
            }
            Ok(())
        },
    );
}
