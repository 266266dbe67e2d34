//! Explicit mode, recall before the turn: once a message has left the agent's window, a new
//! message it matches brings it back beside core memory without the agent searching; messages
//! still in view are not repeated; `explicit.recall_before_turn = 0` leaves it to the tools.

use serde_json::{json, Value};

use crate::common::{harness_with, post_json, Harness};
use crate::explicit::{model_requests, reply_of, say, send, steps, user_payloads};

const FACT: &str = "My sister Ximena plays the bassoon in Leeds.";
const QUESTION: &str = "Which instrument does my sister Ximena play?";

/// Fills the agent's 3,000-token window until its first message is evicted.
async fn overflow(h: &Harness, user: &str) {
    overflow_after(h, user, FACT).await;
}

/// [`overflow`], the first message saying `fact`.
async fn overflow_after(h: &Harness, user: &str, fact: &str) {
    let filler = "apple ".repeat(250);
    for turn in 0..20 {
        let text = if turn == 0 {
            format!("{fact} {filler}")
        } else {
            format!("Turn {turn}. {filler}")
        };
        h.mock.push(send(&format!("Noted turn {turn}.")));
        say(h, user, &text).await;
        let evicted = steps(h, user, "default")
            .await
            .iter()
            .any(|s| s["tool"] == "(evict)");
        if evicted {
            return;
        }
    }
    panic!("no eviction in 20 turns");
}

/// The agent's request of the turn that asked `question`, and its memory message.
fn asked(h: &Harness, question: &str) -> (Value, String) {
    let request = model_requests(h)
        .into_iter()
        .rev()
        .find(|r| {
            user_payloads(r)
                .last()
                .is_some_and(|p| p["message"] == question)
        })
        .expect("the question's request");
    let memory = crate::explicit::memory_message(&request);
    assert!(!memory.is_empty(), "memory message: {request}");
    (request, memory)
}

#[tokio::test]
async fn an_evicted_message_is_recalled_beside_core_memory() {
    let h = harness_with(|c| c.explicit.context_window_tokens = 3000).await;
    overflow(&h, "ro").await;
    // The console's simulator shows what the turn will recall, before it is asked.
    let simulated = post_json(
        &h,
        "/memproxy/v1/simulate",
        &json!({"user": "ro", "strategy": "explicit",
            "request": {"model": "m", "messages": [{"role": "user", "content": QUESTION}]}}),
    )
    .await;
    let shown = simulated["payload"]["messages"].to_string();
    assert!(
        shown.contains("[Found in your archival and recall memory")
            && shown.contains("Ximena plays the bassoon in Leeds"),
        "{shown}"
    );
    assert!(simulated["sections"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|s| s["name"] == "recalled" && s["tokens"].as_u64() > Some(0)));
    h.mock.push(send("Ximena plays the bassoon."));
    let body = say(&h, "ro", QUESTION).await;
    assert_eq!(reply_of(&body), "Ximena plays the bassoon.");
    let (request, memory) = asked(&h, QUESTION);
    let recalled = memory
        .split_once("[Found in your archival and recall memory")
        .map(|(_, items)| items)
        .unwrap_or_else(|| panic!("nothing recalled: {memory}"));
    assert!(
        recalled.contains("user said: \"My sister Ximena plays the bassoon in Leeds."),
        "{recalled}"
    );
    // The evicted message itself is not back in the queue, and what is in view is not repeated.
    assert!(!user_payloads(&request)
        .iter()
        .any(|p| p["message"].as_str().is_some_and(|m| m.starts_with(FACT))));
    let last_turn = user_payloads(&request)
        .iter()
        .filter_map(|p| p["message"].as_str())
        .rfind(|m| m.starts_with("Turn "))
        .map(|m| m[..8].to_owned())
        .expect("a filler turn in view");
    assert!(!recalled.contains(&last_turn), "{last_turn} is in view");
}

#[tokio::test]
async fn turned_off_the_agent_sees_only_its_window() {
    let h = harness_with(|c| {
        c.explicit.context_window_tokens = 3000;
        c.explicit.recall_before_turn = 0;
    })
    .await;
    overflow(&h, "so").await;
    h.mock.push(send("I do not know."));
    say(&h, "so", QUESTION).await;
    let (_, memory) = asked(&h, QUESTION);
    assert!(!memory.contains("Ximena"), "{memory}");
    assert!(!memory.contains("[Found in"), "{memory}");
}

