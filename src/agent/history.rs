//! The history lines of the `human` block: a fact a newer one made untrue, told in the past tense
//! with the day it stopped holding and what holds since, in one sentence:
//!
//! > Until 2026-09-20, the deadline for the thesis was October 15; since then: the user's
//! > supervisor extended their deadline to November 30.
//!
//! Why this shape: a small model, asked "When is my thesis due?", answered "October 15" from a
//! history line that kept the old fact as written ("No longer true: The deadline for the thesis
//! is October 15."), and from every variant tried that kept the old value apart from the new one
//! (in the past tense, dated, in a section of its own, first in the block). It answered "November
//! 30" when the line named the new value in the same sentence (`docs/eval-history.md`, "History
//! lines that name what holds now"). Lines written by older versions (`No longer true: …`) are
//! still read as history.

use std::borrow::Cow;

use crate::postprocess::gates::relative;

/// How older versions marked a history line.
pub const LEGACY: &str = "No longer true: ";

const UNTIL: &str = "Until ";
const FORMERLY: &str = "Formerly, ";
const SINCE: &str = "; since then: ";

/// The history line for `old`, made untrue by `new` on day `day` (days since 1970-01-01; `None`:
/// not known).
pub fn line(old: &str, new: &str, day: Option<i64>) -> String {
    let old = past(old.trim().trim_end_matches('.'));
    let new = new.trim();
    let when = match day {
        Some(day) => format!("{UNTIL}{}, ", relative::ymd(day)),
        None => FORMERLY.to_owned(),
    };
    format!("{when}{}{SINCE}{}", lowered(&old), lowered(new))
}

/// Whether `line` is a history line (of either shape).
pub fn is_history(line: &str) -> bool {
    former(line).is_some()
}

/// The old fact a history line keeps (without its date and what holds since); `None` for a line
/// that is not history ("Formerly, I was a chemist." in `persona` is not: history names what
/// holds since).
pub fn former(line: &str) -> Option<&str> {
    let line = line.trim();
    if let Some(old) = line.strip_prefix(LEGACY) {
        return Some(old);
    }
    let rest = line.strip_prefix(FORMERLY).or_else(|| {
        let rest = line.strip_prefix(UNTIL)?;
        let (date, rest) = rest.split_once(", ")?;
        is_date(date).then_some(rest)
    })?;
    // A line ending where what holds since begins is trimmed of its space.
    rest.split_once(SINCE.trim_end()).map(|(old, _)| old)
}

/// `text` (a block, or compiled core memory) without its history lines: what a turn that does
/// not ask about the past reads ([`crate::memory::history::asks_about_the_past`], the rule
/// implicit memory's block follows too). Even named beside what holds now, an old value in view
/// is what a small model answers "When is my thesis due?" with.
pub fn without(text: &str) -> Cow<'_, str> {
    if !text.lines().any(is_history) {
        return Cow::Borrowed(text);
    }
    let kept: Vec<&str> = text.lines().filter(|line| !is_history(line)).collect();
    Cow::Owned(kept.join("\n"))
}

/// Whether a turn in which the user said `said` asks about the past, and so reads history lines.
pub fn asked_about(said: &[String]) -> bool {
    said.iter()
        .any(|s| crate::memory::history::asks_about_the_past(s))
}

/// What of `text` a turn reads: all of it when `past` (its message asks about the past), else
/// [`without`] its history.
pub fn in_view(text: &str, past: bool) -> Cow<'_, str> {
    if past {
        Cow::Borrowed(text)
    } else {
        without(text)
    }
}

fn is_date(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.len() == 10
        && bytes.iter().enumerate().all(|(at, b)| match at {
            4 | 7 => *b == b'-',
            _ => b.is_ascii_digit(),
        })
}

/// Words a fact may start with that are not names, lowered in the middle of a sentence.
const OPENERS: [&str; 9] = [
    "The", "A", "An", "His", "Her", "Their", "Its", "This", "That",
];

fn lowered(text: &str) -> String {
    let first = text.split_whitespace().next().unwrap_or_default();
    let bare = first.split('\'').next().unwrap_or_default();
    if OPENERS.contains(&bare) {
        let mut chars = text.chars();
        chars
            .next()
            .map(|c| c.to_lowercase().chain(chars).collect())
            .unwrap_or_default()
    } else {
        text.to_owned()
    }
}

