use super::*;

fn evidence() -> Evidence {
    Evidence::new([
        ("user", "Hi! My dog is called Rexford and he is a corgi. Can you suggest a name for my new cat?"),
        (
            "assistant",
            "Certainly! Here are a few suggestions:\n1. Data Migration\n2. System Integration\nI will remind you about the vet on Friday.",
        ),
    ])
}

#[test]
fn facts_about_the_user_pass() {
    let e = evidence();
    assert_eq!(e.check("The user's dog is called Rexford."), Ok(()));
    assert_eq!(e.check("The user has a corgi named Rexford."), Ok(()));
    assert_eq!(
        e.check("The assistant promised to remind the user about the vet on Friday."),
        Ok(())
    );
}

#[test]
fn junk_is_refused_with_its_reason() {
    let e = evidence();
    for (text, reason) in [
        ("...", Rejection::Placeholder),
        ("", Rejection::Placeholder),
        ("N/A", Rejection::Placeholder),
        ("<the merged text>", Rejection::Placeholder),
        ("The user drives ...", Rejection::Placeholder),
        ("What is a good name for a cat?", Rejection::Question),
        ("1. Data Migration", Rejection::ListFragment),
        ("- System Integration plan", Rejection::ListFragment),
        ("Rexford", Rejection::TooShort),
        (
            "Certainly! Here are a few suggestions:",
            Rejection::CopyOfAssistant,
        ),
        (
            "Can you suggest a name for my new cat",
            Rejection::CopyOfQuestion,
        ),
        (
            "There are seven continents on Earth.",
            Rejection::Ungrounded,
        ),
        (
            "The user loves sleeping on the keyboard.",
            Rejection::Ungrounded,
        ),
        ("The user thanks the assistant.", Rejection::Courtesy),
        ("The user said hello and thanks a lot.", Rejection::Courtesy),
        (
            "The user apologizes and appreciates it.",
            Rejection::Courtesy,
        ),
        ("The user says sorry and goodbye.", Rejection::Courtesy),
        (
            "The user's dog Rexford is a corgi and I love him.",
            Rejection::FirstPerson,
        ),
        ("My dog is called Rexford, a corgi.", Rejection::FirstPerson),
    ] {
        assert_eq!(e.check(text), Err(reason), "{text}");
    }
}

#[test]
fn junk_seen_from_the_background_save_is_refused() {
    let e = Evidence::new([
        (
            "user",
            "I cannot stand mushrooms. What would be a good dinner for tonight? I am allergic to nothing, but I am vegetarian.",
        ),
        ("assistant", "Let me think about the menu."),
    ]);
    for (text, reason) in [
        (
            "The user asked about a good dinner for tonight.",
            Rejection::Question,
        ),
        (
            "The user wants to know what to cook tonight.",
            Rejection::Question,
        ),
        (
            "The assistant will think about the menu later.",
            Rejection::AboutAssistant,
        ),
        (
            "The user will think about the menu later.",
            Rejection::Transient,
        ),
        (
            "The assistant promised to think about the menu later.",
            Rejection::AboutAssistant,
        ),
        (
            "The assistant is sorry and will help with the dinner plan.",
            Rejection::AboutAssistant,
        ),
        (
            "The user asked for a quick breakfast before a 7am shift.",
            Rejection::Question,
        ),
    ] {
        assert_eq!(e.check(text), Err(reason), "{text}");
    }
    assert_eq!(e.check("The user is vegetarian."), Ok(()));
    let plans = Evidence::new([("user", "I will help my sister move on Saturday.")]);
    assert_eq!(
        plans.check("The user will help their sister move on Saturday."),
        Ok(())
    );
    assert_eq!(e.check("The user cannot stand mushrooms."), Ok(()));
    let only_dislike = Evidence::new([("user", "I cannot stand mushrooms.")]);
    assert_eq!(
        only_dislike.check("The user is allergic to mushrooms."),
        Err(Rejection::Ungrounded)
    );
    // Every listed word the user says is theirs, however a stemmer cuts it.
    let intolerant = Evidence::new([("user", "I'm lactose intolerant myself, so no pizza.")]);
    assert_eq!(intolerant.check("The user is lactose intolerant."), Ok(()));
    let pregnant = Evidence::new([("user", "My wife and I are expecting; I'm pregnant!")]);
    assert_eq!(pregnant.check("The user is pregnant."), Ok(()));
    // The word may come from what is already known about the user.
    assert_eq!(
        only_dislike.check_knowing(
            "The user is allergic to mushrooms.",
            &["The user has a mushroom allergy."]
        ),
        Ok(())
    );
}

