//! The store conformance suite: one set of checks per area, run on a fresh store of every
//! backend ([`crate::backends`]: SQLite in a temporary file, PostgreSQL in a fresh database on the
//! server `scripts/test` starts). This file has the `Users`, `Jobs`, response log and integrity
//! areas; `conformance_memory` the recall log, facts and search; `conformance_agents` the agents
//! and shared blocks; `conformance_transfer` export and import.

use std::collections::HashSet;
use std::sync::Arc;

use memproxy::store::Store;

use crate::backends::on_every_backend;
use memproxy::store::{NewJob, Page, UserScope};
use serde_json::json;

const LEASE: i64 = 60_000;

fn job(user: &str, key: &str) -> NewJob {
    NewJob {
        kind: "extract".to_owned(),
        scope: Some(UserScope::new("acme", user)),
        dedupe_key: Some(key.to_owned()),
        payload: json!({"conversation": key}),
        run_after_ms: 0,
    }
}

fn users_area(store: &dyn Store) {
    let (ana, ana_globex) = (
        UserScope::new("acme", "ana"),
        UserScope::new("globex", "ana"),
    );
    assert_eq!(store.find_user(&ana).expect("find"), None);
    let id = store.ensure_user(&ana).expect("ensure");
    assert_eq!(
        store.ensure_user(&ana).expect("again"),
        id,
        "one id per user"
    );
    assert_eq!(store.find_user(&ana).expect("find"), Some(id));
    let other = store.ensure_user(&ana_globex).expect("ensure");
    assert_ne!(other, id, "the same name in another tenant is another user");
    store
        .ensure_user(&UserScope::new("acme", "bob"))
        .expect("ensure");
    assert_eq!(store.list_users("acme").expect("list"), ["ana", "bob"]);
    assert_eq!(store.list_users("globex").expect("list"), ["ana"]);
    assert!(store.delete_user(&ana).expect("delete"));
    assert!(!store.delete_user(&ana).expect("delete again"));
    assert_eq!(store.find_user(&ana).expect("find"), None);
    assert_eq!(store.find_user(&ana_globex).expect("find"), Some(other));
}

fn jobs_area(store: &dyn Store) {
    // One queued job per key (debounce), one per user running at a time.
    let first = store.enqueue_job(&job("ana", "k1")).expect("enqueue");
    assert_eq!(store.enqueue_job(&job("ana", "k1")).expect("again"), first);
    let second = store.enqueue_job(&job("ana", "k2")).expect("enqueue");
    assert_ne!(first, second);
    let queued = store
        .list_jobs(Some("queued"), Page::default())
        .expect("list");
    assert_eq!(queued.len(), 2);
    let claimed = store.claim_job(1, LEASE).expect("claim").expect("a job");
    assert_eq!(
        (claimed.id, claimed.attempts, claimed.state.as_str()),
        (first, 1, "running")
    );
    assert_eq!(claimed.scope, Some(UserScope::new("acme", "ana")));
    assert_eq!(claimed.payload["conversation"], "k1");
    assert!(
        store.claim_job(2, LEASE).expect("claim").is_none(),
        "Ana's second job waits for her first"
    );

    // A new request for k1 while its job runs queues a new job; the failed run merges into it.
    let newer = store.enqueue_job(&job("ana", "k1")).expect("enqueue");
    assert_ne!(newer, first);
    store
        .fail_job(first, "the memory LLM timed out", Some(5))
        .expect("fail");
    let all = store.list_jobs(None, Page::default()).expect("list");
    let state = |id: i64| all.iter().find(|j| j.id == id).expect("listed").clone();
    assert_eq!(state(first).state, "merged");
    assert!(state(first)
        .last_error
        .unwrap_or_default()
        .contains(&newer.to_string()));
    assert_eq!(
        state(newer).attempts,
        1,
        "the merged job keeps the attempts"
    );
    assert_eq!(
        state(newer).last_error.as_deref(),
        Some("the memory LLM timed out")
    );

    // Done, counted per user; failed for good.
    let next = store.claim_job(10, LEASE).expect("claim").expect("a job");
    store.complete_job(next.id, "2 added").expect("complete");
    let after = store.claim_job(10, LEASE).expect("claim").expect("a job");
    assert_ne!(after.id, next.id);
    store.fail_job(after.id, "bad answer", None).expect("fail");
    let all = store.list_jobs(None, Page::default()).expect("list");
    let done: Vec<_> = all.iter().filter(|j| j.state == "done").collect();
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].report.as_deref(), Some("2 added"));
    assert_eq!(
        all.iter().filter(|j| j.state == "failed").count(),
        1,
        "{all:?}"
    );
    let ana = UserScope::new("acme", "ana");
    assert_eq!(store.count_done_jobs(&ana, "extract", 0).expect("count"), 1);
    assert_eq!(
        store
            .count_done_jobs(&UserScope::new("acme", "bob"), "extract", 0)
            .expect("count"),
        0
    );

    // A job whose worker is gone is taken again once its lease has run out.
    let lost = store.enqueue_job(&job("cy", "k3")).expect("enqueue");
    let taken = store.claim_job(100, LEASE).expect("claim").expect("a job");
    assert_eq!(taken.id, lost);
    let now = memproxy::store::now_ms();
    assert!(store.claim_job(now, LEASE).expect("claim").is_none());
    let again = store
        .claim_job(now + LEASE + 1, LEASE)
        .expect("claim")
        .expect("the lost job");
    assert_eq!((again.id, again.attempts), (lost, 2));
}

