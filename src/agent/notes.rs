//! The recursive summary as dated notes. Asked for a free summary, a small model copies the
//! messages back (refused by [`super::material::copies`]) or writes them run together in the
//! first person, without dates. Asked for
//! a bounded list of dated third-person notes (a JSON Schema, enforced by a grammar on local
//! servers), it writes the facts. Each evicted chunk adds its notes to the summary's; past the
//! summary's budget the memory LLM merges the notes into fewer (the recursion), and what still
//! does not fit leaves oldest first (the messages stay searchable with `conversation_search`).
//! A note must read as one: third person, a statement of a few words, not a material line.

use std::borrow::Cow;

use serde_json::{json, Value};

use crate::postprocess::gates;
use crate::tokens;

/// The longest note kept, in characters (the schema's bound; the grammar cuts there).
const NOTE_CHARS: usize = 200;
/// The schema's name in `response_format`.
pub(super) const SCHEMA_NAME: &str = "summary_notes";
/// How many notes one answer may hold.
pub(super) const MAX_NOTES: usize = 8;
/// The line, after the notes, counting messages that left without a summary.
const NOTE_PREFIX: char = '[';

/// The answer's JSON Schema: at most `max` dated notes.
pub(super) fn schema(max: usize) -> Value {
    json!({
        "type": "object",
        "properties": {"notes": {
            "type": "array", "minItems": 1, "maxItems": max,
            "items": {
                "type": "object",
                "properties": {
                    "day": {"type": "string", "maxLength": 10},
                    "note": {"type": "string", "maxLength": NOTE_CHARS}
                },
                "required": ["day", "note"]
            }
        }},
        "required": ["notes"]
    })
}

/// The notes of an answer, as summary lines (`- 2026-10-05: The user …`), those that read as
/// notes of `material` only; of an answer the token limit cut, the notes before the cut. An
/// answer that is no list of notes is an error.
pub(super) fn parse(answer: &str, material: &str) -> Result<Vec<String>, String> {
    // Fenced, or cut by the token limit mid-list (its complete notes are kept).
    let value = crate::postprocess::llm::json_object(answer)
        .map_err(|_| "the summary answer is not a list of notes".to_owned())?;
    let notes = value["notes"]
        .as_array()
        .ok_or_else(|| "the summary answer is not a list of notes".to_owned())?;
    Ok(notes
        .iter()
        .filter_map(|note| {
            // A note given back with its line's start (merging): "- 2026-10-05: …".
            let text = note["note"].as_str()?.trim().trim_start_matches("- ");
            let (day, text) = match text.split_once(": ") {
                Some((day, rest)) if is_day(day) => (day, rest.trim()),
                _ => (note["day"].as_str().unwrap_or_default(), text),
            };
            keeps(text, material).then(|| line(day, text))
        })
        .collect())
}

/// Whether `text` reads as a note: a statement of a few words in the third person, not a line of
/// the material copied (whole, or with its `[date] role:` start).
fn keeps(text: &str, material: &str) -> bool {
    let copied = material.lines().any(|line| {
        let said = line.split_once("] ").map_or(line, |(_, rest)| rest);
        let said = said.split_once(": ").map_or(said, |(_, rest)| rest).trim();
        let piece = text.trim_end_matches(['.', '!']);
        (said.len() > 12 && text.contains(said)) || (piece.len() > 12 && said.contains(piece))
    });
    !copied
        && !super::material::copies(text, material)
        && gates::check_form(text).is_ok()
        && gates::check_person(text).is_ok()
}

/// `- 2026-10-05: text`, without a day that is no date.
fn line(day: &str, text: &str) -> String {
    let day = day.trim();
    if is_day(day) {
        format!("- {day}: {text}")
    } else {
        format!("- {text}")
    }
}

/// `2026-10-05`.
fn is_day(text: &str) -> bool {
    text.len() == 10
        && text.chars().enumerate().all(|(at, c)| {
            if at == 4 || at == 7 {
                c == '-'
            } else {
                c.is_ascii_digit()
            }
        })
}

