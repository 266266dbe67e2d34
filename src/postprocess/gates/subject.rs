//! Whose fact is it: a small model reads "My cat ate grass this morning" and stores "The user ate
//! grass this morning". The user's messages are cut into clauses, each with its subject (the user:
//! "I", "we", "my wife and I"; someone else: "my cat", "my brother", "he", "she", "they"), and a
//! fact stated about the user that matches a clause about someone else far better than any about
//! the user is refused, naming who it was about. Also the facts with no referent ("The user
//! booked it."). Pure functions: the implicit gates and explicit mode's core-memory hygiene both
//! call them.

use super::clauses::{best_shares, words};
use crate::language::{content_words, names_of_others, proper_nouns};

/// Names the user gave themselves ("I'm Marta", "my name is Ana", "The user is Marta."),
/// lowercased.
fn own_names(texts: &[&str]) -> Vec<String> {
    const INTRODUCING: [&str; 6] = [
        "i'm ",
        "i am ",
        "my name is ",
        "call me ",
        "the user is ",
        "the user's name is ",
    ];
    let mut names = Vec::new();
    for text in texts {
        let lower = text.to_lowercase();
        for phrase in INTRODUCING {
            for (at, _) in lower.match_indices(phrase) {
                let after = text.get(at + phrase.len()..).unwrap_or_default();
                let word = after
                    .split(|c: char| !c.is_alphanumeric())
                    .next()
                    .unwrap_or_default();
                if word.chars().next().is_some_and(char::is_uppercase) {
                    names.push(word.to_lowercase());
                }
            }
        }
    }
    names
}

/// The name a fact gives the user ("The user is Lena.", "The user's name is Lena, …"),
/// lowercased: a capitalised word right after how facts give names.
pub(super) fn name_given(fact: &str) -> Option<String> {
    let fact = fact.trim();
    let lower = fact.to_lowercase();
    // The longest lead that fits ("the user is called " before "the user is ").
    let lead = super::lists()
        .subject_naming
        .iter()
        .filter(|lead| lower.starts_with(**lead))
        .max_by_key(|lead| lead.len())?;
    let word = fact
        .get(lead.len()..)?
        .split(|c: char| !c.is_alphanumeric() && c != '-')
        .next()?;
    word.chars()
        .next()
        .is_some_and(char::is_uppercase)
        .then(|| word.to_lowercase())
}

/// Who a fact stated about the user ("The user ...") was really about, when the user's messages
/// say it of someone else: the best-matching clause about another covers at least half of the
/// fact's content words, more than any clause about the user, and the fact does not name that
/// other. `None`: the fact may be the user's.
/// `known`: what is already known about the user (stored memories, the agent's block), where a
/// name given earlier ("a dog named Pixel") may be.
pub fn someone_else(fact: &str, user_texts: &[&str], known: &[&str]) -> Option<String> {
    someone_else_named(fact, user_texts, known, &[])
}

/// Of `openers` (words that open a sentence of the user's: [`crate::language::sentence_openers`]), those that
/// `earlier` (the user's earlier messages) shows to be the name of someone else: given to
/// someone ("my teacher Dorota"), or written with a capital inside a sentence, and never a name
/// the user gave themselves. A sentence's first word is no name on its own, and these texts are
/// read for nothing but names.
pub fn names_in(earlier: &[&str], openers: &[String]) -> Vec<String> {
    let own = own_names(earlier);
    let mut found = names_of_others(earlier);
    found.extend(proper_nouns(earlier));
    openers
        .iter()
        .filter(|o| found.contains(o) && !own.contains(o))
        .cloned()
        .collect()
}

