//! Calendar dates without a date crate: the few conversions memproxy needs (UTC).

/// English month names, lower-case, January first.
pub const MONTHS: [&str; 12] = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
];

/// English weekday names, lower-case, Sunday first (1970-01-01, day 0, was a Thursday: 4).
pub const WEEKDAYS: [&str; 7] = [
    "sunday",
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
];

/// Whether a word is one of the month or weekday names the system writes in dates.
pub fn is_date_word(word: &str) -> bool {
    let lower = word.to_lowercase();
    MONTHS.contains(&lower.as_str()) || WEEKDAYS.contains(&lower.as_str())
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
pub fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day number (inverse of [`days_from_civil`]).
pub fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    (
        if month <= 2 {
            yoe + era * 400 + 1
        } else {
            yoe + era * 400
        },
        month,
        day,
    )
}

/// `YYYY-MM-DD` of a millisecond timestamp.
pub fn ymd(ms: i64) -> String {
    let (year, month, day) = civil_from_days(ms.div_euclid(86_400_000));
    format!("{year:04}-{month:02}-{day:02}")
}

/// `YYYY-MM-DD (Weekday)` of a millisecond timestamp, for prompts that resolve relative dates.
pub fn ymd_weekday(ms: i64) -> String {
    const DAYS: [&str; 7] = [
        "Thursday",
        "Friday",
        "Saturday",
        "Sunday",
        "Monday",
        "Tuesday",
        "Wednesday",
    ];
    let day = ms.div_euclid(86_400_000);
    format!("{} ({})", ymd(ms), DAYS[day.rem_euclid(7) as usize])
}

/// `YYYY-MM-DD HH:MM:SS UTC` of a millisecond timestamp (times shown to an agent).
pub fn timestamp(ms: i64) -> String {
    let seconds = ms.div_euclid(1000).rem_euclid(86_400);
    format!(
        "{} {:02}:{:02}:{:02} UTC",
        ymd(ms),
        seconds / 3600,
        seconds / 60 % 60,
        seconds % 60
    )
}

/// `YYYY-MM-DDTHH:MM:SSZ` (RFC 3339, UTC) of a millisecond timestamp.
pub fn rfc3339(ms: i64) -> String {
    let seconds = ms.div_euclid(1000).rem_euclid(86_400);
    format!(
        "{}T{:02}:{:02}:{:02}Z",
        ymd(ms),
        seconds / 3600,
        seconds / 60 % 60,
        seconds % 60
    )
}

/// Milliseconds at the start (UTC) of a `YYYY-MM-DD` date (anything after the date is ignored).
pub fn parse_ymd(text: &str) -> Option<i64> {
    let date = text.trim().get(..10)?;
    let mut parts = date.split('-');
    let year: i64 = parts.next()?.parse().ok()?;
    let month: i64 = parts.next()?.parse().ok()?;
    let day: i64 = parts.next()?.parse().ok()?;
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return None;
    }
    Some(days_from_civil(year, month, day) * 86_400_000)
}

/// A point in time: `YYYY-MM-DD`, `YYYY-MM-DDTHH:MM[:SS][Z]` (UTC) or milliseconds since 1970.
pub fn parse_time(text: &str) -> Option<i64> {
    let text = text.trim();
    if !text.is_empty() && text.chars().all(|c| c.is_ascii_digit()) {
        return text.parse().ok();
    }
    let day = parse_ymd(text)?;
    let rest = text.get(10..)?.trim_start_matches(['T', ' ']);
    let clock = rest.trim_end_matches('Z');
    if clock.is_empty() {
        return Some(day);
    }
    let mut parts = clock.split(':');
    let hours: i64 = parts.next()?.parse().ok()?;
    let minutes: i64 = parts.next()?.parse().ok()?;
    let seconds: f64 = parts.next().map_or(Some(0.0), |s| s.parse().ok())?;
    if parts.next().is_some() || hours > 23 || minutes > 59 || !(0.0..60.0).contains(&seconds) {
        return None;
    }
    Some(day + (hours * 3600 + minutes * 60) * 1000 + (seconds * 1000.0) as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_formats() {
        for days in [-800_000, -1, 0, 1, 19_000, 20_000, 800_000] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
        assert_eq!(ymd(1_683_554_160_000), "2023-05-08");
        assert_eq!(ymd_weekday(0), "1970-01-01 (Thursday)");
        assert_eq!(timestamp(1_683_554_160_000), "2023-05-08 13:56:00 UTC");
        assert_eq!(parse_ymd("2023-05-08"), Some(1_683_504_000_000));
        assert_eq!(parse_ymd("2023-05-08T10:00"), Some(1_683_504_000_000));
        assert_eq!(parse_ymd("2023-13-08"), None);
        assert_eq!(parse_ymd("May 8"), None);
        assert_eq!(parse_time("2023-05-08"), Some(1_683_504_000_000));
        assert_eq!(parse_time("2023-05-08T13:56:00Z"), Some(1_683_554_160_000));
        assert_eq!(parse_time("2023-05-08 13:56"), Some(1_683_554_160_000));
        assert_eq!(parse_time("1683554160000"), Some(1_683_554_160_000));
        assert_eq!(parse_time("2023-05-08T25:00"), None);
        assert_eq!(parse_time("yesterday"), None);
    }
}