/// A summary split into its notes and what follows them (the line counting messages that left
/// without a summary, if any). A summary from before notes is one note.
pub(super) fn split(summary: &str) -> (Vec<String>, Option<String>) {
    let mut notes: Vec<String> = Vec::new();
    let mut tail = None;
    for line in summary.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if line.starts_with(NOTE_PREFIX) {
            tail = Some(line.to_owned());
        } else if line.starts_with("- ") || notes.is_empty() {
            notes.push(line.to_owned());
        } else if let Some(last) = notes.last_mut() {
            last.push(' ');
            last.push_str(line);
        }
    }
    (notes, tail)
}

/// The summary text: the notes (each once, in order), then the tail.
pub(super) fn join(notes: &[String], tail: Option<&str>) -> String {
    let mut kept: Vec<&str> = Vec::new();
    for note in notes {
        if !kept.contains(&note.as_str()) {
            kept.push(note);
        }
    }
    let mut text = kept.join("\n");
    if let Some(tail) = tail {
        text.push('\n');
        text.push_str(tail);
    }
    text.trim().to_owned()
}

/// The summary as the agent reads it, next to core memory `memory`: without the sentences of
/// notes that restate what core memory keeps as no longer true ([`super::retired`]), and without
/// a note left with nothing. The stored summary keeps them (history).
pub fn current<'a>(summary: &'a str, memory: &str) -> Cow<'a, str> {
    let Some(retired) = super::retired::Retired::of(memory) else {
        return Cow::Borrowed(summary);
    };
    let mut changed = false;
    let mut kept: Vec<String> = Vec::new();
    for line in summary.lines() {
        let (start, text) = note_start(line);
        match retired.without(text, "") {
            Some(Cow::Borrowed(_)) => kept.push(line.to_owned()),
            Some(Cow::Owned(fresh)) => {
                changed = true;
                kept.push(format!("{start}{fresh}"));
            }
            None => changed = true,
        }
    }
    if changed {
        Cow::Owned(kept.join("\n"))
    } else {
        Cow::Borrowed(summary)
    }
}

/// A summary line split into its start (`- 2026-10-05: `, `- ` or nothing) and its text.
fn note_start(line: &str) -> (&str, &str) {
    let Some(rest) = line.strip_prefix("- ") else {
        return ("", line);
    };
    let start = match rest.split_once(": ") {
        Some((day, _)) if is_day(day) => "- ".len() + day.len() + ": ".len(),
        _ => "- ".len(),
    };
    line.split_at(start)
}

/// The summary's budget in tokens for a window of `window` tokens.
pub(super) fn budget(window: usize) -> usize {
    (window / 8).clamp(128, 512)
}

/// Tokens of these notes.
pub(super) fn size(notes: &[String]) -> usize {
    notes.iter().map(|n| tokens::count(n) + 1).sum()
}