/// At a window the instructions, core memory and tools nearly fill, what is recalled shrinks to
/// the room left below the eviction threshold: the turn is answered, never refused as too small
/// (a fixed tenth of the window would leave no room for the question).
#[tokio::test]
async fn at_a_small_window_recall_takes_only_the_room_left() {
    let h = harness_with(|c| c.explicit.context_window_tokens = 1600).await;
    for turn in 0..8 {
        // Many past messages match the question, more than the room left can show.
        let text = if turn % 2 == 1 {
            format!(
                "{FACT} Ximena also sings, number {turn}, in a choir that rehearses on Tuesdays."
            )
        } else {
            format!("Small talk number {turn} about the weather and the traffic today.")
        };
        h.mock.push(send(&format!("Noted {turn}.")));
        say(&h, "to", &text).await;
    }
    h.mock.push(send("Ximena plays the bassoon."));
    let body = say(&h, "to", QUESTION).await;
    assert_eq!(reply_of(&body), "Ximena plays the bassoon.");
    let (request, memory) = asked(&h, QUESTION);
    let fixed = ["tools"]
        .iter()
        .map(|key| request[key].to_string())
        .chain([request["messages"][0].to_string(), memory.clone()])
        .map(|text| memproxy::tokens::count(&text))
        .sum::<usize>();
    // Counted with the JSON around it: an over-estimate of what cannot be evicted.
    assert!(fixed < 1600 * 9 / 10, "{fixed} fixed tokens: {memory}");
}

fn tool_names(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
        .collect()
}

/// Below `explicit.compact_below_tokens` the agent is offered core memory, conversation_search
/// and send_message, with instructions that name only those; a call to a tool of the full set
/// fails with the tools there are. At the default window it has MemGPT's full set.
#[tokio::test]
async fn at_a_small_window_the_agent_gets_the_compact_tool_set() {
    let h = harness_with(|c| c.explicit.context_window_tokens = 3000).await;
    h.mock.push(crate::explicit::call(
        "archival_memory_insert",
        json!({"content": "The user plays chess.", "request_heartbeat": true}),
    ));
    h.mock.push(send("Noted."));
    say(&h, "co", "I play chess.").await;
    let requests = model_requests(&h);
    assert_eq!(
        tool_names(&requests[0]),
        [
            "core_memory_append",
            "core_memory_replace",
            "conversation_search",
            "send_message"
        ]
    );
    let system = requests[0]["messages"][0]["content"]
        .as_str()
        .unwrap_or_default();
    assert!(
        system.contains("answer questions about them from it")
            && !system.contains("archival_memory"),
        "{system}"
    );
    let failed = crate::explicit::tool_results(&requests[1])
        .pop()
        .expect("a result");
    assert_eq!(failed["status"], "Failed");
    assert!(
        failed["message"]
            .as_str()
            .is_some_and(|m| m.contains("no function 'archival_memory_insert'")),
        "{failed}"
    );

    let full = harness_with(|_| {}).await;
    full.mock.push(send("Hi."));
    say(&full, "co", "Hello.").await;
    assert_eq!(tool_names(&model_requests(&full)[0]).len(), 7);
}

