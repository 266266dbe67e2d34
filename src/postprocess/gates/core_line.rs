//! The gates an explicit-mode agent's own line for its `human` block passes. The agent sees the
//! conversation, so its lines need no grounding in this turn's messages (it may save what was
//! said turns ago); what it may not save is manners ("The user thanks the assistant."), a
//! question restated ("The user asks for a quick breakfast"), what the user only asked about,
//! or a rewording of what the block already says ("The user bought a grinder." under "The user
//! bought a new grinder, a Baratza Encore."). Pure: explicit mode's hygiene maps each rejection
//! to the tool message the agent retries from.

use super::{asked::drawn_from_question, check_form, content_words, lists, share, Rejection};

/// Share of a line's content words the block must hold already for the line to say nothing new.
/// Dates and numbers count: "The deadline moved to November 30." is news beside "October 15".
const RESTATED_SHARE: f64 = 0.75;

/// Whether `line` is among what `block` already says: one of its lines about the same subject
/// holds nearly all the line's content words ("The user loves spicy food." is news beside "The
/// user's sister loves spicy food.").
fn restated(block: &str, line: &str) -> bool {
    let (subject, words) = (subject_of(line), content_words(line));
    !words.is_empty()
        && block.lines().any(|known| {
            let known_words = content_words(known);
            subject_of(known) == subject
                && share(&words, |w| known_words.contains(w)) >= RESTATED_SHARE
        })
}

/// Whom a line is about: "user" for "The user …", "user's sister" for "The user's sister …",
/// else its first word ("Tomas").
fn subject_of(line: &str) -> String {
    let words: Vec<String> = line
        .split(|c: char| !c.is_alphanumeric() && c != '\'')
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    let word = |i: usize| words.get(i).map_or("", String::as_str);
    match (word(0), word(1)) {
        ("the", "user's") => format!("user's {}", word(2)),
        ("the", "user") => "user".to_owned(),
        (first, _) => first.to_owned(),
    }
}

/// Whether the agent may add `line` to its `human` block `block`, the user having said `said`
/// this turn.
pub fn check_core_line(line: &str, said: &[&str], block: &str) -> Result<(), Rejection> {
    if let Err(reason @ (Rejection::Courtesy | Rejection::Question)) = check_form(line) {
        return Err(reason);
    }
    let lower = line.to_lowercase();
    if lists().reported_questions.iter().any(|q| lower.contains(q)) {
        return Err(Rejection::Question);
    }
    let known: Vec<&str> = block.lines().collect();
    if drawn_from_question(line, said, &known) {
        return Err(Rejection::FromQuestion);
    }
    if restated(block, line) {
        return Err(Rejection::Restated);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manners_questions_and_rewordings_are_refused() {
        let block =
            "The user takes their coffee black.\nThe user bought a new grinder, a Baratza Encore.";
        for (line, said, reason) in [
            (
                "The user thanks the assistant.",
                "Thanks!",
                Rejection::Courtesy,
            ),
            (
                "The user asks for a quick breakfast before a 7am shift.",
                "Can you suggest a quick breakfast?",
                Rejection::Question,
            ),
            (
                "The user has a preference for a good night's sleep.",
                "Any tips for sleeping after night shifts?",
                Rejection::FromQuestion,
            ),
            ("The user bought a grinder.", "", Rejection::Restated),
            (
                "The user bought a grinder from Baratza.",
                "",
                Rejection::Restated,
            ),
        ] {
            assert_eq!(check_core_line(line, &[said], block), Err(reason), "{line}");
        }
    }

    #[test]
    fn news_passes_even_when_it_shares_words() {
        let block = "The user's thesis deadline is October 15.\nThe user is Ada.\nThe user's sister loves spicy food.";
        for line in [
            "The user's deadline moved to November 30.",
            "The user loves spicy food.",
            "The user switched from the French press to a V60 pour-over.",
            // Said turns ago: the agent sees the whole conversation.
            "The user works as a data analyst at Fabrikam.",
            // Another subject.
            "The user's sister is Ada's friend.",
        ] {
            assert_eq!(
                check_core_line(line, &["How do I make a pivot table faster?"], block),
                Ok(()),
                "{line}"
            );
        }
    }
}
