//! Explicit mode, edge cases met with real small models and real clients: empty or echoed answers,
//! replayed conversations with their own dates, private (read-only) turns, tools not offered.

use memproxy::mock::Reply;
use serde_json::{json, Value};

use crate::common::{get_json, harness_with};
use crate::explicit::{
    ask, call, model_requests, only_send_message, reply_of, say, send, statuses, steps, system_of,
    tool_results, user_payloads,
};

#[tokio::test]
async fn an_empty_or_echoed_answer_is_asked_again() {
    let h = harness_with(|c| c.explicit.reply_retries = 2).await;
    h.mock.push(Reply::Text(String::new()));
    h.mock.push(Reply::Text(
        r#"{"type":"user_message","message":"I moved to Porto.","time":"2026-11-30"}"#.to_owned(),
    ));
    h.mock.push(send("Porto, noted."));
    let response = ask(
        &h,
        "ki",
        "default",
        json!([{"role": "user", "content": "I moved to Porto."}]),
    )
    .await;
    assert_eq!(response.headers()["x-memproxy-steps"], "3");
    assert_eq!(
        reply_of(&response.json().await.expect("json")),
        "Porto, noted."
    );
    let requests = model_requests(&h);
    assert!(
        only_send_message(&requests[1], &requests[0]),
        "only send_message offered"
    );
    assert_eq!(
        statuses(&steps(&h, "ki", "default").await),
        ["(empty):failed", "(echo):failed", "send_message:reply"]
    );
    // The nudge was shown for this turn only.
    assert!(requests[1]
        .to_string()
        .contains("You did not answer the user"));
    let stored = get_json(&h, "/memproxy/v1/users/ki/agents/default/messages")
        .await
        .to_string();
    assert!(!stored.contains("You did not answer the user"), "{stored}");
    // Neither non-answer is kept in the agent's queue.
    let log = get_json(&h, "/memproxy/v1/users/ki/agents/default/messages")
        .await
        .to_string();
    assert!(!log.contains(
        r#"\"type\":\"user_message\",\"message\":\"I moved to Porto.\",\"time\":\"2026-11-30\""#
    ));
}

