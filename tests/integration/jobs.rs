//! The durable job queue under the conditions a real chat creates: a job failing while the next
//! turn's job waits, a restart with interrupted jobs, reconcile decisions that name memories no
//! longer live, and several workers with one user's jobs never overlapping.

use std::time::Duration;

use memproxy::mock::Reply;
use memproxy::store::prelude::*;
use memproxy::store::NewJob;
use serde_json::{json, Value};

use crate::common::{
    eventually, get_json, harness_with, implicit_chat, memories, restart_after, Harness,
};

async fn implicit(h: &Harness, user: &str, messages: Value) {
    assert_eq!(implicit_chat(h, user, messages).await.status(), 200);
}

async fn jobs(h: &Harness, state: &str) -> Vec<Value> {
    let list = get_json(h, &format!("/memproxy/v1/jobs?state={state}")).await;
    list["data"].as_array().cloned().unwrap_or_default()
}

fn of_user<'a>(jobs: &'a [Value], user: &str) -> Vec<&'a Value> {
    jobs.iter().filter(|j| j["scope"]["user"] == user).collect()
}

async fn quick(workers: usize) -> Harness {
    harness_with(|c| {
        c.memory.extraction_debounce = Duration::ZERO;
        c.memory.job_workers = workers;
    })
    .await
}

#[tokio::test]
async fn a_job_failing_while_a_newer_job_of_its_conversation_waits_merges_into_it() {
    let h = quick(1).await;
    // The first extraction fails after a while: the chat's next turn arrives meanwhile.
    h.mock.push_marked(
        "MEMPROXY-EXTRACT",
        Reply::Stall(
            Duration::from_millis(1500),
            Box::new(Reply::Error {
                status: 500,
                message: "the memory model fell over".to_owned(),
                headers: vec![],
            }),
        ),
    );
    let first = json!([{"role": "user", "content": "My dog is called Rexford."}]);
    implicit(&h, "alice", first.clone()).await;
    eventually("the first job runs", || async {
        of_user(&jobs(&h, "running").await, "alice").len() == 1
    })
    .await;
    let mut second = first.as_array().cloned().unwrap_or_default();
    second.push(json!({"role": "assistant", "content": "echo: My dog is called Rexford."}));
    second.push(json!({"role": "user", "content": "My cat is called Whiskers."}));
    implicit(&h, "alice", Value::Array(second)).await;

    eventually("both facts are extracted", || async {
        let stored = memories(&h, "alice").await;
        stored.iter().any(|m| m.contains("Rexford"))
            && stored.iter().any(|m| m.contains("Whiskers"))
    })
    .await;
    // A job's memories are visible before its own state is written (a later transaction).
    eventually("no job is left running", || async {
        of_user(&jobs(&h, "running").await, "alice").is_empty()
    })
    .await;
    let merged = jobs(&h, "merged").await;
    assert_eq!(merged.len(), 1, "the failed job merged: {merged:?}");
    let note = merged[0]["last_error"].as_str().unwrap_or_default();
    assert!(note.contains("merged into job"), "{note}");
    assert!(note.contains("fell over"), "the error is kept: {note}");
    let done = jobs(&h, "done").await;
    assert!(
        done.iter().any(|j| j["attempts"].as_i64() >= Some(2)),
        "the job it merged into kept its attempts: {done:?}"
    );
}

#[tokio::test]
async fn start_up_requeues_every_interrupted_job_even_when_one_collides_with_a_queued_one() {
    crate::sqlite_only!("start-up requeueing (on PostgreSQL another replica may run those jobs; leases take them back, see replicas.rs)");
    let h = quick(1).await;
    implicit(
        &h,
        "alice",
        json!([{"role": "user", "content": "I live in Lisbon."}]),
    )
    .await;
    eventually("the fact is extracted", || async {
        !memories(&h, "alice").await.is_empty()
    })
    .await;
    let done = jobs(&h, "done").await;
    let conversation = done[0]["payload"]["conversation"].clone();
    let h = restart_after(h, |data| {
        // What a crash leaves: a running job with a newer queued one of the same key, and a
        // running job of its own.
        let store = memproxy::store::sqlite::SqliteStore::open(&data.join("memproxy.db"))
            .expect("open the store");
        let job = |key: &str| NewJob {
            kind: "extract".to_owned(),
            scope: Some(memproxy::store::UserScope::new("default", "alice")),
            dedupe_key: Some(key.to_owned()),
            payload: json!({"conversation": conversation, "model": "mock-model"}),
            run_after_ms: 0,
        };
        store.enqueue_job(&job("key-a")).expect("enqueue");
        let lease = i64::MAX / 4;
        let claimed = store.claim_job(1, lease).expect("claim").expect("a job");
        assert_eq!(claimed.state, "running");
        store
            .enqueue_job(&job("key-a"))
            .expect("a newer queued job");
        store.enqueue_job(&job("key-b")).expect("enqueue");
        // The claim rule skips key-b while alice has a running job: force it as a crash would.
        let connection = rusqlite::Connection::open(data.join("memproxy.db")).expect("open");
        connection
            .execute(
                "UPDATE jobs SET state = 'running' WHERE dedupe_key = 'key-b'",
                [],
            )
            .expect("mark running");
    })
    .await;
    eventually("every interrupted job ran", || async {
        jobs(&h, "running").await.is_empty() && jobs(&h, "queued").await.is_empty()
    })
    .await;
    let merged = jobs(&h, "merged").await;
    let all = get_json(&h, "/memproxy/v1/jobs").await;
    assert_eq!(merged.len(), 1, "{all:?}");
    let done = jobs(&h, "done").await;
    let keys_done = done
        .iter()
        .filter(|j| j["payload"]["conversation"] == conversation)
        .count();
    assert_eq!(
        keys_done, 3,
        "the merged-into job and the other one ran: {done:?}"
    );
    // The rest of the start-up check ran: the stored fact is still found by search.
    let found = h
        .client
        .post(h.url("/memproxy/v1/users/alice/memories/search"))
        .json(&json!({"query": "Where does the user live?"}))
        .send()
        .await
        .expect("search");
    let found: Value = found.json().await.expect("json");
    assert!(found.to_string().contains("Lisbon"), "{found}");
}