/// [`someone_else`], also knowing `also` to be names of others (from the user's earlier
/// messages: [`names_in`]).
pub fn someone_else_named(
    fact: &str,
    user_texts: &[&str],
    known: &[&str],
    also: &[String],
) -> Option<String> {
    // Who the user is is the user's to say: a name the user gave someone or something else ("our
    // cat Miso", "my teacher Dorota") made the user's own ("The user is Miso, a 14-year-old
    // cat", "The user's name is Dorota.") belongs to that other, unless the user also called
    // themselves so.
    if let Some(name) = name_given(fact) {
        let all = [user_texts, known].concat();
        let given = names_of_others(&all).contains(&name) || also.contains(&name);
        if given && !own_names(&all).contains(&name) {
            return Some(name);
        }
    }
    let lower = fact.trim().to_lowercase();
    let about_user = (lower.starts_with("the user ") || lower.starts_with("user "))
        && !lower.starts_with("the user's")
        && !lower.starts_with("user's");
    if !about_user {
        return None;
    }
    // A date says nothing of whom: "The user ate grass on 2026-07-08." is the cat's grass.
    let fact_words = super::without_dates(content_words(fact));
    if fact_words.is_empty() {
        return None;
    }
    let named = words(fact);
    let all = [user_texts, known].concat();
    // The names of others: those the user gave someone ("my teacher Dorota"), and any word
    // written as a name that the user never gave themselves.
    let own = own_names(&all);
    let mut names = names_of_others(&all);
    names.extend(proper_nouns(&all).into_iter().filter(|n| !own.contains(n)));
    names.extend(also.iter().filter(|n| !own.contains(n)).cloned());
    // "The user Tomas moved to Berlin": a small model's fact about the user's brother Tomas (a
    // name the user gave someone else, or any name but the user's own).
    let second = fact.split_whitespace().nth(2).unwrap_or_default();
    let second = second.trim_matches(|c: char| !c.is_alphanumeric());
    if second.chars().next().is_some_and(char::is_uppercase) && second != "I" {
        let lower = second.to_lowercase();
        if names.contains(&lower) || !own.contains(&lower) {
            return Some(lower);
        }
    }
    // "Kwame lent me his glider" as "The user lent Kwame his glider": the roles swapped.
    if let Some(who) = super::roles::swapped(fact, user_texts, &names) {
        return Some(who);
    }
    let whole = said_of_another(&fact_words, &named, user_texts, &names);
    if whole.is_some() {
        return whole;
    }
    // "The user retired from the conservatory last year and is now learning the piano": two
    // statements joined, one of them someone else's ("My piano teacher Halina retired …"). Each
    // half matches its clause at about half of the whole's words, so neither wins read whole;
    // each is read on its own.
    conjuncts(fact).into_iter().find_map(|part| {
        let part_words = super::without_dates(content_words(&part));
        (part_words.len() >= 2)
            .then(|| said_of_another(&part_words, &words(&part), user_texts, &names))
            .flatten()
    })
}

/// Who said what `fact_words` (a fact about the user, as content words) say, when it is someone
/// else: the best-matching clause about another covers at least half of them, more than any
/// clause about the user, and the fact (`named`: its words) does not name that other.
fn said_of_another(
    fact_words: &std::collections::HashSet<String>,
    named: &[String],
    user_texts: &[&str],
    names: &[String],
) -> Option<String> {
    let (best_user, best_other) = best_shares(fact_words, user_texts, names, |_, _| true);
    let (share, who) = best_other?;
    let pronoun = super::lists().subject_others.contains(&who.as_str());
    // Named in any of its forms ("friends with Siobhan" names "my best friend").
    let stem = super::stem(&who);
    let names_them = named.iter().any(|w| *w == who || super::stem(w) == stem);
    (share >= 0.5 && share > best_user && (pronoun || !names_them)).then_some(who)
}

