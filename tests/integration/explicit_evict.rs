//! Explicit mode, eviction after the turn: once the agent has had its memory-pressure step, the
//! oldest messages are summarised and evicted after the answer, in the background, when the next
//! turn would pass the threshold; that next turn then asks the model at once.

use serde_json::Value;

use crate::common::{get_json, harness_with, Harness};
use crate::explicit::{model_requests, say, send, steps, user_payloads};

/// Waits until the work the last answers set off is done.
pub(crate) async fn settle(h: &Harness) {
    let tasks = &h.proxy.state.after_exchange;
    tasks.close();
    tasks.wait().await;
    tasks.reopen();
}

fn tools_of(trace: &[Value]) -> Vec<(String, String)> {
    trace
        .iter()
        .map(|s| {
            (
                s["turn"].as_str().unwrap_or_default().to_owned(),
                s["tool"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

#[tokio::test]
async fn the_oldest_messages_are_evicted_after_the_answer_not_before_the_next_one() {
    let h = harness_with(|c| {
        c.explicit.context_window_tokens = 3000;
        c.explicit.evict_after_turn = true;
    })
    .await;
    // Each turn adds less than the gap between the alert (75%) and eviction (90%) thresholds.
    let filler = "apple ".repeat(250);
    let mut turns = 0;
    let mut evicted_after: Option<String> = None;
    while evicted_after.is_none() && turns < 20 {
        let text = if turns == 0 {
            format!("The secret code is PAPAYA-42. {filler}")
        } else {
            format!("Turn {turns}. {filler}")
        };
        h.mock.push(send(&format!("Noted turn {turns}.")));
        let summaries = h.mock.chat_requests(Some("MEMPROXY-SUMMARIZE")).len();
        say(&h, "ev", &text).await;
        // The answer came before any summary call: the summary is not on the request path.
        assert_eq!(
            h.mock.chat_requests(Some("MEMPROXY-SUMMARIZE")).len(),
            summaries,
            "turn {turns} waited for a summary"
        );
        settle(&h).await;
        turns += 1;
        let trace = tools_of(&steps(&h, "ev", "default").await);
        evicted_after = trace
            .iter()
            .find(|(_, tool)| tool == "(evict)")
            .map(|(turn, _)| turn.clone());
        if evicted_after.is_some() {
            // In the trace of the turn it followed, after that turn's reply.
            let of_turn: Vec<&String> = trace
                .iter()
                .filter(|(turn, _)| Some(turn) == evicted_after.as_ref())
                .map(|(_, tool)| tool)
                .collect();
            assert_eq!(
                of_turn.last().map(|t| t.as_str()),
                Some("(evict)"),
                "{trace:?}"
            );
        }
    }
    let evicted_turn = evicted_after.expect("an eviction after some turn within 20 turns");
    let requests = model_requests(&h);
    assert!(
        requests
            .iter()
            .any(|r| user_payloads(r).iter().any(|p| p["type"] == "system_alert")),
        "a memory-pressure alert came first"
    );
    assert!(!h.mock.chat_requests(Some("MEMPROXY-SUMMARIZE")).is_empty());
    let agent = get_json(&h, "/memproxy/v1/users/ev/agents/default").await;
    assert!(agent["summary"]["text"]
        .as_str()
        .is_some_and(|t| !t.is_empty()));

    // The next turn opens below the threshold: one step, no eviction of its own, the summary
    // in view and the first message out of it.
    h.mock.push(send("Still here."));
    say(&h, "ev", "And now?").await;
    let trace = tools_of(&steps(&h, "ev", "default").await);
    let last_turn = trace.last().map(|(turn, _)| turn.clone()).expect("traced");
    assert_ne!(last_turn, evicted_turn);
    let of_last: Vec<&str> = trace
        .iter()
        .filter(|(turn, _)| *turn == last_turn)
        .map(|(_, tool)| tool.as_str())
        .collect();
    assert_eq!(of_last, ["send_message"], "{trace:?}");
    let last = model_requests(&h).pop().expect("request");
    assert!(last["messages"][1]["content"]
        .as_str()
        .is_some_and(|s| s.starts_with("[Summary of earlier messages")));
    let still_in_view = user_payloads(&last).iter().any(|p| {
        p["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("The secret code"))
    });
    assert!(!still_in_view, "the first message left the window");
}

#[tokio::test]
async fn nothing_is_evicted_after_the_turn_before_the_agent_was_told_of_the_pressure() {
    // The alert comes only just below the eviction threshold: a turn's estimate of the next
    // one crosses the threshold before the alert is due, and must wait for it.
    let h = harness_with(|c| {
        c.explicit.context_window_tokens = 3000;
        c.explicit.pressure_alert_ratio = 0.89;
        c.explicit.evict_after_turn = true;
    })
    .await;
    let filler = "apple ".repeat(250);
    let mut evicted = false;
    for turn in 0..20 {
        h.mock.push(send(&format!("Noted turn {turn}.")));
        say(&h, "ew", &format!("Turn {turn}. {filler}")).await;
        settle(&h).await;
        let alerted = model_requests(&h)
            .iter()
            .any(|r| user_payloads(r).iter().any(|p| p["type"] == "system_alert"));
        let trace = tools_of(&steps(&h, "ew", "default").await);
        evicted = trace.iter().any(|(_, tool)| tool == "(evict)");
        assert!(alerted || !evicted, "evicted before the alert: {trace:?}");
        if evicted {
            break;
        }
    }
    assert!(evicted, "an eviction within 20 turns");
}

#[tokio::test]
async fn a_summary_that_copies_the_messages_back_is_not_kept_and_memory_tools_are_no_material() {
    let h = harness_with(|c| c.explicit.context_window_tokens = 3000).await;
    // The answer the 1.5B model gave: the material's lines copied back.
    let copy = "Current summary:\n[2026-01-01 10:00:00 UTC] user: Turn 0.\n\
                [2026-01-01 10:00:00 UTC] assistant: Noted turn 0.";
    for _ in 0..20 {
        h.mock.push_marked(
            "MEMPROXY-SUMMARIZE",
            memproxy::mock::Reply::Text(copy.to_owned()),
        );
    }
    let filler = "apple ".repeat(250);
    h.mock.push(crate::explicit::call(
        "core_memory_append",
        serde_json::json!({"label": "human", "content": "The user likes apples.", "request_heartbeat": true}),
    ));
    h.mock.push(send("Noted turn 0."));
    say(&h, "ec", &format!("Turn 0. I like apples. {filler}")).await;
    let mut evictions: Vec<Value> = Vec::new();
    for turn in 1..30 {
        h.mock.push(send(&format!("Noted turn {turn}.")));
        say(&h, "ec", &format!("Turn {turn}. {filler}")).await;
        // The trace of the last turn: an eviction in this turn is in it.
        evictions.extend(
            steps(&h, "ec", "default")
                .await
                .into_iter()
                .filter(|s| s["tool"] == "(evict)"),
        );
        if evictions.len() >= 2 {
            break;
        }
    }
    assert!(evictions.len() >= 2, "two evictions within 30 turns");
    let evicted: usize = evictions
        .iter()
        .map(|s| {
            assert_eq!(s["status"], "failed", "{s}");
            let result = s["result"].as_str().unwrap_or_default();
            result
                .strip_prefix("evicted ")
                .and_then(|r| r.split(' ').next())
                .and_then(|n| n.parse::<usize>().ok())
                .unwrap_or(0)
        })
        .sum();
    // One note counting every message that left without a summary, not the copy.
    let agent = get_json(&h, "/memproxy/v1/users/ec/agents/default").await;
    let summary = agent["summary"]["text"].as_str().unwrap_or_default();
    assert_eq!(
        summary,
        format!("[{evicted} earlier messages could not be summarised; search them with conversation_search.]")
    );
    // The summariser saw the conversation, not memproxy's tool traffic.
    let asked = h.mock.chat_requests(Some("MEMPROXY-SUMMARIZE"));
    let material = asked
        .first()
        .and_then(|r| r["messages"][1]["content"].as_str())
        .unwrap_or_default()
        .to_owned();
    assert!(
        material.contains("user: Turn 0. I like apples."),
        "{material}"
    );
    assert!(material.contains("assistant: Noted turn 0."), "{material}");
    for absent in ["core_memory_append", "\"function\"", "updated ("] {
        assert!(!material.contains(absent), "{absent} in {material}");
    }
}
