//! Explicit mode and upstream prompt caches: each step's prompt starts byte for byte with the
//! previous one's (the same tools, the same system message, the same messages), within a turn and
//! from one turn to the next up to where the last turn began; core memory, shown just before the
//! turn, costs the cache only the turn when it changes; and the step trace notes what the
//! upstream says it served from its cache.

use serde_json::{json, Value};

use crate::common::harness_with;
use crate::explicit::{call, model_requests, say, send, steps, system_of};

/// How many leading messages `later` shares with `earlier`, and whether their tools are equal.
pub fn shared(earlier: &Value, later: &Value) -> (usize, bool) {
    let (a, b) = (
        earlier["messages"].as_array().cloned().unwrap_or_default(),
        later["messages"].as_array().cloned().unwrap_or_default(),
    );
    let count = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    (count, earlier["tools"] == later["tools"])
}

pub fn message_count(request: &Value) -> usize {
    request["messages"].as_array().map_or(0, Vec::len)
}

#[tokio::test]
async fn every_step_and_turn_extends_the_previous_prompt_and_the_trace_notes_cache_hits() {
    let h = harness_with(|_| {}).await;
    h.mock.report_prompt_cache();
    // Turn 1: a search that changes nothing, then the reply. Turn 2: a reply at once.
    // Turn 3: a core-memory edit (the system message must change), then the reply.
    h.mock.push(call(
        "conversation_search",
        json!({"query": "boats", "request_heartbeat": true}),
    ));
    h.mock.push(send("Boats, noted."));
    h.mock.push(send("Hello again."));
    h.mock.push(call(
        "core_memory_append",
        json!({"label": "human", "content": "The user sails a red boat.", "request_heartbeat": true}),
    ));
    h.mock.push(send("A red boat, lovely."));
    say(&h, "sailor", "Do you remember my boats?").await;
    say(&h, "sailor", "Hi there.").await;
    say(&h, "sailor", "My boat is red.").await;

    let requests = model_requests(&h);
    assert_eq!(requests.len(), 5, "five steps in three turns");
    // Within turn 1 the second step only adds to the first one's prompt.
    let (count, same_tools) = shared(&requests[0], &requests[1]);
    assert!(same_tools, "the tool list is the same at every step");
    assert_eq!(
        count,
        message_count(&requests[0]),
        "step 2 starts with all of step 1's messages"
    );
    // Turn 2 starts with turn 1's prompt up to where turn 1 began (its core memory message):
    // what was stored renders as it was sent; then turn 1's messages, core memory, turn 2's.
    let turn_start = |request: &Value| {
        request["messages"]
            .as_array()
            .and_then(|m| {
                m.iter().position(|m| {
                    m["content"]
                        .as_str()
                        .is_some_and(|c| c.starts_with(memproxy::agent::context::MEMORY_HEADING))
                })
            })
            .expect("core memory is shown")
    };
    let (count, same_tools) = shared(&requests[1], &requests[2]);
    assert!(same_tools);
    assert_eq!(
        count,
        turn_start(&requests[1]),
        "turn 2 starts with turn 1's prompt: {:#}\n---\n{:#}",
        requests[1]["messages"],
        requests[2]["messages"]
    );
    let (a, b) = (
        requests[1]["messages"].as_array().expect("m"),
        requests[2]["messages"].as_array().expect("m"),
    );
    assert!(
        b[turn_start(&requests[1])..turn_start(&requests[2])]
            .starts_with(&a[turn_start(&requests[1]) + 1..]),
        "turn 1's messages follow, as they were sent (then its answer)"
    );
    // A core-memory edit changes the core memory message, and only from there on: the system
    // message and the history stay.
    let (count, _) = shared(&requests[3], &requests[4]);
    assert_eq!(
        count,
        turn_start(&requests[3]),
        "the edited core memory is in the next step, where the turn began"
    );
    assert!(system_of(&requests[4]).contains("The user sails a red boat."));
    assert_eq!(
        shared(&requests[2], &requests[3]).0,
        turn_start(&requests[2])
    );

    // The trace notes what the upstream said it served from its cache, step by step.
    let last = steps(&h, "sailor", "default").await;
    let cached: Vec<Option<i64>> = last.iter().map(|s| s["cached_tokens"].as_i64()).collect();
    assert_eq!(cached.len(), 2, "{last:?}");
    let first = cached[0].expect("reported for the edit step");
    assert!(first > 0, "turn 3's first step reuses turn 2's prompt");
    let second = cached[1].expect("reported for the reply step");
    assert!(
        second > 0,
        "after the edit the system message and the history are still shared"
    );
    assert!(last.iter().all(|s| s["prompt_tokens"].as_i64() > Some(0)));
}

#[tokio::test]
async fn the_trace_leaves_cached_tokens_out_when_the_upstream_does_not_report_them() {
    let h = harness_with(|_| {}).await;
    h.mock.push(send("Hi."));
    say(&h, "quiet", "Hello.").await;
    let trace = steps(&h, "quiet", "default").await;
    assert_eq!(trace.len(), 1);
    assert!(trace[0].get("cached_tokens").is_none(), "{trace:?}");
}

