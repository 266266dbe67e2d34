//! `memproxy migrate`: a SQLite deployment's memory (implicit facts and turns, an explicit agent
//! with its blocks, log, tags and a shared block, two users) copied into PostgreSQL by the real
//! binary; a replica on PostgreSQL then exports every user exactly as the SQLite one did, and
//! answers the same searches. A second run is refused (the users are there).

use std::process::Command;

use serde_json::{json, Value};

use crate::common::{eventually, get_text, harness_with, implicit_chat, memories, Harness};
use crate::explicit::{call, send};
use crate::replicas::{database, get, start_replica, Replica};

async fn search(base: &str, user: &str, query: &str) -> Vec<String> {
    let hits: Value = reqwest::Client::new()
        .post(format!("{base}/memproxy/v1/users/{user}/memories/search"))
        .json(&json!({"query": query, "corpora": ["memory", "message", "passage"], "top_k": 5}))
        .send()
        .await
        .expect("search")
        .json()
        .await
        .expect("JSON");
    hits["data"]
        .as_array()
        .expect("hits")
        .iter()
        .map(|hit| hit["text"].as_str().unwrap_or_default().to_owned())
        .collect()
}

async fn put(h: &Harness, path: &str, body: Value) {
    let response = h
        .client
        .put(h.url(path))
        .json(&body)
        .send()
        .await
        .expect("put");
    assert_eq!(response.status(), 200, "{path}");
}

async fn export_of(replica: &Replica, user: &str) -> String {
    reqwest::Client::new()
        .get(format!("{}/memproxy/v1/users/{user}/export", replica.url))
        .send()
        .await
        .expect("export")
        .text()
        .await
        .expect("text")
}

fn migrate(from: &std::path::Path, to: &str) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_memproxy"))
        .args(["migrate", "--from"])
        .arg(from)
        .args(["--to", to])
        .output()
        .expect("memproxy migrate runs")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sqlite_deployment_moves_to_postgres_and_answers_the_same() {
    crate::sqlite_only!("it migrates from a SQLite deployment");
    let Some(url) = database().await else {
        return;
    };
    let h = harness_with(|c| c.memory.extraction_debounce = std::time::Duration::ZERO).await;
    for (user, text) in [
        ("ana", "My dog is called Rex."),
        ("bob", "I play the cello."),
    ] {
        implicit_chat(&h, user, json!([{"role": "user", "content": text}])).await;
    }
    eventually("both facts are stored", || async {
        memories(&h, "ana").await.iter().any(|m| m.contains("Rex"))
            && memories(&h, "bob")
                .await
                .iter()
                .any(|m| m.contains("cello"))
    })
    .await;
    h.mock.push(call(
        "core_memory_append",
        json!({"label": "human", "content": "The user has a dog named Rex.", "request_heartbeat": true}),
    ));
    h.mock.push(send("Noted: Rex."));
    let answer = h
        .client
        .post(h.url("/explicit/v1/chat/completions"))
        .header("x-memproxy-user", "ana")
        .header("x-memproxy-agent", "helper")
        .json(&json!({"model": "mock-model", "messages": [{"role": "user", "content": "My dog is Rex."}]}))
        .send()
        .await
        .expect("explicit turn");
    assert_eq!(answer.status(), 200);
    put(
        &h,
        "/memproxy/v1/users/ana/blocks/household",
        json!({"value": "Ana lives with Rui."}),
    )
    .await;
    put(
        &h,
        "/memproxy/v1/users/ana/agents/helper/shared/household",
        json!({}),
    )
    .await;
    put(
        &h,
        "/memproxy/v1/users/ana/agents/helper/tags",
        json!({"tags": ["home"]}),
    )
    .await;
    let mut before = Vec::new();
    for user in ["ana", "bob"] {
        before.push(get_text(&h, &format!("/memproxy/v1/users/{user}/export")).await);
    }
    let searches = [
        ("ana", "What is my dog called?"),
        ("bob", "Do I still play the cello?"),
    ];
    let mut found = Vec::new();
    for (user, query) in searches {
        found.push(search(&h.proxy.url(), user, query).await);
    }
    let agents_before: Value = crate::common::get_json(&h, "/memproxy/v1/users/ana/agents").await;
    let Harness {
        data, mock, proxy, ..
    } = h;
    proxy.shutdown().await;

    let output = migrate(data.path(), &url);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("migrated 2 users"), "{stdout}");

    let replica = start_replica(&mock, &url).await;
    for (user, exported) in ["ana", "bob"].iter().zip(&before) {
        assert_eq!(
            &export_of(&replica, user).await,
            exported,
            "{user}'s export"
        );
    }
    // The same hits. Their order may differ where two score nearly alike: the keyword rankers
    // differ (SQLite's bm25 weighs a turn's length, PostgreSQL's cover density does not; a
    // reply that repeats the user's words, with those words again as its context, ranks first
    // on one and second on the other).
    for ((user, query), hits) in searches.iter().zip(&found) {
        assert!(!hits.is_empty(), "{user}: {query}: nothing found");
        let (mut after, mut before) = (search(&replica.url, user, query).await, hits.clone());
        after.sort();
        before.sort();
        assert_eq!(after, before, "{user}: {query}");
    }
    let agents_after = get(&replica, "/memproxy/v1/users/ana/agents").await;
    let tags = |agents: &Value| agents["data"][0]["tags"].clone();
    assert_eq!(tags(&agents_after), tags(&agents_before));
    assert_eq!(tags(&agents_after), json!(["home"]));

    let again = migrate(data.path(), &url);
    assert!(!again.status.success());
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("already has 2 of these users"),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
}
