//! Moving a user's memory: JSONL export and import (exact round trip, superseded turns, agent
//! search text) and forgetting a user entirely.

use memproxy::memory::{MemoryService, RetrievalRequest};
use memproxy::store::{CoreBlock, Corpus, NewJob, NewMessage, SharedBlock, Summary, UserScope};
use rusqlite::Connection;

use crate::common::{alice, memory_in, query, turn};

async fn populate(memory: &MemoryService, scope: &UserScope) {
    let turns = vec![
        NewMessage {
            position: 0,
            role: "user".into(),
            content: "I'm training for the Berlin marathon.".into(),
            name: None,
            tool_calls: None,
            tool_call_id: None,
            created_at_ms: 1_700_000_000_000,
        },
        NewMessage {
            position: 1,
            role: "assistant".into(),
            content: String::new(),
            name: None,
            tool_calls: Some(
                r#"[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]"#
                    .into(),
            ),
            tool_call_id: None,
            created_at_ms: 1_700_000_000_001,
        },
        NewMessage {
            position: 2,
            role: "tool".into(),
            content: "ok".into(),
            name: None,
            tool_calls: None,
            tool_call_id: Some("c1".into()),
            created_at_ms: 1_700_000_000_002,
        },
    ];
    memory
        .record_messages(scope, "run-club", "coach", turns)
        .await
        .expect("record");
    memory
        .add_memory(
            scope,
            "Alice runs the Berlin marathon in September.",
            "fact",
            "t",
        )
        .await
        .expect("add");
    let old = memory
        .add_memory(scope, "Alice runs 20 km a week.", "fact", "t")
        .await
        .expect("add");
    if let memproxy::store::Inserted::New { id, .. } = old {
        memory
            .retire_memory(scope, id, false, "t")
            .await
            .expect("invalidate");
    }
    let block = CoreBlock {
        label: "human".into(),
        value: "Name: Alice".into(),
        char_limit: 2000,
        read_only: false,
        updated_at_ms: 0,
        shared: None,
    };
    memory
        .store()
        .put_core_block(scope, "coach", &block)
        .expect("block");
    let team = SharedBlock {
        name: "running".into(),
        label: "club".into(),
        value: "The run club meets on Sundays.".into(),
        char_limit: 500,
        read_only: true,
        updated_at_ms: 0,
        agents: vec![],
    };
    memory
        .store()
        .put_shared_block(scope, &team)
        .expect("shared block");
    memory
        .store()
        .attach_shared_block(scope, "coach", "running", &[])
        .expect("attach");
    memory
        .store()
        .insert_passage(
            scope,
            "coach",
            "Training plan: 16 weeks.",
            1_700_000_000_100,
            None,
        )
        .expect("passage");
    let summary = Summary {
        conversation: "run-club".into(),
        text: "Marathon prep.".into(),
        through_position: 2,
        updated_at_ms: 5,
    };
    memory
        .store()
        .put_summary(scope, &summary)
        .expect("summary");
}

#[tokio::test]
async fn export_then_import_round_trips_exactly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let memory = memory_in(dir.path());
    populate(&memory, &alice()).await;
    let exported = memory.export(&alice()).await.expect("export");
    assert_eq!(
        exported.lines().count(),
        1 + 2 + 3 + 2 + 1 + 1 + 1 + 1,
        "{exported}"
    );

    let copy = UserScope::new("acme", "alice-copy");
    let counts = memory.import(&copy, &exported).await.expect("import");
    assert_eq!(
        (
            counts.messages,
            counts.memories,
            counts.blocks,
            counts.passages,
            counts.summaries
        ),
        (3, 2, 2, 1, 1)
    );
    let again = memory.export(&copy).await.expect("export copy");
    let body = |text: &str| text.lines().skip(1).map(str::to_owned).collect::<Vec<_>>();
    assert_eq!(body(&again), body(&exported));

    // Imported memories are searchable (re-embedded), the invalidated one is not.
    let hits = memory
        .retrieve(&copy, query("which marathon"))
        .await
        .expect("search");
    assert_eq!(
        hits.first().map(|h| h.text.as_str()),
        Some("Alice runs the Berlin marathon in September.")
    );
    assert!(hits.iter().all(|h| h.text != "Alice runs 20 km a week."));
    // Importing the same file again adds nothing twice.
    let counts = memory.import(&copy, &exported).await.expect("import again");
    assert_eq!((counts.messages, counts.memories), (0, 0));
}

