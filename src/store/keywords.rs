//! Which words of a query keyword search looks for, a rule and not storage: both backends search
//! the same words (each with its own full-text engine).

/// Words too common to help a keyword search (they would match nearly every row).
const STOPWORDS: &[&str] = &[
    "a", "about", "all", "am", "an", "and", "any", "are", "as", "at", "be", "been", "but", "by",
    "can", "could", "did", "do", "does", "for", "from", "had", "has", "have", "he", "her", "him",
    "his", "how", "i", "if", "in", "into", "is", "it", "its", "just", "me", "my", "no", "not",
    "of", "on", "or", "our", "she", "so", "some", "than", "that", "the", "their", "them", "then",
    "there", "these", "they", "this", "to", "up", "us", "was", "we", "were", "what", "when",
    "where", "which", "who", "why", "will", "with", "would", "you", "your",
];

/// The meaningful words of `text`: lower-cased, deduplicated, without stopwords.
pub fn query_words(text: &str) -> Vec<String> {
    let mut words: Vec<String> = Vec::new();
    for word in text
        .split(|c: char| !c.is_alphanumeric())
        .map(str::to_lowercase)
        .filter(|w| w.chars().count() > 1 && !STOPWORDS.contains(&w.as_str()))
    {
        if !words.contains(&word) && words.len() < 32 {
            words.push(word);
        }
    }
    words
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
}
