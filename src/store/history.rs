//! History alignment, a rule and not storage (every backend calls it): how the history a chat app
//! sends lines up with a conversation's stored log, and where it branches off.
//!
//! Chat apps resend the whole history every turn, or only their newest turns, so turns are matched
//! by content. Where the history leaves the log (another chat that opened with the same words, an
//! edited message, a regenerated answer), nothing stored is replaced: the rest goes to a branch, a
//! conversation of its own whose id derives from the parent and the point of divergence, so both
//! stay live and searchable, and the same history always finds the same branch again.

use super::{content_hash, PortableConversation};

/// How incoming turns (by [`turn_hash`]) line up with a log's live turns (position, hash).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Alignment {
    /// The incoming turns continue the log: those from index `first_new` on are new and go to
    /// positions from `position` on.
    Continues { first_new: usize, position: i64 },
    /// The incoming turns leave the log: incoming turn `at` differs from the stored turn at
    /// `position`, with turns stored after the shared part.
    Diverges { at: usize, position: i64 },
}

/// Aligns `incoming` with `live`, a log whose first position (when empty) is `start`.
///
/// The first incoming turn found in the log anchors the alignment, at the stored occurrence that
/// matches longest; with no turn in common, everything is new (an app that sent only a window of
/// turns the log has not seen yet).
pub fn align(incoming: &[String], live: &[(i64, String)], start: i64) -> Alignment {
    let next_position = live.last().map_or(start, |(p, _)| p + 1);
    for (k, hash) in incoming.iter().enumerate() {
        let best = live
            .iter()
            .enumerate()
            .filter(|(_, (_, stored))| stored == hash)
            .map(|(j, _)| {
                let run = incoming[k..]
                    .iter()
                    .zip(&live[j..])
                    .take_while(|(a, (_, b))| *a == b)
                    .count();
                (run, j)
            })
            .max();
        if let Some((run, j)) = best {
            let (first_new, diverged) = (k + run, j + run);
            return match live.get(diverged) {
                Some((position, _)) if first_new < incoming.len() => Alignment::Diverges {
                    at: first_new,
                    position: *position,
                },
                // The history stops inside the log (a regeneration request, a resend): nothing new.
                Some((position, _)) => Alignment::Continues {
                    first_new,
                    position: *position,
                },
                None => Alignment::Continues {
                    first_new,
                    position: next_position,
                },
            };
        }
    }
    Alignment::Continues {
        first_new: 0,
        position: next_position,
    }
}

/// The branch of `conversation` that leaves it at `position` with the turn `turn_hash`. Branches
/// of branches keep the root's id as their prefix and a fixed length.
pub fn branch_id(conversation: &str, position: i64, turn_hash: &str) -> String {
    let root = conversation.split('~').next().unwrap_or(conversation);
    let digest = content_hash(&format!("{conversation}\u{0}{position}\u{0}{turn_hash}"));
    format!("{root}~{}", &digest[..12])
}

/// A turn's identity for alignment: role, content and tool calls, with the differences a client
/// introduces when it resends an answer (surrounding white space, the key order and optional
/// fields of tool calls) left out. A plain turn hashes as it always did.
pub fn turn_hash(role: &str, content: &str, tool_calls: Option<&str>) -> String {
    let calls = tool_calls.map(canonical_calls).unwrap_or_default();
    content_hash(&format!("{role}\u{0}{}\u{0}{calls}", content.trim()))
}