#[test]
fn a_fact_may_name_the_user_by_a_name_the_messages_do_not_hold() {
    let e = Evidence::new([("user", "I moved to Porto, with my cat Tom.")]);
    assert_eq!(e.check("Alice lives in Porto."), Ok(()));
    assert_eq!(e.check("Alice lives with a cat named Tom."), Ok(()));
    assert_eq!(
        e.check("Alice likes jazz music."),
        Err(Rejection::Ungrounded)
    );
}

#[test]
fn what_small_models_attribute_wrongly_is_refused() {
    let e = Evidence::new([
        (
            "user",
            "My sister visits on Saturday. How do I make a pivot table faster?",
        ),
        (
            "assistant",
            "You could cook a spicy stir-fry with quinoa. For pivot tables, turn off autofit.",
        ),
    ]);
    assert_eq!(
        e.check("The user plans a stir-fry for the sister's Saturday visit."),
        Err(Rejection::FromAssistant)
    );
    assert!(e
        .check("The user suggests a spicy stir-fry with quinoa for the sister's Saturday visit.")
        .is_err());
    assert_eq!(
        e.check("The assistant provides tips on how to make a pivot table faster."),
        Err(Rejection::AboutAssistant)
    );
    assert_eq!(e.check("The user's sister visits on Saturday."), Ok(()));
    let moved = Evidence::new([(
        "user",
        "I moved to Porto in October and I love the new flat.",
    )]);
    assert_eq!(
        moved.check_update(
            "The user lives in Lisbon with a dog named Pixel.",
            "The user lives in Lisbon with a dog named Pixel. The user moved to Porto in October."
        ),
        Err(Rejection::SeveralFacts)
    );
}

#[test]
fn the_prompts_example_is_no_memory_of_anyone() {
    let e = Evidence::new([
        ("user", "My dog is called Rexford."),
        ("assistant", "What a nice name!"),
    ]);
    assert_eq!(
        e.check("The assistant promised to remind the user about the dentist on Friday."),
        Err(Rejection::Ungrounded)
    );
}

#[test]
fn an_update_keeps_its_subject() {
    let e = Evidence::new([("user", "I sold my Toyota and bought a red Tesla.")]);
    let old = "The user drives a Toyota Corolla.";
    assert_eq!(
        e.check_update(
            old,
            "The user drives a red Tesla instead of the Toyota Corolla."
        ),
        Ok(())
    );
    assert_eq!(e.check_update(old, "..."), Err(Rejection::Placeholder));
    assert_eq!(
        e.check_update(old, "The user bought red paint."),
        Err(Rejection::LosesSubject)
    );
    // An update that drops the old memory's number drops a fact; one that changes it is news.
    let brother = Evidence::new([("user", "Tomas is really into climbing.")]);
    let old = "The user's brother Tomas is turning 30 next month and is really into climbing.";
    assert_eq!(
        brother.check_update(
            old,
            "The user's brother Tomas is really into climbing a lot."
        ),
        Err(Rejection::LosesSubject)
    );
    let older = Evidence::new([("user", "Tomas turned 31 and still climbs.")]);
    assert_eq!(
        older.check_update(
            old,
            "The user's brother Tomas turned 31 and is really into climbing."
        ),
        Ok(())
    );
}

