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

/// The marks that end a clause: `, ; . ! ?` and their full-width forms.
pub const CLAUSE_MARKS: [char; 9] = [',', ';', '.', '!', '?', '。', '？', '！', '，'];

/// Whether a clause mark is a question mark (`?`, or its full-width form).
pub fn is_question_mark(c: char) -> bool {
    matches!(c, '?' | '？')
}

/// Whether every clause of `text` that has words in it ends in a question mark: a text that only
/// asks, in which nothing is stated ("When is my thesis due?"), as against one that asks after
/// saying something ("Since I moved to Lisbon, where should I eat?"). Told by punctuation alone,
/// so it holds in any language that writes `?`; a text with no words asks nothing.
pub fn only_asks(text: &str) -> bool {
    let mut asked = false;
    let mut words = false;
    for c in text.chars() {
        if CLAUSE_MARKS.contains(&c) {
            if words {
                if !is_question_mark(c) {
                    return false;
                }
                asked = true;
            }
            words = false;
        } else if c.is_alphanumeric() {
            words = true;
        }
    }
    // Words after the last mark are a clause that ends in no question mark.
    asked && !words
}

#[cfg(test)]
mod tests {
    use super::only_asks;

    #[test]
    fn a_text_only_asks_when_each_of_its_clauses_ends_in_a_question_mark() {
        for asks in [
            "When is my thesis due?",
            "What did I do last weekend? And with whom?",
            "¿Cuándo es mi cumpleaños?",
            "我的生日是什么时候？",
            "  Where do I live?\n",
        ] {
            assert!(only_asks(asks), "{asks}");
        }
        for states in [
            "Since I moved to Lisbon, where should I eat?",
            "Good news, my supervisor extended my deadline. When is it now?",
            "My thesis is due in November",
            "Thanks! When is it?",
            "",
            "?",
        ] {
            assert!(!only_asks(states), "{states}");
        }
    }
}