/// Present-tense verbs a fact is stated with, and their past tense.
const PAST: &[(&str, &str)] = &[
    ("is", "was"),
    ("are", "were"),
    ("has", "had"),
    ("have", "had"),
    ("will", "would"),
    ("can", "could"),
    ("does", "did"),
    ("goes", "went"),
    ("lives", "lived"),
    ("works", "worked"),
    ("owns", "owned"),
    ("uses", "used"),
    ("likes", "liked"),
    ("loves", "loved"),
    ("prefers", "preferred"),
    ("plans", "planned"),
    ("wants", "wanted"),
    ("rents", "rented"),
    ("attends", "attended"),
    ("studies", "studied"),
    ("teaches", "taught"),
    ("runs", "ran"),
    ("leads", "led"),
    ("manages", "managed"),
    ("drives", "drove"),
    ("rides", "rode"),
    ("takes", "took"),
    ("drinks", "drank"),
    ("eats", "ate"),
    ("brews", "brewed"),
    ("plays", "played"),
    ("keeps", "kept"),
    ("writes", "wrote"),
    ("needs", "needed"),
    ("belongs", "belonged"),
    ("commutes", "commuted"),
];

/// `fact` with its first present-tense verb in the past ("is now" loses its "now"); as it is when
/// it has none it knows (a fact told in the past already: "moved to Porto").
fn past(fact: &str) -> String {
    let words: Vec<&str> = fact.split(' ').collect();
    let Some((at, was)) = words.iter().enumerate().find_map(|(at, word)| {
        let lower = word.to_lowercase();
        PAST.iter()
            .find(|(now, _)| *now == lower)
            .map(|(_, was)| (at, *was))
    }) else {
        return fact.to_owned();
    };
    let mut out: Vec<&str> = words[..at].to_vec();
    out.push(was);
    let rest = &words[at + 1..];
    let rest = match rest.first() {
        Some(word) if word.eq_ignore_ascii_case("now") => &rest[1..],
        _ => rest,
    };
    out.extend_from_slice(rest);
    out.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2026-09-20 in days since 1970-01-01.
    const DAY: i64 = 20_716;

    #[test]
    fn a_history_line_tells_the_old_fact_in_the_past_and_names_what_holds_now() {
        assert_eq!(
            line(
                "The deadline for the thesis is October 15.",
                "The user's supervisor extended their deadline to November 30.",
                Some(DAY)
            ),
            "Until 2026-09-20, the deadline for the thesis was October 15; since then: the user's supervisor extended their deadline to November 30."
        );
        assert_eq!(
            line(
                "The user works as a data analyst at Fabrikam.",
                "The user is now a machine learning engineer at Contoso.",
                None
            ),
            "Formerly, the user worked as a data analyst at Fabrikam; since then: the user is now a machine learning engineer at Contoso."
        );
        assert_eq!(
            line(
                "The user is now a nurse.",
                "Ada left the hospital.",
                Some(DAY)
            ),
            "Until 2026-09-20, the user was a nurse; since then: Ada left the hospital."
        );
        // Told in the past already: as it was.
        assert_eq!(
            line("The user moved to Porto.", "The user moved to Braga.", None),
            "Formerly, the user moved to Porto; since then: the user moved to Braga."
        );
    }

    #[test]
    fn history_is_read_in_both_shapes_and_only_history() {
        let new = line(
            "The deadline for the thesis is October 15.",
            "The user's supervisor extended their deadline to November 30.",
            Some(DAY),
        );
        assert_eq!(
            former(&new),
            Some("the deadline for the thesis was October 15")
        );
        assert_eq!(
            former("No longer true: The user lives in Lisbon."),
            Some("The user lives in Lisbon.")
        );
        assert_eq!(
            former("Formerly, the user lived in Lisbon; since then: the user moved to Porto."),
            Some("the user lived in Lisbon")
        );
        for live in [
            "The user lives in Lisbon.",
            "Until recently, the user lived in Lisbon.",
            "Until 2026, the user lived in Lisbon.",
            "Until 2026-09-20, the user lived in Lisbon.",
            "Formerly, I was a chemist.",
            "",
        ] {
            assert!(!is_history(live), "{live:?}");
        }
    }

    #[test]
    fn a_turn_that_does_not_ask_about_the_past_reads_no_history() {
        let human = "The user is Ada.\nNo longer true: The user lives in Lisbon.\nThe user likes tea.\nFormerly, the user lived in Faro; since then: the user moved to Lisbon.";
        assert_eq!(
            in_view(human, false),
            "The user is Ada.\nThe user likes tea."
        );
        assert_eq!(in_view(human, true), human);
        let plain = "The user is Ada.\nThe user likes tea.";
        assert!(matches!(in_view(plain, false), Cow::Borrowed(_)));
    }
}
