//! Core-memory hygiene with scripted agents that write the way small models do: a user fact in
//! `persona`, a fact in the first person, a duplicate line, and a first write over the `human`
//! placeholder. Each refused write is a failed tool result that says what to do, the agent retries,
//! and the blocks end as they should.

use serde_json::{json, Value};

use crate::common::{get_json, harness_with, Harness};
use crate::explicit::{call, model_requests, say, send, tool_results};

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