/// Tool calls as `name(arguments)` lines, arguments re-serialised (compact, keys in order).
fn canonical_calls(json: &str) -> String {
    let Ok(serde_json::Value::Array(calls)) = serde_json::from_str::<serde_json::Value>(json)
    else {
        return json.to_owned();
    };
    calls
        .iter()
        .map(|call| {
            let function = &call["function"];
            let arguments = function["arguments"].as_str().unwrap_or_default();
            let arguments = serde_json::from_str::<serde_json::Value>(arguments)
                .map(|v| sorted(&v).to_string())
                .unwrap_or_else(|_| arguments.trim().to_owned());
            format!(
                "{}({arguments})",
                function["name"].as_str().unwrap_or_default()
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn sorted(value: &serde_json::Value) -> serde_json::Value {
    match value {
        serde_json::Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            serde_json::Value::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| (k.clone(), sorted(v)))
                    .collect(),
            )
        }
        serde_json::Value::Array(items) => {
            serde_json::Value::Array(items.iter().map(sorted).collect())
        }
        other => other.clone(),
    }
}

/// Conversations ordered so that each branch comes after its parent.
pub fn parents_first(mut pending: Vec<PortableConversation>) -> Vec<PortableConversation> {
    let mut ordered: Vec<PortableConversation> = Vec::with_capacity(pending.len());
    while !pending.is_empty() {
        let before = pending.len();
        let (ready, rest): (Vec<_>, Vec<_>) = pending.into_iter().partition(|c| {
            c.parent
                .as_ref()
                .is_none_or(|p| ordered.iter().any(|o| &o.id == p))
        });
        ordered.extend(ready);
        pending = rest;
        if pending.len() == before {
            // A parent that is not there (or a cycle): keep them, as roots.
            for mut orphan in pending.drain(..) {
                orphan.parent = None;
                ordered.push(orphan);
            }
        }
    }
    ordered
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hashes(turns: &[&str]) -> Vec<String> {
        turns.iter().map(|t| turn_hash("user", t, None)).collect()
    }

    fn log(turns: &[&str]) -> Vec<(i64, String)> {
        hashes(turns)
            .into_iter()
            .enumerate()
            .map(|(i, h)| (i as i64, h))
            .collect()
    }

    #[test]
    fn resent_windowed_and_shorter_histories_continue_the_log() {
        let live = log(&["a", "b", "c"]);
        assert_eq!(
            align(&hashes(&["a", "b", "c", "d"]), &live, 0),
            Alignment::Continues {
                first_new: 3,
                position: 3
            }
        );
        assert_eq!(
            align(&hashes(&["c", "d"]), &live, 0),
            Alignment::Continues {
                first_new: 1,
                position: 3
            }
        );
        assert_eq!(
            align(&hashes(&["a", "b"]), &live, 0),
            Alignment::Continues {
                first_new: 2,
                position: 2
            }
        );
        assert_eq!(
            align(&hashes(&["x"]), &[], 7),
            Alignment::Continues {
                first_new: 0,
                position: 7
            }
        );
    }

    #[test]
    fn a_different_continuation_diverges_where_it_leaves_the_log() {
        let live = log(&["hi", "hello", "my dog", "nice"]);
        assert_eq!(
            align(&hashes(&["hi", "hello", "pasta?"]), &live, 0),
            Alignment::Diverges { at: 2, position: 2 }
        );
        let first = branch_id("c-1", 2, &turn_hash("user", "pasta?", None));
        let again = branch_id("c-1", 2, &turn_hash("user", "pasta?", None));
        let other = branch_id("c-1", 2, &turn_hash("user", "soup?", None));
        assert_eq!(first, again);
        assert_ne!(first, other);
        assert!(first.starts_with("c-1~"));
        let nested = branch_id(&first, 5, "h");
        assert!(nested.starts_with("c-1~") && nested.len() == first.len());
    }

    #[test]
    fn resent_answers_match_despite_formatting() {
        assert_eq!(
            turn_hash("assistant", "Hi there. ", None),
            turn_hash("assistant", "Hi there.", None)
        );
        let ours = r#"[{"id":"call_1","type":"function","function":{"name":"w","arguments":"{\"b\":1,\"a\":2}"}}]"#;
        let theirs = r#"[{"function":{"arguments":"{\"a\": 2, \"b\": 1}","name":"w"},"id":"call_1","type":"function","index":0}]"#;
        assert_eq!(
            turn_hash("assistant", "", Some(ours)),
            turn_hash("assistant", "", Some(theirs))
        );
        assert_eq!(
            turn_hash("user", "plain", None),
            content_hash("user\u{0}plain\u{0}"),
            "plain turns hash as before, so stored logs still align"
        );
    }
}
