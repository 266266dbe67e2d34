//! One fact, one memory: a fact written as several statements ("Chiara's birthday is on July 19.
//! Mine is in December.", a small memory model copying the user's message whole) is read as each
//! of them, so that each is checked, and stored or refused, on its own.

/// The statements of `fact` ([`crate::text::statements`]) that stand alone. A later statement
/// stands alone when it opens with the subject facts are written about ("The user", "The
/// assistant"), or has the speaker's word for themselves in it ("Mine is in December.", "It's my
/// turn to pick.", which the third-person rule then refuses alone, rather than with the statement
/// before it). Any other ("She loves climbing.", "It cost 600 euros.", "Nothing too heavy.") says
/// more of the one before it and names no one out of it: it stays joined to that one.
pub fn statements(fact: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for statement in crate::text::statements(fact) {
        let lower = statement.to_lowercase();
        let alone = ["the user", "the assistant"]
            .iter()
            .any(|side| lower.starts_with(side))
            || super::first_person(statement);
        match out.last_mut() {
            Some(before) if !alone => {
                before.push(' ');
                before.push_str(statement);
            }
            _ => out.push(statement.to_owned()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::statements;

    #[test]
    fn a_fact_of_several_statements_is_read_as_each_that_stands_alone() {
        assert_eq!(
            statements(
                "The user's girlfriend Chiara's birthday is on July 19, she'll be 31. \
                 Mine is in December. She loves climbing. The user climbs too."
            ),
            [
                "The user's girlfriend Chiara's birthday is on July 19, she'll be 31.",
                "Mine is in December. She loves climbing.",
                "The user climbs too.",
            ]
        );
        assert_eq!(
            statements("Mateo is 12 years old. He wants to learn the electric guitar."),
            ["Mateo is 12 years old. He wants to learn the electric guitar."]
        );
        assert_eq!(
            statements("The user bought a piano. It's a Yamaha. The user plays daily."),
            [
                "The user bought a piano. It's a Yamaha.",
                "The user plays daily."
            ]
        );
        assert_eq!(
            statements("The user picked 'Homegoing' it is. Nothing too heavy."),
            ["The user picked 'Homegoing' it is. Nothing too heavy."]
        );
        // Seen from the 0.5B: joined, "It's my turn" took the book club down with it.
        assert_eq!(
            statements("The user runs a book club with five friends. It's my turn to pick."),
            [
                "The user runs a book club with five friends.",
                "It's my turn to pick."
            ]
        );
        assert_eq!(
            statements("The user's wife Noor works nights. We never see each other."),
            [
                "The user's wife Noor works nights.",
                "We never see each other."
            ]
        );
        assert_eq!(
            statements("The user's landlord is Mr. Petrov."),
            ["The user's landlord is Mr. Petrov."]
        );
    }
}