#[tokio::test]
async fn a_replayed_conversation_keeps_its_own_dates() {
    let h = harness_with(|_| {}).await;
    h.mock.push(send("Enjoy the hike!"));
    let response = h
        .client
        .post(h.url("/explicit/v1/chat/completions"))
        .header("x-memproxy-user", "li")
        .header("x-memproxy-time", "2023-05-08T13:56:00Z")
        .json(&json!({"model": "m", "messages": [{"role": "user", "content": "Hiking tomorrow."}]}))
        .send()
        .await
        .expect("answer");
    assert_eq!(response.status(), 200);
    let wrapped = user_payloads(&model_requests(&h)[0]);
    assert_eq!(wrapped[0]["time"], "2023-05-08 13:56:00 UTC");
    let log = get_json(&h, "/memproxy/v1/users/li/agents/default/messages").await;
    assert_eq!(log["data"][0]["created_at_ms"], 1_683_554_160_000_i64);

    // Implicit mode stores the turns with that date too.
    let response = h.client.post(h.url("/implicit/v1/chat/completions"))
        .header("x-memproxy-user", "li")
        .header("x-memproxy-conversation", "trip")
        .header("x-memproxy-time", "2023-05-09")
        .json(&json!({"model": "m", "messages": [{"role": "user", "content": "Back from the hike."}]}))
        .send().await.expect("answer");
    assert_eq!(response.status(), 200);
    let turns = get_json(&h, "/memproxy/v1/users/li/conversations/trip/messages").await;
    assert_eq!(turns["data"][0]["created_at_ms"], 1_683_590_400_000_i64);

    let response = h
        .client
        .post(h.url("/v1/chat/completions"))
        .header("x-memproxy-time", "last tuesday")
        .json(&json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .expect("answer");
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.expect("json");
    assert_eq!(body["error"]["param"], "x-memproxy-time");
}

#[tokio::test]
async fn a_private_turn_reads_memory_and_stores_nothing() {
    let h = harness_with(|_| {}).await;
    h.mock.push(call(
        "core_memory_append",
        json!({"label": "human", "content": "Name: Mo.", "request_heartbeat": true}),
    ));
    h.mock.push(send("Hi Mo."));
    say(&h, "mo", "I'm Mo.").await;
    let before = get_json(&h, "/memproxy/v1/users/mo/agents/default").await;

    h.mock.push(call(
        "core_memory_append",
        json!({"label": "human", "content": "Secret: likes karaoke.", "request_heartbeat": true}),
    ));
    h.mock.push(send("Your name is Mo."));
    let private = |user: &'static str| {
        h.client.post(h.url("/explicit/v1/chat/completions"))
            .header("x-memproxy-user", user)
            .header("x-memproxy-record", "false")
            .json(&json!({"model": "m", "messages": [{"role": "user", "content": "What's my name? (I like karaoke)"}]}))
            .send()
    };
    let response = private("mo").await.expect("answer");
    assert_eq!(response.status(), 200);
    assert_eq!(
        reply_of(&response.json().await.expect("json")),
        "Your name is Mo."
    );
    let requests = model_requests(&h);
    // The same tools as in any turn (the prompt's start stays for the upstream's cache); a
    // write is refused when called.
    assert_eq!(requests[requests.len() - 2]["tools"], requests[0]["tools"]);
    assert!(
        system_of(&requests[requests.len() - 2]).contains("Name: Mo."),
        "memory is read"
    );
    let refused = tool_results(requests.last().expect("request"))
        .pop()
        .expect("result");
    assert_eq!(refused["status"], "Failed");
    let after = get_json(&h, "/memproxy/v1/users/mo/agents/default").await;
    assert_eq!(after["blocks"], before["blocks"]);
    assert_eq!(
        after["counts"], before["counts"],
        "no message of the private turn was stored"
    );
    assert_eq!(steps(&h, "mo", "default").await.len(), 2, "nor its trace");

    // A private first contact does not even create the agent.
    h.mock.push(send("Hello."));
    assert_eq!(private("nobody").await.expect("answer").status(), 200);
    let agents = get_json(&h, "/memproxy/v1/users/nobody/agents").await;
    assert_eq!(agents["data"], json!([]));
}

#[tokio::test]
async fn a_tool_that_was_not_offered_is_refused_and_then_no_tools_are_offered() {
    let h = harness_with(|_| {}).await;
    let search = || {
        call(
            "conversation_search",
            json!({"query": "dinner", "request_heartbeat": true}),
        )
    };
    h.mock.push(search());
    h.mock.push(search()); // repeated: next step offers only send_message...
    h.mock.push(search()); // ...which a server that ignores tool_choice lets the model ignore
    h.mock.push(Reply::Text(
        r#"{"name": "conversation_search", "arguments": {"query": "dinner"}}"#.to_owned(),
    ));
    h.mock
        .push(Reply::Text("We talked about dinner at Luigi's.".to_owned()));
    let response = ask(
        &h,
        "ny",
        "default",
        json!([{"role": "user", "content": "What did we say about dinner?"}]),
    )
    .await;
    assert_eq!(
        reply_of(&response.json().await.expect("json")),
        "We talked about dinner at Luigi's."
    );
    let requests = model_requests(&h);
    assert_eq!(requests.len(), 5);
    // Only send_message may be called: tool_choice names it, and the tool list stays as it was
    // (a shorter list would change the prompt's start and miss the upstream's prompt cache).
    assert_eq!(requests[2]["tools"], requests[1]["tools"]);
    assert_eq!(
        requests[2]["tool_choice"]["function"]["name"],
        "send_message"
    );
    let refused = tool_results(&requests[3]).pop().expect("result");
    assert_eq!(refused["status"], "Failed");
    assert!(refused["message"]
        .as_str()
        .expect("m")
        .contains("not available now"));
    assert!(requests[3].get("tools").is_none() && requests[4].get("tools").is_none());
    assert_eq!(
        statuses(&steps(&h, "ny", "default").await),
        [
            "conversation_search:ok",
            "conversation_search:ok",
            "conversation_search:failed",
            "(echo):failed",
            "(plain_reply):reply"
        ]
    );
    // With no tools offered the model still wrote a call: the same request would get the same
    // answer, so the last one is the plain request (no agent instructions, no tool traffic).
    assert!(!system_of(&requests[4]).contains("conversation_search"));
    let plain = requests[4]["messages"].as_array().expect("messages");
    assert!(plain
        .iter()
        .all(|m| m["role"] != "tool" && m.get("tool_calls").is_none()));
}