#[test]
fn another_subject_a_bare_pronoun_a_restated_question_and_tonight_are_refused() {
    let e = Evidence::new([
        (
            "user",
            "My cat Mochi ate grass this morning. I booked it yesterday. How do I make a pivot table faster? I'm cooking dinner tonight.",
        ),
        ("assistant", "Cats often eat grass; it helps them."),
    ]);
    assert_eq!(
        e.check("The user ate grass this morning."),
        Err(Rejection::NotTheUser)
    );
    assert_eq!(e.check("The user's cat Mochi ate grass."), Ok(()));
    assert_eq!(e.check("The user booked it."), Err(Rejection::NoReferent));
    assert_eq!(
        e.check("The user is interested in making a pivot table faster."),
        Err(Rejection::Question)
    );
    assert_eq!(
        e.check("The user is cooking dinner tonight."),
        Err(Rejection::Transient)
    );
}

#[test]
fn a_noop_needs_a_memory_that_says_it_and_an_invalidation_the_same_topic() {
    let job = "The user works as a nurse in Leeds.";
    assert!(covers(job, "The user works as a nurse in Leeds now."));
    assert!(covers(
        "Sam works as a nurse in Leeds.",
        "Sam is a nurse in Leeds."
    ));
    assert!(!covers(job, "The user has a dog named Biscuit."));
    assert!(!covers(
        "The user has a dog named Biscuit.",
        "The user's dog Biscuit is a beagle."
    ));
    assert!(same_topic(
        "The user no longer works as a nurse; they teach chemistry in Leeds.",
        job
    ));
    assert!(same_topic(
        "The user lives in Berlin.",
        "The user lives in Paris."
    ));
    assert!(same_topic("Dana moved to Berlin.", "Dana lives in Paris."));
    assert!(!same_topic(
        "The user is allergic to penicillin.",
        "The user teaches chemistry at a school in Leeds."
    ));
    assert!(!same_topic(
        "The user eats meat again.",
        "The user is vegetarian."
    ));
    // An update's text must carry the new fact.
    assert!(carries("Ana lives in Porto.", "Ana moved to Porto."));
    assert!(carries(
        "The user teaches chemistry in Leeds, no longer as a nurse.",
        "The user now teaches chemistry in Leeds."
    ));
    assert!(!carries(
        "The user has a dog named Biscuit.",
        "The user moved from Leeds to York in March."
    ));
    assert!(!carries("Ana lives in Lisbon.", "Ana moved to Porto."));
    // As a small memory LLM writes them: an update that drops only the date carries the fact, and
    // a NOOP on a dated repeat of a stored fact holds.
    assert!(carries(
        "The user lives in Porto with a dog named Pixel.",
        "The user moved to Porto in October 2026."
    ));
    assert!(covers(
        "The user is a nurse at the children's hospital in Valencia.",
        "The user started as a nurse at the children's hospital in Valencia on March 2, 2026."
    ));
}

#[test]
fn an_invented_date_or_promise_is_refused_and_a_real_one_kept() {
    let said = crate::dates::days_from_civil(2026, 11, 3) * 86_400_000;
    let e = Evidence::new([
        ("user", "I moved to Porto last week. My brother Tomas turns 30 next month."),
        (
            "assistant",
            "Congratulations! Would you like party ideas for Tomas? I'll remind you about his birthday next month.",
        ),
    ])
    .said_at(said);
    assert_eq!(e.check("The user moved to Porto in October 2026."), Ok(()));
    assert_eq!(
        e.check("The user moved to Porto in October 2025."),
        Err(Rejection::InventedDate)
    );
    assert_eq!(
        e.check("The user's brother Tomas turns 30 on March 2, 2026."),
        Err(Rejection::InventedDate)
    );
    assert_eq!(
        e.check("The assistant promised to remind the user about Tomas's birthday."),
        Ok(())
    );
    assert_eq!(
        e.check("The assistant promised to plan a party for Tomas."),
        Err(Rejection::NotPromised)
    );
    // Marked a commitment, but the assistant's advice stored as the user's doing.
    let advised = Evidence::new([
        (
            "user",
            "My dad is home. How can I support him from a distance?",
        ),
        (
            "assistant",
            "You could send regular text messages and emails to check in on his health.",
        ),
    ]);
    let refused = advised.check("The user suggests sending emails to check in on his health.");
    assert!(refused.is_err(), "{refused:?}");
    // A date already known about the user may be repeated.
    let known = ["The user's brother Tomas was born on 4 December 1996."];
    assert_eq!(
        e.check_knowing(
            "The user's brother Tomas was born in December 1996.",
            &known
        ),
        Ok(())
    );
}

