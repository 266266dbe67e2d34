//! Storage durability: migrations, index rebuilds, crashes, jobs, keyword search at scale, the
//! recall log under edited histories, and the `openai` embedder against the scripted
//! `/v1/embeddings`. Export/import and deleting a user are in `memory_transfer`.

use std::sync::Arc;

use memproxy::memory::{MemoryService, RetrievalRequest};
use memproxy::store::prelude::*;
use memproxy::store::sqlite::SqliteStore;
use memproxy::store::{Corpus, Embedding, NewJob, NewMemory, NewMessage, Page, UserScope};
use rusqlite::Connection;

use crate::common::{alice, local_embedder, memory_in, query};

#[test]
fn migrations_apply_from_empty_and_reopen_keeps_data() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("memproxy.db");
    let store = SqliteStore::open(&path).expect("open");
    let version = store.schema_version().expect("version");
    assert!(version >= 1);
    store.ensure_user(&alice()).expect("user");
    drop(store);
    let reopened = SqliteStore::open(&path).expect("reopen");
    assert_eq!(reopened.schema_version().expect("version"), version);
    assert_eq!(reopened.list_users("acme").expect("users"), ["alice"]);
    let journal: String = Connection::open(&path)
        .expect("raw")
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .expect("pragma");
    assert_eq!(journal, "wal");
}

/// Schema 15 gives each stored turn the words of the turn before it as a lower-weighted keyword
/// context: a database from before it gets the context of the turns it already holds.
#[test]
fn the_keyword_context_is_filled_in_for_turns_stored_before_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("memproxy.db");
    let store = SqliteStore::open(&path).expect("open");
    let log = [
        crate::conformance_memory::turn("user", "Did you ever visit the lighthouse museum?"),
        crate::conformance_memory::turn("assistant", "Yes, last May, with my cousin."),
    ];
    store
        .sync_messages(&alice(), "c", "default", &log)
        .expect("sync");
    drop(store);
    // Back to schema 14's index: the turns' own words only.
    Connection::open(&path)
        .expect("raw")
        .execute_batch(
            "DROP TRIGGER messages_fts_insert;
             DROP TABLE messages_fts;
             CREATE VIRTUAL TABLE messages_fts USING fts5(text, scope, content='',
                 contentless_delete=1, tokenize='porter unicode61');
             INSERT INTO messages_fts(rowid, text, scope)
                 SELECT id, COALESCE(search_text, content), 'u' || uid FROM messages;
             CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
                 INSERT INTO messages_fts(rowid, text, scope)
                 VALUES (new.id, COALESCE(new.search_text, new.content), 'u' || new.uid);
             END;
             DELETE FROM schema_migrations WHERE version >= 15;",
        )
        .expect("schema 14");
    let store = SqliteStore::open(&path).expect("reopen");
    // 15 rebuilds the index with the context, 16 reads a branch's first context in its parent.
    assert_eq!(store.schema_version().expect("version"), 16);
    let found = store
        .keyword_search(&alice(), Corpus::Message, "museum", 10, None)
        .expect("search");
    assert_eq!(
        found.len(),
        2,
        "the answer is found by its question: {found:?}"
    );
}

#[test]
fn a_database_from_a_newer_memproxy_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("memproxy.db");
    drop(SqliteStore::open(&path).expect("open"));
    Connection::open(&path)
        .expect("raw")
        .execute("INSERT INTO schema_migrations VALUES (999, 0)", [])
        .expect("insert");
    let error = SqliteStore::open(&path).err().expect("refused");
    assert!(error.to_string().contains("newer"), "{error}");
}