/// The newest notes that fit `budget` tokens, and how many older ones left.
pub(super) fn newest(notes: &[String], budget: usize) -> (Vec<String>, usize) {
    let mut kept: Vec<String> = Vec::new();
    let mut used = 0;
    for note in notes.iter().rev() {
        let cost = tokens::count(note) + 1;
        if used + cost > budget {
            break;
        }
        used += cost;
        kept.push(note.clone());
    }
    kept.reverse();
    let dropped = notes.len() - kept.len();
    (kept, dropped)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MATERIAL: &str = "[2026-10-05 07:30:00 UTC] user: I take my coffee black, no sugar. Two cups before noon, never after.\n\
        [2026-10-05 07:30:05 UTC] assistant: Got it! Black coffee, no sugar, two cups before noon.\n";

    #[test]
    fn dated_third_person_notes_are_kept_copies_and_first_person_are_not() {
        let answer = json!({"notes": [
            {"day": "2026-10-05", "note": "The user takes their coffee black, no sugar, two cups before noon."},
            {"day": "2026-10-05", "note": "I take my coffee black, no sugar."},
            {"day": "2026-10-05", "note": "Got it! Black coffee, no sugar, two cups before noon."},
            {"day": "2026-10-05", "note": "[2026-10-05 07:30:00 UTC] user: coffee"},
            {"day": "October", "note": "The assistant said two cups are fine."},
            {"day": "2026-10-05", "note": "..."},
            {"day": "", "note": "- 2026-10-06: The user asked about caffeine."},
        ]})
        .to_string();
        assert_eq!(
            parse(&answer, MATERIAL).expect("notes"),
            [
                "- 2026-10-05: The user takes their coffee black, no sugar, two cups before noon.",
                "- The assistant said two cups are fine.",
                "- 2026-10-06: The user asked about caffeine.",
            ]
        );
        assert!(parse("Black coffee, no sugar.", MATERIAL).is_err());
        // Cut by the token limit: the notes before the cut are kept.
        let cut = r#"```json
{"notes": [{"day": "2026-10-05", "note": "The user bought a grinder."}, {"day": "2026-10-06", "note": "The user asked ab"#;
        assert_eq!(
            parse(cut, MATERIAL).expect("the complete note"),
            ["- 2026-10-05: The user bought a grinder."]
        );
        assert!(parse(r#"{"summary": "x"}"#, MATERIAL).is_err());
    }

    #[test]
    fn a_summary_splits_into_notes_and_the_count_of_messages_without_one() {
        let summary = "- 2026-10-05: The user takes coffee black.\n- The user bought a grinder.\n\
                       [3 earlier messages could not be summarised; search them with conversation_search.]";
        let (notes, tail) = split(summary);
        assert_eq!(notes.len(), 2);
        assert!(tail.as_deref().is_some_and(|t| t.starts_with("[3 ")));
        assert_eq!(join(&notes, tail.as_deref()), summary);
        // A summary from before notes is one note; a note given twice is kept once.
        let (old, none) = split("They greeted.\nThen they talked.");
        assert_eq!(
            (old, none),
            (vec!["They greeted. Then they talked.".to_owned()], None)
        );
        assert_eq!(
            join(&["- a b c".to_owned(), "- a b c".to_owned()], None),
            "- a b c"
        );
    }

    #[test]
    fn a_note_restating_a_retired_fact_is_left_out_of_the_view() {
        let memory = "<human>\nThe user is writing a thesis on coral reef bleaching.\n\
            The user's supervisor extended the deadline to November 30.\n\
            The user lives with a dog named Pixel.\n\
            No longer true: The deadline for the thesis is October 15.\n\
            No longer true: The user lives in Lisbon with a dog named Pixel.\n</human>";
        let summary = "- 2026-09-01: The user is writing a thesis on coral reef bleaching. The deadline is October 15.\n\
            - 2026-09-01: The thesis is due on October 15!\n\
            - 2026-09-02: The user has a dog named Pixel.\n\
            - 2026-09-20: The supervisor extended the deadline to November 30.\n\
            [2 earlier messages could not be summarised; search them with conversation_search.]";
        assert_eq!(
            current(summary, memory),
            "- 2026-09-01: The user is writing a thesis on coral reef bleaching.\n\
             - 2026-09-02: The user has a dog named Pixel.\n\
             - 2026-09-20: The supervisor extended the deadline to November 30.\n\
             [2 earlier messages could not be summarised; search them with conversation_search.]"
        );
        // Without retired lines, or with no note restating one, the summary is the same text.
        assert!(matches!(
            current(summary, "The user likes tea."),
            Cow::Borrowed(_)
        ));
        let fresh = "- 2026-09-20: The supervisor extended the deadline to November 30.";
        assert!(matches!(current(fresh, memory), Cow::Borrowed(_)));
    }

    #[test]
    fn the_newest_notes_fit_the_budget() {
        let notes: Vec<String> = (0..40)
            .map(|n| {
                format!(
                    "- 2026-10-{:02}: The user told fact number {n}.",
                    n % 28 + 1
                )
            })
            .collect();
        let (kept, dropped) = newest(&notes, budget(2000));
        assert!(dropped > 0 && !kept.is_empty());
        assert_eq!(kept.last(), notes.last());
        assert!(size(&kept) <= budget(2000));
        assert_eq!(kept.len() + dropped, notes.len());
    }
}