/// Abstention in explicit mode: a new message about "my dog" from a user who never mentioned one
/// is shown so beside core memory (and in the console's simulator); a thing in view, in core
/// memory or stored is mentioned.
#[tokio::test]
async fn a_thing_the_user_never_mentioned_is_said_to_be_unmentioned() {
    let h = harness_with(|_| {}).await;
    h.mock.push(send("Noted."));
    say(&h, "pets", "I have a cat named Miso.").await;
    let note = "Nothing the user said mentions their dog";

    let question = "What is my dog's name?";
    let simulated = post_json(
        &h,
        "/memproxy/v1/simulate",
        &json!({"user": "pets", "strategy": "explicit",
            "request": {"model": "m", "messages": [{"role": "user", "content": question}]}}),
    )
    .await;
    let shown = simulated["payload"]["messages"].to_string();
    assert!(shown.contains(note), "{shown}");
    h.mock.push(send("You have not told me."));
    say(&h, "pets", question).await;
    let (_, memory) = asked(&h, question);
    assert!(memory.contains(note), "{memory}");

    h.mock.push(send("Miso."));
    say(&h, "pets", "What is my cat's name?").await;
    let (_, memory) = asked(&h, "What is my cat's name?");
    assert!(!memory.contains("Nothing the user said"), "{memory}");

    // Off: never said.
    let h = harness_with(|c| c.explicit.never_mentioned = false).await;
    h.mock.push(send("I don't know."));
    say(&h, "pets", question).await;
    let (_, memory) = asked(&h, question);
    assert!(!memory.contains("Nothing the user said"), "{memory}");
}

/// A recalled message restating what core memory keeps as no longer true is shown without that
/// sentence (`agent::retired`): in run Q the 1.5B model answered "When is my thesis due?" with
/// the old deadline of the user's first message, recalled beside a `human` block that had the new
/// one.
#[tokio::test]
async fn a_recalled_message_is_shown_without_what_core_memory_retired() {
    let h = harness_with(|c| c.explicit.context_window_tokens = 3000).await;
    let first = "I am writing my thesis on coral reef bleaching. My thesis is due on October 15.";
    overflow_after(&h, "rt", first).await;
    let human = "The user is writing a thesis on coral reef bleaching.\n\
        The user's thesis is due on November 30.\n\
        Until 2026-09-20, the user's thesis was due on October 15; since then: the user's thesis is due on November 30.";
    crate::common::put_ok(
        &h,
        "/memproxy/v1/users/rt/agents/default/blocks/human",
        &json!({"value": human}),
    )
    .await;
    let question = "When is my thesis due?";
    h.mock.push(send("November 30."));
    say(&h, "rt", question).await;
    let (_, memory) = asked(&h, question);
    let recalled = memory
        .split("[Found in your archival and recall memory")
        .nth(1)
        .unwrap_or_else(|| panic!("the first message is recalled: {memory}"));
    assert!(
        recalled.contains("I am writing my thesis on coral reef bleaching.")
            && recalled.contains("[…]")
            && !recalled.contains("October 15"),
        "{recalled}"
    );
    // The stored message is whole.
    let log = crate::common::get_json(&h, "/memproxy/v1/users/rt/agents/default/messages").await;
    assert!(log.to_string().contains("My thesis is due on October 15."));
}

/// Issue 48: a thing the user told about is never called unmentioned by the agent, over a
/// restart, with many questions about it after and all of it out of view; a thing never told
/// still is. (The store-level cause, the newest 20 texts read, is pinned in `memory.rs`.)
#[tokio::test]
async fn a_thing_told_before_a_restart_is_never_called_unmentioned() {
    let h = harness_with(|c| c.explicit.context_window_tokens = 3000).await;
    let told = "Please remember that my sister Zelda moved to Lisbon last spring.";
    h.mock.push(send("I will remember that."));
    say(&h, "zl", told).await;
    for turn in 0..25 {
        h.mock.push(send("Noted."));
        say(&h, "zl", &format!("Is my sister happy there, part {turn}?")).await;
    }
    // Out of view: what the agent still sees says nothing of her.
    let filler = "apple ".repeat(250);
    for turn in 0..14 {
        h.mock.push(send(&format!("Noted turn {turn}.")));
        say(&h, "zl", &format!("Turn {turn}. {filler}")).await;
    }
    let h = crate::common::restart(h).await;
    let question = "Where does my sister live now?";
    h.mock.push(send("In Lisbon."));
    say(&h, "zl", question).await;
    let (_, memory) = asked(&h, question);
    assert!(!memory.contains("Nothing the user said"), "{memory}");
    // The check itself runs: a thing never told is still said to be unmentioned.
    let question = "What is my brother's name?";
    h.mock.push(send("You have not told me."));
    say(&h, "zl", question).await;
    let (_, memory) = asked(&h, question);
    assert!(
        memory.contains("Nothing the user said mentions their brother"),
        "{memory}"
    );
}