#[tokio::test]
async fn deleting_the_index_files_rebuilds_them_from_sqlite() {
    let dir = tempfile::tempdir().expect("tempdir");
    let memory = memory_in(dir.path());
    memory
        .add_memory(&alice(), "Alice is allergic to peanuts.", "fact", "t")
        .await
        .expect("add");
    memory.flush().await.expect("flush");
    let uid = memory
        .store()
        .find_user(&alice())
        .expect("find")
        .expect("uid");
    let files = memory.vectors().files_of(uid);
    assert!(!files.is_empty());
    drop(memory);
    for file in &files {
        std::fs::remove_file(file).expect("remove");
    }
    let reopened = memory_in(dir.path());
    reopened.vectors().verify(uid).expect("verify at start-up");
    assert!(reopened
        .vectors()
        .files_of(uid)
        .iter()
        .any(|f| f.extension().is_some_and(|e| e == "usearch")));
    let hits = reopened
        .retrieve(&alice(), query("what food allergy"))
        .await
        .expect("search");
    assert_eq!(
        hits.first().map(|h| h.text.as_str()),
        Some("Alice is allergic to peanuts.")
    );
    assert!(
        hits[0].vector_rank.is_some(),
        "found through the rebuilt vector index"
    );
}

#[tokio::test]
async fn a_crash_between_database_and_index_never_surfaces_deleted_memories() {
    let dir = tempfile::tempdir().expect("tempdir");
    let memory = memory_in(dir.path());
    let doomed = "Alice's old phone number is 555-0199.";
    memory
        .add_memory(&alice(), doomed, "fact", "t")
        .await
        .expect("add");
    memory.flush().await.expect("flush");
    let listed = memory
        .list_memories(&alice(), false, Page::default())
        .await
        .expect("list");
    // "Crash": the row is deleted in SQLite but the index file is never updated.
    memory
        .store()
        .delete_memory(&alice(), listed[0].id, "crash test")
        .expect("delete");
    // And a row written to SQLite whose vector never reached the index.
    let vector = local_embedder()
        .embed(vec!["Alice's new phone is a Pixel.".into()])
        .await
        .expect("embed");
    let model = local_embedder().model_id().to_owned();
    memory
        .store()
        .insert_memory(
            &alice(),
            &NewMemory {
                text: "Alice's new phone is a Pixel.".into(),
                kind: "fact".into(),
                sources: vec![],
                subject: None,
                created_at_ms: 1,
                embedding: Some(Embedding {
                    model,
                    vector: vector[0].clone(),
                }),
            },
            "crash test",
        )
        .expect("insert");
    drop(memory);

    let restarted = memory_in(dir.path());
    let hits = restarted
        .retrieve(&alice(), query("phone number"))
        .await
        .expect("search");
    let found: Vec<&str> = hits.iter().map(|h| h.text.as_str()).collect();
    assert!(
        !found.contains(&doomed),
        "deleted memory surfaced: {found:?}"
    );
    assert!(
        found.contains(&"Alice's new phone is a Pixel."),
        "{found:?}"
    );
}

