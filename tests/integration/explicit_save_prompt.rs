//! The background save asked inside the agent's prompt (issue 51): where the memory LLM is the
//! chat model on a local upstream, the save's question follows the agent's prompt as the next turn
//! opens it, so the server's prompt cache keeps that prompt and no re-warm follows; an answer
//! without facts is asked again of the memory LLM in its own prompt, and a re-warm follows that.

use memproxy::agent::Rewarm;
use memproxy::mock::Reply;
use serde_json::Value;

use crate::common::{eventually, facts, harness_with, memories, Harness};
use crate::explicit::{say, send, steps};
use crate::explicit_cache::{message_count, shared};

const FACT: &str = "The user keeps three hives of bees on their roof.";

fn extract_requests(h: &Harness) -> Vec<Value> {
    h.mock.chat_requests(Some("MEMPROXY-EXTRACT"))
}

fn warms(h: &Harness) -> usize {
    h.mock
        .chat_requests(None)
        .iter()
        .filter(|r| r["max_tokens"] == 1)
        .count()
}

fn last_text(request: &Value) -> String {
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let last = messages.last().cloned().unwrap_or_default();
    last["content"].as_str().unwrap_or_default().to_owned()
}

async fn harness(save_in_prompt: Rewarm) -> Harness {
    harness_with(|c| {
        c.explicit.background_save = true;
        c.explicit.rewarm_cache = Rewarm::Auto;
        c.explicit.save_in_prompt = save_in_prompt;
    })
    .await
}

#[tokio::test]
async fn a_save_asked_inside_the_agents_prompt_leaves_it_cached_and_needs_no_re_warm() {
    let h = harness(Rewarm::Auto).await;
    h.mock.report_prompt_cache();
    h.mock.push(send("How lovely!"));
    h.mock.push_marked("MEMPROXY-EXTRACT", facts(&[FACT]));
    say(&h, "bees", "I keep three hives of bees on my roof.").await;
    eventually("the fact is saved", || async {
        memories(&h, "bees").await.contains(&FACT.to_owned())
    })
    .await;

    let asked = extract_requests(&h);
    assert_eq!(asked.len(), 1, "one question");
    let save = &asked[0];
    assert!(
        last_text(save).contains("MEMPROXY-EXTRACT") && last_text(save).contains("New messages:"),
        "the question and the turn's messages are the prompt's last message: {save:#}"
    );
    let turn = &h.mock.chat_requests(None)[0];
    assert_eq!(save["tools"], turn["tools"], "the agent's own tools");
    assert_eq!(
        save["messages"][0], turn["messages"][0],
        "the agent's own system message"
    );
    assert!(save.get("response_format").is_none());
    // The trace notes the save, with the prompt it reused from the server's cache.
    let trace = steps(&h, "bees", "default").await;
    let step = trace
        .iter()
        .find(|s| s["tool"] == "(background_save)")
        .expect("the save is traced");
    assert_eq!(step["status"], "ok", "{step}");
    assert!(step["cached_tokens"].as_i64() > Some(0), "{step}");

    // No re-warm: the save's request was it. The next turn opens with the save's prompt, all
    // but its question and the core memory the save changed.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(warms(&h), 0);
    h.mock.push(send("Your bees, yes."));
    say(&h, "bees", "How many hives do I keep?").await;
    let next = h
        .mock
        .chat_requests(None)
        .last()
        .cloned()
        .unwrap_or_default();
    let (count, same_tools) = shared(save, &next);
    assert!(same_tools);
    assert!(
        count + 2 >= message_count(save) && count > 2,
        "{count} of {} messages shared: {:#}\n---\n{:#}",
        message_count(save),
        save["messages"],
        next["messages"]
    );
}

#[tokio::test]
async fn an_answer_without_facts_is_asked_again_of_the_memory_llm_and_re_warmed() {
    let h = harness(Rewarm::Auto).await;
    h.mock.push(send("How lovely!"));
    h.mock.push_marked(
        "MEMPROXY-EXTRACT",
        Reply::Text("Bees are wonderful. Tell me more!".to_owned()),
    );
    h.mock.push_marked("MEMPROXY-EXTRACT", facts(&[FACT]));
    h.mock.push(Reply::Text(".".to_owned()));
    say(&h, "bees", "I keep three hives of bees on my roof.").await;
    eventually("the fact is saved", || async {
        memories(&h, "bees").await.contains(&FACT.to_owned())
    })
    .await;
    eventually("a re-warm follows", || async { warms(&h) == 1 }).await;
    let asked = extract_requests(&h);
    assert_eq!(asked.len(), 2);
    assert!(
        asked[0]["tools"].is_array(),
        "first inside the agent's prompt"
    );
    let system = asked[1]["messages"][0]["content"]
        .as_str()
        .unwrap_or_default();
    assert!(
        system.contains("MEMPROXY-EXTRACT") && asked[1].get("tools").is_none(),
        "then in the memory LLM's own prompt: {:#}",
        asked[1]
    );
}

#[tokio::test]
async fn never_asks_in_a_prompt_of_its_own_then_re_warms() {
    let h = harness(Rewarm::Never).await;
    h.mock.push(send("How lovely!"));
    h.mock.push_marked("MEMPROXY-EXTRACT", facts(&[FACT]));
    h.mock.push(Reply::Text(".".to_owned()));
    say(&h, "bees", "I keep three hives of bees on my roof.").await;
    eventually("a re-warm follows the save", || async { warms(&h) == 1 }).await;
    let asked = extract_requests(&h);
    assert_eq!(asked.len(), 1);
    assert!(asked[0].get("tools").is_none(), "{:#}", asked[0]);
    assert!(memories(&h, "bees").await.contains(&FACT.to_owned()));
}
