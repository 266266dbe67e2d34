//! Answer and retrieval metrics: token F1 and exact-contains as in SQuAD/LoCoMo (lower case, no
//! punctuation, no articles), abstention detection, recall@k, and the LLM judge's fixed prompt.

/// Lower case, punctuation to spaces, articles dropped, whitespace collapsed, and a written-out
/// date ("October 11, 2026", "11th October 2026") as the ISO date's words ("2026 10 11"; "10 11"
/// without a year): the same day in another format is the same answer.
pub fn normalize(text: &str) -> String {
    let cleaned: String = text
        .to_lowercase()
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || c.is_whitespace() {
                c
            } else {
                ' '
            }
        })
        .collect();
    let words: Vec<&str> = cleaned.split_whitespace().collect();
    iso_dates(&words)
        .into_iter()
        .filter(|w| !matches!(w.as_str(), "a" | "an" | "the"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn month(word: &str) -> Option<usize> {
    crate::dates::MONTHS
        .iter()
        .position(|m| *m == word)
        .map(|i| i + 1)
}

/// "11", "11th", "1st" as a day of the month.
fn day(word: &str) -> Option<u32> {
    let digits = word.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let suffix = &word[digits.len()..];
    let ordinal = matches!(suffix, "" | "st" | "nd" | "rd" | "th");
    digits
        .parse::<u32>()
        .ok()
        .filter(|d| ordinal && (1..=31).contains(d))
}

fn year(word: &str) -> Option<u32> {
    (word.len() == 4)
        .then(|| word.parse::<u32>().ok())
        .flatten()
}

/// Month-day(-year) and day-month(-year) (lowercase words, punctuation gone) as
/// "yyyy mm dd", or "mm dd" without a year.
fn iso_dates(words: &[&str]) -> Vec<String> {
    let mut out = Vec::with_capacity(words.len());
    let mut i = 0;
    while i < words.len() {
        let at = |k: usize| words.get(i + k).copied().unwrap_or_default();
        let date = match (month(at(0)), day(at(0))) {
            (Some(m), _) => day(at(1)).map(|d| (m, d)),
            (_, Some(d)) => month(at(1)).map(|m| (m, d)),
            _ => None,
        };
        match date {
            Some((m, d)) => {
                if let Some(y) = year(at(2)) {
                    out.push(y.to_string());
                    i += 1;
                }
                out.extend([format!("{m:02}"), format!("{d:02}")]);
                i += 2;
            }
            None => {
                out.push(words[i].to_owned());
                i += 1;
            }
        }
    }
    out
}

/// Token-level F1 between a prediction and the gold answer (bag of normalized tokens).
pub fn token_f1(prediction: &str, gold: &str) -> f64 {
    let predicted: Vec<String> = normalize(prediction)
        .split(' ')
        .filter(|w| !w.is_empty())
        .map(str::to_owned)
        .collect();
    let expected: Vec<String> = normalize(gold)
        .split(' ')
        .filter(|w| !w.is_empty())
        .map(str::to_owned)
        .collect();
    if predicted.is_empty() || expected.is_empty() {
        return if predicted == expected { 1.0 } else { 0.0 };
    }
    let mut remaining = expected.clone();
    let mut common = 0usize;
    for word in &predicted {
        if let Some(index) = remaining.iter().position(|w| w == word) {
            remaining.swap_remove(index);
            common += 1;
        }
    }
    if common == 0 {
        return 0.0;
    }
    let precision = common as f64 / predicted.len() as f64;
    let recall = common as f64 / expected.len() as f64;
    2.0 * precision * recall / (precision + recall)
}

/// The normalized gold answer appears in the normalized prediction.
pub fn contains(prediction: &str, gold: &str) -> bool {
    let gold = normalize(gold);
    !gold.is_empty() && format!(" {} ", normalize(prediction)).contains(&format!(" {gold} "))
}

/// The reply says it does not know (the right answer to a question whose answer was never given).
pub fn abstains(prediction: &str) -> bool {
    let text = prediction.to_lowercase().replace('’', "'");
    [
        "don't know",
        "do not know",
        "not sure",
        "no information",
        "don't have",
        "do not have",
        "haven't told",
        "have not told",
        "hasn't told",
        "has not told",
        "didn't mention",
        "did not mention",
        "not mentioned",
        "never mentioned",
        "haven't mentioned",
        "no record",
        "can't recall",
        "cannot recall",
        "don't recall",
        "do not recall",
        "not aware",
        "unknown",
        "no idea",
        "not provided",
        "haven't shared",
        "didn't tell",
        "did not tell",
        "not something you've",
    ]
    .iter()
    .any(|phrase| text.contains(phrase))
}

/// Fraction of `relevant` found in `retrieved[..k]` (1 when nothing is relevant).
pub fn recall_at_k(retrieved: &[String], relevant: &[String], k: usize) -> f64 {
    if relevant.is_empty() {
        return 1.0;
    }
    let top = &retrieved[..retrieved.len().min(k)];
    relevant.iter().filter(|r| top.contains(r)).count() as f64 / relevant.len() as f64
}

/// The judge's fixed prompt (system); the user message carries question, gold and answer.
pub const JUDGE_PROMPT: &str =
    "You grade answers to questions about a past conversation. You get the \
question, the gold answer and a candidate answer. The candidate is CORRECT if it states the same \
fact as the gold answer (wording, extra detail and date formats may differ; it must not contradict \
the gold answer), otherwise WRONG. If the gold answer says the information was never given, the \
candidate is CORRECT only if it says it does not know. Reply with one word: CORRECT or WRONG.";

pub fn judge_material(question: &str, gold: &str, answer: &str) -> String {
    format!("Question: {question}\nGold answer: {gold}\nCandidate answer: {answer}")
}

/// The judge's verdict; `None` when it answered neither word.
pub fn judge_verdict(reply: &str) -> Option<bool> {
    let upper = reply.to_uppercase();
    match (
        upper.contains("CORRECT") && !upper.contains("INCORRECT"),
        upper.contains("WRONG") || upper.contains("INCORRECT"),
    ) {
        (true, false) => Some(true),
        (false, true) => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f1_matches_hand_computed_values() {
        // prediction tokens: [she, moved, to, porto] ; gold: [porto]
        // common 1, precision 1/4, recall 1 -> F1 = 2*(0.25*1)/(1.25) = 0.4
        assert!((token_f1("She moved to Porto.", "Porto") - 0.4).abs() < 1e-9);
        // Articles and punctuation do not count: "The Eiffel Tower!" vs "eiffel tower" -> 1.0
        assert!((token_f1("The Eiffel Tower!", "eiffel tower") - 1.0).abs() < 1e-9);
        // prediction [7, may, 2023], gold [may, 7] -> common 2, p 2/3, r 1 -> 0.8
        assert!((token_f1("7 May 2023", "May 7") - 0.8).abs() < 1e-9);
        assert_eq!(token_f1("Lisbon", "Porto"), 0.0);
        assert_eq!(token_f1("", ""), 1.0);
    }

    #[test]
    fn a_date_in_words_matches_the_iso_date() {
        assert!(contains(
            "You bought your grinder on October 11, 2026.",
            "2026-10-11"
        ));
        assert!(contains("On the 7th March 2026.", "2026-03-07"));
        assert!(!contains("You hiked it on March 9, 2026.", "2026-03-07"));
        assert!(
            !contains("On October 11.", "2026-10-11"),
            "no year, no date"
        );
        assert!((token_f1("October 11", "2026-10-11") - 0.8).abs() < 1e-9);
        assert_eq!(token_f1("October 11, 2026", "2026-10-11"), 1.0);
        assert_eq!(normalize("May 2026 and the may be"), "may 2026 and may be");
    }

    #[test]
    fn contains_abstains_recall_and_judge() {
        assert!(contains("You live in Porto now.", "Porto"));
        assert!(!contains("You live in Portofino.", "Porto"));
        assert!(abstains("I'm sorry, you haven't told me that."));
        assert!(abstains("I don’t know."));
        assert!(abstains("The user has not told you their dog's name."));
        assert!(!abstains("Your dog is called Pixel."));
        let retrieved: Vec<String> = ["D1:1", "D2:3", "D1:4"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let relevant: Vec<String> = ["D1:4", "D3:1"].iter().map(|s| s.to_string()).collect();
        assert_eq!(recall_at_k(&retrieved, &relevant, 2), 0.0);
        assert_eq!(recall_at_k(&retrieved, &relevant, 3), 0.5);
        assert_eq!(recall_at_k(&retrieved, &[], 3), 1.0);
        assert_eq!(judge_verdict("CORRECT"), Some(true));
        assert_eq!(judge_verdict("Incorrect."), Some(false));
        assert_eq!(judge_verdict("WRONG"), Some(false));
        assert_eq!(judge_verdict("maybe"), None);
    }
}