#[test]
fn what_the_user_only_asked_is_no_fact_and_a_detail_in_a_question_is() {
    let e = Evidence::new([
        (
            "user",
            "Hi! I'm Marta. I just started as a nurse in Valencia.",
        ),
        ("assistant", "Welcome, Marta!"),
        (
            "user",
            "Long week. Any tips for sleeping after night shifts?",
        ),
        (
            "user",
            "Can you help me plan dinner for our anniversary on June 12?",
        ),
    ]);
    assert_eq!(
        e.check("The user has a preference for a good night's sleep."),
        Err(Rejection::FromQuestion)
    );
    assert_eq!(e.check("The user works night shifts as a nurse."), Ok(()));
    // The assistant's answer to a question, told as the user's (one stated word, "legs", does
    // not ground it).
    let hike = Evidence::new([
        (
            "user",
            "On Saturday I hiked up Mount Tamalpais with my friend Ben. My legs still hurt!",
        ),
        ("assistant", "That's a great hike. Rest those legs!"),
        ("user", "Any stretches you recommend?"),
        (
            "assistant",
            "Try standing quad stretches and seated hamstring stretches.",
        ),
    ]);
    assert_eq!(
        hike.check("The user recommended standing leg stretches."),
        Err(Rejection::FromQuestion)
    );
    assert_eq!(
        hike.check("The user's legs hurt after hiking Mount Tamalpais."),
        Ok(())
    );
    assert_eq!(
        e.check("The user plans dinner for their anniversary on June 12."),
        Ok(())
    );
}

#[test]
fn the_users_news_repeated_by_the_assistant_is_still_theirs() {
    let e = Evidence::new([
        (
            "user",
            "Update: I left Fabrikam. I'm now a machine learning engineer at Contoso.",
        ),
        (
            "assistant",
            "The user is now a machine learning engineer at Contoso. Congratulations!",
        ),
    ]);
    assert_eq!(
        e.check("The user is now a machine learning engineer at Contoso."),
        Ok(())
    );
}

#[test]
fn a_liking_must_be_the_users_own_word() {
    let painted = Evidence::new([(
        "user",
        "This weekend I stayed home and painted the kitchen blue.",
    )]);
    assert_eq!(
        painted.check("The user has a preference for painting the kitchen blue."),
        Err(Rejection::Ungrounded)
    );
    assert_eq!(
        painted.check("The user painted the kitchen blue this weekend."),
        Ok(())
    );
    let climbing = Evidence::new([("user", "I'm really into climbing these days.")]);
    assert_eq!(climbing.check("The user likes climbing."), Ok(()));
    let spicy = Evidence::new([(
        "user",
        "My sister visits on Saturday. She loves spicy food.",
    )]);
    assert_eq!(spicy.check("The user's sister loves spicy food."), Ok(()));
}