#[tokio::test]
async fn a_call_written_with_type_as_its_name_runs_and_an_enveloped_reply_is_the_reply() {
    let h = harness_with(|_| {}).await;
    // Qwen-style slips seen with a real 1.5B model: the tool named under "type", and the reply
    // wrapped in the user-message envelope.
    h.mock.push(Reply::Text(
        r#"{"type": "core_memory_append", "arguments": {"label": "human", "content": "The user likes green tea.", "request_heartbeat": true}}"#.to_owned(),
    ));
    h.mock.push(Reply::Text(
        r#"{"type": "user_message", "message": "Green tea it is!", "time": "2026-01-01"}"#
            .to_owned(),
    ));
    let body = say(&h, "tea", "I like green tea.").await;
    assert_eq!(reply_of(&body), "Green tea it is!");
    let blocks = get_json(&h, "/memproxy/v1/users/tea/agents/default/blocks").await;
    assert!(
        blocks.to_string().contains("The user likes green tea."),
        "{blocks}"
    );
    assert_eq!(
        statuses(&steps(&h, "tea", "default").await),
        ["core_memory_append:ok", "(text):reply"]
    );
}

/// A small model that once answered off the point copies that answer into every later turn (seen
/// with Qwen2.5-1.5B: "I'm sorry, but I don't know what you're asking. Can you please rephrase
/// your question?" to four different messages). A reply said word for word before is not taken:
/// as plain text it is asked again with the user's message quoted, as a send_message call it
/// fails with the same guidance; a short one ("You're welcome!") may be said twice.
#[tokio::test]
async fn a_reply_said_word_for_word_before_is_asked_again() {
    const OFF: &str = "I'm sorry, but I don't know what you're asking. Can you please rephrase?";
    let h = harness_with(|c| c.explicit.reply_retries = 2).await;
    h.mock.push(Reply::Text(OFF.to_owned()));
    say(&h, "re", "What's a good dinner for tonight?").await;

    h.mock.push(Reply::Text(OFF.to_owned()));
    h.mock.push(send(OFF));
    h.mock.push(send("Your sister will love a spicy curry."));
    let body = say(
        &h,
        "re",
        "My sister visits on Saturday. She loves spicy food.",
    )
    .await;
    assert_eq!(reply_of(&body), "Your sister will love a spicy curry.");
    let requests = model_requests(&h);
    let nudge = requests[requests.len() - 2].to_string();
    assert!(
        nudge.contains("You said exactly that before")
            && nudge.contains("My sister visits on Saturday"),
        "{nudge}"
    );
    let trace = statuses(&steps(&h, "re", "default").await);
    let last = requests.last().expect("a request");
    let refused = tool_results(last)
        .pop()
        .unwrap_or_else(|| panic!("a result: {trace:?} {last}"));
    assert_eq!(refused["status"], "Failed");
    assert!(refused["message"]
        .as_str()
        .is_some_and(|m| m.contains("said exactly that before")));
    let trace = statuses(&steps(&h, "re", "default").await);
    assert_eq!(
        trace[trace.len() - 3..],
        [
            "(repeat):failed",
            "send_message:failed",
            "send_message:reply"
        ]
    );

    // Short courtesies may repeat.
    h.mock.push(Reply::Text("You're welcome!".to_owned()));
    say(&h, "re", "Thanks!").await;
    h.mock.push(Reply::Text("You're welcome!".to_owned()));
    let body = say(&h, "re", "Thanks again!").await;
    assert_eq!(reply_of(&body), "You're welcome!");
}