#[test]
fn jobs_survive_restarts_and_retry() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("memproxy.db");
    let store = SqliteStore::open(&path).expect("open");
    let job = |key: &str, at: i64| NewJob {
        kind: "extract".into(),
        scope: Some(alice()),
        dedupe_key: Some(key.into()),
        payload: serde_json::json!({"conversation": key, "at": at}),
        run_after_ms: at,
    };
    let first = store.enqueue_job(&job("c1", 100)).expect("enqueue");
    let debounced = store.enqueue_job(&job("c1", 200)).expect("enqueue");
    assert_eq!(first, debounced, "one pending job per key");
    assert!(
        store.claim_job(150, LEASE).expect("claim").is_none(),
        "pushed back to 200"
    );
    let claimed = store.claim_job(250, LEASE).expect("claim").expect("due");
    assert_eq!(
        (claimed.attempts, claimed.payload["at"].as_i64()),
        (1, Some(200))
    );
    assert_eq!(claimed.scope, Some(alice()));
    drop(store); // crash while running

    let store = SqliteStore::open(&path).expect("reopen");
    assert_eq!(store.requeue_interrupted_jobs().expect("requeue"), 1);
    let again = store
        .claim_job(250, LEASE)
        .expect("claim")
        .expect("requeued");
    assert_eq!(again.attempts, 2);
    store
        .fail_job(again.id, "LLM answered nonsense", Some(400))
        .expect("fail");
    assert!(store.claim_job(300, LEASE).expect("claim").is_none());
    let retried = store.claim_job(400, LEASE).expect("claim").expect("retry");
    store
        .fail_job(retried.id, "still nonsense", None)
        .expect("give up");
    let failed = store
        .list_jobs(Some("failed"), Page::default())
        .expect("list");
    assert_eq!(failed[0].last_error.as_deref(), Some("still nonsense"));

    // A job whose worker vanished mid-run (no restart to requeue it) is taken again after its
    // lease, not before.
    store.enqueue_job(&job("c2", 0)).expect("enqueue");
    let now = memproxy::store::now_ms();
    let lost = store.claim_job(now, LEASE).expect("claim").expect("due");
    assert!(store
        .claim_job(now + LEASE - 1_000, LEASE)
        .expect("claim")
        .is_none());
    let taken_again = store
        .claim_job(now + LEASE + 1_000, LEASE)
        .expect("claim")
        .expect("lease expired");
    assert_eq!((taken_again.id, taken_again.attempts), (lost.id, 2));
}

const LEASE: i64 = 60_000;

#[tokio::test]
async fn the_openai_embedder_uses_any_embeddings_endpoint() {
    let mock = memproxy::mock::MockUpstream::start().await.expect("mock");
    let embedder = memproxy::embed::OpenAiEmbedder::new(
        &mock.base_url(),
        "mock-embed",
        Some(memproxy::config::Secret::new("sk-e")),
        64,
    )
    .expect("embedder");
    let dir = tempfile::tempdir().expect("tempdir");
    let memory = MemoryService::open(dir.path(), Arc::new(embedder)).expect("open");
    memory
        .add_memory(&alice(), "Alice collects vintage typewriters.", "fact", "t")
        .await
        .expect("add");
    memory
        .add_memory(&alice(), "Alice's favourite colour is teal.", "fact", "t")
        .await
        .expect("add");
    let request = RetrievalRequest {
        min_similarity: 0.3,
        ..query("vintage typewriters")
    };
    let hits = memory.retrieve(&alice(), request).await.expect("search");
    assert_eq!(hits[0].text, "Alice collects vintage typewriters.");
    assert!(hits[0].similarity.is_some_and(|s| s > 0.5));
    let requests = mock.requests();
    assert!(requests
        .iter()
        .all(|r| r.path_and_query == "/v1/embeddings"));
    assert_eq!(requests[0].headers["authorization"], "Bearer sk-e");
    assert_eq!(requests[0].json()["model"], "mock-embed");
    let stored = memory
        .list_memories(&alice(), false, Page::default())
        .await
        .expect("list");
    assert_eq!(
        stored[0].embedding_model.as_deref(),
        Some("openai:mock-embed")
    );
    let _ = Corpus::Memory;
}

#[test]
fn keyword_search_of_a_big_user_keeps_the_informative_words() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = SqliteStore::open(&dir.path().join("memproxy.db")).expect("open");
    let memory = |text: String| NewMemory {
        text,
        kind: "fact".into(),
        sources: vec![],
        subject: None,
        created_at_ms: 1,
        embedding: None,
    };
    // 1,500 rows: past the size where a user is searched whole.
    for i in 0..1500 {
        store
            .insert_memory(
                &alice(),
                &memory(format!("Weekly grocery list number {i}: apples and bread.")),
                "t",
            )
            .expect("insert");
    }
    store
        .insert_memory(
            &alice(),
            &memory("The grocery order for the party includes durian.".into()),
            "t",
        )
        .expect("insert");
    store
        .insert_memory(
            &UserScope::new("acme", "bob"),
            &memory("Bob also wants durian.".into()),
            "t",
        )
        .expect("insert");

    let hits = store
        .keyword_search(&alice(), Corpus::Memory, "grocery durian", 10, None)
        .expect("search");
    assert_eq!(
        hits.len(),
        1,
        "'grocery' matches every row and is skipped; 'durian' decides"
    );
    let documents = store
        .documents(&alice(), Corpus::Memory, &[hits[0].0])
        .expect("documents");
    assert!(documents[0].text.contains("durian"));
    let small = store
        .keyword_search(
            &UserScope::new("acme", "bob"),
            Corpus::Memory,
            "wants durian",
            10,
            None,
        )
        .expect("search");
    assert_eq!(
        small.len(),
        1,
        "a small user is searched with every word, only their own rows"
    );
}

