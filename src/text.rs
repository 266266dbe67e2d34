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

/// The statements of a written text (a fact, a note), each with its end mark: split after `.`,
/// `!` or `?` only where the next word opens with a capital or a digit, and not after an
/// abbreviation: a capitalised word of at most three letters or a single letter ("Mr. Petrov",
/// "Dr. Lee", "J. K. Rowling", "No. 5"). A break missed keeps two statements in one, as before;
/// a break made inside a name would cut a fact in two, so the doubtful case is not split. The
/// full-width marks always end one (the scripts that use them have no capitals).
pub fn statements(text: &str) -> Vec<&str> {
    let mut found = Vec::new();
    let mut from = 0;
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    for (i, &(at, mark)) in chars.iter().enumerate() {
        let end = at + mark.len_utf8();
        let breaks = match mark {
            '。' | '？' | '！' => true,
            '.' | '!' | '?' => {
                let next = chars[i + 1..].iter().map(|&(_, c)| c);
                let spaced = chars.get(i + 1).is_some_and(|&(_, c)| c.is_whitespace());
                let opens = next
                    .skip_while(|c| c.is_whitespace())
                    .find(|c| !matches!(c, '"' | '\'' | '“' | '‘' | '('))
                    .is_some_and(|c| c.is_uppercase() || c.is_ascii_digit());
                let word: Vec<char> = text[from..at]
                    .chars()
                    .rev()
                    .take_while(|c| c.is_alphanumeric())
                    .collect();
                let abbreviation = mark == '.'
                    && (word.len() == 1
                        || (word.len() <= 3 && word.last().is_some_and(|c| c.is_uppercase())));
                spaced && opens && !abbreviation
            }
            _ => false,
        };
        if breaks {
            found.push(text[from..end].trim());
            from = end;
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
    use super::{only_asks, statements};

    #[test]
    fn a_text_is_split_into_statements_but_not_inside_a_name() {
        assert_eq!(
            statements("Chiara's birthday is on July 19. Mine is in December! She climbs."),
            [
                "Chiara's birthday is on July 19.",
                "Mine is in December!",
                "She climbs."
            ]
        );
        assert_eq!(
            statements("The landlord is Mr. Petrov. He lives in St. Ives."),
            ["The landlord is Mr. Petrov.", "He lives in St. Ives."]
        );
        for whole in [
            "The user reads J. K. Rowling.",
            "The user lives at No. 5 on the high street.",
            "The user's tea costs 3.50 a day.",
            "The user said wow. then left",
            "The user moved to the U.S. in 2019.",
            "The user is 34.",
        ] {
            assert_eq!(statements(whole), [whole], "{whole}");
        }
        assert_eq!(
            statements("我有一只猫。它叫Mimi。"),
            ["我有一只猫。", "它叫Mimi。"]
        );
        assert!(statements("  ").is_empty());
    }

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
