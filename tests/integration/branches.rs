//! Chats that share their opening, and edited or regenerated chats: a history that leaves the
//! stored log continues in a branch, and nothing anyone said is replaced, hidden or left out of
//! extraction (no `X-Memproxy-Conversation` header, as most chat apps send none).

use std::time::Duration;

use serde_json::{json, Value};

use crate::common::{eventually, get_json, harness_with, implicit_chat, memories, Harness};

const SYSTEM: &str = "You are a helpful assistant.";

/// Sends `history` (after the app's system prompt) in implicit mode; returns the reply text.
async fn say(h: &Harness, user: &str, history: &[Value]) -> String {
    let mut messages = vec![json!({"role": "system", "content": SYSTEM})];
    messages.extend(history.iter().cloned());
    let response = implicit_chat(h, user, Value::Array(messages)).await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.expect("json");
    let reply = body["choices"][0]["message"]["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    // The exchange has reached the hooks (the post-processor stores the reply in the background).
    h.next_exchange().await;
    reply
}

fn user(text: &str) -> Value {
    json!({"role": "user", "content": text})
}

fn assistant(text: &str) -> Value {
    json!({"role": "assistant", "content": text})
}

/// One chat, turn by turn as an app sends it: the whole history every time.
struct Chat {
    history: Vec<Value>,
}

impl Chat {
    fn new() -> Chat {
        Chat {
            history: Vec::new(),
        }
    }

    async fn send(&mut self, h: &Harness, who: &str, text: &str) {
        self.history.push(user(text));
        let reply = say(h, who, &self.history).await;
        self.history.push(assistant(&reply));
    }
}

async fn search_turns(h: &Harness, who: &str, query: &str) -> Vec<String> {
    let response = h
        .client
        .post(h.url(&format!("/memproxy/v1/users/{who}/memories/search")))
        .json(&json!({"query": query, "corpora": ["message"], "top_k": 20}))
        .send()
        .await
        .expect("search");
    let body: Value = response.json().await.expect("json");
    body["data"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|hit| hit["text"].as_str().map(str::to_owned))
        .collect()
}

async fn conversations(h: &Harness, who: &str) -> Vec<Value> {
    get_json(h, &format!("/memproxy/v1/users/{who}/conversations")).await["data"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

async fn turns_of(h: &Harness, who: &str, conversation: &str) -> Vec<String> {
    let path = format!("/memproxy/v1/users/{who}/conversations/{conversation}/messages");
    get_json(h, &path).await["data"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| {
            assert_eq!(m["superseded"], false, "{m}");
            m["content"].as_str().unwrap_or_default().to_owned()
        })
        .collect()
}

#[tokio::test]
async fn a_new_chat_with_the_same_opening_keeps_the_old_chats_turns_and_facts() {
    // Chat B starts within chat A's extraction debounce.
    let h = harness_with(|c| c.memory.extraction_debounce = Duration::from_secs(2)).await;
    let mut a = Chat::new();
    a.send(&h, "zoe", "hi").await;
    a.send(&h, "zoe", "My dog is called Rexford and he is a corgi.")
        .await;
    let mut b = Chat::new();
    b.send(&h, "zoe", "hi").await;
    b.send(&h, "zoe", "What's a good pasta recipe?").await;

    let found = search_turns(&h, "zoe", "What is my dog called?").await;
    assert!(
        found.iter().any(|t| t.contains("Rexford")),
        "chat A's turn is still searchable: {found:?}"
    );
    eventually("chat A's fact is extracted", || async {
        memories(&h, "zoe")
            .await
            .iter()
            .any(|m| m.contains("Rexford"))
    })
    .await;
    // A third chat gets it injected.
    say(&h, "zoe", &[user("What is my dog called?")]).await;
    let prompt = h
        .mock
        .chat_requests(None)
        .last()
        .expect("a chat request")
        .to_string();
    assert!(prompt.contains("Rexford"), "{prompt}");
}

#[tokio::test]
async fn two_chats_with_the_same_opening_interleaved_keep_two_clean_logs() {
    let h = harness_with(|_| {}).await;
    let (mut a, mut b) = (Chat::new(), Chat::new());
    for (ta, tb) in [
        ("hello", "hello"),
        (
            "I am planning a trip to Kyoto.",
            "Help me fix my bike chain.",
        ),
        ("Which temples should I see?", "It keeps slipping."),
        ("And where do I eat?", "Thanks, that worked."),
    ] {
        a.send(&h, "kim", ta).await;
        b.send(&h, "kim", tb).await;
    }
    eventually("the last replies are stored", || async {
        let listed = conversations(&h, "kim").await;
        let count: i64 = listed.iter().filter_map(|c| c["messages"].as_i64()).sum();
        count == 8 + 6
    })
    .await;
    let listed = conversations(&h, "kim").await;
    assert_eq!(listed.len(), 2, "{listed:?}");
    let root = listed
        .iter()
        .find(|c| c["parent"].is_null())
        .expect("the first chat");
    let branch = listed
        .iter()
        .find(|c| !c["parent"].is_null())
        .expect("the second chat, a branch");
    assert_eq!(branch["parent"], root["id"]);
    assert_eq!(branch["fork_position"], 2, "they part at the third turn");
    let texts = |chat: &Chat| -> Vec<String> {
        chat.history
            .iter()
            .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
            .collect()
    };
    let root_id = root["id"].as_str().expect("id");
    let branch_id = branch["id"].as_str().expect("id");
    assert_eq!(turns_of(&h, "kim", root_id).await, texts(&a));
    assert_eq!(turns_of(&h, "kim", branch_id).await, texts(&b)[2..]);
}

#[tokio::test]
async fn edits_and_regenerations_branch_and_every_version_stays_searchable() {
    let h = harness_with(|c| c.memory.extraction_debounce = Duration::ZERO).await;
    let mut chat = Chat::new();
    chat.send(&h, "lee", "I play the violin in an orchestra.")
        .await;
    chat.send(&h, "lee", "My sister is called Ana.").await;
    // The user edits their second message: the app resends the history up to it, changed.
    let mut edited = chat.history[..2].to_vec();
    edited.push(user("My sister is called Beatriz."));
    say(&h, "lee", &edited).await;
    // And regenerates the first answer: the app resends the history up to the first question.
    h.mock.push(memproxy::mock::Reply::Text(
        "A second take on the violin.".to_owned(),
    ));
    say(&h, "lee", &chat.history[..1]).await;
    eventually("both replies are stored, each in its branch", || async {
        let listed = conversations(&h, "lee").await;
        listed.len() == 3
            && listed.iter().all(|c| c["messages"].as_i64() >= Some(1))
            && listed
                .iter()
                .any(|c| c["fork_position"] == 2 && c["messages"] == 2)
    })
    .await;
    for said in ["Ana", "Beatriz", "second take"] {
        let found = search_turns(&h, "lee", said).await;
        assert!(
            found.iter().any(|t| t.contains(said)),
            "'{said}' is searchable: {found:?}"
        );
    }
    let listed = conversations(&h, "lee").await;
    assert_eq!(listed.len(), 3, "the chat and two branches: {listed:?}");
    let edit = listed
        .iter()
        .find(|c| c["fork_position"] == 2)
        .expect("the edit's branch");
    let edit_id = edit["id"].as_str().expect("id");
    assert_eq!(
        turns_of(&h, "lee", edit_id).await,
        [
            "My sister is called Beatriz.",
            "echo: My sister is called Beatriz."
        ]
    );
    // The edited branch is what the next turn continues; its facts and the old ones are learned.
    edited.push(assistant("echo: My sister is called Beatriz."));
    edited.push(user("She lives in Porto."));
    say(&h, "lee", &edited).await;
    eventually("the reply is stored in the edited branch", || async {
        turns_of(&h, "lee", edit_id).await.len() == 4
    })
    .await;
    eventually("facts of both versions are extracted", || async {
        let stored = memories(&h, "lee").await;
        ["Ana", "Beatriz", "Porto"]
            .iter()
            .all(|said| stored.iter().any(|m| m.contains(said)))
    })
    .await;
}
