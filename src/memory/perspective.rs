//! A question in the user's words, asked about "the user": the form facts are stored in.
//!
//! Facts are written in the third person ("The user lives in Porto."), questions in the first
//! ("Which city do I live in now?"). A small embedding model scores the two far apart (0.26
//! cosine with all-MiniLM-L6-v2, under the relevance threshold), while the same question about
//! "the user" scores 0.48. So a first-person query is embedded twice: as asked, for past turns
//! (said in the user's words), and rewritten here, for facts. Purely lexical and deterministic.

/// The question about "the user", or `None` when it has no first-person word (nothing to do).
pub fn about_the_user(question: &str) -> Option<String> {
    let tokens = tokenize(question);
    let words: Vec<usize> = (0..tokens.len()).filter(|&i| tokens[i].1).collect();
    let lower: Vec<String> = tokens.iter().map(|(t, _)| t.to_lowercase()).collect();
    let mut replaced: Vec<Option<&'static str>> = vec![None; tokens.len()];
    // Verbs after a bare "I" that become third person ("I live" → "the user lives").
    let mut conjugate: Vec<bool> = vec![false; tokens.len()];
    let mut changed = false;
    for (n, &i) in words.iter().enumerate() {
        let next = words.get(n + 1).map(|&j| lower[j].as_str());
        let previous = n.checked_sub(1).map(|m| lower[words[m]].as_str());
        let word = lower[i].as_str();
        let with = match (word, next) {
            ("i", Some("am")) | ("i'm", _) | ("im", _) => Some("the user is"),
            ("i", Some("have")) | ("i've", _) => Some("the user has"),
            ("i'd", _) => Some("the user would"),
            ("i'll", _) => Some("the user will"),
            ("i", _) => Some("the user"),
            ("my", _) | ("mine", _) => Some("the user's"),
            ("me", _) | ("myself", _) => Some("the user"),
            // "am I" / "do I" / "have I" before the pronoun; "I am" / "I have" after it.
            ("am", Some("i")) => Some("is"),
            ("do", Some("i")) => Some("does"),
            ("have", Some("i")) => Some("has"),
            ("am", _) if previous == Some("i") => Some(""),
            ("have", _) if previous == Some("i") => Some(""),
            _ => None,
        };
        if let Some(with) = with {
            replaced[i] = Some(with);
            changed = true;
            let bare = word == "i"
                && !previous.is_some_and(|p| {
                    crate::language::words()
                        .perspective_auxiliaries
                        .contains(&p)
                });
            if let (true, Some(&j)) = (bare, words.get(n + 1)) {
                conjugate[j] = !lower[j].contains('\'')
                    && !crate::language::words()
                        .perspective_auxiliaries
                        .contains(&lower[j].as_str())
                    && !crate::language::words()
                        .perspective_not_verbs
                        .contains(&lower[j].as_str())
                    && lower[j].chars().all(|c| c.is_ascii_lowercase());
            }
        }
    }
    if !changed {
        return None;
    }
    let mut out = String::with_capacity(question.len() + 16);
    for (i, (text, _)) in tokens.iter().enumerate() {
        match replaced[i] {
            // A dropped word ("I am" → "the user is") takes the space before it along.
            Some("") => {
                if out.ends_with(' ') {
                    out.pop();
                }
            }
            Some(with) => out.push_str(with),
            None if conjugate[i] => out.push_str(&third_person(text)),
            None => out.push_str(text),
        }
    }
    Some(out)
}

/// "live" → "lives", "go" → "goes", "study" → "studies".
fn third_person(verb: &str) -> String {
    if verb == "be" {
        return "is".to_owned();
    }
    let consonant_y = verb.len() > 1
        && verb.ends_with('y')
        && !verb[..verb.len() - 1].ends_with(['a', 'e', 'i', 'o', 'u']);
    if consonant_y {
        format!("{}ies", &verb[..verb.len() - 1])
    } else if ["s", "sh", "ch", "x", "z", "o"]
        .iter()
        .any(|e| verb.ends_with(e))
    {
        format!("{verb}es")
    } else {
        format!("{verb}s")
    }
}

/// Words (letters, digits and inner apostrophes) and the text between them, in order.
fn tokenize(text: &str) -> Vec<(String, bool)> {
    let mut tokens: Vec<(String, bool)> = Vec::new();
    for c in text.chars() {
        let c = if c == '\u{2019}' { '\'' } else { c };
        let in_word = c.is_alphanumeric() || c == '\'';
        match tokens.last_mut() {
            Some((token, word)) if *word == in_word => token.push(c),
            _ => tokens.push((c.to_string(), in_word)),
        }
    }
    tokens
}

#[cfg(test)]
mod tests {
    use super::about_the_user;

    #[test]
    fn asks_first_person_questions_about_the_user() {
        let cases = [
            (
                "Which city do I live in now?",
                "Which city does the user live in now?",
            ),
            ("What am I allergic to?", "What is the user allergic to?"),
            ("Where do I work?", "Where does the user work?"),
            ("What is my dog's name?", "What is the user's dog's name?"),
            (
                "I'm vegetarian, remember?",
                "the user is vegetarian, remember?",
            ),
            (
                "Have I told you about me?",
                "has the user told you about the user?",
            ),
            ("I am moving to Oslo", "the user is moving to Oslo"),
            ("I live in Porto.", "the user lives in Porto."),
            (
                "I study law and go running.",
                "the user studies law and go running.",
            ),
            ("I was born in Lima", "the user was born in Lima"),
            ("I have a cat", "the user has a cat"),
            (
                "What did I say I'd do?",
                "What did the user say the user would do?",
            ),
        ];
        for (question, expected) in cases {
            assert_eq!(
                about_the_user(question).as_deref(),
                Some(expected),
                "{question}"
            );
        }
    }

    #[test]
    fn leaves_other_questions_alone() {
        assert_eq!(about_the_user("When did Caroline go to the museum?"), None);
        assert_eq!(about_the_user("The user lives in Porto."), None);
        assert_eq!(about_the_user(""), None);
        // "I" inside a word or a name is not the pronoun.
        assert_eq!(about_the_user("Is Iris in Italy?"), None);
    }
}
