//! Deleting erases the words from the database files, not only from the listings: a user who
//! told a unique word in implicit mode, in explicit mode, over Responses and as a memory is
//! deleted, and after a clean stop no file of the data directory (database, write-ahead log,
//! vector indexes) holds the word. The same for one deleted memory and one deleted response.
//! SQLite only: PostgreSQL's files are the server's (docs/postgres.md says what it guarantees).

use serde_json::{json, Value};

use crate::common::{eventually, harness_with, implicit_chat, memories, post_json};
use crate::explicit::{say, send};

/// Every file under `dir` whose bytes contain `word`.
fn files_holding(dir: &std::path::Path, word: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_owned()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else if let Ok(bytes) = std::fs::read(&path) {
                let needle = word.as_bytes();
                if bytes.windows(needle.len()).any(|w| w == needle) {
                    found.push(path.display().to_string());
                }
            }
        }
    }
    found
}

#[tokio::test]
async fn a_deleted_user_leaves_no_word_in_the_data_directory() {
    crate::sqlite_only!("the test reads SQLite's files");
    let h = harness_with(|c| c.memory.extraction_debounce = std::time::Duration::ZERO).await;
    let word = "Quarvendish";
    let kept = "Plombrivex";
    // Implicit mode, explicit mode, Responses and the management API.
    let told = format!("My cat is called {word}.");
    let answer = implicit_chat(&h, "dave", json!([{"role": "user", "content": told}])).await;
    assert_eq!(answer.status(), 200);
    h.mock.push(send(&format!("Noted: {word}.")));
    say(&h, "dave", &format!("Remember the word {word}.")).await;
    let response = h
        .client
        .post(h.url("/v1/responses"))
        .header("x-memproxy-user", "dave")
        .json(&json!({"model": "m", "input": format!("Say {word} back.")}))
        .send()
        .await
        .expect("answer");
    assert_eq!(response.status(), 200);
    post_json(
        &h,
        "/memproxy/v1/users/dave/memories",
        &json!({"text": format!("Dave's cat is {word}.")}),
    )
    .await;
    // Another user keeps a word of their own: the check can find what is there.
    post_json(
        &h,
        "/memproxy/v1/users/erin/memories",
        &json!({"text": format!("Erin likes {kept}.")}),
    )
    .await;
    eventually("the exchanges are recorded", || async {
        let conversations: Value =
            crate::common::get_json(&h, "/memproxy/v1/users/dave/conversations").await;
        conversations["data"]
            .as_array()
            .is_some_and(|c| c.len() >= 2)
    })
    .await;
    h.proxy.state.after_exchange.close();
    h.proxy.state.after_exchange.wait().await;
    let deleted = h
        .client
        .delete(h.url("/memproxy/v1/users/dave"))
        .send()
        .await
        .expect("answer");
    assert_eq!(deleted.status(), 200);
    let data = h.data.path().to_owned();
    let keep_dir = h.data;
    h.proxy.shutdown().await;
    assert!(
        !files_holding(&data, kept).is_empty(),
        "the other user's word is still stored"
    );
    assert_eq!(
        files_holding(&data, word),
        Vec::<String>::new(),
        "dave's word is still in the files"
    );
    drop(keep_dir);
}

#[tokio::test]
async fn a_deleted_memory_and_a_deleted_response_leave_no_word() {
    crate::sqlite_only!("the test reads SQLite's files");
    let h = harness_with(|_| {}).await;
    let (memory_word, response_word) = ("Zintrolvane", "Moskavitter");
    let added = post_json(
        &h,
        "/memproxy/v1/users/ana/memories",
        &json!({"text": format!("Ana's boat is the {memory_word}.")}),
    )
    .await;
    let id = added["id"].as_i64().expect("id");
    let edited = h
        .client
        .patch(h.url(&format!("/memproxy/v1/users/ana/memories/{id}")))
        .json(&json!({"text": format!("Ana's boat is the blue {memory_word}.")}))
        .send()
        .await
        .expect("answer");
    assert_eq!(edited.status(), 200);
    let response: Value = h
        .client
        .post(h.url("/passthrough/v1/responses"))
        .header("x-memproxy-user", "ana")
        .json(&json!({"model": "m", "input": format!("Spell {response_word}.")}))
        .send()
        .await
        .expect("answer")
        .json()
        .await
        .expect("json");
    let response_id = response["id"].as_str().expect("id").to_owned();
    let (memory_url, response_url) = (
        h.url(&format!("/memproxy/v1/users/ana/memories/{id}")),
        h.url(&format!("/v1/responses/{response_id}")),
    );
    eventually("the response is logged", || async {
        h.client
            .get(&response_url)
            .header("x-memproxy-user", "ana")
            .send()
            .await
            .is_ok_and(|r| r.status() == 200)
    })
    .await;
    assert_eq!(
        h.client
            .delete(&memory_url)
            .send()
            .await
            .expect("answer")
            .status(),
        200
    );
    let gone = h
        .client
        .delete(&response_url)
        .header("x-memproxy-user", "ana")
        .send()
        .await;
    assert_eq!(gone.expect("answer").status(), 200);
    assert!(memories(&h, "ana").await.is_empty());
    let data = h.data.path().to_owned();
    let keep_dir = h.data;
    h.proxy.shutdown().await;
    // In passthrough the response log alone held the response's words.
    assert_eq!(files_holding(&data, memory_word), Vec::<String>::new());
    assert_eq!(files_holding(&data, response_word), Vec::<String>::new());
    drop(keep_dir);
}