/// Several workers (of one process or of several replicas: `stores` share one database) take
/// every job exactly once, never two of one user at a time.
fn jobs_run_once(stores: Vec<Arc<dyn Store>>) {
    let users = 12;
    for user in 0..users {
        for key in 0..3 {
            stores[0]
                .enqueue_job(&job(&format!("u{user}"), &format!("u{user}-k{key}")))
                .expect("enqueue");
        }
    }
    let workers: Vec<_> = (0..4)
        .map(|worker| {
            let store = Arc::clone(&stores[worker % stores.len()]);
            std::thread::spawn(move || {
                let mut taken = Vec::new();
                while let Some(job) = store
                    .claim_job(memproxy::store::now_ms(), LEASE)
                    .expect("claim")
                {
                    taken.push(job.id);
                    std::thread::sleep(std::time::Duration::from_millis(2));
                    store.complete_job(job.id, "done").expect("complete");
                }
                taken
            })
        })
        .collect();
    let taken: Vec<i64> = workers
        .into_iter()
        .flat_map(|worker| worker.join().expect("worker"))
        .collect();
    let distinct: HashSet<i64> = taken.iter().copied().collect();
    assert_eq!(
        distinct.len(),
        taken.len(),
        "a job was run twice: {taken:?}"
    );
    let done = stores[0]
        .list_jobs(
            Some("done"),
            Page {
                limit: 1000,
                offset: 0,
            },
        )
        .expect("list");
    assert_eq!(done.len(), users * 3, "every job done once");
}

#[test]
fn users_on_every_backend() {
    on_every_backend(|b| users_area(&*b.store));
}

#[test]
fn jobs_on_every_backend() {
    on_every_backend(|b| jobs_area(&*b.store));
}

#[test]
fn jobs_run_once_across_workers_and_replicas() {
    on_every_backend(|b| jobs_run_once(vec![Arc::clone(&b.store), (b.replica)()]));
}

fn responses_area(store: &dyn Store) {
    use memproxy::store::responses::{chain_messages, StoredResponse};
    let (ada, bob) = (UserScope::new("acme", "ada"), UserScope::new("acme", "bob"));
    let response = |id: &str, previous: Option<&str>, text: &str| StoredResponse {
        id: id.to_owned(),
        previous: previous.map(str::to_owned),
        messages: json!([{"role": "user", "content": text}]).to_string(),
        body: json!({"id": id}).to_string(),
        created_at_ms: 1,
    };
    store
        .put_response(&ada, &response("resp_1", None, "one"))
        .expect("put");
    store
        .put_response(&ada, &response("resp_2", Some("resp_1"), "two"))
        .expect("put");
    let chain = store.response_chain(&ada, "resp_2", 10).expect("chain");
    assert_eq!(
        chain.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
        ["resp_2", "resp_1"]
    );
    let messages = chain_messages(store, &ada, "resp_2")
        .expect("messages")
        .expect("complete");
    assert_eq!(messages.len(), 2);
    assert_eq!(
        store
            .response_chain(&ada, "resp_2", 1)
            .expect("limited")
            .len(),
        1
    );
    assert_eq!(store.response(&bob, "resp_1").expect("bob"), None);
    assert!(store
        .response_chain(&bob, "resp_2", 10)
        .expect("bob")
        .is_empty());
    assert!(!store.delete_response(&bob, "resp_1").expect("bob"));
    assert!(store.delete_response(&ada, "resp_1").expect("delete"));
    assert_eq!(
        chain_messages(store, &ada, "resp_2").expect("messages"),
        None,
        "a missing link makes the chain unknown"
    );
}

