//! The checks of a fact's text on its own, before anything it is compared with: no
//! placeholder or tautology, no question, no instruction to the model, no fragment, no manners,
//! long enough.

use super::lists;
use super::{content_words, instruction, Rejection, MIN_WORDS};

/// The checks of a text on its own: no placeholder, no question, no instruction to the model, no
/// fragment, long enough.
pub fn check_form(text: &str) -> Result<(), Rejection> {
    let trimmed = text.trim();
    let bare: String = trimmed
        .chars()
        .filter(|c| c.is_alphanumeric() || c.is_whitespace())
        .collect();
    let lower = bare.trim().to_lowercase();
    if lower.is_empty()
        || super::lists().form_placeholders.contains(&lower.as_str())
        || (trimmed.starts_with('<') && trimmed.ends_with('>'))
        || trimmed.contains("...")
        || trimmed.contains('…')
    {
        return Err(Rejection::Placeholder);
    }
    if trimmed.ends_with('?') {
        return Err(Rejection::Question);
    }
    if tautology(&lower) {
        return Err(Rejection::Placeholder);
    }
    if instruction::reads_as_instruction(trimmed) {
        return Err(Rejection::Instruction);
    }
    let first = trimmed.split_whitespace().next().unwrap_or_default();
    let numbered = first
        .trim_end_matches(['.', ')', ':'])
        .chars()
        .all(|c| c.is_ascii_digit())
        && first.len() > first.trim_end_matches(['.', ')', ':']).len();
    if numbered || ["-", "*", "•", "#", "##", "###"].contains(&first) || trimmed.starts_with("**")
    {
        return Err(Rejection::ListFragment);
    }
    if lower.split_whitespace().count() < MIN_WORDS {
        return Err(Rejection::TooShort);
    }
    let words = content_words(trimmed);
    if !words.is_empty()
        && words.iter().all(|w| {
            lists()
                .courtesy
                .iter()
                .any(|c| w.starts_with(&super::stem(c)))
                || lists().saying.contains(&w.as_str())
        })
    {
        return Err(Rejection::Courtesy);
    }
    Ok(())
}

/// "The user's supervisor is the user's supervisor.": the same words on both sides of its verb
/// (a small memory LLM writes such) say nothing.
fn tautology(lower: &str) -> bool {
    [" is ", " are ", " was ", " were "].iter().any(|verb| {
        lower.split_once(verb).is_some_and(|(subject, rest)| {
            !subject.trim().is_empty() && subject.trim() == rest.trim()
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fact_that_names_its_subject_twice_says_nothing() {
        for fact in [
            "The user's supervisor is the user's supervisor.",
            "Tomas is Tomas.",
        ] {
            assert_eq!(check_form(fact), Err(Rejection::Placeholder), "{fact}");
        }
        for fact in [
            "The user's supervisor is Ana.",
            "The user is the user's own boss now.",
        ] {
            assert_eq!(check_form(fact), Ok(()), "{fact}");
        }
    }
}
