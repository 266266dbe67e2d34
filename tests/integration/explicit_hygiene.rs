//! Explicit mode saving what matters, with scripted agents:
//! - core-memory hygiene: writes the way small models make them (a user fact in `persona`, a fact
//!   in the first person, a duplicate line or a rewording of one, manners, a question restated, a
//!   first write over the `human` placeholder) are refused
//!   with what to do instead, the agent retries, and the blocks end as they should;
//! - the background save of a fact the agent did not save, after the answer;
//! - past the eviction threshold, the pressure alert and the agent's save come before eviction.

use serde_json::{json, Value};

use crate::common::{get_json, harness_with, Harness};
use crate::explicit::{
    ask, call, model_requests, reply_of, say, send, statuses, steps, tool_results,
};
use memproxy::mock::Reply;

async fn block(h: &Harness, user: &str, label: &str) -> String {
    let blocks = get_json(
        h,
        &format!("/memproxy/v1/users/{user}/agents/default/blocks"),
    )
    .await;
    blocks["data"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|b| b["label"] == label)
        .and_then(|b| b["value"].as_str())
        .unwrap_or_default()
        .to_owned()
}

fn append(label: &str, content: &str) -> memproxy::mock::Reply {
    call(
        "core_memory_append",
        json!({"label": label, "content": content, "request_heartbeat": true}),
    )
}

/// The `message` of the newest tool result the model was shown.
fn last_result(h: &Harness) -> Value {
    let requests = model_requests(h);
    let last = requests.last().expect("a model request");
    tool_results(last).pop().expect("a tool result")
}

#[tokio::test]
async fn small_model_mistakes_are_refused_with_guidance_and_the_blocks_stay_clean() {
    let h = harness_with(|_| {}).await;

    // A user fact written to persona, in the first person: refused, pointing to human.
    h.mock
        .push(append("persona", "I have a severe peanut allergy."));
    h.mock.push(send("Noted."));
    say(&h, "di", "I have a severe peanut allergy.").await;
    let persona_before = block(&h, "di", "persona").await;
    assert!(persona_before.starts_with("I am a helpful assistant"));
    let result = last_result(&h);
    assert_eq!(result["status"], "Failed");
    let message = result["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("'human'")
            && message.contains("content=\"The user has a severe peanut allergy.\""),
        "{message}"
    );

    // The same fact in human, first person: refused with the third-person line; the retry with
    // that line replaces the placeholder.
    h.mock
        .push(append("human", "I have a severe peanut allergy."));
    h.mock
        .push(append("human", "The user has a severe peanut allergy."));
    h.mock.push(send("Got it."));
    say(&h, "di", "Remember my allergy, please.").await;
    assert_eq!(
        block(&h, "di", "human").await,
        "The user has a severe peanut allergy."
    );

    // A duplicate line: refused, the block unchanged.
    h.mock
        .push(append("human", "The user has a severe peanut allergy"));
    h.mock.push(send("I know."));
    say(&h, "di", "Did I tell you about my allergy?").await;
    let duplicate = last_result(&h);
    assert_eq!(duplicate["status"], "Failed");
    assert!(duplicate["message"]
        .as_str()
        .unwrap_or_default()
        .contains("already says this"));
    assert_eq!(
        block(&h, "di", "human").await,
        "The user has a severe peanut allergy."
    );
    // The whole persona appended to itself again: a duplicate too.
    h.mock.push(append("persona", &persona_before));
    h.mock.push(send("Fine."));
    say(&h, "di", "Who are you?").await;
    assert_eq!(block(&h, "di", "persona").await, persona_before);
}

