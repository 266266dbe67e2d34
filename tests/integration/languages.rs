//! Text in a language the text rules do not read (German and Spanish here) is not judged by the
//! English rules: its facts meet only the mechanisms that read no words (where the quote is in
//! the user's turns, question marks, the model's own "question" or "request", numbers, whom the
//! fact names) and the memory LLM's decisions. Over real HTTP, with the real local embedding
//! model and a scripted memory LLM.

use serde_json::{json, Value};

use crate::common::{harness_local_facts, memories, tell_facts};

fn fact(text: &str, quote: &str, said_as: &str, about: &str) -> Value {
    json!({"text": text, "kind": "fact", "quote": quote, "said_as": said_as, "about": about})
}

#[tokio::test]
async fn german_facts_meet_the_mechanisms_not_the_english_rules() {
    let h = harness_local_facts(|_| {}).await;
    let said = "Ich wohne seit März in Leipzig und arbeite als Krankenpflegerin im Klinikum. \
                Meine Schwester Lena ist 34. Kannst du mir ein Rezept für sie empfehlen?";
    let facts = vec![
        fact(
            "Der Nutzer wohnt seit März in Leipzig.",
            "Ich wohne seit März in Leipzig",
            "statement",
            "user",
        ),
        // Every German noun has a capital: "Schwester", "Nutzers" and "Jahre" are no names the
        // user failed to say (the English reading of capitals refused this one).
        fact(
            "Die Schwester des Nutzers, Lena, ist 34 Jahre alt.",
            "Meine Schwester Lena ist 34",
            "statement",
            "Lena",
        ),
        // Lena's age given to the user: it does not name her.
        fact(
            "Der Nutzer ist 34 Jahre alt.",
            "Meine Schwester Lena ist 34",
            "statement",
            "Lena",
        ),
        // A number the user never said.
        fact(
            "Der Nutzer arbeitet seit 12 Jahren als Krankenpflegerin.",
            "arbeite als Krankenpflegerin im Klinikum",
            "statement",
            "user",
        ),
        // A question states no fact.
        fact(
            "Der Nutzer möchte ein Rezept.",
            "Kannst du mir ein Rezept für sie empfehlen",
            "statement",
            "user",
        ),
    ];
    let reports = tell_facts(&h, "jo", said, facts, 1).await;
    let mut stored = memories(&h, "jo").await;
    stored.sort();
    assert_eq!(
        stored,
        [
            "Der Nutzer wohnt seit März in Leipzig.",
            "Die Schwester des Nutzers, Lena, ist 34 Jahre alt.",
        ],
        "{reports:?}"
    );
    let report = &reports[0];
    for refused in [
        "1 rejected (not_the_user)",
        "1 rejected (ungrounded)",
        "1 rejected (from_question)",
    ] {
        assert!(report.contains(refused), "{report}");
    }
}

#[tokio::test]
async fn spanish_facts_meet_the_same_mechanisms() {
    let h = harness_local_facts(|_| {}).await;
    let said = "Mi hermana Lucía vive en Sevilla y tiene dos gatos. Yo soy vegetariana desde hace \
                un año, y el mes pasado empecé a correr. ¿Me recomiendas una receta?";
    let facts = vec![
        fact(
            "La hermana del usuario, Lucía, vive en Sevilla.",
            "Mi hermana Lucía vive en Sevilla",
            "statement",
            "Lucía",
        ),
        fact(
            "El usuario es vegetariano desde hace un año.",
            "Yo soy vegetariana desde hace un año",
            "statement",
            "user",
        ),
        fact(
            "El usuario empezó a correr el mes pasado.",
            "el mes pasado empecé a correr",
            "statement",
            "user",
        ),
        fact(
            "El usuario quiere una receta.",
            "Me recomiendas una receta",
            "request",
            "user",
        ),
        // Lucía's city given to the user.
        fact(
            "El usuario vive en Sevilla.",
            "Mi hermana Lucía vive en Sevilla",
            "statement",
            "Lucía",
        ),
    ];
    let reports = tell_facts(&h, "ana", said, facts, 1).await;
    let mut stored = memories(&h, "ana").await;
    stored.sort();
    // "el mes pasado" ("last month") is left as the user said it: no rule here reads a Spanish
    // date. (Spanish keeps capitals for names as English does, so these facts would pass the
    // English reading of capitals too; what this pins is that the mechanisms hold in Spanish.)
    assert_eq!(
        stored,
        [
            "El usuario empezó a correr el mes pasado.",
            "El usuario es vegetariano desde hace un año.",
            "La hermana del usuario, Lucía, vive en Sevilla.",
        ],
        "{reports:?}"
    );
    let report = &reports[0];
    assert!(report.contains("1 rejected (not_the_user)"), "{report}");
    assert!(report.contains("1 rejected (from_question)"), "{report}");
}

/// Small models write their facts in English when the user speaks German. The gates that read
/// the fact alone judge such a fact (a musing, a passing plan, a question reported as a fact);
/// the gates that look for its words among the user's leave it alone, since "lives" is not
/// among "Ich wohne".
#[tokio::test]
async fn english_facts_of_a_german_conversation_meet_the_gates_that_read_the_fact() {
    let h = harness_local_facts(|_| {}).await;
    let said = "Ich wohne seit März in Leipzig. Heute Abend rufe ich meine Schwester Lena an. \
                Vielleicht denke ich über einen Umzug nach Hamburg nach.";
    let facts = vec![
        fact(
            "The user has lived in Leipzig since March.",
            "Ich wohne seit März in Leipzig",
            "statement",
            "user",
        ),
        fact(
            "The user will call their sister Lena tonight.",
            "Heute Abend rufe ich meine Schwester Lena an",
            "statement",
            "user",
        ),
        fact(
            "The user will think about moving to Hamburg.",
            "Vielleicht denke ich über einen Umzug nach Hamburg nach",
            "statement",
            "user",
        ),
    ];
    let reports = tell_facts(&h, "jo", said, facts, 1).await;
    let stored = memories(&h, "jo").await;
    assert_eq!(
        stored,
        ["The user has lived in Leipzig since March."],
        "{reports:?}"
    );
    assert!(reports[0].contains("2 rejected (transient)"), "{reports:?}");
}