/// Retention: past the cut-off time, and beyond each user's newest N, responses go; each user's
/// count is their own.
fn response_retention_area(store: &dyn Store) {
    use memproxy::store::responses::StoredResponse;
    let (cy, dee) = (
        UserScope::new("acme", "cy"),
        UserScope::new("globex", "dee"),
    );
    let at = |id: &str, created_at_ms: i64| StoredResponse {
        id: id.to_owned(),
        previous: None,
        messages: "[]".to_owned(),
        body: "{}".to_owned(),
        created_at_ms,
    };
    for (id, when) in [("old", 100), ("mid", 200), ("new", 300), ("newest", 400)] {
        store.put_response(&cy, &at(id, when)).expect("put");
    }
    store.put_response(&dee, &at("only", 100)).expect("put");
    let ids = |scope: &UserScope| -> Vec<&str> {
        ["old", "mid", "new", "newest", "only"]
            .into_iter()
            .filter(|id| store.response(scope, id).expect("read").is_some())
            .collect()
    };
    // Nothing is old enough and everyone is within the count: nothing goes.
    assert_eq!(store.prune_responses(0, 10).expect("prune"), 0);
    // Older than 150: cy's oldest and dee's only one (and what another area left that old).
    assert!(store.prune_responses(150, 10).expect("prune") >= 2);
    assert_eq!(ids(&cy), ["mid", "new", "newest"]);
    assert!(ids(&dee).is_empty());
    // At most two per user: cy's older one of the three goes.
    assert_eq!(store.prune_responses(0, 2).expect("prune"), 1);
    assert_eq!(ids(&cy), ["new", "newest"]);
}

#[test]
fn response_log_on_every_backend() {
    on_every_backend(|b| {
        responses_area(&*b.store);
        response_retention_area(&*b.store);
    });
}

/// The consistency check reads the store as it is when it runs. A reader that searched the
/// keyword index before the writer rewrote it (FTS5 merges segments as rows come and go) must not
/// report the segments it saw then as missing: a false "corruption" that failed the crash test.
fn integrity_area(store: &dyn Store) {
    use memproxy::store::{Corpus, NewMemory};
    let ana = UserScope::new("acme", "ana");
    store.ensure_user(&ana).expect("user");
    for round in 0..30 {
        for _ in 0..8 {
            store
                .keyword_search(&ana, Corpus::Memory, "garden tomatoes", 5, None)
                .expect("search");
        }
        for k in 0..3 {
            let memory = NewMemory {
                text: format!("Round {round}: grows tomatoes in garden bed {k}."),
                kind: "fact".to_owned(),
                sources: vec![],
                subject: None,
                created_at_ms: 1_000,
                embedding: None,
            };
            let id = match store.insert_memory(&ana, &memory, "test").expect("insert") {
                memproxy::store::Inserted::New { id, .. } => id,
                other => panic!("expected a new memory, got {other:?}"),
            };
            if k == 1 {
                store.delete_memory(&ana, id, "test").expect("delete");
            }
        }
        let problems = store.storage_problems().expect("check");
        assert!(problems.is_empty(), "round {round}: {problems:?}");
    }
}

#[test]
fn the_check_reads_the_store_as_it_is_on_every_backend() {
    on_every_backend(|b| integrity_area(&*b.store));
}