#[tokio::test]
async fn a_decision_about_a_memory_already_retired_keeps_the_jobs_other_facts() {
    let h = quick(1).await;
    implicit(
        &h,
        "alice",
        json!([{"role": "user", "content": "Alice lives in Lisbon"}]),
    )
    .await;
    eventually("the first fact is stored", || async {
        memories(&h, "alice").await.len() == 1
    })
    .await;
    h.mock.push_marked(
        "MEMPROXY-EXTRACT",
        Reply::Text(
            json!({"facts": [
                {"text": "Alice lives in Porto", "kind": "fact"},
                {"text": "Alice lives with a cat named Tom", "kind": "fact"}
            ]})
            .to_string(),
        ),
    );
    // Both decisions name M0: the second one finds it retired by the first.
    h.mock.push_marked(
        "MEMPROXY-RECONCILE",
        Reply::Text(
            json!({"decisions": [
                {"fact": "F0", "action": "INVALIDATE", "memory": "M0"},
                {"fact": "F1", "action": "UPDATE", "memory": "M0", "text": "Alice lives with a cat named Tom"}
            ]})
            .to_string(),
        ),
    );
    implicit(
        &h,
        "alice",
        json!([{"role": "user", "content": "I moved to Porto, with my cat Tom."}]),
    )
    .await;
    eventually("the second job is done", || async {
        of_user(&jobs(&h, "done").await, "alice").len() == 2
    })
    .await;
    let done = jobs(&h, "done").await;
    assert!(
        done.iter().all(|j| j["attempts"] == 1),
        "each job succeeded at its first attempt: {done:?}"
    );
    let stored = memories(&h, "alice").await;
    assert!(
        stored.iter().any(|m| m == "Alice lives in Porto"),
        "{stored:?}"
    );
    assert!(
        stored
            .iter()
            .any(|m| m == "Alice lives with a cat named Tom"),
        "{stored:?}"
    );
    assert!(!stored.iter().any(|m| m.contains("Lisbon")), "{stored:?}");
}

#[tokio::test]
async fn one_users_jobs_never_overlap_while_other_users_jobs_run_beside_them() {
    let h = quick(2).await;
    h.mock.push_marked(
        "MEMPROXY-EXTRACT",
        Reply::Stall(
            Duration::from_secs(3),
            Box::new(Reply::Text(
                json!({"facts": [{"text": "Alice lives in Lisbon", "kind": "fact"}]}).to_string(),
            )),
        ),
    );
    implicit(
        &h,
        "alice",
        json!([{"role": "user", "content": "I live in Lisbon."}]),
    )
    .await;
    eventually("alice's first job runs", || async {
        of_user(&jobs(&h, "running").await, "alice").len() == 1
    })
    .await;
    // A second chat of alice's, and one of bob's.
    implicit(
        &h,
        "alice",
        json!([{"role": "user", "content": "I work as a nurse."}]),
    )
    .await;
    implicit(
        &h,
        "bob",
        json!([{"role": "user", "content": "I play the cello."}]),
    )
    .await;
    eventually("bob's job ran beside alice's", || async {
        memories(&h, "bob")
            .await
            .iter()
            .any(|m| m.contains("cello"))
    })
    .await;
    let running = jobs(&h, "running").await;
    assert_eq!(of_user(&running, "alice").len(), 1, "{running:?}");
    let queued = jobs(&h, "queued").await;
    assert_eq!(
        of_user(&queued, "alice").len(),
        1,
        "alice's second job waits for her first: {queued:?}"
    );
    eventually("alice's jobs both ran", || async {
        let stored = memories(&h, "alice").await;
        stored.iter().any(|m| m.contains("Lisbon")) && stored.iter().any(|m| m.contains("nurse"))
    })
    .await;
}
