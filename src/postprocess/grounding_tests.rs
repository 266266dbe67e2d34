use super::*;

fn months(word: &str) -> bool {
    crate::dates::MONTHS.contains(&word.to_lowercase().as_str())
}

fn claim<'a>(text: &'a str, quote: Option<&'a str>) -> Claim<'a> {
    Claim {
        text,
        quote,
        said_as: None,
        about: None,
        commitment: false,
    }
}

const TURNS: [Said<'static>; 4] = [
    Said {
        role: "user",
        text: "I'm Ines, I'm 34. My teacher, Dorota Sikorska, is 71. Any tips for fourth position?",
    },
    Said {
        role: "assistant",
        text: "You could try slow open-string exercises, or a weekend in Chamrousse.",
    },
    Said {
        role: "user",
        text: "I'll take the second one, it sounds fun, can you book it?",
    },
    Said {
        role: "assistant",
        text: "I will remind you on Friday to practise.",
    },
];

#[test]
fn a_quote_is_found_word_for_word_and_names_the_turn() {
    let grounded = ground(
        &claim("The user is 34 years old.", Some("i'm 34")),
        &TURNS,
        &months,
        true,
    )
    .unwrap();
    assert_eq!(grounded.turn, 0);
    // The user's own spelling, as the message has it.
    assert_eq!(grounded.quote, "I'm 34");
}

#[test]
fn the_assistants_words_are_not_the_users() {
    let suggestion = claim(
        "The user does slow open-string exercises.",
        Some("try slow open-string exercises"),
    );
    assert_eq!(
        ground(&suggestion, &TURNS, &months, true),
        Err(Ungrounded::AssistantsWords)
    );
    // Without a quote: a place only the assistant named.
    let place = claim("The user plans a weekend in Chamrousse.", None);
    assert_eq!(
        ground(&place, &TURNS, &months, true).and_then(|g| g.unsaid_check(&[])),
        Err(Ungrounded::AssistantsWords)
    );
    // Quoted from the assistant's line, but the user said it too: the user's sentence is its
    // source. A user's sentence holding less of it is not.
    let turns = [
        Said {
            role: "user",
            text: "Kwame lent me his glider, so I can start flying lessons in May.",
        },
        Said {
            role: "assistant",
            text: "Great! I'll start flying lessons in May is a fine plan. Or try a weekend in the mountains.",
        },
        Said {
            role: "user",
            text: "Maybe a weekend away first.",
        },
    ];
    let repeated = claim(
        "The user will start flying lessons in May.",
        Some("I'll start flying lessons in May"),
    );
    let grounded = ground(&repeated, &turns, &months, true).unwrap();
    assert_eq!(grounded.turn, 0);
    assert!(grounded
        .quote
        .contains("so I can start flying lessons in May"));
    let suggested = claim(
        "The user plans a weekend in the mountains.",
        Some("a weekend in the mountains"),
    );
    assert_eq!(
        ground(&suggested, &turns, &months, true),
        Err(Ungrounded::AssistantsWords)
    );
    // The assistant's own commitment has the assistant's line as its source.
    let promise = Claim {
        commitment: true,
        ..claim(
            "The assistant will remind the user on Friday to practise.",
            Some("I will remind you on Friday"),
        )
    };
    assert_eq!(ground(&promise, &TURNS, &months, true).unwrap().turn, 3);
}

#[test]
fn questions_and_requests_state_no_fact() {
    let asked = claim(
        "The user plays in fourth position.",
        Some("tips for fourth position"),
    );
    assert_eq!(
        ground(&asked, &TURNS, &months, true),
        Err(Ungrounded::Asked)
    );
    // A statement before a question in one sentence is still a statement.
    let stated = claim(
        "The user will take the second one.",
        Some("I'll take the second one"),
    );
    assert_eq!(ground(&stated, &TURNS, &months, true).unwrap().turn, 2);
    let booked = claim(
        "The user wants the assistant to book it.",
        Some("can you book it"),
    );
    assert_eq!(
        ground(&booked, &TURNS, &months, true),
        Err(Ungrounded::Asked)
    );
    // The model's own word for its source counts too.
    let request = Claim {
        said_as: Some(SaidAs::Request),
        ..claim("The user is 34 years old.", Some("I'm 34"))
    };
    assert_eq!(
        ground(&request, &TURNS, &months, true),
        Err(Ungrounded::Asked)
    );
}

#[test]
fn names_and_numbers_come_from_the_users_words() {
    let checked = |claim: &Claim<'_>, known: &[&str]| {
        ground(claim, &TURNS, &months, true).and_then(|g| g.unsaid_check(known).map(|()| g))
    };
    // A city from the prompt's example, in no turn.
    let copied = claim("The user moved to Porto with Ines.", None);
    assert_eq!(checked(&copied, &[]), Err(Ungrounded::NameNotSaid));
    // ... unless it is known already from an earlier chat.
    assert!(checked(&copied, &["The user lives in Porto."]).is_ok());
    let age = claim("The user is 43 years old.", Some("I'm 34"));
    assert_eq!(checked(&age, &[]), Err(Ungrounded::NameNotSaid));
    // A date the system resolved is its own writing, not a name.
    let dated = claim("The user's teacher Dorota is 71 as of March 3, 2026.", None);
    assert_eq!(ground(&dated, &TURNS, &months, true).unwrap().turn, 0);
}