#[test]
fn resent_windowed_edited_and_regenerated_histories_branch_and_keep_every_turn_live() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = SqliteStore::open(&dir.path().join("memproxy.db")).expect("open");
    let turn = |role: &str, content: &str| NewMessage {
        position: 0,
        role: role.into(),
        content: content.into(),
        name: None,
        tool_calls: None,
        tool_call_id: None,
        created_at_ms: 1,
    };
    let sync = |turns: &[NewMessage]| -> (String, Vec<(i64, String)>) {
        let synced = store
            .sync_messages(&alice(), "c", "default", turns)
            .expect("sync");
        let stored = synced
            .stored
            .into_iter()
            .map(|m| (m.position, m.content))
            .collect();
        (synced.conversation, stored)
    };
    let (u1, a1, u2, a2, u3) = (
        turn("user", "u1"),
        turn("assistant", "a1"),
        turn("user", "u2"),
        turn("assistant", "a2"),
        turn("user", "u3"),
    );
    let main = |stored: Vec<(i64, &str)>| {
        (
            "c".to_owned(),
            stored
                .into_iter()
                .map(|(p, t)| (p, t.to_owned()))
                .collect::<Vec<_>>(),
        )
    };
    assert_eq!(
        sync(&[u1.clone(), a1.clone()]),
        main(vec![(0, "u1"), (1, "a1")])
    );
    // The whole history again plus one turn: only the new turn is stored.
    assert_eq!(
        sync(&[u1.clone(), a1.clone(), u2.clone()]),
        main(vec![(2, "u2")])
    );
    // An app that sends only its newest turns: aligned by content, not by index.
    assert_eq!(
        sync(&[u2.clone(), a2.clone(), u3.clone()]),
        main(vec![(3, "a2"), (4, "u3")])
    );
    // A regenerated answer goes to a branch that leaves the log where the old answer stands.
    sync(&[u2.clone(), a2.clone(), u3.clone(), turn("assistant", "a3")]);
    let (regenerated, stored) = sync(&[u3.clone(), turn("assistant", "a3 again")]);
    assert!(regenerated.starts_with("c~"), "{regenerated}");
    assert_eq!(stored, [(5, "a3 again".to_owned())]);
    // An edit of turn 2 branches off at position 2; the same history finds the same branch.
    let (edited, stored) = sync(&[u1.clone(), a1.clone(), turn("user", "u2 edited")]);
    assert_eq!(stored, [(2, "u2 edited".to_owned())]);
    assert!(edited.starts_with("c~") && edited != regenerated);
    let (again, stored) = sync(&[
        u1.clone(),
        a1.clone(),
        turn("user", "u2 edited"),
        turn("assistant", "a2 of the edit"),
    ]);
    assert_eq!(
        (again.as_str(), stored),
        (edited.as_str(), vec![(3, "a2 of the edit".to_owned())])
    );
    // Going back to the original history continues the original log: nothing was replaced.
    assert_eq!(sync(&[u1.clone(), a1.clone(), u2.clone()]), main(vec![]));
    let live = |conversation: &str| -> Vec<String> {
        let messages = store
            .list_messages(&alice(), conversation, Page::default())
            .expect("list");
        assert!(messages.iter().all(|m| !m.superseded), "{messages:?}");
        let ids: Vec<i64> = messages.iter().map(|m| m.id).collect();
        let mut docs = store
            .documents(&alice(), Corpus::Message, &ids)
            .expect("docs");
        docs.sort_by_key(|d| d.id);
        docs.into_iter().map(|d| d.text).collect()
    };
    assert_eq!(live("c"), ["u1", "a1", "u2", "a2", "u3", "a3"]);
    assert_eq!(live(&regenerated), ["a3 again"]);
    assert_eq!(live(&edited), ["u2 edited", "a2 of the edit"]);
    let conversations = store.list_conversations(&alice()).expect("list");
    let branch = |id: &str| {
        let c = conversations.iter().find(|c| c.id == id).expect("listed");
        (c.parent.clone(), c.fork_position)
    };
    assert_eq!(branch("c"), (None, 0));
    assert_eq!(branch(&regenerated), (Some("c".to_owned()), 5));
    assert_eq!(branch(&edited), (Some("c".to_owned()), 2));
}

