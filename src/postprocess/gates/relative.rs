//! A relative day in a fact made absolute: "The user bought a grinder yesterday." said on
//! 2026-10-12 is stored as "The user bought a grinder on 2026-10-11.".
//!
//! A fact is read long after it was said, and a small chat model does not count days back from
//! the date the memory block shows beside it: asked "On which day did I buy my grinder?" with
//! "[2026-10-12] … yesterday", a small model answers October 12. The extraction prompt asks the
//! memory LLM to resolve such times; a small memory LLM keeps them as they were said. Only what
//! has one meaning is resolved: "yesterday", "today", "tonight", "this morning", "this evening",
//! "tomorrow", "last <weekday>", and "on <weekday>" in a fact told in the past tense ("hiked …
//! on Saturday": the Saturday before). "Last weekend", "next week" or "on Saturday" in a plan
//! stay as they are. Days are counted in UTC, as the message times are: a "yesterday" said
//! just after midnight in a user's timezone west of UTC lands a day late, as it would for a
//! reader counting from the date shown.

use crate::dates::{civil_from_days, WEEKDAYS};

/// `fact` with its one-meaning relative days replaced by the date they meant, counted from
/// `day` (days since 1970, when it was said); `None` when there is none.
pub fn resolve(fact: &str, day: i64) -> Option<String> {
    let tokens = tokenize(fact);
    let lower: Vec<String> = tokens.iter().map(|t| t.to_lowercase()).collect();
    let past = told_in_past(&words_of(fact));
    let mut out: Vec<String> = Vec::with_capacity(tokens.len());
    let mut changed = false;
    let mut at = 0;
    while at < tokens.len() {
        let word = lower[at].as_str();
        let next = lower.get(at + 2).map(String::as_str);
        // (tokens consumed, the day meant); tokens alternate words and the gaps between them.
        let meant = match (word, next) {
            ("yesterday", _) => Some((1, day - 1)),
            ("today" | "tonight", _) => Some((1, day)),
            ("tomorrow", _) => Some((1, day + 1)),
            ("this", Some("morning" | "evening" | "afternoon")) => Some((3, day)),
            ("last", Some(weekday)) => before(weekday, day).map(|d| (3, d)),
            ("on", Some(weekday)) if past => before(weekday, day).map(|d| (3, d)),
            _ => None,
        };
        match meant {
            Some((consumed, meant)) => {
                let date = ymd(meant);
                // "on yesterday's …" has its "on" already.
                let text = if preceded_by_on(&lower, at) {
                    date
                } else {
                    format!("on {date}")
                };
                out.push(capitalized_like(&tokens[at], &text));
                at += consumed;
                changed = true;
            }
            None => {
                out.push(tokens[at].clone());
                at += 1;
            }
        }
    }
    changed.then(|| out.concat())
}

/// A fact told in the past with no time of its own, dated from the one user sentence it comes
/// from when that sentence has one one-meaning relative day: "Yesterday I bought a new grinder, a
/// Baratza Encore." → "The user bought a new grinder, a Baratza Encore." (as a small memory LLM
/// writes it) → "… Encore on 2026-10-11.". A fact in the present ("Yesterday I realized I love
/// tea." → "The user loves tea.") is not dated: the day is the realizing's.
pub fn from_source(fact: &str, said: &[String], day: i64) -> Option<String> {
    let words = words_of(fact);
    let content: Vec<&String> = words
        .iter()
        .filter(|w| w.len() >= 3 && !matches!(w.as_str(), "the" | "user" | "and" | "with"))
        .collect();
    if content.len() < 2 || !told_in_past(&words) || has_time(&words) {
        return None;
    }
    let mut dates = Vec::new();
    for sentence in said
        .iter()
        .flat_map(|t| t.split_inclusive(['.', '!', '?', '\n']))
    {
        let theirs = words_of(sentence);
        let shared = content
            .iter()
            .filter(|w| {
                theirs
                    .iter()
                    .any(|t| t.get(..4) == w.get(..4) && t.len().abs_diff(w.len()) <= 3)
            })
            .count();
        if shared * 5 < content.len() * 4 {
            continue;
        }
        let meant = days_meant(&theirs, day);
        if let [one] = meant.as_slice() {
            dates.push(*one);
        }
    }
    dates.dedup();
    let [date] = dates.as_slice() else {
        return None;
    };
    let body = fact.trim_end().trim_end_matches(['.', '!']);
    Some(format!("{body} on {}.", ymd(*date)))
}

