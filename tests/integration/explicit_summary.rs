//! Explicit mode's recursive summary as dated notes (`agent::notes`): the memory LLM is asked for
//! a bounded list of dated third-person notes; a note that copies a line or speaks in the first
//! person is not kept; past the summary's budget the notes are merged into fewer, and the newest
//! are what stays.

use serde_json::{json, Value};

use crate::common::{get_json, harness_with, Harness};
use crate::explicit::{say, send, steps};
use crate::explicit_evict::settle;
use memproxy::mock::Reply;

async fn summary(h: &Harness, user: &str) -> String {
    let agent = get_json(h, &format!("/memproxy/v1/users/{user}/agents/default")).await;
    agent["summary"]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn notes_requests(h: &Harness) -> Vec<Value> {
    h.mock.chat_requests(Some("MEMPROXY-SUMMARIZE"))
}

#[tokio::test]
async fn the_summary_is_dated_notes_in_the_third_person_merged_past_its_budget() {
    let h = harness_with(|c| {
        c.explicit.context_window_tokens = 3000;
        c.explicit.evict_after_turn = true;
    })
    .await;
    // The first summary answer: one note as a note should be, one in the first person, one
    // copying the user's line back, one placeholder.
    h.mock.push_marked(
        "MEMPROXY-SUMMARIZE",
        Reply::Text(
            json!({"notes": [
                {"day": "2026-01-01", "note": "The user counted the first turns in apples."},
                {"day": "2026-01-01", "note": "I like apples more than anything."},
                {"day": "2026-01-01", "note": "Turn 0. I like apples and pears."},
                {"day": "2026-01-01", "note": "..."}
            ]})
            .to_string(),
        ),
    );
    let filler = "apple ".repeat(250);
    let mut first: Option<String> = None;
    let mut turn: usize = 0;
    while turn < 80 {
        h.mock.push(send(&format!("Noted turn {turn}.")));
        let text = if turn == 0 {
            format!("Turn 0. I like apples and pears. {filler}")
        } else {
            format!("Turn {turn}. {filler}")
        };
        say(&h, "sn", &text).await;
        settle(&h).await;
        turn += 1;
        let evicted = steps(&h, "sn", "default")
            .await
            .iter()
            .any(|s| s["tool"] == "(evict)");
        if evicted && first.is_none() {
            first = Some(summary(&h, "sn").await);
        }
        let merged = notes_requests(&h).iter().any(|r| {
            r["messages"][1]["content"]
                .as_str()
                .is_some_and(|m| m.starts_with("Notes to merge"))
        });
        if merged {
            break;
        }
    }
    assert_eq!(
        first.as_deref(),
        Some("- 2026-01-01: The user counted the first turns in apples."),
        "only the note that reads as one is kept"
    );
    let asked = notes_requests(&h);
    assert!(asked.iter().all(|r| {
        r["response_format"]["json_schema"]["name"] == "summary_notes"
            && r["response_format"]["json_schema"]["schema"]["properties"]["notes"]["maxItems"]
                .as_u64()
                .is_some()
    }));
    let merge = asked
        .iter()
        .filter_map(|r| r["messages"][1]["content"].as_str())
        .find(|m| m.starts_with("Notes to merge"))
        .unwrap_or_else(|| panic!("the notes were merged within {turn} turns"))
        .to_owned();
    assert!(
        merge.contains("- 2026-01-01: The user counted the first turns in apples."),
        "the merge is asked of the notes as kept: {merge}"
    );
    // After the merge: dated notes only, within the budget (an eighth of the window), the
    // newest evicted turn's among them.
    let text = summary(&h, "sn").await;
    assert!(
        text.lines().all(|l| l.starts_with("- 20")),
        "dated notes: {text}"
    );
    assert!(memproxy::tokens::count(&text) <= 3000 / 8, "{text}");
    let newest = text.lines().last().unwrap_or_default();
    let numbered = |line: &str| {
        line.split("Turn ")
            .nth(1)
            .and_then(|rest| rest.split('.').next())
            .and_then(|n| n.parse::<usize>().ok())
    };
    let newest_turn = numbered(newest).unwrap_or_else(|| panic!("a turn's note: {text}"));
    assert!(
        text.lines().filter_map(numbered).all(|n| n <= newest_turn),
        "{text}"
    );
    assert!(
        newest_turn >= turn.saturating_sub(8),
        "{newest_turn} of {turn}: {text}"
    );
}

/// A note of the summary that restates what core memory keeps as no longer true is left out of
/// the agent's view (`agent::notes::current`); the stored summary keeps it.
#[tokio::test]
async fn a_note_of_a_retired_fact_is_left_out_of_the_agents_view() {
    let h = harness_with(|_| {}).await;
    h.mock.push(send("Hello!"));
    say(&h, "st", "Hi.").await;
    let base = "/memproxy/v1/users/st/agents/default";
    let human = "The user is writing a thesis on coral reef bleaching.\n\
        The user's supervisor extended the deadline to November 30.\n\
        No longer true: The deadline for the thesis is October 15.";
    let notes = "- 2026-09-01: The user is writing a thesis on coral reef bleaching. The deadline is October 15.\n\
        - 2026-09-20: The supervisor extended the deadline to November 30.";
    for (path, body) in [
        ("blocks/human", json!({"value": human})),
        ("summary", json!({"text": notes})),
    ] {
        crate::common::put_ok(&h, &format!("{base}/{path}"), &body).await;
    }
    h.mock.push(send("November 30."));
    say(&h, "st", "When is my thesis due?").await;
    let request = crate::explicit::model_requests(&h)
        .pop()
        .expect("the turn's request");
    let seen = request["messages"][1]["content"]
        .as_str()
        .unwrap_or_default();
    assert!(seen.starts_with("[Summary"), "{request}");
    assert!(
        seen.ends_with(
            "\n- 2026-09-01: The user is writing a thesis on coral reef bleaching.\n\
             - 2026-09-20: The supervisor extended the deadline to November 30."
        ),
        "{seen}"
    );
    assert_eq!(
        summary(&h, "st").await,
        notes,
        "the stored summary is whole"
    );
}
