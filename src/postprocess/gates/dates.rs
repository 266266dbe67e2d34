//! A date in a fact must come from the user: written in their words ("on March 2", "in 2019"), or
//! resolved from a relative one ("last week", "yesterday") against when they said it, as the
//! extraction prompt asks. Small models otherwise date facts that had no date ("The user is a
//! nurse in Valencia on March 2, 2026": the message's own date), or give a date that the words
//! cannot mean ("moved to Porto in October 2025" for "last week" in November 2026): both are
//! false memories, and the newest-first order of the memory block reads them.

use std::collections::HashSet;

use crate::dates::{civil_from_days, days_from_civil, MONTHS};

/// What the user said, as the date check reads it.
#[derive(Default)]
pub(super) struct SaidDates {
    /// Every lower-case word of the user's messages.
    words: HashSet<String>,
    /// The days (offsets from when it was said) the user's relative times can mean.
    windows: Vec<(i64, i64)>,
    /// The day the newest message was said (days since 1970), if known.
    day: Option<i64>,
}

/// A date a fact names: what it names and whether the user wrote each part.
#[derive(Default)]
struct Named {
    year: Option<(i64, bool)>,
    month: Option<(i64, bool)>,
    day: Option<i64>,
}

impl SaidDates {
    pub fn add(&mut self, text: &str) {
        let lower = text.to_lowercase();
        let words: Vec<&str> = lower
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .collect();
        for &(phrase, from, to) in super::lists().dates_relative {
            let found = if phrase.contains(' ') {
                lower.contains(phrase)
            } else {
                words.contains(&phrase)
            };
            if found {
                self.windows.push((from, to));
            }
        }
        self.words.extend(words.into_iter().map(str::to_owned));
    }

    /// The day the newest message was said (days since 1970), if known.
    pub fn day(&self) -> Option<i64> {
        self.day
    }

    pub fn at(&mut self, ms: i64) {
        let day = ms.div_euclid(86_400_000);
        self.day = Some(self.day.map_or(day, |d| d.max(day)));
    }

    /// Whether `fact` names a month or a year the user neither wrote (nor a stored memory
    /// `known` holds) nor can have meant by one of their relative times.
    pub fn invented(&self, fact: &str, known: &[&str]) -> bool {
        let known: HashSet<String> = known
            .iter()
            .flat_map(|k| {
                k.to_lowercase()
                    .split(|c: char| !c.is_alphanumeric())
                    .map(str::to_owned)
                    .collect::<Vec<_>>()
            })
            .collect();
        let written = |word: &str| self.words.contains(word) || known.contains(word);
        let named = named(fact, written);
        let unwritten = |part: Option<(i64, bool)>| part.is_some_and(|(_, w)| !w);
        if !unwritten(named.year) && !unwritten(named.month) {
            return false;
        }
        let Some(today) = self.day else {
            // Without the time it was said, a relative time can mean any date.
            return self.windows.is_empty();
        };
        let (said_year, ..) = civil_from_days(today);
        // The user named the month (or day); only its year was resolved.
        if named.month.is_some_and(|(_, w)| w) {
            return named.year.is_some_and(|(y, _)| (y - said_year).abs() > 1);
        }
        let years: Vec<i64> = match named.year {
            Some((y, _)) => vec![y],
            None => vec![said_year - 1, said_year, said_year + 1],
        };
        let meant = |(from, to): (i64, i64)| {
            years.iter().any(|&y| {
                let (first, last) = match (named.month, named.day) {
                    (Some((m, _)), Some(d)) => {
                        let day = days_from_civil(y, m, d);
                        (day, day)
                    }
                    (Some((m, _)), None) => (
                        days_from_civil(y, m, 1),
                        days_from_civil(y + m / 12, m % 12 + 1, 1) - 1,
                    ),
                    _ => (days_from_civil(y, 1, 1), days_from_civil(y, 12, 31)),
                };
                first <= today + to && last >= today + from
            })
        };
        !self.windows.iter().copied().any(meant)
    }
}