/// The statements a fact about the user joins ("The user retired … and is now learning …"):
/// its words cut at the words that join clauses ([`crate::language::Words::subject_joins`]).
/// None when it joins nothing, or when a join comes right after "the user" ("The user and Noor
/// …": one statement of two people).
fn conjuncts(fact: &str) -> Vec<String> {
    let joins = super::lists().subject_joins;
    let mut parts: Vec<Vec<&str>> = vec![Vec::new()];
    for word in fact.split_whitespace() {
        let bare = word
            .trim_matches(|c: char| !c.is_alphanumeric())
            .to_lowercase();
        if joins.contains(&bare.as_str()) {
            parts.push(Vec::new());
        } else if let Some(last) = parts.last_mut() {
            last.push(word);
        }
    }
    if parts.len() < 2 || parts[0].len() <= 2 {
        return Vec::new();
    }
    parts.into_iter().map(|p| p.join(" ")).collect()
}

/// A fact whose only object is a pronoun ("The user booked it.", "The assistant promised to do
/// exactly that."), or that speaks of "him" or "her" without naming anyone ("The user is
/// interested in visiting him."), or an impersonal statement about no one ("It's normal for an
/// old cat to sleep a lot.", the answer to the user's "Is that normal for an old cat?"; "There
/// are many ways to brew coffee."), or a "the …" that says not whose ("The paint smell is awful.",
/// as a small memory LLM writes: out of its conversation, no one knows which paint): it says
/// nothing of the user on its own.
pub fn no_referent(fact: &str) -> bool {
    let all = words(fact);
    let opening = fact.trim().to_lowercase().replace('\u{2019}', "'");
    // "The deadline for the thesis is October 15." dates its thing, and stands.
    let the_thing = opening.starts_with("the ")
        && !opening.starts_with("the assistant")
        && !fact.chars().any(|c| c.is_ascii_digit());
    let impersonal = super::lists()
        .subject_impersonal
        .iter()
        .any(|o| opening.starts_with(o))
        || the_thing;
    let bare = all
        .iter()
        .any(|w| super::lists().subject_bare.contains(&w.as_str()));
    let content = content_words(fact);
    let fillers: Vec<String> = super::lists()
        .subject_fillers
        .iter()
        .map(|f| super::stem(f))
        .collect();
    let said = content.iter().filter(|w| !fillers.contains(w)).count();
    if bare && (content.len() <= 1 || said == 0) {
        return true;
    }
    let person = all
        .iter()
        .any(|w| super::lists().subject_personal.contains(&w.as_str()));
    // A name: a capitalized word after the first ("Tomas", "Dr Lee"), not a month or a day (or another date word).
    let named = fact.split_whitespace().skip(1).any(|w| {
        let bare = w
            .trim_matches(|c: char| !c.is_alphanumeric())
            .to_lowercase();
        w.chars().next().is_some_and(char::is_uppercase)
            && w != "I"
            && !crate::dates::MONTHS.contains(&bare.as_str())
            && !crate::dates::WEEKDAYS.contains(&bare.as_str())
            && !crate::language::words()
                .gates_date_words
                .contains(&bare.as_str())
    });
    let someone = all.iter().any(|w| {
        let one = w.strip_suffix('s').unwrap_or(w);
        super::lists()
            .subject_people
            .iter()
            .any(|p| w.ends_with(p) || one.ends_with(p))
    });
    if impersonal && !named && !all.iter().any(|w| w == "user" || w == "users") {
        return true;
    }
    person && !named && !someone
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fact_said_of_a_pet_or_a_relative_is_not_the_users() {
        let said = ["My cat Mochi ate grass this morning, and I laughed."];
        assert_eq!(
            someone_else("The user ate grass on 2026-07-08.", &said, &[]),
            Some("cat".to_owned())
        );
        // Seen from explicit mode's background save: the dog's name known from the agent's
        // `human` block only.
        let block = [
            "The user moved to Porto.",
            "The user lives with their dog Pixel.",
        ];
        assert_eq!(
            someone_else(
                "The user loves the new flat.",
                &["Pixel loves the new flat."],
                &block
            ),
            Some("pixel".to_owned())
        );
        // Seen from explicit mode's background save, its date resolved from "this morning".
        let known = ["The user has a cat named Miso. She is twelve years old."];
        assert!(someone_else(
            "The user ate grass on 2026-07-08.",
            &["Miso ate some grass this morning."],
            &known
        )
        .is_some());
        assert_eq!(
            someone_else("The user ate grass this morning.", &said, &[]),
            Some("cat".to_owned())
        );
        assert_eq!(someone_else("The user's cat ate grass.", &said, &[]), None);
        // A word for a person used as their name opens a clause about them.
        let dad = ["Dad is walking with a frame now. I'm back home in Manchester."];
        assert_eq!(
            someone_else("The user is walking with a frame now.", &dad, &[]),
            Some("dad".to_owned())
        );
        assert_eq!(
            someone_else("The user's dad is walking with a frame now.", &dad, &[]),
            None
        );
        assert_eq!(
            someone_else("The user is back home in Manchester.", &dad, &[]),
            None
        );
        // A clause opening with "the" is about the thing it names.
        let trip = ["Haruka moved our lessons. Also the trip is now in November, not October."];
        assert_eq!(
            someone_else("The user is now in November, not October.", &trip, &[]),
            Some("trip".to_owned())
        );
        assert_eq!(
            someone_else("The user's trip is now in November.", &trip, &[]),
            None
        );
        let kept = ["The kids and I flew to Oslo."];
        assert_eq!(someone_else("The user flew to Oslo.", &kept, &[]), None);
        // "my best friend Siobhan" is the friend; a fact that names the friendship names her.
        let friend = [
            "My best friend Siobhan is a vet in Galway.",
            "Since school, twenty years.",
        ];
        assert_eq!(
            someone_else("The user is a vet in Galway.", &friend, &[]),
            Some("friend".to_owned())
        );
        assert_eq!(
            someone_else(
                "The user has been friends with Siobhan since school.",
                &friend,
                &[]
            ),
            None
        );
        let both = ["Mum and I walked the coast path."];
        assert_eq!(
            someone_else("The user walked the coast path.", &both, &[]),
            None
        );
        assert_eq!(
            someone_else("The user has a cat named Mochi.", &said, &[]),
            None
        );
        let moved = ["We moved last month. My dog loves the new flat."];
        assert_eq!(
            someone_else("The user loves the new flat.", &moved, &[]),
            Some("dog".to_owned())
        );
        assert_eq!(
            someone_else("The user moved last month.", &moved, &[]),
            None
        );
        let brother = ["My brother moved to Berlin for work and is really into climbing."];
        assert_eq!(
            someone_else("The user moved to Berlin for work.", &brother, &[]),
            Some("brother".to_owned())
        );
        assert_eq!(
            someone_else("The user is really into climbing.", &brother, &[]),
            Some("brother".to_owned())
        );
        // Said of the user too: the user's.
        let both = [
            "My wife and I love hiking.",
            "He plays chess. I play chess too.",
        ];
        assert_eq!(someone_else("The user loves hiking.", &both, &[]), None);
        assert_eq!(someone_else("The user plays chess.", &both, &[]), None);
        let pronoun = ["She works at the hospital."];
        assert_eq!(
            someone_else("The user works at the hospital.", &pronoun, &[]),
            Some("she".to_owned())
        );
    }

    #[test]
    fn the_user_is_never_named_after_someone_they_named() {
        let pet = ["Our dog Pixel is 9 and the vet says he has arthritis."];
        assert_eq!(
            someone_else(
                "The user is Pixel, a 9-year-old dog with arthritis.",
                &pet,
                &[]
            ),
            Some("pixel".to_owned())
        );
        let teacher = ["I'm Ines, and my teacher Dorota still plays in a quartet at 71."];
        assert_eq!(
            someone_else("The user's name is Dorota.", &teacher, &[]),
            Some("dorota".to_owned())
        );
        assert_eq!(
            someone_else("The user is called Dorota.", &teacher, &[]),
            Some("dorota".to_owned())
        );
        assert_eq!(someone_else("The user is Ines.", &teacher, &[]), None);
        // A name the user also gave themselves stays theirs; other words after "is" are no name.
        let shared = ["I'm Max, and my dog Max hates the rain."];
        assert_eq!(someone_else("The user is Max.", &shared, &[]), None);
        assert_eq!(someone_else("The user is British.", &teacher, &[]), None);
        assert_eq!(
            name_given("The user's name is Ana-Lucia, 34."),
            Some("ana-lucia".to_owned())
        );
        assert_eq!(name_given("The user is a nurse."), None);
    }

    #[test]
    fn a_name_given_to_someone_else_earlier_is_theirs() {
        let known = ["The user lives in Lisbon with a dog named Pixel."];
        let said = [
            "Big news: I moved to Porto last week.",
            "Pixel loves the new flat.",
        ];
        assert_eq!(
            someone_else("The user loves the new flat.", &said, &known),
            Some("pixel".to_owned())
        );
        assert_eq!(
            someone_else("Pixel loves the new flat.", &said, &known),
            None
        );
        let earlier = [
            "My brother Tomas is turning 30.",
            "Tomas just moved to Berlin for work.",
        ];
        assert_eq!(
            someone_else("The user just moved to Berlin for work.", &earlier, &[]),
            Some("tomas".to_owned())
        );
        // A small model's "The user Tomas …" is about Tomas.
        assert_eq!(
            someone_else("The user Tomas moved to Berlin for work.", &earlier, &[]),
            Some("tomas".to_owned())
        );
        assert_eq!(
            someone_else("The user Pixel loves the new flat.", &said, &known),
            Some("pixel".to_owned())
        );
        // Any name but the user's own, as the block or the messages give it.
        let later = ["Tomas just moved to Berlin for work."];
        assert_eq!(
            someone_else("The user Tomas moved to Berlin for work.", &later, &[]),
            Some("tomas".to_owned())
        );
        assert_eq!(
            someone_else("The user Marta works nights.", &["I'm Marta."], &[]),
            None
        );
        assert_eq!(
            someone_else(
                "The user Marta works nights.",
                &["I work nights."],
                &["The user is Marta."]
            ),
            None
        );
        // A capitalized word that opens a sentence is no name.
        let plain = ["Yesterday I moved to Berlin for work."];
        assert_eq!(
            someone_else("The user moved to Berlin for work.", &plain, &[]),
            None
        );
    }

    #[test]
    fn a_bare_pronoun_is_no_referent() {
        assert!(no_referent("The user booked it."));
        assert!(no_referent("It's normal for an old cat to sleep a lot."));
        assert!(no_referent("There are many ways to brew coffee."));
        assert!(!no_referent("It is Miso's twelfth birthday today."));
        assert!(no_referent("The user loves them."));
        assert!(!no_referent("The user booked a flight to Porto."));
        // "the …" of no one.
        assert!(no_referent("The paint smell is awful."));
        assert!(!no_referent("The Baratza grinder was a gift."));
        assert!(!no_referent("The deadline for the thesis is October 15."));
        assert!(!no_referent("The user's paint smells awful."));
        assert!(!no_referent(
            "The assistant promised to book a table for Friday."
        ));
        assert!(!no_referent("The user has a dog and loves it."));
        assert!(no_referent("The assistant promised to do exactly that."));
        assert!(no_referent("The assistant really tried it, definitely."));
        assert!(no_referent("The user plans to do it."));
        assert!(!no_referent(
            "The assistant promised to book it for Friday."
        ));
        // "him" or "her" with nobody named (a month is no name).
        assert!(no_referent("The user is interested in visiting him."));
        assert!(no_referent("The user might visit him in April."));
        assert!(no_referent("The user called her yesterday."));
        assert!(!no_referent(
            "The user might visit his brother Tomas in April."
        ));
        assert!(!no_referent(
            "The user's sister loves spicy food; she visits on Saturday."
        ));
        assert!(!no_referent(
            "The user visits her grandparents every summer."
        ));
        assert!(!no_referent(
            "The user's boss said he would approve the leave."
        ));
    }

    /// A clause with no subject of its own is about whoever the clause before it in the sentence
    /// named, across commas ("Marek, my brother, is a pilot"), unless the user speaks in it.
    #[test]
    fn a_subject_carries_across_commas_unless_the_user_speaks() {
        let said = ["Like I said, Marek, my brother, is a pilot for a cargo airline."];
        assert_eq!(
            someone_else("The user is a pilot for a cargo airline.", &said, &[]),
            Some("brother".to_owned())
        );
        let said = ["My boss finally agreed, from Monday I'm working from home."];
        assert_eq!(
            someone_else("The user is working from home from Monday.", &said, &[]),
            None
        );
    }

    /// Seen from the 0.5B's background save in explicit mode: the teacher's retirement joined to
    /// the user's own fact. Each statement is read on its own; the user's own one stands.
    #[test]
    fn a_statement_joined_to_the_users_own_is_read_on_its_own() {
        let said = ["My piano teacher Halina retired from the conservatory last year. I've been learning the piano for two years."];
        assert!(someone_else(
            "The user retired from the conservatory last year and is now learning the piano for two years.",
            &said,
            &[]
        )
        .is_some());
        for fact in [
            "The user has been learning the piano for two years.",
            "The user has been learning the piano for two years and loves it.",
        ] {
            assert_eq!(someone_else(fact, &said, &[]), None, "{fact}");
        }
        let both = ["Noor works nights. We never see each other."];
        assert_eq!(
            someone_else("The user and Noor never see each other.", &both, &[]),
            None
        );
    }

    #[test]
    fn a_name_opening_a_clause_is_its_subject() {
        // Named in an earlier message (or a stored memory), then the subject of a later one.
        let said = [
            "Our landlord, Mr Haddad, said the heating gets fixed this week.",
            "News: Haddad replaced the whole boiler yesterday.",
        ];
        assert_eq!(
            someone_else("The user replaced the whole boiler.", &said, &[]),
            Some("haddad".to_owned())
        );
        let known = ["The user's coach Ilse trains the juniors."];
        let said = ["Ilse signed up for the Berlin marathon."];
        assert_eq!(
            someone_else("The user signed up for the Berlin marathon.", &said, &known),
            Some("ilse".to_owned())
        );
        // The user speaking in the clause keeps it theirs; so does a name the user gave themselves.
        let said = ["Ilse and I signed up for the Berlin marathon."];
        assert_eq!(
            someone_else("The user signed up for the Berlin marathon.", &said, &known),
            None
        );
        let said = ["Hi, this is Ilse again. Ilse ran the Berlin marathon in 3 hours, by the way."];
        let mine = ["The user is Ilse."];
        assert_eq!(
            someone_else("The user ran the Berlin marathon in 3 hours.", &said, &mine),
            None
        );
    }

    #[test]
    fn a_name_told_in_an_earlier_message_makes_a_sentence_its_subjects() {
        use crate::postprocess::gates::{Evidence, Rejection};
        let now = Evidence::new([(
            "user",
            "Small news: Halina switched our lessons to Friday mornings. Works for me.",
        )]);
        let fact = "The user switched their lessons to Friday mornings.";
        // These turns alone cannot tell a name from any word that opens a sentence.
        assert_eq!(now.check(fact), Ok(()));
        let earlier = [
            "My piano teacher Halina retired from the conservatory last year.".to_owned(),
            "Small steps: I practise scales every evening.".to_owned(),
        ];
        let now = now.with_earlier(&earlier);
        assert_eq!(now.check(fact), Err(Rejection::NotTheUser));
        // "Small" opens sentences in both messages and is named nowhere; the user's own name is
        // theirs.
        assert_eq!(
            names_in(
                &[
                    "I'm Halina, by the way.",
                    "Small steps: my tutor Oren helps."
                ],
                &["small".to_owned(), "halina".to_owned(), "oren".to_owned()]
            ),
            ["oren"]
        );
    }
}
