//! Text rules that read no language: a text cut to a length, a text's sentences by their
//! punctuation. On the ground floor: anything may use them.

/// `text` cut to at most `limit` characters, marked with an ellipsis when cut.
pub fn clip(text: &str, limit: usize) -> String {
    if text.chars().count() <= limit {
        return text.to_owned();
    }
    let mut clipped: String = text.chars().take(limit).collect();
    clipped.push('…');
    clipped
}

/// The sentences of `text`, each with its end mark: split after `.`, `!` or `?` followed by
/// whitespace (so "3.5" and "e.g.x" stay whole).
pub fn sentences(text: &str) -> Vec<&str> {
    let mut found = Vec::new();
    let mut from = 0;
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    for pair in chars.windows(2) {
        let ((at, mark), (_, next)) = (pair[0], pair[1]);
        if matches!(mark, '.' | '!' | '?') && next.is_whitespace() {
            found.push(text[from..=at].trim());
            from = at + 1;
        }
    }
    found.push(text[from..].trim());
    found.retain(|s| !s.is_empty());
    found
}
