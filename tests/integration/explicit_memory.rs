//! Explicit mode, the memory: archival paging, recall search over evicted messages, overflow
//! (pressure alert, eviction with a recursive summary, retry after an upstream context error),
//! isolation between users and agents, and the management API.

use memproxy::mock::Reply;
use serde_json::{json, Value};

use crate::common::{get_json, harness_with};
use crate::explicit::{
    ask, call, model_requests, reply_of, say, send, steps, system_of, tool_results, user_payloads,
};

fn tools_named(request: &Value) -> Vec<String> {
    request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| m["role"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// Every tool result follows the assistant message that made its call, in every request.
fn assert_tool_pairs_intact(requests: &[Value]) {
    for request in requests {
        let messages = request["messages"].as_array().expect("messages");
        assert_ne!(messages.get(1).map(|m| &m["role"]), Some(&json!("tool")));
        for (index, message) in messages.iter().enumerate() {
            if message["role"] != "tool" {
                continue;
            }
            let id = &message["tool_call_id"];
            let made = messages[..index].iter().any(|m| {
                m["tool_calls"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|c| &c["id"] == id)
            });
            assert!(
                made,
                "tool result {id} without its call in {:?}",
                tools_named(request)
            );
        }
    }
}

#[tokio::test]
async fn archival_insert_then_paged_search_in_a_later_turn() {
    let h = harness_with(|_| {}).await;
    let inserts: Vec<(String, String)> = (1..=7)
        .map(|n| {
            let args = json!({"content": format!("Boat trip number {n} went to island {n}."), "request_heartbeat": n == 7});
            ("archival_memory_insert".to_owned(), args.to_string())
        })
        .collect();
    h.mock.push(Reply::ToolCalls(inserts));
    h.mock.push(send("Saved all seven trips."));
    say(&h, "ka", "Here are my seven boat trips.").await;

    h.mock.push(call(
        "archival_memory_search",
        json!({"query": "boat trip", "request_heartbeat": true}),
    ));
    h.mock.push(call(
        "archival_memory_search",
        json!({"query": "boat trip", "page": "1", "request_heartbeat": true}),
    ));
    h.mock.push(send("You took seven boat trips."));
    say(&h, "ka", "How many boat trips did I take?").await;
    let requests = model_requests(&h);
    let first = tool_results(&requests[3]).pop().expect("page 0");
    let text = first["message"].as_str().expect("text");
    assert!(
        text.starts_with("Showing 5 of 7 results (page 0/1)"),
        "{text}"
    );
    let second = tool_results(&requests[4]).pop().expect("page 1");
    let text = second["message"].as_str().expect("text");
    assert!(
        text.starts_with("Showing 2 of 7 results (page 1/1)"),
        "{text}"
    );
    assert_eq!(text.matches("Boat trip number").count(), 2);
    // The system message counts the archive once it is rebuilt; the API lists it.
    let archive = get_json(&h, "/memproxy/v1/users/ka/agents/default/archival").await;
    assert_eq!(archive["data"].as_array().expect("list").len(), 7);
}

#[tokio::test]
async fn overflow_alerts_then_evicts_into_a_summary_and_recall_still_finds_it() {
    let h = harness_with(|c| c.explicit.context_window_tokens = 3000).await;
    // Each turn adds less than the gap between the alert (75%) and eviction (90%) thresholds.
    let filler = "apple ".repeat(250);
    let mut turns = 0;
    let mut evicted = false;
    while !evicted && turns < 20 {
        let text = if turns == 0 {
            format!("The secret code is PAPAYA-42. {filler}")
        } else {
            format!("Turn {turns}. {filler}")
        };
        h.mock.push(send(&format!("Noted turn {turns}.")));
        say(&h, "la", &text).await;
        turns += 1;
        evicted = steps(&h, "la", "default")
            .await
            .iter()
            .any(|s| s["tool"] == "(evict)");
    }
    assert!(evicted, "eviction happened within {turns} turns");
    let requests = model_requests(&h);
    assert!(
        requests
            .iter()
            .any(|r| user_payloads(r).iter().any(|p| p["type"] == "system_alert")),
        "a memory-pressure alert came before eviction"
    );
    let summarized = h.mock.chat_requests(Some("MEMPROXY-SUMMARIZE"));
    assert!(
        !summarized.is_empty(),
        "the memory LLM summarised the evicted messages"
    );
    let last = requests.last().expect("request");
    assert!(last["messages"][1]["content"]
        .as_str()
        .expect("summary")
        .starts_with("[Summary of earlier messages"));
    let still_in_view = user_payloads(last).iter().any(|p| {
        p["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("The secret code"))
    });
    assert!(!still_in_view, "the first message left the window");
    let asked = format!("Turn {}.", turns - 1);
    assert!(
        user_payloads(last)
            .iter()
            .any(|p| p["message"].as_str().is_some_and(|m| m.starts_with(&asked))),
        "the question of the evicting turn itself stays in view"
    );
    assert_tool_pairs_intact(&requests);
    let agent = get_json(&h, "/memproxy/v1/users/la/agents/default").await;
    assert!(agent["counts"]["messages"].as_i64() > agent["counts"]["in_context"].as_i64());
    assert!(agent["summary"]["text"]
        .as_str()
        .is_some_and(|t| !t.is_empty()));

    // The evicted message is still found by conversation_search.
    h.mock.push(call(
        "conversation_search",
        json!({"query": "PAPAYA-42 secret code", "request_heartbeat": true}),
    ));
    h.mock.push(send("Your code is PAPAYA-42."));
    let body = say(&h, "la", "What was my secret code?").await;
    assert_eq!(reply_of(&body), "Your code is PAPAYA-42.");
    let found = tool_results(&model_requests(&h).pop().expect("request"))
        .pop()
        .expect("result");
    let text = found["message"].as_str().expect("text");
    assert!(
        text.contains("user: The secret code is PAPAYA-42."),
        "{}",
        &text[..text.len().min(300)]
    );
}

#[tokio::test]
async fn an_upstream_context_error_evicts_and_the_step_is_retried() {
    let h = harness_with(|_| {}).await;
    for n in 0..3 {
        h.mock.push(send(&format!("Reply {n}.")));
        say(&h, "ma", &format!("Message number {n} about gardening.")).await;
    }
    h.mock.push(Reply::Error {
        status: 400,
        message: "This model's maximum context length is 4096 tokens. However, your messages resulted in 9000 tokens.".to_owned(),
        headers: vec![],
    });
    h.mock.push(send("Recovered."));
    let response = ask(
        &h,
        "ma",
        "default",
        json!([{"role": "user", "content": "Still there?"}]),
    )
    .await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        reply_of(&response.json().await.expect("json")),
        "Recovered."
    );
    let trace: Vec<String> = steps(&h, "ma", "default")
        .await
        .iter()
        .map(|s| {
            format!(
                "{}:{}",
                s["tool"].as_str().unwrap_or(""),
                s["status"].as_str().unwrap_or("")
            )
        })
        .collect();
    assert_eq!(
        trace,
        [
            "(context_overflow):retry",
            "(evict):ok",
            "send_message:reply"
        ]
    );
    let retried = model_requests(&h).pop().expect("request");
    assert!(retried["messages"][1]["content"]
        .as_str()
        .expect("summary")
        .starts_with("[Summary"));
    assert_tool_pairs_intact(&model_requests(&h));
    let summary = get_json(&h, "/memproxy/v1/users/ma/agents/default/summary").await;
    assert!(summary["through_position"].as_i64().expect("position") >= 0);
}

#[tokio::test]
async fn users_and_agents_are_isolated() {
    let h = harness_with(|_| {}).await;
    h.mock.push(Reply::ToolCalls(vec![
        (
            "core_memory_append".to_owned(),
            json!({"label": "human", "content": "Name: Nia."}).to_string(),
        ),
        (
            "archival_memory_insert".to_owned(),
            json!({"content": "Nia keeps a red kayak.", "request_heartbeat": true}).to_string(),
        ),
    ]));
    h.mock.push(send("Got it, Nia."));
    say(&h, "nia", "I'm Nia and I keep a red kayak.").await;

    // Another user, and another agent of the same user, see none of it, although each has a
    // log and an archive of its own to search.
    for (user, agent) in [("omar", "default"), ("nia", "work")] {
        h.mock.push(call(
            "archival_memory_insert",
            json!({"content": "Likes trains.", "request_heartbeat": true}),
        ));
        h.mock.push(send("Trains, noted."));
        let response = ask(
            &h,
            user,
            agent,
            json!([{"role": "user", "content": "I like trains."}]),
        )
        .await;
        assert_eq!(response.status(), 200);
        h.mock.push(call(
            "archival_memory_search",
            json!({"query": "red kayak", "request_heartbeat": true}),
        ));
        h.mock.push(call(
            "conversation_search",
            json!({"query": "kayak Nia", "request_heartbeat": true}),
        ));
        h.mock.push(send("I know nothing about that."));
        let response = ask(
            &h,
            user,
            agent,
            json!([{"role": "user", "content": "What do I keep?"}]),
        )
        .await;
        assert_eq!(response.status(), 200);
        let requests = model_requests(&h);
        let last = requests.last().expect("request");
        assert!(
            !system_of(last).contains("Nia"),
            "{user}/{agent} sees no core memory of nia/default"
        );
        let results = tool_results(last);
        for result in &results[results.len() - 2..] {
            let text = result["message"].as_str().expect("text");
            assert!(
                text.starts_with("No results found.") || text.starts_with("Showing"),
                "{text}"
            );
            assert!(
                !text.contains("kayak") && !text.contains("Nia"),
                "{user}/{agent}: {text}"
            );
        }
    }
    let work = get_json(&h, "/memproxy/v1/users/nia/agents").await;
    let names: Vec<&str> = work["data"]
        .as_array()
        .expect("agents")
        .iter()
        .filter_map(|a| a["name"].as_str())
        .collect();
    assert_eq!(names, ["default", "work"]);
}

#[tokio::test]
async fn the_management_api_inspects_edits_and_resets_an_agent() {
    let h = harness_with(|_| {}).await;
    h.mock.push(send("Hello!"));
    say(&h, "pia", "Hi there.").await;
    let base = "/memproxy/v1/users/pia/agents/default";

    let agent = get_json(&h, base).await;
    assert_eq!(
        agent["counts"]["messages"], 3,
        "user message, call, result: {agent}"
    );
    assert!(agent["system_message"]
        .as_str()
        .expect("compiled")
        .contains("<persona"));

    // Edit a block: the next turn's system message is rebuilt with it.
    let edited = h
        .client
        .put(h.url(&format!("{base}/blocks/human")))
        .json(&json!({"value": "Name: Pia. Vegetarian."}))
        .send()
        .await
        .expect("put");
    assert_eq!(edited.status(), 200);
    let over = h
        .client
        .put(h.url(&format!("{base}/blocks/human")))
        .json(&json!({"value": "x".repeat(30), "char_limit": 10}))
        .send()
        .await
        .expect("put");
    assert_eq!(over.status(), 400);
    h.mock.push(send("Noted."));
    say(&h, "pia", "Anything new?").await;
    assert!(
        system_of(&model_requests(&h).pop().expect("request")).contains("Name: Pia. Vegetarian.")
    );

    // Archival: add, search, delete.
    let added: Value = h
        .client
        .post(h.url(&format!("{base}/archival")))
        .json(&json!({"text": "Pia's favourite dish is mushroom risotto."}))
        .send()
        .await
        .expect("post")
        .json()
        .await
        .expect("json");
    let found = get_json(&h, &format!("{base}/archival?query=risotto")).await;
    assert_eq!(
        found["data"][0]["text"],
        "Pia's favourite dish is mushroom risotto."
    );
    let id = added["id"].as_i64().expect("id");
    let deleted = h
        .client
        .delete(h.url(&format!("{base}/archival/{id}")))
        .send()
        .await
        .expect("delete");
    assert_eq!(deleted.status(), 200);
    assert_eq!(
        get_json(&h, &format!("{base}/archival")).await["data"]
            .as_array()
            .expect("list")
            .len(),
        0
    );

    // Queue and summary.
    let queue = get_json(&h, &format!("{base}/messages?in_context=true&limit=2")).await;
    assert_eq!(queue["data"].as_array().expect("queue").len(), 2);
    let put = h
        .client
        .put(h.url(&format!("{base}/summary")))
        .json(&json!({"text": "Pia said hi twice."}))
        .send()
        .await
        .expect("put");
    assert_eq!(put.status(), 200);
    h.mock.push(send("Yes."));
    say(&h, "pia", "Do you remember?").await;
    let last = model_requests(&h).pop().expect("request");
    assert!(last["messages"][1]["content"]
        .as_str()
        .expect("summary")
        .contains("Pia said hi twice."));

    // Steps, by both paths.
    let by_user = get_json(&h, &format!("{base}/steps?turns=2")).await;
    assert_eq!(by_user["data"].as_array().expect("steps").len(), 2);
    assert_eq!(by_user["data"][1]["tool"], "send_message");
    assert!(by_user["data"][1]["latency_ms"].as_f64().is_some());

    // Reset: the next turn starts from the default blocks and an empty log.
    let reset = h.client.delete(h.url(base)).send().await.expect("delete");
    assert_eq!(reset.status(), 200);
    let missing = h.client.get(h.url(base)).send().await.expect("get");
    assert_eq!(missing.status(), 404);
    h.mock.push(send("Nice to meet you."));
    say(&h, "pia", "Hello?").await;
    let fresh = model_requests(&h).pop().expect("request");
    assert!(!fresh.to_string().contains("Vegetarian"));
    assert!(system_of(&fresh).contains("Nothing is known about the user yet."));
    assert_eq!(user_payloads(&fresh).len(), 1);
}

#[tokio::test]
async fn a_private_turn_over_the_window_leaves_old_messages_out_of_view_and_stores_nothing() {
    // The agent's history was built with a big model; the private question goes to a small one.
    let h = harness_with(|c| {
        c.explicit.context_window_tokens = 100_000;
        c.explicit.context_windows.insert("small".to_owned(), 3000);
    })
    .await;
    let filler = "apple ".repeat(250);
    for turn in 0..12 {
        h.mock.push(send(&format!("Noted turn {turn}.")));
        say(&h, "pv", &format!("Turn {turn}. {filler}")).await;
    }
    let before = get_json(&h, "/memproxy/v1/users/pv/agents/default").await;
    let recorded_steps = steps(&h, "pv", "default").await.len();

    h.mock.push(send("From what I can see, turn 11."));
    let response = h
        .client
        .post(h.url("/explicit/v1/chat/completions"))
        .header("x-memproxy-user", "pv")
        .header("x-memproxy-record", "false")
        .json(&json!({"model": "small", "messages": [{"role": "user", "content": "Which turn was last?"}]}))
        .send()
        .await
        .expect("answer");
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.expect("json");
    assert_eq!(reply_of(&body), "From what I can see, turn 11.");

    let sent = model_requests(&h).pop().expect("request");
    let seen: Vec<String> = user_payloads(&sent)
        .iter()
        .filter_map(|p| p["message"].as_str().map(str::to_owned))
        .collect();
    assert!(
        seen.len() < 13 && !seen.iter().any(|m| m.starts_with("Turn 0.")),
        "the oldest turns are out of view: {} user messages",
        seen.len()
    );
    assert!(
        seen.iter().any(|m| m.starts_with("Turn 11.")),
        "the newest stay"
    );
    assert_eq!(
        seen.last().map(String::as_str),
        Some("Which turn was last?")
    );
    let size: usize = serde_json::to_string(&sent["messages"])
        .expect("json")
        .len();
    assert!(
        size / 4 < 3000,
        "the prompt fits the small window (~{} tokens)",
        size / 4
    );

    // Nothing was stored: no summary, no eviction, the same log and trace.
    assert!(h.mock.chat_requests(Some("MEMPROXY-SUMMARIZE")).is_empty());
    let after = get_json(&h, "/memproxy/v1/users/pv/agents/default").await;
    assert_eq!(after["counts"], before["counts"]);
    assert_eq!(after["summary"], before["summary"]);
    assert_eq!(steps(&h, "pv", "default").await.len(), recorded_steps);
}

#[tokio::test]
async fn a_message_deleted_from_the_log_leaves_context_and_search_with_its_tool_results() {
    let h = harness_with(|_| {}).await;
    h.mock.push(call(
        "archival_memory_insert",
        json!({"content": "Locker notes.", "request_heartbeat": true}),
    ));
    h.mock.push(send("Noted."));
    say(&h, "del", "My locker code is 4711.").await;
    let base = "/memproxy/v1/users/del/agents/default";
    let log = get_json(&h, &format!("{base}/messages")).await;
    let rows = log["data"].as_array().expect("log").clone();
    let position_of = |pred: &dyn Fn(&Value) -> bool| {
        rows.iter()
            .find(|m| pred(m))
            .and_then(|m| m["position"].as_i64())
            .expect("message")
    };
    let said = position_of(&|m| m["role"] == "user" && m["content"].to_string().contains("4711"));
    let insert_call = position_of(&|m| {
        m["tool_calls"]
            .as_str()
            .is_some_and(|c| c.contains("archival_memory_insert"))
    });
    let insert_result = position_of(&|m| m["role"] == "tool");
    let delete = |position: i64| {
        h.client
            .delete(h.url(&format!("{base}/messages/{position}")))
            .send()
    };

    let refused = delete(insert_result).await.expect("answer");
    assert_eq!(refused.status(), 400, "a tool result alone is refused");
    let gone = delete(99_999).await.expect("answer");
    assert_eq!(gone.status(), 404);

    let deleted: Value = delete(insert_call)
        .await
        .expect("answer")
        .json()
        .await
        .expect("json");
    assert_eq!(
        deleted["deleted"],
        json!([insert_call, insert_result]),
        "{deleted}"
    );
    let deleted: Value = delete(said)
        .await
        .expect("answer")
        .json()
        .await
        .expect("json");
    assert_eq!(deleted["deleted"], json!([said]));

    // The next turn neither sees nor finds them.
    h.mock.push(call(
        "conversation_search",
        json!({"query": "locker code", "request_heartbeat": true}),
    ));
    h.mock.push(send("I have no note of a locker code."));
    say(&h, "del", "What is my locker code?").await;
    let requests = model_requests(&h);
    let last = requests.last().expect("request").to_string();
    assert!(!last.contains("4711"), "{last}");
    // The insert call is gone from the log; the passage it stored stays in archival memory
    // (recalled for the question, as any passage is).
    assert_eq!(last.matches("Locker notes.").count(), 1, "{last}");
    assert!(last.contains("archival: \\\"Locker notes."), "{last}");
    let searched = tool_results(requests.last().expect("request"));
    assert!(
        searched
            .iter()
            .any(|r| r.to_string().contains("Showing 0") || r.to_string().contains("No results")),
        "{searched:?}"
    );
    assert_tool_pairs_intact(&requests);
}