/// What a small agent saves in place of facts, seen in real runs: manners, the user's question
/// restated, a rewording of a line the block has. Each is refused with what to do instead; the
/// agent's real fact in the same turn is kept.
#[tokio::test]
async fn manners_questions_and_rewordings_are_not_saved() {
    let h = harness_with(|_| {}).await;
    let started = memproxy::store::now_ms();
    h.mock.push(append(
        "human",
        "The user bought a new grinder, a Baratza Encore.",
    ));
    h.mock
        .push(append("human", "The user thanks the assistant."));
    h.mock.push(send("Enjoy it!"));
    say(
        &h,
        "fa",
        "Thanks! Yesterday I bought a new grinder, a Baratza Encore.",
    )
    .await;
    let thanks = last_result(&h);
    assert_eq!(thanks["status"], "Failed");
    assert!(thanks["message"]
        .as_str()
        .unwrap_or_default()
        .contains("manners"));

    h.mock.push(append(
        "human",
        "The user has a preference for a fine grind size.",
    ));
    h.mock
        .push(append("human", "The user bought a grinder from Baratza."));
    h.mock.push(send("Medium-coarse."));
    say(&h, "fa", "What grind size is best for a French press?").await;
    let requests = model_requests(&h);
    let mut results = tool_results(requests.last().expect("a model request"));
    // This turn's two results (the earlier turn's are still in view).
    let results = results.split_off(results.len().saturating_sub(2));
    let messages: Vec<&str> = results
        .iter()
        .map(|r| r["message"].as_str().unwrap_or_default())
        .collect();
    assert!(
        results.iter().all(|r| r["status"] == "Failed")
            && messages.iter().any(|m| m.contains("asked this"))
            && messages.iter().any(|m| m.contains("core_memory_replace")),
        "{messages:?}"
    );
    // "Yesterday" is written as the date it meant (the turn's clock is the wall clock here).
    let human = block(&h, "fa", "human").await;
    let yesterday = |ms: i64| memproxy::dates::ymd(ms - 86_400_000);
    let dated = |ms: i64| {
        format!(
            "The user bought a new grinder, a Baratza Encore on {}.",
            yesterday(ms)
        )
    };
    assert!(
        human == dated(started) || human == dated(memproxy::store::now_ms()),
        "{human}"
    );
}

#[tokio::test]
async fn a_fact_the_agent_did_not_save_is_saved_in_the_background_after_the_answer() {
    let h = harness_with(|c| c.explicit.background_save = true).await;
    // The memory LLM takes a while: the answer must not wait for it.
    let facts = json!({"facts": [
        {"text": "The user has a cat named Miso.", "kind": "fact"},
        {"text": "Cats are wonderful pets.", "kind": "fact"},
    ]});
    h.mock.push_marked(
        "MEMPROXY-EXTRACT",
        memproxy::mock::Reply::Stall(
            std::time::Duration::from_millis(1500),
            Box::new(memproxy::mock::Reply::Text(facts.to_string())),
        ),
    );
    h.mock.push(send("What a lovely name!"));
    say(&h, "el", "I have a cat named Miso.").await;
    // Answered while the background step still waits for the memory LLM.
    assert_eq!(block(&h, "el", "human").await, PLACEHOLDER);
    crate::common::eventually("the background save", || async {
        block(&h, "el", "human").await == "The user has a cat named Miso."
    })
    .await;
    // The general-knowledge "fact" was refused by the gates; the step is in the trace (written
    // after the block).
    let steps = "/memproxy/v1/agents/default/steps?user=el&turns=1";
    crate::common::eventually("the background save is traced", || async {
        get_json(&h, steps)
            .await
            .to_string()
            .contains("(background_save)")
    })
    .await;
    let trace = get_json(&h, steps).await;
    let save = trace["data"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|s| s["tool"] == "(background_save)")
        .cloned()
        .expect("traced");
    assert_eq!(save["status"], "ok");
    assert!(save["result"]
        .as_str()
        .unwrap_or_default()
        .starts_with("1 saved (human: The user has a cat named Miso.), 1 refused"));

    // A turn in which the agent saved something itself gets no background step.
    h.mock.push(append("human", "The user's cat Miso is two."));
    h.mock.push(send("Noted."));
    let extract_calls = h.mock.chat_requests(Some("MEMPROXY-EXTRACT")).len();
    say(&h, "el", "Miso turned two years old today.").await;
    // Then a turn that saves nothing: once its background step is traced, a step of the turn
    // before (spawned earlier) would have asked the memory LLM too. Exactly one call more.
    h.mock.push(send("Sounds fun."));
    h.mock
        .push_marked("MEMPROXY-EXTRACT", crate::common::facts(&[]));
    say(&h, "el", "We are going to the vet on Friday.").await;
    crate::common::eventually("the third turn's background save", || async {
        let trace = get_json(&h, "/memproxy/v1/agents/default/steps?user=el&turns=1").await;
        trace.to_string().contains("(background_save)")
    })
    .await;
    assert_eq!(
        h.mock.chat_requests(Some("MEMPROXY-EXTRACT")).len(),
        extract_calls + 1
    );
}