/// Facts that no longer hold: the old text of an update and a retired memory, newest first;
/// not what consolidation retired (junk, duplicates), not a memory restored since, not another
/// user's.
fn former_facts_area(store: &dyn Store) {
    let (ana, bob) = (UserScope::new("acme", "ana"), UserScope::new("acme", "bob"));
    let add = |scope: &UserScope, text: &str| add_fact(store, scope, text);
    let job = add(&ana, "The user works at Fabrikam.");
    store
        .update_memory(
            &ana,
            job,
            "The user works at Contoso.",
            None,
            &[],
            "extract job 1",
        )
        .expect("update");
    let city = add(&ana, "The user lives in Lisbon.");
    store
        .invalidate_memory(&ana, city, "extract job 2")
        .expect("retire");
    let junk = add(&ana, "Certainly! Here are some ideas.");
    store
        .invalidate_memory(&ana, junk, "consolidation job 3: junk (from_assistant)")
        .expect("consolidate");
    let back = add(&ana, "The user has a cat named Miso.");
    store.invalidate_memory(&ana, back, "api").expect("retire");
    store.restore_memory(&ana, back, "api").expect("restore");
    let other = add(&bob, "The user lives in Oslo.");
    store.invalidate_memory(&bob, other, "api").expect("retire");

    let former = store.former_facts(&ana, 10).expect("former");
    let texts: Vec<(&str, Option<&str>)> = former
        .iter()
        .map(|f| (f.text.as_str(), f.replaced_by.as_deref()))
        .collect();
    assert_eq!(
        texts,
        [
            ("The user lives in Lisbon.", None),
            (
                "The user works at Fabrikam.",
                Some("The user works at Contoso.")
            ),
        ]
    );
    assert!(former.iter().all(|f| f.until_ms > 0));
    assert_eq!(store.former_facts(&ana, 1).expect("limited").len(), 1);
    assert!(store
        .former_facts(&UserScope::new("acme", "nobody"), 10)
        .expect("unknown user")
        .is_empty());
}

#[test]
fn former_facts_on_every_backend() {
    on_every_backend(|b| former_facts_area(&*b.store));
}

/// Whether the user ever said a word ([`memproxy::memory::unmentioned`]): their live facts and
/// their own turns holding it, any word form, however common the word is among all users; not
/// the assistant's turns, not a retired fact, not another user's.
fn texts_with_area(store: &dyn Store) {
    use memproxy::store::Corpus;
    let (ana, bob) = (UserScope::new("acme", "ana"), UserScope::new("acme", "bob"));
    let add = |scope: &UserScope, text: &str| add_fact(store, scope, text);
    add(&ana, "The user has a cat named Miso.");
    let old = add(&ana, "The user had a parrot.");
    store.invalidate_memory(&ana, old, "api").expect("retire");
    // Common among all users: keyword search would skip the word, this must not.
    for n in 0..3 {
        add(&bob, &format!("The user has dog number {n}."));
    }
    let turns = [
        super::conformance_memory::turn("user", "I ride my bikes to work."),
        super::conformance_memory::turn("assistant", "You could get a hamster."),
    ];
    store
        .sync_messages(&ana, "c1", "default", &turns)
        .expect("sync");
    let words = |list: &[&str]| list.iter().map(|w| (*w).to_owned()).collect::<Vec<_>>();

    let cats = store
        .texts_with(&ana, Corpus::Memory, &words(&["cats", "kitten"]), 10)
        .expect("facts");
    assert_eq!(cats, ["The user has a cat named Miso."]);
    let bikes = store
        .texts_with(&ana, Corpus::Message, &words(&["bike"]), 10)
        .expect("turns");
    assert_eq!(bikes, ["I ride my bikes to work."]);
    for (corpus, word) in [
        (Corpus::Message, "hamster"),
        (Corpus::Memory, "parrot"),
        (Corpus::Memory, "dog"),
        (Corpus::Memory, "\" OR x:*"),
    ] {
        let found = store
            .texts_with(&ana, corpus, &words(&[word]), 10)
            .expect("search");
        assert!(found.is_empty(), "{word}: {found:?}");
    }
    let dogs = store
        .texts_with(&bob, Corpus::Memory, &words(&["dog"]), 2)
        .expect("bob's");
    assert_eq!(dogs.len(), 2, "limited: {dogs:?}");
}

#[test]
fn texts_with_words_on_every_backend() {
    on_every_backend(|b| texts_with_area(&*b.store));
}

/// A new fact of `scope`'s; its id.
fn add_fact(store: &dyn Store, scope: &UserScope, text: &str) -> i64 {
    use memproxy::store::{Inserted, NewMemory};
    let memory = NewMemory {
        text: text.to_owned(),
        kind: "fact".to_owned(),
        sources: vec![],
        subject: None,
        created_at_ms: 1_000,
        embedding: None,
    };
    match store.insert_memory(scope, &memory, "test").expect("insert") {
        Inserted::New { id, .. } => id,
        other => panic!("expected a new memory, got {other:?}"),
    }
}