#[test]
fn an_interest_or_a_worry_must_be_the_users_own_word() {
    // Readings a small model wrote in explicit mode's background save.
    for (said, reading) in [
        (
            "This weekend I stayed home and painted the kitchen blue.",
            "The user is interested in painting.",
        ),
        (
            "The paint smell is awful. How long does it last?",
            "The user is concerned about the smell of the paint.",
        ),
        (
            "The paint smell is awful. How long does it last?",
            "The user is looking for information about the paint smell.",
        ),
        (
            "Big news: I moved to Porto last week for a new job.",
            "The user is looking for a new job.",
        ),
        // Run K, the background save: a complaint read as an experience, and the answer to the
        // question told as what the user learned.
        (
            "The paint smell is awful. How long does it last?",
            "The user has experienced a paint smell.",
        ),
        (
            "The paint smell is awful. How long does it last?",
            "The user has learned about the lifespan of paint smell.",
        ),
    ] {
        let evidence = Evidence::new([("user", said)]);
        assert_eq!(
            evidence.check(reading),
            Err(Rejection::Ungrounded),
            "{reading}"
        );
    }
    for (said, own) in [
        (
            "I'm worried about the paint smell with the baby around.",
            "The user is worried about the paint smell.",
        ),
        (
            "I want to learn Spanish before my trip to Seville.",
            "The user wants to learn Spanish before a trip to Seville.",
        ),
        (
            "I'm hoping to find a flat with a garden for Pixel.",
            "The user is looking for a flat with a garden.",
        ),
        (
            "I learned about sourdough starters from my grandmother.",
            "The user learned about sourdough starters from their grandmother.",
        ),
    ] {
        let evidence = Evidence::new([("user", said)]);
        assert_eq!(evidence.check(own), Ok(()), "{own}");
    }
}

#[test]
fn what_a_fact_says_of_its_subject_must_be_said() {
    let miso = Evidence::new([(
        "user",
        "My cat Miso is twelve years old and sleeps all day.",
    )]);
    for runaway in [
        "The user's cat Miso is a pet lover.",
        "The user's cat Miso is a domestic animal.",
    ] {
        assert_eq!(miso.check(runaway), Err(Rejection::Ungrounded), "{runaway}");
    }
    for fact in [
        "The user's cat Miso is twelve years old.",
        "The user has a cat named Miso.",
        "The user's cat Miso sleeps all day.",
    ] {
        assert_eq!(miso.check(fact), Ok(()), "{fact}");
    }
}

#[test]
fn advice_is_the_assistants_unless_the_user_gave_it_to_themselves() {
    let e = Evidence::new([
        (
            "user",
            "I started as a machine learning engineer. Mostly Python.",
        ),
        ("assistant", "You should learn NumPy and Pandas."),
    ]);
    assert_eq!(
        e.check("The user should learn NumPy and Pandas for Python."),
        Err(Rejection::FromAssistant)
    );
    // Asking it is not saying it.
    let asked = Evidence::new([
        ("user", "I booked it. Should I bring flowers?"),
        (
            "assistant",
            "Flowers are a lovely touch for an anniversary.",
        ),
    ]);
    assert_eq!(
        asked.check("The user should bring flowers."),
        Err(Rejection::FromAssistant)
    );
    let own = Evidence::new([("user", "I know I should call my mother more often.")]);
    assert_eq!(
        own.check("The user should call their mother more often."),
        Ok(())
    );
}

#[test]
fn first_person_is_refused_outside_quotes_only() {
    for text in [
        "The transgender stories were so inspiring! I was so happy.",
        "I'm a nurse in Valencia.",
        "The user says my sister is a chef.",
        "The user told me about Rexford.",
        "Mine is in December.",
        "The Algarve apartment is what we'll do.",
        "We moved to Leeds.",
        "Haruka moved our lessons to Mondays.",
    ] {
        assert_eq!(check_person(text), Err(Rejection::FirstPerson), "{text}");
    }
    for text in [
        "The user's motto is \"I can do it\".",
        "The user is a nurse in Valencia.",
        "The user reads about World War I.",
        "The user's cat is called Miso.",
        "Mimi is the user's nickname.",
        "The user's favourite song is \"All You Need Is Love\".",
        "The user moved to the US in 2019.",
        "The user's sister lets them borrow her car.",
    ] {
        assert_eq!(check_person(text), Ok(()), "{text}");
    }
    for text in [
        "The assistant will make sure to keep you updated on any changes to the research plan.",
        "Your deadline is November 30.",
        "The user said you're right.",
    ] {
        assert_eq!(check_person(text), Err(Rejection::SecondPerson), "{text}");
    }
}