/// Seen with the real 1.5B model on the job-change dialogue: the agent answered the news without
/// saving it, the background save added the new job below the old one, and the agent went on
/// answering from the old line. The new job now takes the old line's place, which is kept as
/// history.
#[tokio::test]
async fn a_new_job_saved_in_the_background_takes_the_old_ones_place() {
    let h = harness_with(|c| c.explicit.background_save = true).await;
    let analyst = "The user works as a data analyst at Fabrikam.";
    h.mock.push(append("human", analyst));
    h.mock.push(send("Nice to meet you!"));
    say(
        &h,
        "jo",
        "I work as a data analyst at Fabrikam. Mostly SQL and dashboards.",
    )
    .await;
    assert_eq!(block(&h, "jo", "human").await, analyst);

    h.mock.push(send("Congrats on the new role at Contoso!"));
    h.mock.push_marked(
        "MEMPROXY-EXTRACT",
        crate::common::facts(&[
            "The user left Fabrikam.",
            "The user is now a machine learning engineer at Contoso.",
        ]),
    );
    say(
        &h,
        "jo",
        "Update: I left Fabrikam. I'm now a machine learning engineer at Contoso.",
    )
    .await;
    // The history line is dated with the day of the turn (the clock's: no time was sent).
    let current =
        "The user left Fabrikam.\nThe user is now a machine learning engineer at Contoso.\n";
    let history =
        "the user worked as a data analyst at Fabrikam; since then: the user left Fabrikam.";
    crate::common::eventually("the background save", || async {
        let human = block(&h, "jo", "human").await;
        human.strip_prefix(current).is_some_and(|last| {
            last.starts_with("Until 20") && last.ends_with(&format!(", {history}"))
        })
    })
    .await;
}

const PLACEHOLDER: &str = "Nothing is known about the user yet.";

#[tokio::test]
async fn past_the_eviction_threshold_the_agent_saves_first_and_eviction_waits() {
    // MemGPT's full tool set, archival memory included, at a small window.
    let h = harness_with(|c| {
        c.explicit.context_window_tokens = 3000;
        c.explicit.compact_below_tokens = 0;
    })
    .await;
    h.mock.push(send("Hello!"));
    say(&h, "fa", "The secret code is PAPAYA-42, keep it safe.").await;
    // One message that takes the prompt from well under the alert threshold (75%) straight past
    // the eviction threshold (90%), still inside the window.
    let filler = "apple ".repeat(FILLER_WORDS);
    h.mock.push(call(
        "archival_memory_insert",
        json!({"content": "The user's secret code is PAPAYA-42.", "request_heartbeat": true}),
    ));
    h.mock.push(send("Saved."));
    say(&h, "fa", &format!("Here is a long note. {filler}")).await;
    let requests = model_requests(&h);
    let alerted = requests.len() - 2;
    let payloads = crate::explicit::user_payloads(&requests[alerted]);
    assert!(
        payloads.iter().any(|p| p["type"] == "system_alert"),
        "the step before eviction carried the alert: {payloads:?}"
    );
    let trace: Vec<String> =
        crate::explicit::statuses(&crate::explicit::steps(&h, "fa", "default").await);
    let saved = trace.iter().position(|s| s == "archival_memory_insert:ok");
    let evicted = trace.iter().position(|s| s.starts_with("(evict)"));
    assert!(
        matches!((saved, evicted), (Some(s), Some(e)) if s < e),
        "saved, then evicted: {trace:?}"
    );
}

/// With the instructions and tool schemas, this many more words take a 3,000-token window from
/// under 75% to past 90% but under 100% (measured: 1,500..1,600 do; the old code evicted at once,
/// before any alert). If the instructions grow, recalibrate: fewer words only alert, more overflow.
const FILLER_WORDS: usize = 1550;

