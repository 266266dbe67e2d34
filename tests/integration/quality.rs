//! Memory quality gates end to end: a scripted memory LLM answering the way small models do
//! (placeholders copied from the prompt, the assistant's lines, the user's questions, list
//! fragments, general knowledge, the prompt's own example) gets none of it stored, an update
//! into "..." corrupts nothing, a NOOP, INVALIDATE or UPDATE that would lose a fact is overruled,
//! and structured output is asked for, with a remembered fallback.

use std::time::Duration;

use memproxy::mock::Reply;
use serde_json::json;

use crate::common::{eventually, facts, get_json, harness_with, implicit_chat, memories, Harness};

async fn chat(h: &Harness, text: &str) {
    let response = implicit_chat(h, "rio", json!([{"role": "user", "content": text}])).await;
    assert_eq!(response.status(), 200);
}

pub(crate) async fn done_reports(h: &Harness) -> Vec<String> {
    get_json(h, "/memproxy/v1/jobs?state=done").await["data"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|j| j["report"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn junk_from_the_memory_llm_never_reaches_the_store_and_updates_keep_their_subject() {
    let h = harness_with(|c| c.memory.extraction_debounce = Duration::ZERO).await;
    h.mock.push(Reply::Text(
        "Certainly! Here are a few suggestions:\n1. Data Migration\n2. System Integration".into(),
    ));
    h.mock.push_marked(
        "MEMPROXY-EXTRACT",
        facts(&[
            "...",
            "Certainly! Here are a few suggestions:",
            "1. Data Migration",
            "What should I call my project?",
            "There are seven continents on Earth.",
            "The assistant promised to remind the user about the dentist on Friday.",
            "The user's dog is called Rexford.",
        ]),
    );
    chat(
        &h,
        "My dog is called Rexford. What should I call my project?",
    )
    .await;
    eventually("the job is done", || async {
        !done_reports(&h).await.is_empty()
    })
    .await;
    assert_eq!(
        memories(&h, "rio").await,
        ["The user's dog is called Rexford."]
    );
    let report = done_reports(&h).await.join("; ");
    for reason in [
        "placeholder",
        "copy_of_assistant",
        "list_fragment",
        "question",
        "ungrounded",
    ] {
        assert!(report.contains(reason), "{reason} in: {report}");
    }
    let metrics = crate::common::get_text(&h, "/metrics").await;
    assert!(
        metrics.contains("memproxy_memory_rejections_total{reason=\"ungrounded\"} 2"),
        "{metrics}"
    );

    // A reconcile that rewrites the fact into "..." (the prompt's example, copied) corrupts
    // nothing: the new fact is added beside it instead.
    h.mock.push_marked(
        "MEMPROXY-EXTRACT",
        facts(&["The user's dog Rexford is three years old."]),
    );
    h.mock.push_marked(
        "MEMPROXY-RECONCILE",
        Reply::Text(
            json!({"decisions": [{"fact": 0, "action": "UPDATE", "memory": 0, "text": "..."}]})
                .to_string(),
        ),
    );
    chat(&h, "Rexford turned three years old last week.").await;
    eventually("the second job is done", || async {
        done_reports(&h).await.len() == 2
    })
    .await;
    let stored = memories(&h, "rio").await;
    assert!(
        stored.contains(&"The user's dog is called Rexford.".to_owned()),
        "{stored:?}"
    );
    assert!(
        stored.contains(&"The user's dog Rexford is three years old.".to_owned()),
        "{stored:?}"
    );
    assert!(!stored.iter().any(|m| m.contains("...")), "{stored:?}");
}

#[tokio::test]
async fn structured_output_is_asked_for_and_a_refusal_is_remembered() {
    let h = harness_with(|c| {
        c.memory.extraction_debounce = Duration::ZERO;
        c.explicit.background_save = true;
    })
    .await;
    h.mock.push_marked(
        "MEMPROXY-EXTRACT",
        Reply::Error {
            status: 400,
            message: "response_format type json_schema is not supported".into(),
            headers: vec![],
        },
    );
    chat(&h, "I grow tomatoes on my balcony.").await;
    eventually("the fact is stored", || async {
        memories(&h, "rio")
            .await
            .iter()
            .any(|m| m.contains("tomatoes"))
    })
    .await;
    chat(&h, "I also grow basil on my balcony.").await;
    eventually("the second fact is stored", || async {
        memories(&h, "rio")
            .await
            .iter()
            .any(|m| m.contains("basil"))
    })
    .await;
    let formats = || -> Vec<String> {
        h.mock
            .chat_requests(Some("MEMPROXY-EXTRACT"))
            .iter()
            .map(|r| {
                r["response_format"]["type"]
                    .as_str()
                    .unwrap_or("none")
                    .to_owned()
            })
            .collect()
    };
    assert_eq!(formats(), ["json_schema", "json_object", "json_object"]);
    // One memory LLM client serves implicit and explicit mode: an agent's background save asks
    // for json_object straight away too.
    h.mock.push(crate::explicit::send("Lovely."));
    crate::explicit::say(&h, "rio", "I also keep bees on the roof of my building.").await;
    h.proxy.state.after_exchange.close();
    h.proxy.state.after_exchange.wait().await;
    assert_eq!(
        formats(),
        ["json_schema", "json_object", "json_object", "json_object"]
    );
    let first = &h.mock.chat_requests(Some("MEMPROXY-EXTRACT"))[0];
    let schema = &first["response_format"]["json_schema"]["schema"];
    assert_eq!(schema["properties"]["facts"]["maxItems"], 12, "{schema}");
}

/// A harness whose user `rio` has one memory: "The user works as a nurse in Leeds."
async fn with_a_job_memory() -> Harness {
    let h = harness_with(|c| c.memory.extraction_debounce = Duration::ZERO).await;
    h.mock.push_marked(
        "MEMPROXY-EXTRACT",
        facts(&["The user works as a nurse in Leeds."]),
    );
    chat(&h, "I work as a nurse in Leeds.").await;
    eventually("the job is stored", || async {
        memories(&h, "rio").await == ["The user works as a nurse in Leeds."]
    })
    .await;
    h
}

#[tokio::test]
async fn a_small_models_noop_or_invalidation_of_something_else_loses_nothing() {
    let h = with_a_job_memory().await;

    // The memory LLM calls a new fact known (NOOP) and lets another retire the job memory.
    h.mock.push_marked(
        "MEMPROXY-EXTRACT",
        facts(&[
            "The user has a dog named Biscuit.",
            "The user is allergic to penicillin.",
        ]),
    );
    h.mock.push_marked(
        "MEMPROXY-RECONCILE",
        Reply::Text(
            json!({"decisions": [
                {"fact": 0, "action": "NOOP", "memory": 0, "text": null},
                {"fact": 1, "action": "INVALIDATE", "memory": 0, "text": null}
            ]})
            .to_string(),
        ),
    );
    chat(
        &h,
        "In Leeds I have a dog named Biscuit, and I am allergic to penicillin.",
    )
    .await;
    eventually("the second job is done", || async {
        done_reports(&h).await.len() == 2
    })
    .await;
    assert_eq!(
        h.mock.chat_requests(Some("MEMPROXY-RECONCILE")).len(),
        1,
        "the decisions were asked for"
    );
    let mut stored = memories(&h, "rio").await;
    stored.sort();
    assert_eq!(
        stored,
        [
            "The user has a dog named Biscuit.",
            "The user is allergic to penicillin.",
            "The user works as a nurse in Leeds.",
        ]
    );
    let report = done_reports(&h).await.join("; ");
    assert!(
        report.contains("1 overruled (noop)") && report.contains("1 overruled (invalidate)"),
        "{report}"
    );
}

#[tokio::test]
async fn an_update_that_keeps_the_old_text_does_not_drop_the_new_fact() {
    let h = with_a_job_memory().await;
    // The memory LLM "updates" the memory into its own text again.
    h.mock.push_marked(
        "MEMPROXY-EXTRACT",
        facts(&["The user moved from Leeds to York in March."]),
    );
    h.mock.push_marked(
        "MEMPROXY-RECONCILE",
        Reply::Text(
            json!({"decisions": [{"fact": 0, "action": "UPDATE", "memory": 0,
                "text": "The user works as a nurse in Leeds."}]})
            .to_string(),
        ),
    );
    chat(&h, "In March I moved from Leeds to York.").await;
    eventually("the second job is done", || async {
        done_reports(&h).await.len() == 2
    })
    .await;
    assert_eq!(h.mock.chat_requests(Some("MEMPROXY-RECONCILE")).len(), 1);
    let stored = memories(&h, "rio").await;
    assert!(
        stored.contains(&"The user moved from Leeds to York in March.".to_owned())
            && stored.contains(&"The user works as a nurse in Leeds.".to_owned()),
        "{stored:?}"
    );
    let report = done_reports(&h).await.join("; ");
    assert!(report.contains("1 overruled (update)"), "{report}");
}

/// Sends `text` as `user`'s one message in implicit mode (said at `time`), waits for its
/// extraction job and returns the user's memories, sorted.
pub(crate) async fn extracted(
    h: &Harness,
    user: &str,
    time: Option<&str>,
    text: &str,
) -> Vec<String> {
    let mut request = h
        .client
        .post(h.url("/implicit/v1/chat/completions"))
        .header("x-memproxy-user", user)
        .json(&json!({"model": "mock-model", "messages": [{"role": "user", "content": text}]}));
    if let Some(time) = time {
        request = request.header("x-memproxy-time", time);
    }
    let response = request.send().await.expect("answer");
    assert_eq!(response.status(), 200);
    eventually("the job is done", || async {
        !done_reports(h).await.is_empty()
    })
    .await;
    let mut stored = memories(h, user).await;
    stored.sort();
    stored
}

/// A date the user never gave nor meant is cut out of the fact (or, where it cannot be, the fact
/// is refused), and a promise the assistant never made is refused; the promise it made is kept.
#[tokio::test]
async fn invented_dates_and_promises_are_refused_and_real_ones_kept() {
    let h = harness_with(|c| c.memory.extraction_debounce = Duration::ZERO).await;
    h.mock.push(Reply::Text(
        "Congratulations! Would you like ideas for Tomas's party? I'll remind you about his birthday next month."
            .into(),
    ));
    h.mock.push_marked(
        "MEMPROXY-EXTRACT",
        facts(&[
            "The user moved to Porto in October 2025.",
            "The user's brother Tomas is a nurse in Valencia on November 3, 2026.",
            "The user's October 2025 move to Porto was a big step.",
            "The assistant promised to remind the user about Tomas's birthday.",
            "The assistant promised to check Tomas's availability for the party.",
        ]),
    );
    let stored = extracted(
        &h,
        "rio",
        Some("2026-11-03T10:00:00Z"),
        "I moved to Porto last week. My brother Tomas turns 30 next month and he is a nurse in Valencia.",
    )
    .await;
    assert_eq!(
        stored,
        [
            "The assistant promised to remind the user about Tomas's birthday.",
            "The user moved to Porto.",
            "The user's brother Tomas is a nurse in Valencia.",
        ]
    );
    let report = done_reports(&h).await.join("; ");
    // A date phrase is cut out of a fact that is right without it; a date that cannot be cut
    // out refuses the fact.
    assert!(report.contains("2 undated"), "{report}");
    assert!(report.contains("1 rejected (invented_date)"), "{report}");
    assert!(report.contains("1 rejected (not_promised)"), "{report}");
}

/// What the user only asked about, and manners, are no facts: a scripted memory LLM that
/// restates the user's question as a preference, thanks as a fact, and a request for help as a
/// plan stores none of them; the fact stated in the same message is kept, with the user's words
/// that state it as its source.
#[tokio::test]
async fn questions_restated_as_facts_and_manners_are_refused() {
    let h = harness_with(|c| c.memory.extraction_debounce = Duration::ZERO).await;
    h.mock
        .push(Reply::Text("Congratulations on the new job!".into()));
    h.mock.push_marked(
        "MEMPROXY-EXTRACT",
        facts(&[
            "The user has a preference for a good night's sleep.",
            "The user thanks the assistant.",
            "The user is a nurse at the children's hospital.",
            "The user plans dinner for their anniversary on June 12.",
        ]),
    );
    let stored = extracted(
        &h,
        "ines",
        None,
        "Thanks! I'm a nurse at the children's hospital. Any tips for sleeping after night shifts? And can you help me plan dinner for our anniversary on June 12?",
    )
    .await;
    assert_eq!(stored, ["The user is a nurse at the children's hospital."]);
    let report = done_reports(&h).await.join("; ");
    assert!(report.contains("2 rejected (from_question)"), "{report}");
    let listed = get_json(&h, "/memproxy/v1/users/ines/memories").await;
    assert_eq!(
        listed["data"][0]["sources"][0]["quote"], "I'm a nurse at the children's hospital.",
        "{listed}"
    );
    assert!(report.contains("courtesy"), "{report}");
}

/// Junk the 1.5B memory LLM wrote on the scenario suite, each refused end to end: a fact about
/// the user's brother told as the user's by name ("The user Tomas …"), "him" with nobody named,
/// a promise of nothing in particular, and the assistant's answer to a question told as the
/// user's. The facts of the same message are kept.
#[tokio::test]
async fn names_pronouns_empty_promises_and_answers_told_as_the_users_are_refused() {
    let h = harness_with(|c| c.memory.extraction_debounce = Duration::ZERO).await;
    h.mock.push(Reply::Text(
        "Try standing quad stretches and seated hamstring stretches.".into(),
    ));
    h.mock.push_marked(
        "MEMPROXY-EXTRACT",
        facts(&[
            "The user Tomas moved to Berlin for work.",
            "The user is interested in visiting him.",
            "The assistant promised to do exactly that.",
            "The user recommended standing leg stretches.",
            "The user's brother Tomas moved to Berlin for work.",
            "The user might visit their brother Tomas in April.",
        ]),
    );
    let stored = extracted(
        &h,
        "tomas-sister",
        None,
        "My brother Tomas just moved to Berlin for work, and I might visit him in April. My legs still hurt after the hike. Any stretches you recommend?",
    )
    .await;
    assert_eq!(
        stored,
        [
            "The user might visit their brother Tomas in April.",
            "The user's brother Tomas moved to Berlin for work.",
        ]
    );
    let report = done_reports(&h).await.join("; ");
    assert!(report.contains("1 rejected (not_the_user)"), "{report}");
    assert!(report.contains("2 rejected (no_referent)"), "{report}");
    assert!(report.contains("1 rejected (from_question)"), "{report}");
}

/// A relative day with one meaning is stored as the date it meant, counted from when it was
/// said: the 1.5B chat model answered "October 12" from "[2026-10-12] … yesterday". A day with
/// more than one meaning ("last weekend", a plan "on Saturday") stays as it was said. The gates
/// read the fact as written: seen in a real run, "The user ate grass this morning." (the cat
/// did) passed them once its day was a date.
#[tokio::test]
async fn one_meaning_relative_days_are_stored_as_dates() {
    let h = harness_with(|c| c.memory.extraction_debounce = Duration::ZERO).await;
    h.mock.push(Reply::Text("Enjoy the new grinder!".into()));
    h.mock.push_marked(
        "MEMPROXY-EXTRACT",
        facts(&[
            "The user bought a new grinder, a Baratza Encore, yesterday.",
            "The user hiked Mount Tamalpais with Ben on Saturday.",
            "The user's sister visits on Saturday.",
            "The user painted the kitchen last weekend.",
            // The cat's, read as the user's: refused as written, before its day is resolved.
            "The user ate grass this morning.",
        ]),
    );
    let stored = extracted(
        &h,
        "rio",
        Some("2026-10-12T09:00:00Z"),
        "Yesterday I bought a new grinder, a Baratza Encore. On Saturday I hiked Mount Tamalpais with Ben, \
         and last weekend I painted the kitchen. My sister visits on Saturday. \
         My cat ate some grass this morning.",
    )
    .await;
    assert_eq!(
        stored,
        [
            "The user bought a new grinder, a Baratza Encore, on 2026-10-11.",
            "The user hiked Mount Tamalpais with Ben on 2026-10-10.",
            "The user painted the kitchen last weekend.",
            "The user's sister visits on Saturday.",
        ]
    );
    let report = done_reports(&h).await.join("; ");
    assert!(report.contains("3 dated"), "{report}");
    assert!(report.contains("1 rejected (not_the_user)"), "{report}");
}

/// Seen from the 1.5B memory LLM: "This weekend I stayed home and painted the kitchen blue."
/// became "The user is painting the kitchen blue.", an action the user had finished kept as
/// ongoing. It is stored in the tense the user told it; what the user told as ongoing stays so.
#[tokio::test]
async fn a_finished_action_is_stored_in_the_tense_the_user_told_it() {
    let h = harness_with(|c| c.memory.extraction_debounce = Duration::ZERO).await;
    h.mock.push(Reply::Text("Blue is a calm colour.".into()));
    h.mock.push_marked(
        "MEMPROXY-EXTRACT",
        facts(&[
            "The user is painting the kitchen blue.",
            "The user is learning Spanish.",
        ]),
    );
    let stored = extracted(
        &h,
        "tn",
        Some("2026-03-16T19:00:00Z"),
        "This weekend I stayed home and painted the kitchen blue. I am learning Spanish too.",
    )
    .await;
    assert_eq!(
        stored,
        [
            "The user is learning Spanish.",
            "The user painted the kitchen blue.",
        ]
    );
    let report = done_reports(&h).await.join("; ");
    assert!(report.contains("1 tense"), "{report}");
}

/// Seen from the 1.5B memory LLM in explicit mode's background save: a complaint and a question
/// ("The paint smell is awful. How long does it last?") read as a worry and a search. A claim of
/// interest or worry is stored only when the user said so in some such word.
#[tokio::test]
async fn an_interest_or_a_worry_the_user_never_voiced_is_not_stored() {
    let h = harness_with(|c| c.memory.extraction_debounce = Duration::ZERO).await;
    h.mock.push(Reply::Text("It fades in a day or two.".into()));
    h.mock.push_marked(
        "MEMPROXY-EXTRACT",
        facts(&[
            "The user is concerned about the smell of the paint.",
            "The user is looking for information about the paint smell.",
            "The user is worried about the baby's sleep.",
        ]),
    );
    let stored = extracted(
        &h,
        "iw",
        Some("2026-03-16T19:00:00Z"),
        "The paint smell is awful. I'm worried about the baby's sleep. How long does it last?",
    )
    .await;
    assert_eq!(stored, ["The user is worried about the baby's sleep."]);
    let report = done_reports(&h).await.join("; ");
    assert!(report.contains("2 rejected (ungrounded)"), "{report}");
}

/// Seen from the 1.5B memory LLM (the scenario suite, run H): one statement extracted twice,
/// as told and paraphrased into something vaguer. Only the fact as told is stored.
#[tokio::test]
async fn a_vaguer_paraphrase_beside_the_fact_as_told_is_not_stored() {
    let h = harness_with(|c| c.memory.extraction_debounce = Duration::ZERO).await;
    h.mock.push(Reply::Text("Field data will help.".into()));
    h.mock.push_marked(
        "MEMPROXY-EXTRACT",
        facts(&[
            "The user will take advantage of the extra time.",
            "The user will use the extra time for more field data.",
        ]),
    );
    let stored = extracted(
        &h,
        "vg",
        Some("2026-09-20T10:00:00Z"),
        "I will use the extra time for more field data.",
    )
    .await;
    assert_eq!(
        stored,
        ["The user will use the extra time for more field data."]
    );
    let report = done_reports(&h).await.join("; ");
    assert!(report.contains("1 rejected (vaguer)"), "{report}");
}