/// The upstream's chat requests once `count` of them have arrived (a background request comes
/// after the answer).
async fn requests_once(h: &crate::common::Harness, count: usize) -> Vec<Value> {
    for _ in 0..200 {
        let requests = model_requests(h);
        if requests.len() >= count {
            return requests;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    model_requests(h)
}

/// After a turn, a local upstream gets the agent's prompt again for one token, off the request
/// path, as the next turn will start it: that turn's first request repeats all of it (but the core
/// memory message, when memory changed in between). A turn answered by the plain reply ended on a
/// short prompt of its own, which on a one-slot local server evicts the agent's (run J: the next
/// turn took 20-30 s instead of 8 s); one answered with `send_message` left the turn's messages
/// and the core memory after them unprocessed at their new place (run N: 5-9 s of the next turn).
/// `never` sends none.
#[tokio::test]
async fn after_a_turn_a_local_upstream_gets_the_agents_prompt_again() {
    let h = harness_with(|c| c.explicit.rewarm_cache = memproxy::agent::Rewarm::Auto).await;
    h.mock.push(send("Hello!"));
    h.mock.push(memproxy::mock::Reply::Text("ok".to_owned()));
    say(&h, "warm", "Hi there.").await;
    let requests = requests_once(&h, 2).await;
    assert_eq!(requests.len(), 2, "hello, re-warm");
    let first_warm = requests[1].clone();
    assert_eq!(first_warm["max_tokens"], 1, "{first_warm:#}");
    h.mock
        .push(send("I'm sorry, but I can't assist with that."));
    h.mock.push(memproxy::mock::Reply::Text(
        "Miso is a fine name.".to_owned(),
    ));
    h.mock.push(memproxy::mock::Reply::Text("ok".to_owned()));
    say(&h, "warm", "My cat is called Miso.").await;
    let requests = requests_once(&h, 5).await;
    assert_eq!(requests.len(), 5, "refusal, plain reply, re-warm");
    let (count, same_tools) = shared(&first_warm, &requests[2]);
    assert!(same_tools);
    assert!(
        count + 1 >= message_count(&first_warm),
        "after a send_message turn too: {:#}\n---\n{:#}",
        first_warm["messages"],
        requests[2]["messages"]
    );
    assert!(requests[3].get("tools").is_none(), "the plain reply");
    let warm = &requests[4];
    assert_eq!(warm["max_tokens"], 1, "{warm:#}");
    assert_eq!(warm["tools"], requests[2]["tools"], "the agent's own tools");

    h.mock.push(send("Your cat is Miso."));
    say(&h, "warm", "What is my cat called?").await;
    let requests = model_requests(&h);
    let (count, same_tools) = shared(warm, &requests[5]);
    assert!(same_tools);
    // All of it when memory did not change since (here); else all but the core memory message.
    assert!(
        count + 1 >= message_count(warm),
        "the next turn starts with the re-warmed prompt up to core memory: {:#}\n---\n{:#}",
        warm["messages"],
        requests[5]["messages"]
    );
    assert!(count > 3, "system message and turn history are shared");

    let never = harness_with(|_| {}).await;
    never
        .mock
        .push(send("I'm sorry, but I can't assist with that."));
    never.mock.push(memproxy::mock::Reply::Text(
        "Miso is a fine name.".to_owned(),
    ));
    say(&never, "warm", "My cat is called Miso.").await;
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert_eq!(model_requests(&never).len(), 2, "never: no re-warm");
}

/// The model requests a local upstream got for one answered turn, once memproxy has shut down
/// (which drains the work the turn set off), with `says` describing the server.
async fn requests_after_one_turn(says: impl FnOnce(&memproxy::mock::MockUpstream)) -> usize {
    let h = harness_with(|c| c.explicit.rewarm_cache = memproxy::agent::Rewarm::Auto).await;
    says(&h.mock);
    h.mock.push(send("Hello!"));
    h.mock.push(memproxy::mock::Reply::Text("ok".to_owned()));
    say(&h, "warm", "Hi there.").await;
    let crate::common::Harness { mock, proxy, .. } = h;
    proxy.shutdown().await;
    mock.chat_requests(None).len()
}

/// `auto` re-warms a server that keeps one prompt cache, and not one that keeps several, where
/// the agent's prompt survives a background request beside it: llama.cpp with `--parallel 4`
/// (its `/props` says `total_slots: 4`), vLLM (its model list says `owned_by: vllm`). A server
/// that says nothing is taken to keep one.
#[tokio::test]
async fn auto_rewarms_only_a_local_server_with_one_prompt_cache() {
    let one_slot = requests_after_one_turn(|m| m.serve_props(json!({"total_slots": 1}))).await;
    assert_eq!(
        one_slot, 2,
        "llama.cpp with one slot: the turn, the re-warm"
    );
    let silent = requests_after_one_turn(|_| {}).await;
    assert_eq!(
        silent, 2,
        "a server that does not say: the turn, the re-warm"
    );
    let slots = requests_after_one_turn(|m| m.serve_props(json!({"total_slots": 4}))).await;
    assert_eq!(slots, 1, "llama.cpp --parallel 4: the turn only");
    let vllm = requests_after_one_turn(|m| m.own_models_as("vllm")).await;
    assert_eq!(vllm, 1, "vLLM: the turn only");
}
