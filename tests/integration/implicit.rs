//! Implicit mode end to end: what the chat model sees, what the post-processor learns, and how
//! both fail safely. The scripted upstream answers the memory LLM calls (recognised by the marker
//! in their prompts) and records everything, so the tests read what the model actually got.

use std::time::Duration;

use futures_util::StreamExt;
use memproxy::mock::Reply;
use serde_json::json;

use crate::common::{
    eventually, get_json, harness_with, implicit_chat as implicit, memories, restart, Harness,
};

/// What the chat model (not the memory LLM) saw in its last request.
fn last_prompt(h: &Harness) -> String {
    let requests = h.mock.chat_requests(None);
    requests.last().expect("a chat request").to_string()
}

async fn fast_harness() -> Harness {
    harness_with(|c| {
        c.memory.extraction_debounce = Duration::ZERO;
        c.memory.summary_min_turns = 2;
    })
    .await
}

#[tokio::test]
async fn a_fact_from_one_chat_is_remembered_in_the_next_and_only_for_that_user() {
    let h = fast_harness().await;
    let first = implicit(
        &h,
        "alice",
        json!([{"role": "user", "content": "My dog is called Rex."}]),
    )
    .await;
    assert_eq!(first.status(), 200);
    assert_eq!(first.headers()["x-memproxy-mode"], "implicit");
    eventually("the fact is extracted", || async {
        memories(&h, "alice")
            .await
            .iter()
            .any(|m| m.contains("Rex"))
    })
    .await;

    let second = implicit(
        &h,
        "alice",
        json!([
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "What is my dog's name?"},
        ]),
    )
    .await;
    assert!(
        second.headers()["x-memproxy-memories"]
            .to_str()
            .expect("ascii")
            .parse::<usize>()
            .expect("count")
            >= 1
    );
    let seen = last_prompt(&h);
    assert!(
        seen.contains("<memory>") && seen.contains("Rex"),
        "the model was not told: {seen}"
    );
    assert!(
        seen.contains("You are a helpful assistant."),
        "the client's system prompt is kept"
    );

    implicit(
        &h,
        "bob",
        json!([{"role": "user", "content": "What is my dog's name?"}]),
    )
    .await;
    let seen = last_prompt(&h);
    assert!(!seen.contains("Rex"), "bob was told alice's memory: {seen}");

    // The memory block never feeds back into extraction.
    eventually("all three chats are extracted", || async {
        h.mock.chat_requests(Some("MEMPROXY-EXTRACT")).len() >= 3
    })
    .await;
    for extraction in h.mock.chat_requests(Some("MEMPROXY-EXTRACT")) {
        let material = extraction["messages"][1]["content"]
            .as_str()
            .unwrap_or_default();
        assert!(
            !material.contains("<memory>"),
            "the injected block reached the extractor: {material}"
        );
        assert!(
            !material.contains("You are a helpful assistant."),
            "the client's system prompt reached the extractor"
        );
    }
}

#[tokio::test]
async fn resent_history_is_stored_once() {
    let h = fast_harness().await;
    let turn1 = json!([{"role": "user", "content": "Hi, I'm planning a trip to Japan."}]);
    implicit(&h, "carol", turn1).await;
    let history = json!([
        {"role": "user", "content": "Hi, I'm planning a trip to Japan."},
        {"role": "assistant", "content": "echo: Hi, I'm planning a trip to Japan."},
        {"role": "user", "content": "Which cities should I visit?"},
    ]);
    implicit(&h, "carol", history.clone()).await;
    implicit(&h, "carol", history).await; // a retry of the same request
    let conversations = get_json(&h, "/memproxy/v1/users/carol/conversations").await;
    let id = conversations["data"][0]["id"]
        .as_str()
        .expect("conversation")
        .to_owned();
    eventually("both replies stored", || async {
        let messages = get_json(
            &h,
            &format!("/memproxy/v1/users/carol/conversations/{id}/messages"),
        )
        .await;
        messages["data"].as_array().map(Vec::len) == Some(4)
    })
    .await;
    let messages = get_json(
        &h,
        &format!("/memproxy/v1/users/carol/conversations/{id}/messages"),
    )
    .await;
    let contents: Vec<&str> = messages["data"]
        .as_array()
        .expect("list")
        .iter()
        .filter_map(|m| m["content"].as_str())
        .collect();
    assert_eq!(
        contents,
        [
            "Hi, I'm planning a trip to Japan.",
            "echo: Hi, I'm planning a trip to Japan.",
            "Which cities should I visit?",
            "echo: Which cities should I visit?",
        ]
    );
}