/// Issue 46, first step: a fact told in implicit mode is in the explicit agent's recall before
/// its turn (it searched only its own archival passages and conversation), and only the user's.
#[tokio::test]
async fn a_fact_told_in_implicit_mode_is_recalled_by_the_explicit_agent() {
    let h = harness_with(|c| c.memory.extraction_debounce = std::time::Duration::ZERO).await;
    let told = "Please remember that my sister Zelda moved to Lisbon last spring.";
    let response =
        crate::common::implicit_chat(&h, "zm", json!([{"role": "user", "content": told}])).await;
    assert_eq!(response.status(), 200);
    crate::common::eventually("the fact is stored", || async {
        crate::common::memories(&h, "zm")
            .await
            .iter()
            .any(|m| m.contains("Lisbon"))
    })
    .await;
    // Switched over a restart.
    let h = crate::common::restart(h).await;
    let question = "Where does my sister live now?";
    for user in ["zm", "zo"] {
        h.mock.push(send("In Lisbon."));
        say(&h, user, question).await;
        let (request, memory) = asked(&h, question);
        let recalled = memory
            .split("[Found in your archival and recall memory")
            .nth(1);
        if user == "zm" {
            let recalled = recalled.unwrap_or_else(|| panic!("recalled: {memory}"));
            assert!(recalled.contains("known about the user"), "{recalled}");
            assert!(recalled.contains("Lisbon"), "{recalled}");
            assert!(!memory.contains("Nothing the user said"), "{memory}");
        } else {
            assert!(!request.to_string().contains("Lisbon"), "{request}");
        }
    }
    // The agent's own archival search finds the fact too; another user's finds nothing of it.
    for user in ["zm", "zo"] {
        h.mock.push(crate::explicit::call(
            "archival_memory_search",
            json!({"query": "sister Lisbon", "request_heartbeat": true}),
        ));
        h.mock.push(send("Lisbon."));
        say(&h, user, "Search your memory for my sister.").await;
        let requests = model_requests(&h);
        let results = crate::explicit::tool_results(requests.last().expect("a request"));
        let found = Value::Array(results).to_string();
        assert_eq!(found.contains("Lisbon"), user == "zm", "{user}: {found}");
    }
}

/// A message's content without the times memproxy stamps on it (the simulation and the turn run
/// seconds apart).
fn untimed(messages: &Value) -> Vec<Value> {
    let strip = |text: &str| -> String {
        match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(mut object)) => {
                object.remove("time");
                Value::Object(object).to_string()
            }
            _ => text.to_owned(),
        }
    };
    messages
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| {
            let mut m = m.clone();
            if let Some(text) = m["content"].as_str() {
                m["content"] = json!(strip(text));
            }
            m
        })
        .collect()
}

/// The console's simulator shows the request the turn then sends, evicted messages, summary,
/// recall and all: it opens the turn read-only with the turn's own layout (`Agents::preview`),
/// not a layout of its own.
#[tokio::test]
async fn the_simulator_shows_the_request_the_turn_then_sends() {
    let h = harness_with(|c| c.explicit.context_window_tokens = 3000).await;
    overflow(&h, "sim").await;
    let simulated = post_json(
        &h,
        "/memproxy/v1/simulate",
        &json!({"user": "sim", "strategy": "explicit",
            "request": {"model": "mock-model", "messages": [{"role": "user", "content": QUESTION}]}}),
    )
    .await;
    let before = model_requests(&h).len();
    h.mock.push(send("Ximena plays the bassoon."));
    say(&h, "sim", QUESTION).await;
    let sent = &model_requests(&h)[before];
    assert_eq!(
        untimed(&simulated["payload"]["messages"]),
        untimed(&sent["messages"])
    );
    assert_eq!(simulated["payload"]["tools"], sent["tools"]);
    let named = |name: &str| {
        simulated["sections"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|s| s["name"] == name)
            .and_then(|s| s["tokens"].as_u64())
            .unwrap_or(0)
    };
    for part in [
        "instructions",
        "core memory",
        "tools",
        "summary",
        "history",
        "new message",
    ] {
        assert!(named(part) > 0, "{part}: {}", simulated["sections"]);
    }
}