/// The lowercase words of `text` (letters only, as `tokenize` splits them).
fn words_of(text: &str) -> Vec<String> {
    tokenize(text)
        .into_iter()
        .skip(1)
        .step_by(2)
        .map(|w| w.to_lowercase())
        .collect()
}

/// Told in the past: a past tense that is not a state ("is married"), and no plan or habit.
fn told_in_past(words: &[String]) -> bool {
    let past = words.iter().enumerate().any(|(at, w)| {
        let state = at > 0
            && matches!(
                words[at - 1].as_str(),
                "is" | "are" | "am" | "be" | "s" | "been"
            );
        is_past(w) && !state
    });
    past && !words
        .iter()
        .any(|w| super::lists().relative_not_past.contains(&w.as_str()))
}

/// Whether the words carry a time of their own (a month, a weekday, a relative word, a number).
fn has_time(words: &[String]) -> bool {
    words.iter().any(|w| {
        WEEKDAYS.contains(&w.as_str())
            || crate::dates::MONTHS
                .iter()
                .any(|m| m.eq_ignore_ascii_case(w))
            || matches!(
                w.as_str(),
                "yesterday"
                    | "today"
                    | "tonight"
                    | "tomorrow"
                    | "morning"
                    | "evening"
                    | "week"
                    | "weekend"
                    | "month"
                    | "year"
                    | "ago"
                    | "last"
                    | "next"
                    | "recently"
                    | "on"
            )
    })
}

/// The one-meaning days a sentence names, each once.
fn days_meant(words: &[String], day: i64) -> Vec<i64> {
    let past = told_in_past(words);
    let mut days = Vec::new();
    for (at, word) in words.iter().enumerate() {
        let next = words.get(at + 1).map(String::as_str);
        let meant = match (word.as_str(), next) {
            ("yesterday", _) => Some(day - 1),
            ("today" | "tonight", _) => Some(day),
            ("this", Some("morning" | "evening" | "afternoon")) => Some(day),
            ("last", Some(weekday)) => before(weekday, day),
            ("on", Some(weekday)) if past => before(weekday, day),
            _ => None,
        };
        if let Some(meant) = meant.filter(|m| !days.contains(m)) {
            days.push(meant);
        }
    }
    days
}

/// The last `weekday` strictly before `day`.
fn before(weekday: &str, day: i64) -> Option<i64> {
    let target = WEEKDAYS.iter().position(|w| *w == weekday)? as i64;
    // 1970-01-01 was a Thursday (4).
    let today = (day + 4).rem_euclid(7);
    let back = (today - target).rem_euclid(7);
    Some(day - if back == 0 { 7 } else { back })
}

fn is_past(word: &str) -> bool {
    super::lists().relative_irregular_past.contains(&word) || word.len() > 4 && word.ends_with("ed")
}

fn preceded_by_on(lower: &[String], at: usize) -> bool {
    at >= 2 && lower[at - 2] == "on"
}

pub(crate) fn ymd(day: i64) -> String {
    let (year, month, day) = civil_from_days(day);
    format!("{year:04}-{month:02}-{day:02}")
}

fn capitalized_like(original: &str, text: &str) -> String {
    if original.chars().next().is_some_and(char::is_uppercase) {
        let mut chars = text.chars();
        match chars.next() {
            Some(first) => first.to_uppercase().chain(chars).collect(),
            None => String::new(),
        }
    } else {
        text.to_owned()
    }
}