#[test]
fn a_new_memory_is_found_by_keyword_at_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = SqliteStore::open(&dir.path().join("memproxy.db")).expect("open");
    // A search before the word exists must not hide the row added right after it.
    assert!(store
        .keyword_search(&alice(), Corpus::Memory, "zeppelin ride", 10, None)
        .expect("search")
        .is_empty());
    let memory = NewMemory {
        text: "Alice took a zeppelin ride.".into(),
        kind: "fact".into(),
        sources: vec![],
        subject: None,
        created_at_ms: 1,
        embedding: None,
    };
    store.insert_memory(&alice(), &memory, "t").expect("insert");
    assert_eq!(
        store
            .keyword_search(&alice(), Corpus::Memory, "zeppelin ride", 10, None)
            .expect("search")
            .len(),
        1
    );
}

/// PostgreSQL schema 4 fills in the keyword context of a branch's first turn stored before it
/// (an edited answer, whose question is in the conversation it branched from), as SQLite's
/// migration 16 does: the database is taken back to version 3's state for that turn (no context,
/// version 4 not recorded) and opened again.
#[test]
fn postgres_schema_4_gives_an_old_branchs_first_turn_its_question() {
    let Some(url) = crate::backends::postgres_url() else {
        return;
    };
    let opener = crate::conformance_memory::turn("user", "I am planning a weekend in Porto.");
    let question =
        crate::conformance_memory::turn("assistant", "Did you ever visit the lighthouse museum?");
    let answers = [
        "Not yet, it is on my list.",
        "Yes, last May, with my cousin.",
    ];
    let store = crate::backends::postgres(&url);
    let mut edited = None;
    for answer in answers {
        let log = [
            opener.clone(),
            question.clone(),
            crate::conformance_memory::turn("user", answer),
        ];
        let synced = store
            .sync_messages(&alice(), "c", "default", &log)
            .expect("sync");
        edited = synced.stored.last().map(|turn| turn.id);
    }
    let edited = edited.expect("the edited answer, in a branch");
    let found = |store: &dyn Store| -> Vec<i64> {
        let hits = store
            .keyword_search(&alice(), Corpus::Message, "museum", 10, None)
            .expect("search");
        hits.into_iter().map(|(id, _)| id).collect()
    };
    assert!(
        found(&store).contains(&edited),
        "stored now, the branch's first turn is found by its question"
    );
    drop(store);
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
            .await
            .expect("connect");
        tokio::spawn(connection);
        client
            .batch_execute(
                "UPDATE messages m SET context = NULL FROM conversations b
                 WHERE b.id = m.conversation_id AND b.parent IS NOT NULL;
                 DELETE FROM schema_migrations WHERE version >= 4;",
            )
            .await
            .expect("back to version 3's state");
    });
    let store = crate::backends::postgres(&url);
    assert!(found(&store).contains(&edited), "after schema 4");
}