#[tokio::test]
async fn deleting_a_user_leaves_nothing_behind() {
    let dir = tempfile::tempdir().expect("tempdir");
    let memory = memory_in(dir.path());
    populate(&memory, &alice()).await;
    let bob = UserScope::new("acme", "bob");
    memory
        .add_memory(&bob, "Bob plays the cello.", "fact", "t")
        .await
        .expect("add");
    memory
        .store()
        .enqueue_job(&NewJob {
            kind: "extract".into(),
            scope: Some(alice()),
            dedupe_key: None,
            payload: serde_json::json!({}),
            run_after_ms: 0,
        })
        .expect("job");
    memory.flush().await.expect("flush");
    let uid = memory
        .store()
        .find_user(&alice())
        .expect("find")
        .expect("uid");
    assert!(!memory.vectors().files_of(uid).is_empty());

    assert!(memory.delete_user(&alice()).await.expect("delete"));
    assert!(
        !memory.delete_user(&alice()).await.expect("delete again"),
        "already gone"
    );
    assert!(
        memory.vectors().files_of(uid).is_empty(),
        "vector files removed"
    );
    let raw = Connection::open(dir.path().join("memproxy.db")).expect("raw");
    for table in [
        "users",
        "conversations",
        "messages",
        "memories",
        "core_blocks",
        "shared_blocks",
        "block_attachments",
        "archival_passages",
        "summaries",
        "jobs",
        "memory_events",
        "vector_generations",
    ] {
        let column = if table == "users" { "id" } else { "uid" };
        let left: i64 = raw
            .query_row(
                &format!("SELECT COUNT(*) FROM {table} WHERE {column} = ?1"),
                [uid],
                |r| r.get(0),
            )
            .expect("count");
        assert_eq!(left, 0, "{table} still holds rows of the deleted user");
    }
    for fts in ["messages_fts", "memories_fts", "passages_fts"] {
        let left: i64 = raw
            .query_row(
                &format!("SELECT COUNT(*) FROM {fts} WHERE {fts} MATCH 'scope:u{uid}'"),
                [],
                |r| r.get(0),
            )
            .expect("count");
        assert_eq!(left, 0, "{fts} still indexes the deleted user");
    }
    let hits = memory
        .retrieve(&bob, query("cello"))
        .await
        .expect("bob unaffected");
    assert_eq!(hits.len(), 1);
}

#[tokio::test]
async fn export_keeps_branches_superseded_turns_and_agent_search_text() {
    let dir = tempfile::tempdir().expect("tempdir");
    let memory = memory_in(dir.path());
    let question = turn(0, "user", "Suggest a weekend sport.");
    let first = turn(1, "assistant", "Try underwater hockey.");
    let regenerated = turn(1, "assistant", "Try rowing on the river.");
    for history in [vec![question.clone(), first], vec![question, regenerated]] {
        memory
            .record_messages(&alice(), "chat", "default", history)
            .await
            .expect("record");
    }
    let wrapped =
        r#"{"type":"user_message","message":"I collect vintage typewriters.","time":"t"}"#;
    memory
        .append_agent_messages(
            &alice(),
            "coach",
            vec![memproxy::store::AgentMessage {
                role: "user".into(),
                content: wrapped.into(),
                tool_calls: None,
                tool_call_id: None,
                search_text: "I collect vintage typewriters.".into(),
                created_at_ms: 1_700_000_000_500,
            }],
        )
        .await
        .expect("agent message");
    let exported = memory.export(&alice()).await.expect("export");
    // The regenerated answer is a branch of the chat, leaving it at position 1; both answers live.
    let branch = exported
        .lines()
        .find(|l| l.contains(r#""type":"conversation""#) && l.contains(r#""parent":"chat""#))
        .unwrap_or_else(|| panic!("a branch line in: {exported}"));
    assert!(branch.contains(r#""fork_position":1"#), "{branch}");
    assert!(!exported.contains("superseded"), "{exported}");
    // A turn an older memproxy marked superseded (edits replaced turns then) still imports as such.
    let legacy = r#"{"type":"message","conversation":"chat","position":2,"role":"user","content":"An abandoned draft.","created_at_ms":1700000000002,"superseded":true}"#;
    let exported = format!("{exported}{legacy}\n");
    assert!(exported.contains(r#""search_text":"I collect vintage typewriters.""#));

    let copy = UserScope::new("acme", "alice-copy");
    memory.import(&copy, &exported).await.expect("import");
    let again = memory.export(&copy).await.expect("export copy");
    let body = |text: &str| {
        let mut lines = text.lines().skip(1).map(str::to_owned).collect::<Vec<_>>();
        lines.sort();
        lines
    };
    assert_eq!(body(&again), body(&exported));

    let past_turns = |text: &str| RetrievalRequest {
        corpora: vec![Corpus::Message],
        ..query(text)
    };
    let hits = memory
        .retrieve(&copy, past_turns("underwater hockey"))
        .await
        .expect("search");
    assert!(
        hits.iter().any(|h| h.text.contains("underwater")),
        "the answer a regeneration replaced was still said, and is found: {hits:?}"
    );
    let hits = memory
        .retrieve(&copy, past_turns("abandoned draft"))
        .await
        .expect("search");
    assert!(
        hits.iter().all(|h| !h.text.contains("abandoned")),
        "a superseded turn stays out of search: {hits:?}"
    );
    let hits = memory
        .retrieve(&copy, past_turns("typewriters"))
        .await
        .expect("search");
    assert!(
        hits.iter()
            .any(|h| h.keyword_rank.is_some() && h.text.contains("typewriters")),
        "found by its search text: {hits:?}"
    );
}
