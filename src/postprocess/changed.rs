//! A change supersedes: the older memories a new fact sits beside are checked against the user's
//! own message, and one is retired (kept as history) only when two independent questions to the
//! memory LLM agree that it no longer holds.
//!
//! Why two: a small model asked a single yes/no question ("can both be true?") says "no" for most
//! pairs that are both true, and asked which words changed the note it quotes the whole message
//! whatever the note. Asked to rewrite the note as it reads after the message, it copies true
//! notes and rewrites most changed ones, but sometimes rewrites a true note with the message's
//! number (measured: docs/eval-history.md, the change check). So a note is
//! retired only when (1) rewritten after the user's message, it loses some of its own words, and
//! (2) asked of the two notes, the model says they cannot both be true. Each answer is structured
//! output; what the rewrite keeps is compared by words, in any language the stemmer reads. A
//! "rewrite" that is the user's message given back (a habit of the smallest models) is no rewrite.

use serde_json::{json, Value};

use super::llm::{json_object, Answer};
use super::PostProcessor;
use crate::language::content_words;
use crate::strategy::inject::quoted;

/// An older live memory a new fact may have made untrue.
#[derive(Clone, Debug)]
pub(super) struct Older {
    pub id: i64,
    pub text: String,
    /// When it was said (a part of it that stays true keeps this date).
    pub at: i64,
}

/// What the new fact came from.
pub(super) struct Change<'a> {
    /// The new fact, as stored.
    pub fact: &'a str,
    /// The user's message it was drawn from (the fact itself when the user stated it as one).
    pub told: &'a str,
    /// The chat's model, for the memory LLM calls.
    pub model: &'a str,
}

/// The ids of `older` that `change` makes untrue, in order. A failed or malformed answer keeps
/// the memory (nothing is retired on doubt).
pub(super) async fn superseded(
    pp: &PostProcessor,
    change: &Change<'_>,
    older: &[Older],
) -> Vec<i64> {
    let mut retired = Vec::new();
    for old in older {
        match untrue(pp, change, old).await {
            Ok(true) => retired.push(old.id),
            Ok(false) => {}
            Err(error) => {
                tracing::warn!(memory = old.id, %error, "the change check failed; the memory is kept")
            }
        }
    }
    retired
}

async fn untrue(pp: &PostProcessor, change: &Change<'_>, old: &Older) -> Result<bool, String> {
    let material = format!(
        "Older note: {}\n\nThe user's newest message: {}\n",
        quoted(&old.text),
        quoted(change.told)
    );
    let answer = ask(
        pp,
        change.model,
        &pp.prompts.changed,
        &material,
        "now",
        now_schema(),
    )
    .await?;
    let now = answer["now"].as_str().unwrap_or_default();
    if echoes(now, change.told) || !loses_words(&old.text, now) {
        return Ok(false);
    }
    let material = format!(
        "Older note: {}\nNewer note: {}\n",
        quoted(&old.text),
        quoted(change.fact)
    );
    let answer = ask(
        pp,
        change.model,
        &pp.prompts.both_true,
        &material,
        "both_true",
        both_schema(),
    )
    .await?;
    let untrue = answer["both_true"].as_bool() == Some(false);
    tracing::info!(memory = old.id, old = %old.text, now, fact = %change.fact, untrue, "change check");
    Ok(untrue)
}

/// Whether the rewrite `now` of the note `old` has lost some of its content words: a copy, or a
/// note with more added ("is a nurse" → "is a nurse at the university hospital"), has not. An
/// empty answer is no rewrite.
pub(super) fn loses_words(old: &str, now: &str) -> bool {
    if now.trim().is_empty() {
        return false;
    }
    let kept = content_words(now);
    content_words(old).iter().any(|word| !kept.contains(word))
}

/// Whether the "rewrite" `now` is the user's message `told` given back instead of the note
/// (the smallest models answer so for true and changed notes alike): every content
/// word of it is the message's, and it has most of them. Such an answer says nothing of the note.
pub(super) fn echoes(now: &str, told: &str) -> bool {
    let (now, told) = (content_words(now), content_words(told));
    !now.is_empty() && now.is_subset(&told) && now.len() as f64 >= ECHO_SHARE * told.len() as f64
}

/// The share of the message's content words an echo has at least.
const ECHO_SHARE: f64 = 0.8;

async fn ask(
    pp: &PostProcessor,
    model: &str,
    prompt: &str,
    material: &str,
    name: &str,
    schema: Value,
) -> Result<Value, String> {
    let answer = pp
        .llm
        .complete(model, prompt, material, Answer::Json(name, &schema))
        .await
        .map_err(|e| e.to_string())?;
    json_object(&answer).map_err(|e| e.to_string())
}

fn now_schema() -> Value {
    json!({"type": "object", "additionalProperties": false, "required": ["now"],
        "properties": {"now": {"type": "string", "maxLength": super::fact::MAX_FACT_CHARS + 100}}})
}

fn both_schema() -> Value {
    json!({"type": "object", "additionalProperties": false, "required": ["both_true"],
        "properties": {"both_true": {"type": "boolean"}}})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_given_back_is_no_rewrite() {
        let told = "I took the job! I'm now sous-chef at the bistro. First week was chaos.";
        assert!(echoes(told, told));
        assert!(echoes(
            "I took the job, now sous-chef at the bistro. First week was chaos",
            told
        ));
        assert!(!echoes(
            "The user works as a sous-chef at the bistro.",
            told
        ));
        assert!(!echoes(
            "The user lives in Grenoble.",
            "I moved to Grenoble."
        ));
        assert!(!echoes("", told));
    }

    #[test]
    fn a_copy_or_an_addition_loses_no_words_a_new_value_does() {
        let old = "The user's friend Amélie is a nurse.";
        assert!(!loses_words(old, old));
        assert!(!loses_words(old, "the user's friend Amélie is a nurse"));
        assert!(!loses_words(
            old,
            "The user's friend Amélie is a nurse at the university hospital."
        ));
        assert!(!loses_words(old, "  "));
        assert!(loses_words(
            "The user works as a line cook at a hotel in Porto.",
            "The user works as a sous-chef at the bistro in Porto."
        ));
        assert!(loses_words(old, "none"));
    }
}
