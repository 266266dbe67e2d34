//! The names the user calls the assistant by. A user who writes "Hey Mel! …" or "Thanks,
//! Melanie." speaks to someone called Mel: a fact about Mel is about the assistant, and "The
//! user is Mel." is the greeting misread. On a conversation between two people, one replayed as
//! the assistant, a small model stored "The user is Mel.", "Melanie works in a school." and
//! "Melanie is transgender." from the other speaker's greetings and news.

/// Names the user addresses at the start of a sentence: `opener[,] Name` followed by `!`, `,`,
/// `.` or `?`.
pub fn addressed(user_texts: &[String]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for text in user_texts {
        for sentence in super::sentences(text) {
            let sentence = sentence.trim_start();
            // The longest opener first: "thank you" before "thanks", "good morning".
            let mut openers = super::lists().addressed_openers.to_vec();
            openers.sort_by_key(|o| std::cmp::Reverse(o.len()));
            let rest = openers.iter().find_map(|o| {
                let head = sentence.get(..o.len())?;
                let rest = sentence.get(o.len()..)?;
                (head.eq_ignore_ascii_case(o) && rest.starts_with([' ', ','])).then_some(rest)
            });
            let Some(rest) = rest else {
                continue;
            };
            let rest = rest.trim_start_matches([' ', ',']);
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphabetic() || *c == '-')
                .collect();
            let after = rest[name.len()..].chars().next();
            let capitalised = name.chars().next().is_some_and(char::is_uppercase);
            if name.chars().count() >= 2
                && capitalised
                && !super::lists().addressed_not_names.contains(&name.as_str())
                && after.is_none_or(|c| matches!(c, '!' | ',' | '.' | '?'))
                && !names.contains(&name)
            {
                names.push(name);
            }
        }
    }
    names
}

/// Whether `fact` is about one of the addressed `names`: it starts with the name ("Melanie
/// works in a school.") or makes the user that name ("The user is Mel.", "The user's name is
/// Mel.").
pub fn about_addressed(fact: &str, names: &[String]) -> bool {
    let trimmed = fact.trim().trim_end_matches(['.', '!']);
    names.iter().any(|name| {
        let starts = trimmed
            .strip_prefix(name.as_str())
            .is_some_and(|rest| rest.starts_with([' ', '\'', '\u{2019}']));
        let (lower, name) = (trimmed.to_lowercase(), name.to_lowercase());
        let named = super::lists()
            .subject_naming
            .iter()
            .any(|lead| lower.strip_prefix(lead) == Some(name.as_str()));
        starts || named
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(all: &[&str]) -> Vec<String> {
        all.iter().map(|t| (*t).to_owned()).collect()
    }

    #[test]
    fn the_names_of_greetings_and_thanks_are_the_assistants() {
        let said = texts(&[
            "Hey Mel! Good to see you! How have you been?",
            "Thanks, Melanie. That means a lot.",
            "Hi there! I went hiking.",
            "Thank you so much for the tips.",
            "Hello Anna-Lena, long time.",
            "I told my sister Hey Jude is my favourite song.",
        ]);
        assert_eq!(addressed(&said), ["Mel", "Melanie", "Anna-Lena"]);
    }

    #[test]
    fn a_fact_about_an_addressed_name_is_about_the_assistant() {
        let names = vec!["Mel".to_owned(), "Melanie".to_owned()];
        for fact in [
            "The user is Mel.",
            "The user's name is Melanie.",
            "Melanie works in a school.",
            "Melanie is transgender.",
            "Mel's kids love the beach.",
        ] {
            assert!(about_addressed(fact, &names), "{fact}");
        }
        for fact in [
            "The user is proud of Mel for taking part in the charity race.",
            "The user has known Mel for 4 years.",
            "The user is Melanie's friend Caroline.",
            "Melbourne is where the user lives.",
        ] {
            assert!(!about_addressed(fact, &names), "{fact}");
        }
    }

    #[test]
    fn the_gates_refuse_facts_about_the_one_the_user_greets() {
        let evidence = super::super::Evidence::new([(
            "user",
            "Hey Melanie! How's it going? I wanted to tell you about my school event last week. \
             I talked about my transgender journey and encouraged students to get involved.",
        )]);
        for fact in [
            "Melanie works in a school.",
            "Melanie is transgender.",
            "The user is Melanie.",
        ] {
            assert_eq!(
                evidence.check(fact),
                Err(super::super::Rejection::AboutAssistant),
                "{fact}"
            );
        }
        assert_eq!(
            evidence.check("The user talked about their transgender journey at a school event."),
            Ok(())
        );
    }
}