/// `fact` without the date phrase it ends with or carries ("The user moved to Porto in October
/// 2026." → "The user moved to Porto."), when the phrase opens with a preposition; `None` when
/// there is no such phrase. What the fact says stays, and the memory's own date says when it was
/// said.
pub(super) fn strip(fact: &str) -> Option<String> {
    let lower = fact.to_lowercase();
    // Words with their byte spans (lower-casing keeps ASCII offsets; a text with other letters
    // whose case changes length is left as it is).
    if lower.len() != fact.len() {
        return None;
    }
    let mut spans: Vec<(usize, usize)> = Vec::new();
    let mut start = None;
    for (at, c) in lower.char_indices() {
        match (c.is_alphanumeric(), start) {
            (true, None) => start = Some(at),
            (false, Some(from)) => {
                spans.push((from, at));
                start = None;
            }
            _ => {}
        }
    }
    if let Some(from) = start {
        spans.push((from, lower.len()));
    }
    let words: Vec<&str> = spans.iter().map(|&(a, b)| &lower[a..b]).collect();
    let is_date = |i: usize| month_of(&words, i).is_some() || year_of(words[i]).is_some();
    let first = (0..words.len()).find(|&i| is_date(i))?;
    let mut from = first;
    if from > 0 && day_of(words[from - 1]).is_some() {
        from -= 1;
    }
    while from > 0 && super::lists().dates_modifiers.contains(&words[from - 1]) {
        from -= 1;
    }
    if from == 0 || !super::lists().dates_openers.contains(&words[from - 1]) {
        return None;
    }
    from -= 1;
    let mut to = first;
    while to + 1 < words.len() && (is_date(to + 1) || day_of(words[to + 1]).is_some()) {
        to += 1;
    }
    let (cut_from, cut_to) = (spans[from].0, spans[to].1);
    let mut text = format!("{}{}", fact[..cut_from].trim_end(), &fact[cut_to..]);
    // "Porto , ." and "Porto ." after the cut.
    for (bad, good) in [(" ,", ","), (",.", "."), (" .", "."), ("  ", " ")] {
        text = text.replace(bad, good);
    }
    let text = text.trim().to_owned();
    (text != fact.trim()).then_some(text)
}

/// The year, month and day `fact` names, each with whether it was `written` by the user.
fn named(fact: &str, written: impl Fn(&str) -> bool) -> Named {
    let lower = fact.to_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    let mut named = Named::default();
    for (at, word) in words.iter().enumerate() {
        if let Some(index) = month_of(&words, at) {
            named.month = Some((index as i64 + 1, written(word)));
            let day_near = [at.checked_sub(1), Some(at + 1)]
                .into_iter()
                .flatten()
                .filter_map(|i| words.get(i))
                .find_map(|w| day_of(w));
            named.day = named.day.or(day_near);
        } else if let Some(y) = year_of(word) {
            named.year = Some((y, written(word)));
        }
    }
    named
}

/// A day of the month as written beside its month ("7", "7th", "2nd").
fn day_of(word: &str) -> Option<i64> {
    let digits = word.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let suffix = &word[digits.len()..];
    if !matches!(suffix, "" | "st" | "nd" | "rd" | "th") {
        return None;
    }
    digits.parse::<i64>().ok().filter(|d| (1..=31).contains(d))
}

/// The month `words[at]` names: a full month name, and for "may" only beside a number or after
/// "in", "on", "since" or "of" ("may" is mostly a verb).
fn month_of(words: &[&str], at: usize) -> Option<usize> {
    let index = MONTHS.iter().position(|m| *m == words[at])?;
    if words[at] != "may" {
        return Some(index);
    }
    let number = |w: Option<&&str>| w.is_some_and(|w| w.chars().all(|c| c.is_ascii_digit()));
    let before = at.checked_sub(1).and_then(|i| words.get(i));
    let dated = number(words.get(at + 1))
        || number(before)
        || before.is_some_and(|w| matches!(*w, "in" | "on" | "since" | "of"));
    dated.then_some(index)
}