/// Seen with the real 1.5B model: it answered "Miso ate some grass this morning." with those very
/// words, and a question with the question. The user's own message said back is no answer: as text
/// the step is asked again, as a send_message it fails.
#[tokio::test]
async fn the_users_message_said_back_is_asked_again() {
    let h = harness_with(|c| c.explicit.reply_retries = 2).await;
    let said = "Which vet do I take Miso to?";
    h.mock.push(Reply::Text(format!("\"{said}\"")));
    h.mock.push(send("which vet do I take  Miso to?"));
    h.mock.push(send("You haven't told me that."));
    let body = say(&h, "ec", said).await;
    assert_eq!(reply_of(&body), "You haven't told me that.");
    let requests = model_requests(&h);
    let nudge = requests[requests.len() - 2].to_string();
    assert!(
        nudge.contains("You repeated a message") && nudge.contains(said),
        "{nudge}"
    );
    refused_as_the_users_own(&requests);
    let trace = statuses(&steps(&h, "ec", "default").await);
    assert_eq!(
        trace[trace.len() - 3..],
        ["(echo):failed", "send_message:failed", "send_message:reply"]
    );
}

/// Seen with the real 1.5B model: on job-change the agent explained `core_memory_replace` to the
/// user with a JSON example, and that text became the reply; elsewhere it answered with an earlier
/// message of the user's, or with its own persona text. None of these is shown: as text the step
/// is asked again, as a send_message it fails with the reason.
#[tokio::test]
async fn a_lesson_on_functions_an_earlier_message_or_the_persona_is_asked_again() {
    let h = harness_with(|c| c.explicit.reply_retries = 2).await;
    let earlier = "I work as a nurse at the city hospital.";
    h.mock.push(send("Noted, you are a nurse."));
    say(&h, "tl", earlier).await;

    h.mock.push(Reply::Text(
        "To change your job, call core_memory_replace with {\"label\": \"human\"}.".to_owned(),
    ));
    h.mock.push(send(earlier));
    h.mock
        .push(send("You work as a nurse at the city hospital."));
    let body = say(&h, "tl", "Where do I work?").await;
    assert_eq!(reply_of(&body), "You work as a nurse at the city hospital.");
    let requests = model_requests(&h);
    let nudge = requests[requests.len() - 2].to_string();
    assert!(
        nudge.contains("must never see function names") && nudge.contains("Where do I work?"),
        "{nudge}"
    );
    refused_as_the_users_own(&requests);
    let trace = statuses(&steps(&h, "tl", "default").await);
    assert_eq!(
        trace[trace.len() - 3..],
        [
            "(tools):failed",
            "send_message:failed",
            "send_message:reply"
        ]
    );

    // The persona block said back.
    h.mock.push(Reply::Text(
        "I keep notes about the person I talk with and use them.".to_owned(),
    ));
    h.mock.push(send("Good night!"));
    let body = say(&h, "tl", "Good night.").await;
    assert_eq!(reply_of(&body), "Good night!");
    let requests = model_requests(&h);
    assert!(requests
        .last()
        .expect("a request")
        .to_string()
        .contains("That is your persona text"));
    let trace = statuses(&steps(&h, "tl", "default").await);
    assert_eq!(
        trace[trace.len() - 2..],
        ["(echo):failed", "send_message:reply"]
    );
}