#[tokio::test]
async fn update_and_invalidate_change_what_is_injected() {
    let h = fast_harness().await;
    h.mock.push_marked(
        "MEMPROXY-EXTRACT",
        Reply::Text(r#"{"facts": [{"text": "Dana lives in Paris."}]}"#.into()),
    );
    implicit(
        &h,
        "dana",
        json!([{"role": "user", "content": "I live in Paris."}]),
    )
    .await;
    eventually("Paris stored", || async {
        memories(&h, "dana").await == ["Dana lives in Paris."]
    })
    .await;

    h.mock.push_marked(
        "MEMPROXY-EXTRACT",
        Reply::Text("```json\n{\"facts\": [\"Dana moved to Berlin.\"]}\n```".into()),
    );
    h.mock.push_marked(
        "MEMPROXY-RECONCILE",
        Reply::Text(r#"{"decisions": [{"fact": 0, "action": "INVALIDATE", "memory": 0}]}"#.into()),
    );
    implicit(
        &h,
        "dana",
        json!([{"role": "user", "content": "Big news: I moved to Berlin!"}]),
    )
    .await;
    eventually("Berlin replaces Paris", || async {
        memories(&h, "dana").await == ["Dana moved to Berlin."]
    })
    .await;
    let all = get_json(&h, "/memproxy/v1/users/dana/memories?include_invalid=true").await;
    assert_eq!(
        all["data"].as_array().map(Vec::len),
        Some(2),
        "Paris is kept as history"
    );
    let reconcile = h.mock.chat_requests(Some("MEMPROXY-RECONCILE"));
    let material = reconcile[0]["messages"][1]["content"]
        .as_str()
        .unwrap_or_default();
    assert!(
        material.contains("M0")
            && material.contains("Dana lives in Paris.")
            && !material.contains("\"id\""),
        "{material}"
    );

    h.mock.push_marked(
        "MEMPROXY-EXTRACT",
        Reply::Text(
            r#"{"facts": [{"text": "Dana works near the Spree river in Berlin."}]}"#.into(),
        ),
    );
    h.mock.push_marked("MEMPROXY-RECONCILE", Reply::Text(r#"{"decisions": [{"fact": 0, "action": "UPDATE", "memory": 0, "text": "Dana moved to Berlin and works near the Spree."}]}"#.into()));
    implicit(
        &h,
        "dana",
        json!([{"role": "user", "content": "My office is by the Spree."}]),
    )
    .await;
    eventually("the update lands", || async {
        memories(&h, "dana").await == ["Dana moved to Berlin and works near the Spree."]
    })
    .await;

    implicit(
        &h,
        "dana",
        json!([{"role": "user", "content": "Where do I live, Berlin or Paris?"}]),
    )
    .await;
    let seen = last_prompt(&h);
    assert!(
        seen.contains("Dana moved to Berlin and works near the Spree."),
        "{seen}"
    );
    assert!(
        !seen.contains("Dana lives in Paris."),
        "an invalidated memory was injected: {seen}"
    );
    let events = get_json(&h, "/memproxy/v1/users/dana/events").await;
    assert!(
        events["data"]
            .as_array()
            .expect("events")
            .iter()
            .all(|e| e["cause"].as_str().is_some_and(|c| c.starts_with("job "))),
        "every change names its job"
    );
}

#[tokio::test]
async fn a_malformed_memory_llm_answer_fails_the_job_visibly_and_changes_nothing() {
    let h = harness_with(|c| {
        c.memory.extraction_debounce = Duration::ZERO;
        c.memory.job_attempts = 1;
    })
    .await;
    h.mock.push_marked(
        "MEMPROXY-EXTRACT",
        Reply::Text("I think the user likes cats, probably.".into()),
    );
    let response = implicit(
        &h,
        "erin",
        json!([{"role": "user", "content": "I like cats."}]),
    )
    .await;
    assert_eq!(response.status(), 200, "the chat answer is unaffected");
    eventually("the job is marked failed", || async {
        let jobs = get_json(&h, "/memproxy/v1/jobs?state=failed").await;
        jobs["data"].as_array().is_some_and(|j| {
            j.len() == 1
                && j[0]["last_error"]
                    .as_str()
                    .is_some_and(|e| e.contains("JSON"))
        })
    })
    .await;
    assert!(memories(&h, "erin").await.is_empty());
    let metrics = h
        .client
        .get(h.url("/metrics"))
        .send()
        .await
        .expect("answer")
        .text()
        .await
        .expect("text");
    assert!(
        metrics.contains(r#"memproxy_memory_jobs_total{kind="extract",outcome="failed"} 1"#),
        "{metrics}"
    );
    // Every attempt's running time is observed, the failed ones too.
    assert!(
        metrics.contains(r#"memproxy_memory_job_seconds_count{kind="extract"}"#),
        "{metrics}"
    );
}

#[tokio::test]
async fn window_and_summary_compact_long_histories() {
    let h = harness_with(|c| {
        c.memory.history_budget_tokens = 60;
        c.memory.extraction_debounce = Duration::ZERO;
        c.memory.summary_min_turns = 2;
    })
    .await;
    let mut history = vec![json!({"role": "system", "content": "Be brief."})];
    for i in 0..8 {
        history.push(json!({"role": "user", "content": format!("Question {i}: tell me something about topic number {i} please.")}));
        history.push(json!({"role": "assistant", "content": format!("Answer {i}: here is a fact about topic number {i}.")}));
    }
    history.push(json!({"role": "user", "content": "And the last question?"}));
    let response = h
        .client
        .post(h.url("/window/v1/chat/completions"))
        .json(&json!({"model": "m", "messages": history}))
        .send()
        .await
        .expect("answer");
    let before: usize = response.headers()["x-memproxy-prompt-tokens-before"]
        .to_str()
        .expect("ascii")
        .parse()
        .expect("n");
    let after: usize = response.headers()["x-memproxy-prompt-tokens-after"]
        .to_str()
        .expect("ascii")
        .parse()
        .expect("n");
    assert!(after < before / 2, "{after} vs {before}");
    let sent = h.mock.chat_requests(None).pop().expect("request");
    let sent_messages = sent["messages"].as_array().expect("messages");
    assert_eq!(sent_messages[0]["content"], "Be brief.");
    assert_eq!(
        sent_messages.last().expect("last")["content"],
        "And the last question?"
    );
    assert!(sent_messages.len() < 8, "{sent_messages:?}");

    // summary mode: the post-processor writes the summary, the next request carries it.
    let summary_request = |h: &Harness| {
        h.client
            .post(h.url("/summary/v1/chat/completions"))
            .header("x-memproxy-user", "fay")
            .json(&json!({"model": "m", "messages": history}))
            .send()
    };
    summary_request(&h).await.expect("answer");
    eventually("a summary is written", || async {
        !h.mock.chat_requests(Some("MEMPROXY-SUMMARIZE")).is_empty()
    })
    .await;
    eventually("the summary is injected", || async {
        summary_request(&h).await.expect("answer");
        last_prompt(&h).contains("Earlier in this conversation (summary)")
    })
    .await;
    assert!(
        h.mock.chat_requests(Some("MEMPROXY-EXTRACT")).is_empty(),
        "summary mode extracts no facts"
    );
}

#[tokio::test]
async fn a_broken_memory_layer_forwards_the_request_unmodified() {
    let h = harness_with(|c| c.embedding.url = "http://127.0.0.1:9/v1".to_owned()).await;
    let body = json!({"model": "m", "messages": [{"role": "user", "content": "hello"}]});
    let response = h
        .client
        .post(h.url("/implicit/v1/chat/completions"))
        .json(&body)
        .send()
        .await
        .expect("answer");
    assert_eq!(response.status(), 200);
    let reason = response.headers()["x-memproxy-degraded"]
        .to_str()
        .expect("ascii")
        .to_owned();
    assert!(reason.contains("embeddings endpoint"), "{reason}");
    assert_eq!(
        h.mock.chat_requests(None).pop().expect("request"),
        body,
        "forwarded as the client sent it"
    );

    // An embeddings endpoint that accepts and never answers: the pre-processor cannot finish, so
    // the timeout fires whatever the machine's load (a 1 µs timeout raced a fast pre-processor).
    let black_hole = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let silent = format!("http://{}/v1", black_hole.local_addr().expect("addr"));
    let slow = harness_with(|c| {
        c.embedding.url = silent;
        c.memory.preprocess_timeout = Duration::from_millis(300);
    })
    .await;
    let response = slow
        .client
        .post(slow.url("/implicit/v1/chat/completions"))
        .json(&body)
        .send()
        .await
        .expect("answer");
    assert_eq!(response.status(), 200);
    assert!(response.headers()["x-memproxy-degraded"]
        .to_str()
        .expect("ascii")
        .starts_with("timeout"));
}

#[tokio::test]
async fn a_disconnect_mid_stream_still_stores_what_was_generated() {
    let h = fast_harness().await;
    let pieces: Vec<String> = (0..100).map(|i| format!("part{i} ")).collect();
    h.mock.push(Reply::SlowStream {
        pieces,
        delay: Duration::from_millis(30),
    });
    let response = h
        .client
        .post(h.url("/implicit/v1/chat/completions"))
        .header("x-memproxy-user", "gus")
        .header("x-memproxy-conversation", "story")
        .json(&json!({"model": "m", "stream": true, "messages": [{"role": "user", "content": "Tell me a long story."}]}))
        .send()
        .await
        .expect("answer");
    let mut body = response.bytes_stream();
    let mut seen = String::new();
    while !seen.contains("part3 ") {
        seen.push_str(&String::from_utf8_lossy(
            &body.next().await.expect("more").expect("chunk"),
        ));
    }
    drop(body);
    eventually("the partial reply is stored", || async {
        let messages = get_json(&h, "/memproxy/v1/users/gus/conversations/story/messages").await;
        messages["data"].as_array().is_some_and(|m| {
            m.len() == 2
                && m[1]["content"]
                    .as_str()
                    .is_some_and(|c| c.starts_with("part0 part1 part2 part3"))
        })
    })
    .await;
}

#[tokio::test]
async fn queued_jobs_survive_a_restart() {
    let h = harness_with(|c| c.memory.extraction_debounce = Duration::from_millis(1500)).await;
    implicit(
        &h,
        "hal",
        json!([{"role": "user", "content": "I am learning the cello."}]),
    )
    .await;
    // Give the hook time to store the reply and queue the (debounced) job, then stop at once.
    eventually("the job is queued", || async {
        let jobs = get_json(&h, "/memproxy/v1/jobs?state=queued").await;
        jobs["data"].as_array().is_some_and(|j| !j.is_empty())
    })
    .await;
    assert!(memories(&h, "hal").await.is_empty());
    let h = restart(h).await;
    eventually("the restarted proxy runs the queued job", || async {
        memories(&h, "hal")
            .await
            .iter()
            .any(|m| m.contains("cello"))
    })
    .await;
}

#[tokio::test]
async fn an_unrecorded_request_uses_memory_but_leaves_none() {
    let h = fast_harness().await;
    implicit(
        &h,
        "ivy",
        json!([{"role": "user", "content": "My favourite tea is oolong."}]),
    )
    .await;
    eventually("the fact is extracted", || async {
        memories(&h, "ivy")
            .await
            .iter()
            .any(|m| m.contains("oolong"))
    })
    .await;
    let response = h
        .client
        .post(h.url("/implicit/v1/chat/completions"))
        .header("x-memproxy-user", "ivy")
        .header("x-memproxy-record", "false")
        .json(&json!({"model": "m", "messages": [{"role": "user", "content": "Which tea do I like? I secretly also love matcha."}]}))
        .send()
        .await
        .expect("answer");
    assert_eq!(response.status(), 200);
    assert!(last_prompt(&h).contains("oolong"), "memory is still used");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        memories(&h, "ivy")
            .await
            .iter()
            .all(|m| !m.contains("matcha")),
        "nothing of it was learned"
    );
    let conversations = get_json(&h, "/memproxy/v1/users/ivy/conversations").await;
    assert_eq!(
        conversations["data"].as_array().map(Vec::len),
        Some(1),
        "the unrecorded chat was not stored"
    );
    let bad = h
        .client
        .post(h.url("/implicit/v1/chat/completions"))
        .header("x-memproxy-record", "maybe")
        .json(&json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .expect("answer");
    assert_eq!(bad.status(), 400);
}

#[tokio::test]
async fn an_update_that_would_duplicate_another_memory_retires_the_old_one() {
    let h = fast_harness().await;
    let added = h
        .client
        .post(h.url("/memproxy/v1/users/ana/memories"))
        .json(&json!({"text": "Ana lives in Lisbon."}))
        .send()
        .await
        .expect("add");
    assert_eq!(added.status(), 201);
    // One job adds the new fact, then (as small models do) also rewrites the old memory into
    // that very text: the old memory is superseded, the job does not fail.
    h.mock.push_marked(
        "MEMPROXY-EXTRACT",
        Reply::Text(
            r#"{"facts": [{"text": "Ana lives in Porto."}, {"text": "Ana moved to Porto."}]}"#
                .into(),
        ),
    );
    h.mock.push_marked("MEMPROXY-RECONCILE", Reply::Text(r#"{"decisions": [{"fact": 0, "action": "ADD"}, {"fact": 1, "action": "UPDATE", "memory": 0, "text": "Ana lives in Porto."}]}"#.into()));
    implicit(
        &h,
        "ana",
        json!([{"role": "user", "content": "I moved from Lisbon to Porto."}]),
    )
    .await;
    eventually("Porto replaces Lisbon", || async {
        memories(&h, "ana").await == ["Ana lives in Porto."]
    })
    .await;
    // A job's memories are visible before its own state is written (a later transaction).
    eventually("the one job is done", || async {
        let jobs = get_json(&h, "/memproxy/v1/jobs").await;
        let states: Vec<String> = jobs["data"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|j| j["state"].as_str().map(str::to_owned))
            .collect();
        states == ["done"]
    })
    .await;
    let all = get_json(&h, "/memproxy/v1/users/ana/memories?include_invalid=true").await;
    let lisbon = all["data"]
        .as_array()
        .expect("memories")
        .iter()
        .find(|m| m["text"] == "Ana lives in Lisbon.")
        .expect("kept as history");
    assert!(lisbon["valid_until_ms"].is_i64(), "{lisbon}");
}