/// An agent that keeps rewriting its memory, each time asking to go on (seen with the 1.5B
/// model: eight `core_memory_replace` calls in a row until the steps ran out), is stopped after
/// three steps of writes: its reply is one plain request, with the memory it wrote.
#[tokio::test]
async fn an_agent_that_keeps_writing_memory_is_stopped_after_three_writes() {
    let h = harness_with(|_| {}).await;
    for line in [
        "The user is a machine learning engineer at Contoso.",
        "The user has a cat named Miso.",
        "The user lives in Porto.",
    ] {
        h.mock.push(call(
            "core_memory_append",
            json!({"label": "human", "content": line, "request_heartbeat": true}),
        ));
    }
    h.mock
        .push(Reply::Text("Congratulations on Contoso!".to_owned()));
    let response = ask(
        &h,
        "wu",
        "default",
        json!([{"role": "user", "content": "I'm now a machine learning engineer at Contoso, in Porto, with my cat Miso and green tea."}]),
    )
    .await;
    assert_eq!(response.status(), 200);
    let stop = response.headers()["x-memproxy-stop"].clone();
    let body: Value = response.json().await.expect("json");
    let answer = reply_of(&body);
    let trace = statuses(&steps(&h, "wu", "default").await);
    assert_eq!(stop, "plain_reply", "{trace:?}");
    assert_eq!(answer, "Congratulations on Contoso!");
    let requests = model_requests(&h);
    assert_eq!(
        requests.len(),
        4,
        "three steps of writes, then the plain reply"
    );
    assert!(requests[3].get("tools").is_none(), "{}", requests[3]);
    assert_eq!(
        trace,
        [
            "core_memory_append:ok",
            "core_memory_append:ok",
            "core_memory_append:ok",
            "(plain_reply):reply"
        ]
    );
}

/// A `core_memory_replace` of a job by a new one keeps the old job as history in `human` (the
/// agent replaced it outright on job-change, and "What was my job before?" had no answer left).
#[tokio::test]
async fn a_replaced_job_stays_in_human_as_history() {
    let h = harness_with(|_| {}).await;
    let analyst = "The user works as a data analyst at Fabrikam.";
    let engineer = "The user is now a machine learning engineer at Contoso.";
    h.mock.push(call(
        "core_memory_append",
        json!({"label": "human", "content": analyst}),
    ));
    h.mock.push(Reply::Text("Nice, Fabrikam!".to_owned()));
    let first = "I work as a data analyst at Fabrikam.";
    let response = ask(
        &h,
        "jo",
        "default",
        json!([{"role": "user", "content": first}]),
    )
    .await;
    assert_eq!(response.status(), 200);
    h.mock.push(call(
        "core_memory_replace",
        json!({"label": "human", "old_content": analyst, "new_content": engineer}),
    ));
    h.mock.push(Reply::Text("Congratulations!".to_owned()));
    let news = "I'm now a machine learning engineer at Contoso.";
    let response = h
        .client
        .post(h.url("/explicit/v1/chat/completions"))
        .header("x-memproxy-user", "jo")
        .header("x-memproxy-time", "2026-09-20T10:00:00Z")
        .json(&json!({"model": "mock-model", "messages": [
            {"role": "user", "content": first},
            {"role": "assistant", "content": "Nice, Fabrikam!"},
            {"role": "user", "content": news}
        ]}))
        .send()
        .await
        .expect("answer");
    assert_eq!(response.status(), 200);
    // Told in the past, dated with the turn's day, with what holds since.
    let history = "Until 2026-09-20, the user worked as a data analyst at Fabrikam; since then: the user is now a machine learning engineer at Contoso.";
    assert_eq!(
        block(&h, "jo", "human").await,
        format!("{engineer}\n{history}")
    );

    // The agent reads the history only when asked about the past: beside the new job, the
    // 1.5B model answered with the old one.
    for (question, shown) in [
        ("Which company do I work for?", false),
        ("What was my job before my current one?", true),
    ] {
        h.mock.push(send("Answered."));
        say(&h, "jo", question).await;
        let request = model_requests(&h)
            .into_iter()
            .rev()
            .find(|r| r.to_string().contains(question))
            .expect("the question's request");
        let memory = crate::explicit::memory_message(&request);
        assert!(memory.contains(engineer), "{memory}");
        assert_eq!(memory.contains(history), shown, "{question}: {memory}");
    }
    // What is stored is whole.
    assert!(block(&h, "jo", "human").await.ends_with(history));
}