/// The app's history is what the user saw: when its last assistant message is not a reply the
/// agent gave (the app edited it, or replays a conversation), the agent records it as said, so
/// that "Which table did you tell me to ask for?" has its answer in memory. Found on the eval's
/// booking-by-assistant dialogue, whose suggestion the agent never saw. The agent's own reply
/// sent back is not recorded twice.
#[tokio::test]
async fn an_assistant_message_the_agent_did_not_give_is_recorded_as_said() {
    let h = harness_with(|_| {}).await;
    let ask_for = "Can you help me plan dinner for our anniversary on June 12?";
    h.mock.push(send("Happy to help! Any cuisine you like?"));
    say(&h, "bo", ask_for).await;

    let suggestion = "I suggest Trattoria Luigi on Elm Street. Ask for table 14 by the fountain.";
    h.mock.push(send("Enjoy the evening!"));
    let response = ask(
        &h,
        "bo",
        "default",
        json!([
            {"role": "user", "content": ask_for},
            {"role": "assistant", "content": suggestion},
            {"role": "user", "content": "Perfect, I'll do exactly that."}
        ]),
    )
    .await;
    assert_eq!(response.status(), 200);
    // The agent saw it in this turn, before the user's answer to it.
    let seen = model_requests(&h).last().expect("a request").to_string();
    let (at_suggestion, at_answer) = (
        seen.find("Trattoria Luigi")
            .expect("the suggestion is shown"),
        seen.find("exactly that").expect("the answer is shown"),
    );
    assert!(at_suggestion < at_answer, "{seen}");

    // The agent's own reply, sent back by the app, is not recorded again.
    h.mock.push(send("Flowers are a lovely idea."));
    let response = ask(
        &h,
        "bo",
        "default",
        json!([
            {"role": "user", "content": "Perfect, I'll do exactly that."},
            {"role": "assistant", "content": "Enjoy the evening!"},
            {"role": "user", "content": "I booked it. Should I bring flowers?"}
        ]),
    )
    .await;
    assert_eq!(response.status(), 200);
    let stored = get_json(&h, "/memproxy/v1/users/bo/agents/default/messages").await;
    let said: Vec<&str> = stored["data"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "assistant")
        .filter_map(|m| m["search_text"].as_str())
        .collect();
    assert_eq!(
        said,
        [
            "Happy to help! Any cuisine you like?",
            suggestion,
            "Enjoy the evening!",
            "Flowers are a lovely idea."
        ]
    );
    let search = get_json(
        &h,
        "/memproxy/v1/users/bo/agents/default/messages?q=table%2014",
    )
    .await
    .to_string();
    assert!(search.contains("table 14"), "{search}");
}

/// The last request's newest function result: a send_message refused as the user's own message.
fn refused_as_the_users_own(requests: &[Value]) {
    let refused = tool_results(requests.last().expect("a request"))
        .pop()
        .expect("a result");
    assert_eq!(refused["status"], "Failed");
    assert!(refused["message"]
        .as_str()
        .is_some_and(|m| m.contains("the user's own message")));
}

