//! Several memproxy processes on one PostgreSQL: real `memproxy serve` processes, each with its own
//! (empty, separate) data directory, in front of one scripted upstream that the test runs. What
//! one replica learns the other recalls, each job runs once across them, and a replica killed
//! with SIGKILL in the middle of a job loses nothing: the other takes the job when its lease ends.
//! Skipped without the test server outside CI (see `conformance::postgres_url`).

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use memproxy::config::Config;
use memproxy::mock::{MockUpstream, Reply};
use serde_json::{json, Value};

use crate::backends::postgres_url;
use crate::common::{eventually, facts, test_config};
use crate::process::free_port;

pub(crate) struct Replica {
    pub(crate) child: Child,
    pub(crate) url: String,
    data: tempfile::TempDir,
}

impl Replica {
    /// What the replica wrote to its data directory (its config file aside).
    fn local_files(&self) -> Vec<String> {
        walk(self.data.path())
            .into_iter()
            .filter(|name| name != "memproxy.toml")
            .collect()
    }
}

fn walk(dir: &std::path::Path) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(walk(&path));
        } else if let Ok(relative) = path.strip_prefix(dir) {
            found.push(relative.display().to_string());
        }
    }
    found
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A fresh database on the test server (made off the async runtime).
pub(crate) async fn database() -> Option<String> {
    tokio::task::spawn_blocking(postgres_url)
        .await
        .expect("made a database")
}

/// The config of a replica on `database`, in front of `mock`.
fn replica_config(mock: &MockUpstream, data: &std::path::Path) -> Config {
    let mut config = test_config(mock, data);
    config.listen = format!("127.0.0.1:{}", free_port())
        .parse()
        .expect("address");
    config.store.backend = memproxy::store::Backend::Postgres;
    config.memory.extraction_debounce = Duration::ZERO;
    // A dead replica's job is taken again this long after it was claimed.
    config.memory.job_lease = Duration::from_secs(3);
    config.store.pool_size = 4;
    config
}

pub(crate) async fn start_replica(mock: &MockUpstream, database: &str) -> Replica {
    let data = tempfile::tempdir().expect("data dir");
    let config = replica_config(mock, data.path());
    let file = data.path().join("memproxy.toml");
    std::fs::write(&file, toml::to_string(&config).expect("config as TOML")).expect("write");
    let url = format!("http://{}", config.listen);
    let child = Command::new(env!("CARGO_BIN_EXE_memproxy"))
        .arg("serve")
        .arg("--config")
        .arg(&file)
        // The URL (with its credentials) goes by environment, as an operator would pass it.
        .env("MEMPROXY_DATABASE_URL", database)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("memproxy starts");
    let replica = Replica { child, url, data };
    let client = reqwest::Client::new();
    eventually("the replica answers /readyz", || async {
        client
            .get(format!("{}/readyz", replica.url))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success())
    })
    .await;
    replica
}

async fn chat(replica: &Replica, user: &str, text: &str) -> Value {
    let response = reqwest::Client::new()
        .post(format!("{}/implicit/v1/chat/completions", replica.url))
        .header("x-memproxy-user", user)
        .json(&json!({"model": "mock-model", "messages": [{"role": "user", "content": text}]}))
        .send()
        .await
        .expect("an answer");
    assert_eq!(response.status(), 200);
    response.json().await.expect("JSON")
}

pub(crate) async fn get(replica: &Replica, path: &str) -> Value {
    reqwest::Client::new()
        .get(format!("{}{path}", replica.url))
        .send()
        .await
        .expect("an answer")
        .json()
        .await
        .expect("JSON")
}

async fn memory_texts(replica: &Replica, user: &str) -> Vec<String> {
    get(replica, &format!("/memproxy/v1/users/{user}/memories"))
        .await
        .get("data")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|m| m["text"].as_str().map(str::to_owned))
        .collect()
}