fn year_of(word: &str) -> Option<i64> {
    if word.len() != 4 || !word.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    word.parse::<i64>()
        .ok()
        .filter(|y| (1900..=2100).contains(y))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn said(texts: &[&str], at: Option<(i64, i64, i64)>) -> SaidDates {
        let mut said = SaidDates::default();
        for text in texts {
            said.add(text);
        }
        if let Some((y, m, d)) = at {
            said.at(crate::dates::days_from_civil(y, m, d) * 86_400_000);
        }
        said
    }

    #[test]
    fn dates_in_the_users_words_or_resolved_from_them_pass() {
        let s = said(&["My birthday is on March 2, and I started in 2019."], None);
        assert!(!s.invented("The user's birthday is on March 2.", &[]));
        assert!(!s.invented("The user started their job in 2019.", &[]));
        assert!(!s.invented("The user is a nurse.", &[]));
        assert!(!s.invented("The user may move to Berlin.", &[]));
        let s = said(&["I moved to Porto last week."], Some((2026, 11, 3)));
        assert!(!s.invented("The user moved to Porto in October 2026.", &[]));
        assert!(!s.invented("The user moved to Porto in late October.", &[]));
        let s = said(
            &["I went to a support group yesterday."],
            Some((2023, 5, 8)),
        );
        assert!(!s.invented("The user went to a support group on 7 May 2023.", &[]));
        let s = said(&["We married two years ago."], Some((2026, 1, 10)));
        assert!(!s.invented("The user married in 2024.", &[]));
        let s = said(&["I moved last month."], Some((2026, 1, 5)));
        assert!(!s.invented("The user moved in December 2025.", &[]));
        assert!(!s.invented("The user moved in 2025.", &[]));
    }

    #[test]
    fn a_date_phrase_is_cut_out_and_the_fact_kept() {
        for (fact, undated) in [
            (
                "The user moved to Porto in October 2026.",
                Some("The user moved to Porto."),
            ),
            (
                "The user is a nurse in Valencia on March 2, 2026.",
                Some("The user is a nurse in Valencia."),
            ),
            (
                "The user moved to Porto in late October, for a new job.",
                Some("The user moved to Porto, for a new job."),
            ),
            (
                "The user started running on 7 May 2023 with a friend.",
                Some("The user started running with a friend."),
            ),
            (
                "The user has worked here since 2020.",
                Some("The user has worked here."),
            ),
            ("The user's March 2 birthday is a Monday.", None),
            ("The user may move to Berlin.", None),
        ] {
            assert_eq!(strip(fact).as_deref(), undated, "{fact}");
        }
    }

    #[test]
    fn a_date_the_user_cannot_have_meant_is_invented() {
        // The message's date attached to a lasting fact.
        let s = said(
            &["I'm a nurse at the children's hospital in Valencia."],
            Some((2026, 3, 2)),
        );
        assert!(s.invented("The user is a nurse in Valencia on March 2, 2026.", &[]));
        assert!(s.invented("The user has been a nurse since 2020.", &[]));
        // "Last week" cannot be a year earlier.
        let s = said(&["I moved to Porto last week."], Some((2026, 11, 3)));
        assert!(s.invented("The user moved to Porto in October 2025.", &[]));
        assert!(s.invented("The user moved to Porto in May 2026.", &[]));
        assert!(s.invented("The user moved to Porto in 2024.", &[]));
        // The message's own date given to a lasting fact, beside a relative time of another.
        assert!(s.invented("The user is a nurse in Valencia on November 3, 2026.", &[]));
        // A month the user named, its year resolved.
        let s = said(&["My exam is in March."], Some((2026, 11, 3)));
        assert!(!s.invented("The user has an exam in March 2027.", &[]));
        assert!(s.invented("The user has an exam in March 2029.", &[]));
    }
}
