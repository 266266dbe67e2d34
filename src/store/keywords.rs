//! Which words of a query keyword search looks for, a rule and not storage: both backends search
//! the same words (each with its own full-text engine), and leave out the same too-common ones.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// The meaningful words of `text`: lower-cased, deduplicated, without stopwords.
pub fn query_words(text: &str) -> Vec<String> {
    let mut words: Vec<String> = Vec::new();
    for word in text
        .split(|c: char| !c.is_alphanumeric())
        .map(str::to_lowercase)
        .filter(|w| {
            w.chars().count() > 1
                && !crate::language::words()
                    .keywords_stopwords
                    .contains(&w.as_str())
        })
    {
        if !words.contains(&word) && words.len() < 32 {
            words.push(word);
        }
    }
    words
}

/// BM25 costs about a microsecond per matching row, so a keyword search bounds the rows it
/// scores: words matching more rows than this (across all users) are skipped. Such words carry
/// almost no information (a full-text index's statistics cover the whole table) and would dominate the cost.
pub const ROWS_PER_TERM: i64 = 500;
/// Upper bound on rows one search scores; the rarest words are kept first.
pub const ROWS_BUDGET: i64 = 1_500;

/// FTS queries recently found to match more rows than the cap. Only those are remembered: a word
/// that is common stays common (skipping it is the point), while a rare word's count must be fresh
/// (a memory added a moment ago has to be findable by its words at once).
#[derive(Default)]
pub struct CommonTerms(std::sync::Mutex<HashMap<String, Instant>>);

const COMMON_TTL: Duration = Duration::from_secs(60);
const COMMON_ENTRIES: usize = 50_000;

impl CommonTerms {
    pub fn known(&self, key: &str) -> bool {
        self.0
            .lock()
            .is_ok_and(|common| common.get(key).is_some_and(|at| at.elapsed() < COMMON_TTL))
    }

    pub fn remember(&self, key: String) {
        if let Ok(mut common) = self.0.lock() {
            if common.len() >= COMMON_ENTRIES {
                common.clear();
            }
            common.insert(key, Instant::now());
        }
    }
}

/// The words a search looks for, given how many rows each matches (counted up to
/// `ROWS_PER_TERM + 1`, across all users): words matching nothing or more than `ROWS_PER_TERM`
/// rows are left out, then the rarest first while their rows fit `ROWS_BUDGET`.
pub fn within_budget(mut counted: Vec<(i64, &String)>) -> Vec<String> {
    counted.retain(|(rows, _)| *rows > 0 && *rows <= ROWS_PER_TERM);
    counted.sort();
    let mut kept = Vec::new();
    let mut spent = 0;
    for (rows, word) in counted {
        if spent + rows > ROWS_BUDGET {
            break;
        }
        spent += rows;
        kept.push(word.clone());
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::query_words;

    #[test]
    fn query_words_drop_stopwords_and_syntax() {
        assert_eq!(
            query_words("What is my dog's name? \"NEAR\" OR *"),
            ["dog", "name", "near"]
        );
        assert!(query_words("is it?").is_empty());
    }

    #[test]
    fn common_words_are_left_out_and_the_rarest_kept_within_the_budget() {
        let words: Vec<String> = ["common", "rare", "mid", "absent", "big"]
            .map(String::from)
            .to_vec();
        let counted = vec![
            (501, &words[0]),
            (3, &words[1]),
            (400, &words[2]),
            (0, &words[3]),
            (500, &words[4]),
        ];
        assert_eq!(super::within_budget(counted), ["rare", "mid", "big"]);
        let many: Vec<String> = (0..5).map(|i| format!("w{i}")).collect();
        let counted = many.iter().map(|w| (400, w)).collect();
        assert_eq!(super::within_budget(counted).len(), 3, "1,500 rows at most");
    }
}