/// What the chat model (not the memory LLM) saw last.
fn last_prompt(mock: &MockUpstream) -> String {
    mock.chat_requests(None)
        .last()
        .expect("a chat request")
        .to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_fact_told_to_one_replica_is_recalled_by_the_other() {
    let Some(database) = database().await else {
        return;
    };
    let mock = MockUpstream::start().await.expect("mock");
    let a = start_replica(&mock, &database).await;
    let b = start_replica(&mock, &database).await;

    chat(&a, "ana", "My dog is called Rex.").await;
    eventually("B lists the fact A's chat taught", || async {
        memory_texts(&b, "ana")
            .await
            .iter()
            .any(|m| m.contains("Rex"))
    })
    .await;
    chat(&b, "ana", "What is my dog's name?").await;
    let seen = last_prompt(&mock);
    assert!(
        seen.contains("<memory>") && seen.contains("Rex"),
        "B's chat model was not told: {seen}"
    );
    // Bob, through either replica, is told nothing of Ana's.
    chat(&b, "bob", "What is my dog's name?").await;
    assert!(
        !last_prompt(&mock).contains("Rex"),
        "Bob was told Ana's fact"
    );
    chat(&a, "bob", "What is my dog's name?").await;
    assert!(
        !last_prompt(&mock).contains("Rex"),
        "Bob was told Ana's fact"
    );
    assert!(memory_texts(&a, "bob")
        .await
        .iter()
        .all(|m| !m.contains("Rex")));
    // Nothing of memory is on either replica's disk.
    assert_eq!(a.local_files(), Vec::<String>::new());
    assert_eq!(b.local_files(), Vec::<String>::new());
    // The conversation A stored is B's too.
    let conversations = get(&b, "/memproxy/v1/users/ana/conversations").await;
    assert_eq!(
        conversations["data"].as_array().map(Vec::len),
        Some(2),
        "{conversations}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn each_job_runs_once_across_two_replicas() {
    let Some(database) = database().await else {
        return;
    };
    let mock = MockUpstream::start().await.expect("mock");
    let replicas = [
        start_replica(&mock, &database).await,
        start_replica(&mock, &database).await,
    ];
    let users = 12;
    let sent = (0..users).map(|user| {
        let replica = &replicas[user % 2];
        async move {
            let (name, text) = (
                format!("user{user}"),
                format!("My locker number is {user}7."),
            );
            chat(replica, &name, &text).await
        }
    });
    futures_util::future::join_all(sent).await;
    for user in 0..users {
        eventually("every user's fact is stored", || async {
            memory_texts(&replicas[(user + 1) % 2], &format!("user{user}"))
                .await
                .iter()
                .any(|m| m.contains(&format!("{user}7")))
        })
        .await;
    }
    let extractions = mock.chat_requests(Some("MEMPROXY-EXTRACT")).len();
    assert_eq!(
        extractions, users,
        "one extraction call per job, none twice"
    );
    let jobs = get(&replicas[0], "/memproxy/v1/jobs?state=done").await;
    let done: Vec<&Value> = jobs["data"]
        .as_array()
        .expect("jobs")
        .iter()
        .filter(|j| j["kind"] == "extract")
        .collect();
    assert_eq!(done.len(), users, "{jobs}");
    assert!(done.iter().all(|j| j["attempts"] == 1), "{jobs}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_replica_killed_mid_job_loses_nothing() {
    let Some(database) = database().await else {
        return;
    };
    let mock = MockUpstream::start().await.expect("mock");
    // The first extraction stalls: the replica that takes it is killed while it waits.
    mock.push_marked(
        "MEMPROXY-EXTRACT",
        Reply::Stall(
            Duration::from_secs(30),
            Box::new(facts(&["Ana is allergic to penicillin."])),
        ),
    );
    let mut a = start_replica(&mock, &database).await;
    chat(&a, "ana", "I am allergic to penicillin.").await;
    eventually("A calls the memory LLM", || async {
        !mock.chat_requests(Some("MEMPROXY-EXTRACT")).is_empty()
    })
    .await;
    a.child.kill().expect("SIGKILL");
    a.child.wait().expect("reaped");

    let b = start_replica(&mock, &database).await;
    eventually("B finishes the job when A's lease has run out", || async {
        memory_texts(&b, "ana")
            .await
            .iter()
            .any(|m| m.contains("penicillin"))
    })
    .await;
    assert_eq!(mock.chat_requests(Some("MEMPROXY-EXTRACT")).len(), 2);
    let memories = memory_texts(&b, "ana").await;
    assert_eq!(memories.len(), 1, "stored once: {memories:?}");
    // The job is marked done in its own transaction, just after the memories it stored.
    eventually("B marks the job done", || async {
        get(&b, "/memproxy/v1/jobs?state=done").await["data"]
            .as_array()
            .is_some_and(|jobs| jobs.iter().any(|j| j["kind"] == "extract"))
    })
    .await;
    let jobs = get(&b, "/memproxy/v1/jobs?state=done").await;
    let extract = jobs["data"]
        .as_array()
        .expect("jobs")
        .iter()
        .find(|j| j["kind"] == "extract")
        .cloned()
        .expect("the job is done");
    assert_eq!(extract["attempts"], 2, "{extract}");
    // The turn A acknowledged before it died is in the log B serves.
    let log = get(
        &b,
        &format!(
            "/memproxy/v1/users/ana/conversations/{}/messages",
            get(&b, "/memproxy/v1/users/ana/conversations").await["data"][0]["id"]
                .as_str()
                .expect("a conversation")
        ),
    )
    .await;
    assert!(
        log.to_string().contains("I am allergic to penicillin."),
        "{log}"
    );
}

async fn ask_agent(replica: &Replica, text: &str) -> Value {
    let response = reqwest::Client::new()
        .post(format!("{}/explicit/v1/chat/completions", replica.url))
        .header("x-memproxy-user", "ana")
        .header("x-memproxy-agent", "helper")
        .json(&json!({"model": "mock-model", "messages": [{"role": "user", "content": text}]}))
        .send()
        .await
        .expect("an answer");
    assert_eq!(response.status(), 200);
    response.json().await.expect("JSON")
}

#[tokio::test(flavor = "multi_thread")]
async fn one_agents_turns_on_two_replicas_never_interleave() {
    let Some(database) = database().await else {
        return;
    };
    let mock = MockUpstream::start().await.expect("mock");
    let (a, b) = (
        start_replica(&mock, &database).await,
        start_replica(&mock, &database).await,
    );
    // Whichever turn reaches the model first is slow to be answered.
    mock.push(Reply::Stall(
        Duration::from_millis(1500),
        Box::new(Reply::Text("First answer.".to_owned())),
    ));
    let (first, second) = tokio::join!(
        ask_agent(&a, "Turn one from A."),
        ask_agent(&b, "Turn two from B.")
    );
    assert!(first.to_string().contains("choices") && second.to_string().contains("choices"));
    let requests = mock.chat_requests(None);
    assert_eq!(requests.len(), 2, "one model call per turn");
    // The later turn ran after the earlier one had finished: it saw its question and answer.
    let later = requests[1].to_string();
    assert!(
        later.contains("Turn one from A.") && later.contains("Turn two from B."),
        "the second turn did not see the first: {later}"
    );
    let log = get(&b, "/memproxy/v1/users/ana/agents/helper/messages").await;
    let roles: Vec<&str> = log["data"]
        .as_array()
        .expect("messages")
        .iter()
        .filter_map(|m| m["role"].as_str())
        .filter(|role| *role != "system")
        .collect();
    assert_eq!(roles.iter().filter(|r| **r == "user").count(), 2, "{log}");
    assert_ne!(
        roles.windows(2).find(|w| w == &["user", "user"]),
        Some(&["user", "user"][..]),
        "interleaved: {log}"
    );

    // A block edit through B waits for A's running turn.
    mock.push(Reply::Stall(
        Duration::from_millis(1500),
        Box::new(Reply::Text("Slow answer.".to_owned())),
    ));
    let order = std::sync::Mutex::new(Vec::new());
    let turn = async {
        ask_agent(&a, "A slow turn.").await;
        order.lock().expect("order").push("turn");
    };
    let edit = async {
        eventually("A's turn reached the model", || async {
            mock.chat_requests(None).len() == 3
        })
        .await;
        let response = reqwest::Client::new()
            .put(format!(
                "{}/memproxy/v1/users/ana/agents/helper/blocks/human",
                b.url
            ))
            .json(&json!({"value": "Ana lives in Porto."}))
            .send()
            .await
            .expect("edit");
        assert_eq!(response.status(), 200);
        order.lock().expect("order").push("edit");
    };
    tokio::join!(turn, edit);
    assert_eq!(*order.lock().expect("order"), ["turn", "edit"]);
}

async fn respond(replica: &Replica, body: Value) -> Value {
    let response = reqwest::Client::new()
        .post(format!("{}/v1/responses", replica.url))
        .header("x-memproxy-user", "ada")
        .json(&body)
        .send()
        .await
        .expect("an answer");
    assert_eq!(response.status(), 200, "{:?}", response.text().await);
    response.json().await.expect("JSON")
}

/// A Responses API chain continued on the other replica the moment the answer arrives (the first
/// replica writes the response behind its answer; the second waits for the link if needed).
#[tokio::test(flavor = "multi_thread")]
async fn a_responses_chain_continues_on_the_other_replica() {
    let Some(database) = database().await else {
        return;
    };
    let mock = MockUpstream::start().await.expect("mock");
    let (a, b) = (
        start_replica(&mock, &database).await,
        start_replica(&mock, &database).await,
    );
    let mut previous: Option<String> = None;
    for (turn, replica) in [&a, &b, &a, &b].into_iter().enumerate() {
        let mut body = json!({"model": "mock-model", "input": format!("Fact number {turn}.")});
        if let Some(id) = &previous {
            body["previous_response_id"] = json!(id);
        }
        let answer = respond(replica, body).await;
        previous = answer["id"].as_str().map(str::to_owned);
    }
    let seen = mock
        .chat_requests(None)
        .last()
        .expect("a request")
        .to_string();
    for turn in 0..4 {
        assert!(seen.contains(&format!("Fact number {turn}.")), "{seen}");
    }
}