/// Words and the text between them, alternating, starting with a (maybe empty) gap: joined
/// they give `text` back.
fn tokenize(text: &str) -> Vec<String> {
    let mut tokens = vec![String::new()];
    let mut in_word = false;
    for c in text.chars() {
        let letter = c.is_alphabetic();
        if letter != in_word {
            tokens.push(String::new());
            in_word = letter;
        }
        if let Some(last) = tokens.last_mut() {
            last.push(c);
        }
    }
    tokens
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dates::days_from_civil;

    /// Monday 2026-03-09 and Monday 2026-10-12.
    fn monday() -> i64 {
        days_from_civil(2026, 3, 9)
    }

    #[test]
    fn one_meaning_relative_days_become_dates() {
        let oct12 = days_from_civil(2026, 10, 12);
        for (fact, day, resolved) in [
            (
                "The user bought a new grinder, a Baratza Encore, yesterday.",
                oct12,
                "The user bought a new grinder, a Baratza Encore, on 2026-10-11.",
            ),
            (
                "Yesterday the user bought a grinder.",
                oct12,
                "On 2026-10-11 the user bought a grinder.",
            ),
            (
                "The user hiked up Mount Tamalpais with Ben on Saturday.",
                monday(),
                "The user hiked up Mount Tamalpais with Ben on 2026-03-07.",
            ),
            (
                "The user's legs hurt this morning.",
                monday(),
                "The user's legs hurt on 2026-03-09.",
            ),
            (
                "The user met Ana last Monday.",
                monday(),
                "The user met Ana on 2026-03-02.",
            ),
            (
                "The user has a dentist appointment tomorrow.",
                monday(),
                "The user has a dentist appointment on 2026-03-10.",
            ),
            (
                "The user ran on yesterday's trail.",
                monday(),
                "The user ran on 2026-03-08's trail.",
            ),
        ] {
            assert_eq!(resolve(fact, day).as_deref(), Some(resolved), "{fact}");
        }
    }

    #[test]
    fn what_has_more_than_one_meaning_stays() {
        for fact in [
            "The user's sister visits on Saturday.",
            "The user will hike on Saturday.",
            "The user painted the kitchen last weekend.",
            "The user is married and cooks on Sunday.",
            "The user plans to visit their brother next month.",
            "The user lives in Porto.",
            "The user walked to the Saturday market.",
            "The assistant promised to remind the user about the dentist on Friday.",
            "The user booked a table on Friday.",
            "",
        ] {
            assert_eq!(resolve(fact, monday()), None, "{fact}");
        }
    }

    #[test]
    fn a_fact_without_a_time_is_dated_from_its_sentence() {
        let oct12 = days_from_civil(2026, 10, 12);
        let said = |t: &str| vec![t.to_owned()];
        let grinder = said("Yesterday I bought a new grinder, a Baratza Encore. I love it.");
        assert_eq!(
            from_source(
                "The user bought a new grinder, a Baratza Encore.",
                &grinder,
                oct12
            )
            .as_deref(),
            Some("The user bought a new grinder, a Baratza Encore on 2026-10-11.")
        );
        for (fact, said) in [
            // Present: the day is not the fact's.
            ("The user loves their new grinder.", &grinder),
            // A time of its own.
            ("The user bought a grinder in October.", &grinder),
            // Not from that sentence.
            ("The user switched to a V60 pour-over.", &grinder),
            // Two days in the sentence.
            (
                "The user bought a grinder.",
                &said("Yesterday or today I bought a grinder."),
            ),
            // A plan.
            (
                "The user will buy a grinder.",
                &said("Tomorrow I will buy a grinder."),
            ),
        ] {
            assert_eq!(from_source(fact, said, oct12), None, "{fact}");
        }
    }

    #[test]
    fn the_weekday_before_is_strictly_before() {
        // Monday: the Monday before is a week back; Sunday is the day before.
        assert_eq!(before("monday", monday()), Some(monday() - 7));
        assert_eq!(before("sunday", monday()), Some(monday() - 1));
        assert_eq!(before("someday", monday()), None);
    }
}