#[test]
fn a_fact_about_someone_else_names_them() {
    let teachers = Claim {
        about: Some("Dorota Sikorska"),
        ..claim("The user is 71 years old.", Some("Dorota Sikorska, is 71"))
    };
    assert_eq!(
        ground(&teachers, &TURNS, &months, true),
        Err(Ungrounded::WrongSubject)
    );
    let named = Claim {
        about: Some("Dorota Sikorska"),
        ..claim(
            "The user's teacher Dorota Sikorska is 71.",
            Some("Dorota Sikorska, is 71"),
        )
    };
    assert!(ground(&named, &TURNS, &months, true).is_ok());
    let own = Claim {
        about: Some("user"),
        ..claim("The user is 34 years old.", Some("I'm 34"))
    };
    assert!(ground(&own, &TURNS, &months, true).is_ok());
}

#[test]
fn without_a_quote_found_the_closest_statement_stands_in() {
    let paraphrase = claim("The user Ines is 34.", Some("words nobody said"));
    let grounded = ground(&paraphrase, &TURNS, &months, true).unwrap();
    assert_eq!(grounded.turn, 0);
    assert_eq!(grounded.quote, "I'm Ines, I'm 34.");
    // Nothing the user stated shares two words with it.
    assert_eq!(
        ground(
            &claim("The user enjoys quiet evenings.", None),
            &TURNS,
            &months,
            true
        ),
        Err(Ungrounded::NoSource)
    );
}

#[test]
fn text_in_other_scripts_is_read_by_punctuation_alone() {
    let turns = [Said {
        role: "user",
        text: "Ich heiße Jürgen und wohne in München. Kannst du mir helfen?",
    }];
    let home = claim(
        "Der Nutzer Jürgen wohnt in München.",
        Some("wohne in München"),
    );
    assert_eq!(
        ground(&home, &turns, &months, true).unwrap().quote,
        "wohne in München"
    );
    let asked = claim("Der Nutzer braucht Hilfe.", Some("Kannst du mir helfen"));
    assert_eq!(
        ground(&asked, &turns, &months, true),
        Err(Ungrounded::Asked)
    );
    let elsewhere = claim("Der Nutzer Jürgen wohnt in Berlin.", None);
    assert_eq!(
        ground(&elsewhere, &turns, &months, true).and_then(|g| g.unsaid_check(&[])),
        Err(Ungrounded::NameNotSaid)
    );
    // Where capitals are not read as names (a language whose nouns all have one), a noun the
    // user did not say is no unsaid name, and a number still is.
    let aged = claim("Der Nutzer Jürgen ist 40 Jahre alt.", None);
    let noun = claim(
        "Der Nutzer Jürgen wohnt in der Stadt München.",
        Some("wohne in München"),
    );
    let read = |c| ground(c, &turns, &months, false).and_then(|g| g.unsaid_check(&[]));
    assert_eq!(read(&aged), Err(Ungrounded::NameNotSaid));
    assert!(read(&noun).is_ok());
    assert_eq!(
        ground(&noun, &turns, &months, true).and_then(|g| g.unsaid_check(&[])),
        Err(Ungrounded::NameNotSaid)
    );
}

#[test]
fn a_fact_names_its_subject_as_the_schema_or_the_user_named_them() {
    assert_eq!(subject(Some("user"), false).as_deref(), Some("user"));
    assert_eq!(subject(Some("The User"), false).as_deref(), Some("user"));
    assert_eq!(
        subject(Some("assistant"), false).as_deref(),
        Some("assistant")
    );
    assert_eq!(subject(Some(" Dorota "), false).as_deref(), Some("Dorota"));
    assert_eq!(
        subject(Some("Dorota Sikorska"), false).as_deref(),
        Some("Dorota Sikorska")
    );
    // A commitment is the assistant's, whoever the model named.
    assert_eq!(subject(Some("user"), true).as_deref(), Some("assistant"));
    assert_eq!(subject(None, false), None);
    assert_eq!(subject(Some(" "), false), None);
}

#[test]
fn a_fact_that_never_names_the_user_is_about_the_person_it_names() {
    let turns = [Said {
        role: "user",
        text:
            "My mum Helga turns 60 next month. The head chef is Marco Bellini, he trained in Lyon.",
    }];
    let about_user = |text: &'static str| Claim {
        about: Some("user"),
        ..claim(text, None)
    };
    let subject_of = |text: &'static str| {
        ground(&about_user(text), &turns, &months, true)
            .ok()
            .and_then(|g| g.subject)
    };
    assert_eq!(
        subject_of("Helga turns 60 next month.").as_deref(),
        Some("Helga")
    );
    assert_eq!(
        subject_of("Marco Bellini trained in Lyon.").as_deref(),
        Some("Marco Bellini")
    );
    // Opening with anything but a name, it is about no one known (a later name may be a place).
    assert_eq!(subject_of("The head chef trained in Lyon."), None);
    // A fact that says "the user" is the user's, whoever else it names.
    assert_eq!(
        subject_of("The user's mum Helga turns 60 next month.").as_deref(),
        Some("user")
    );
}