/// By default an unusable reply is not asked again: traces of the 1.5B model showed a reply asked
/// again usable about one time in five, at up to 20 s a step, and the plain reply (no tools)
/// usable about three times in four at 3 s. With the app's functions in the turn it is asked
/// again, since the plain reply could not call them.
#[tokio::test]
async fn by_default_an_unusable_reply_goes_straight_to_the_plain_reply() {
    let h = harness_with(|_| {}).await;
    let said = "Which vet do I take Miso to?";
    h.mock.push(send(said));
    h.mock
        .push(Reply::Text("You haven't told me that yet.".to_owned()));
    let body = say(&h, "pr", said).await;
    assert_eq!(reply_of(&body), "You haven't told me that yet.");
    let requests = model_requests(&h);
    assert_eq!(requests.len(), 2, "{requests:?}");
    assert!(requests[1].get("tools").is_none(), "{}", requests[1]);
    assert_eq!(
        statuses(&steps(&h, "pr", "default").await),
        ["send_message:failed", "(plain_reply):reply"]
    );

    // Empty text: the same.
    h.mock.push(Reply::Text(String::new()));
    h.mock.push(Reply::Text("Miso sees Dr. Lee.".to_owned()));
    let body = say(&h, "pr", "Who is Miso's vet again?").await;
    assert_eq!(reply_of(&body), "Miso sees Dr. Lee.");
    assert_eq!(
        statuses(&steps(&h, "pr", "default").await),
        ["(empty):failed", "(plain_reply):reply"]
    );

    // With the app's functions, the reply is asked again (only send_message offered).
    let weather = json!({"type": "function", "function": {
        "name": "get_weather",
        "description": "Current weather of a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    }});
    h.mock.push(Reply::Text(String::new()));
    h.mock.push(send("I can look that up: which city?"));
    let response = h
        .client
        .post(h.url("/explicit/v1/chat/completions"))
        .header("x-memproxy-user", "pr")
        .json(&json!({"model": "mock-model", "tools": [weather],
            "messages": [{"role": "user", "content": "What's the weather?"}]}))
        .send()
        .await
        .expect("answer");
    assert_eq!(
        reply_of(&response.json().await.expect("json")),
        "I can look that up: which city?"
    );
    assert_eq!(
        statuses(&steps(&h, "pr", "default").await),
        ["(empty):failed", "send_message:reply"]
    );
}

/// Seen with the real 1.5B model at a 2,000-token window, its human block holding "The user takes
/// their coffee black": "How do I take my coffee?" got "I understand that you want to know how to
/// take your coffee. Is there anything else you would like to know?" A question said back in other
/// words is no answer: the plain reply answers instead. A question `yes` or `no` answers may be
/// answered in its own words.
#[tokio::test]
async fn a_question_said_back_in_other_words_is_no_answer() {
    let h = harness_with(|_| {}).await;
    h.mock.push(Reply::Text(
        "I understand that you want to know how to take your coffee. Is there anything else you would like to know?".to_owned(),
    ));
    h.mock.push(Reply::Text("Black, no sugar.".to_owned()));
    let body = say(&h, "rq", "How do I take my coffee?").await;
    assert_eq!(reply_of(&body), "Black, no sugar.");
    assert_eq!(
        statuses(&steps(&h, "rq", "default").await),
        ["(restates):failed", "(plain_reply):reply"]
    );

    h.mock.push(send("No, you don't eat meat."));
    let body = say(&h, "rq", "Do I eat meat?").await;
    assert_eq!(reply_of(&body), "No, you don't eat meat.");
}

/// Seen with the real 1.5B model at a 2,000-token window: "Is that normal for an old cat?" and,
/// told that the user never mentioned a vet, "Which vet do I take Miso to?" got "I'm sorry, but I
/// can't assist with that." (offered functions, small models refuse harmless questions, and copy
/// a refusal in view into later turns). A refusal is no answer: the plain reply answers instead,
/// and stands even if it refuses too.
#[tokio::test]
async fn a_refusal_is_answered_by_the_plain_reply() {
    let h = harness_with(|_| {}).await;
    h.mock.push(send("Noted."));
    say(&h, "vet", "I have a cat named Miso.").await;
    h.mock
        .push(send("I'm sorry, but I can't assist with that."));
    h.mock
        .push(Reply::Text("You have not told me which vet.".to_owned()));
    let body = say(&h, "vet", "Which vet do I take Miso to?").await;
    assert_eq!(reply_of(&body), "You have not told me which vet.");
    let trace = statuses(&steps(&h, "vet", "default").await);
    assert_eq!(
        trace[trace.len() - 2..],
        ["send_message:failed", "(plain_reply):reply"]
    );
    let requests = model_requests(&h);
    let plain = requests.last().expect("the plain request");
    assert!(plain.get("tools").is_none(), "{plain}");

    h.mock
        .push(send("I'm sorry, but I can't assist with that."));
    h.mock
        .push(Reply::Text("I'm sorry, I can't help with that.".to_owned()));
    let body = say(&h, "vet", "How do I pick a lock?").await;
    assert_eq!(reply_of(&body), "I'm sorry, I can't help with that.");
}