/// A turn in which the user only asks (every clause ends in a question mark) gets no background
/// save: the gates refuse a fact whose source is a question, and on a one-slot local server the
/// save's prompt would evict the agent's. A turn that states something before asking gets one.
#[tokio::test]
async fn a_turn_that_only_asks_gets_no_background_save() {
    let h = harness_with(|c| c.explicit.background_save = true).await;
    h.mock.push(send("I don't know yet."));
    say(
        &h,
        "qa",
        "When is my thesis due? And where do I hand it in?",
    )
    .await;
    h.mock.push(send("Congratulations!"));
    h.mock
        .push_marked("MEMPROXY-EXTRACT", crate::common::facts(&[]));
    say(
        &h,
        "qa",
        "Good news, my deadline moved to November 30. Can you keep that in mind?",
    )
    .await;
    // Shutting down drains the work both turns set off.
    let Harness { mock, proxy, .. } = h;
    proxy.shutdown().await;
    assert_eq!(
        mock.chat_requests(Some("MEMPROXY-EXTRACT")).len(),
        1,
        "only the turn that stated something"
    );
}

/// The background save reads the user's earlier messages for names, as implicit mode does: a
/// name told in an earlier turn makes the sentence it opens that person's.
#[tokio::test]
async fn the_background_save_keeps_a_person_named_in_an_earlier_turn_apart_from_the_user() {
    let h = harness_with(|c| c.explicit.background_save = true).await;
    let extract = |facts: &[&str]| {
        let facts: Vec<Value> = facts
            .iter()
            .map(|f| json!({"text": f, "kind": "fact"}))
            .collect();
        memproxy::mock::Reply::Text(json!({ "facts": facts }).to_string())
    };
    h.mock.push_marked(
        "MEMPROXY-EXTRACT",
        extract(&["The user has been learning the piano for two years."]),
    );
    h.mock.push(send("Two years is a good start."));
    say(&h, "pianist", "My piano teacher Halina retired from the conservatory last year. I've been learning the piano for two years.").await;
    crate::common::eventually("the first background save", || async {
        block(&h, "pianist", "human").await == "The user has been learning the piano for two years."
    })
    .await;
    h.mock.push_marked(
        "MEMPROXY-EXTRACT",
        extract(&[
            "The user switched their lessons to Friday mornings.",
            "The user practises scales every evening.",
        ]),
    );
    h.mock.push(send("Friday mornings sound calm."));
    say(
        &h,
        "pianist",
        "Small news: Halina switched our lessons to Friday mornings. I practise scales every evening.",
    )
    .await;
    crate::common::eventually("the second background save", || async {
        block(&h, "pianist", "human").await.contains("scales")
    })
    .await;
    let human = block(&h, "pianist", "human").await;
    assert!(!human.contains("switched"), "{human}");
    // The step is traced after the block is written.
    let steps = "/memproxy/v1/agents/default/steps?user=pianist&turns=1";
    crate::common::eventually("the save is traced", || async {
        get_json(&h, steps)
            .await
            .to_string()
            .contains("1 saved (human: The user practises scales every evening.), 1 refused")
    })
    .await;
}

/// The agent's own `core_memory_append` reads the user's earlier messages for names too: a name
/// told in an earlier turn ("my piano teacher Halina") makes the sentence it opens that person's,
/// so the agent's "The user switched their lessons" is refused, with what to write instead; the
/// user's own fact of the same turn is kept.
#[tokio::test]
async fn the_agents_own_write_keeps_a_person_named_in_an_earlier_turn_apart_from_the_user() {
    let h = harness_with(|_| {}).await;
    h.mock.push(append(
        "human",
        "The user has been learning the piano for two years.",
    ));
    h.mock.push(send("Two years is a good start."));
    say(&h, "pianist", "My piano teacher Halina retired from the conservatory last year. I've been learning the piano for two years.").await;
    h.mock.push(append(
        "human",
        "The user switched their lessons to Friday mornings.",
    ));
    h.mock
        .push(append("human", "The user practises scales every evening."));
    h.mock.push(send("Friday mornings sound calm."));
    say(
        &h,
        "pianist",
        "Small news: Halina switched our lessons to Friday mornings. I practise scales every evening.",
    )
    .await;
    let refused = model_requests(&h)
        .iter()
        .flat_map(tool_results)
        .find(|r| r["status"] == "Failed")
        .expect("a refused write");
    let message = refused["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("said this about Halina") && message.contains("starting \"Halina\""),
        "{message}"
    );
    assert_eq!(
        block(&h, "pianist", "human").await,
        "The user has been learning the piano for two years.\nThe user practises scales every evening."
    );
}
