//! The memory layer on real SQLite files, the real local model and real usearch indexes.

use memproxy::memory::{MemoryError, RetrievalRequest};
use memproxy::store::{Corpus, Inserted, Page, UserScope};

use crate::common::{alice, local_embedder, memory_in, query, turn};

fn texts(hits: &[memproxy::memory::Hit]) -> Vec<&str> {
    hits.iter().map(|h| h.text.as_str()).collect()
}

#[tokio::test]
async fn local_model_gives_meaningful_similarities() {
    let vectors = local_embedder()
        .embed(vec![
            "The cat sits on the mat.".into(),
            "A kitten is resting on a rug.".into(),
            "Quarterly tax filings are due in April.".into(),
        ])
        .await
        .expect("embeds");
    assert_eq!(vectors[0].len(), 384);
    let paraphrase = memproxy::embed::cosine(&vectors[0], &vectors[1]);
    let unrelated = memproxy::embed::cosine(&vectors[0], &vectors[2]);
    assert!(
        paraphrase > 0.5 && unrelated < 0.2,
        "{paraphrase} vs {unrelated}"
    );
}

#[tokio::test]
async fn fusion_finds_by_keyword_what_vectors_miss_and_vice_versa() {
    let dir = tempfile::tempdir().expect("tempdir");
    let memory = memory_in(dir.path());
    let facts = [
        "The replacement part for the dishwasher is XQ-7731-B.",
        "Alice owns a golden retriever called Biscuit.",
        "Alice prefers window seats on long flights.",
        "Alice's sister lives in Lisbon.",
    ];
    for fact in facts {
        memory
            .add_memory(&alice(), fact, "fact", "test")
            .await
            .expect("added");
    }
    // An exact code: the embedding of "XQ-7731-B" alone is far from the whole sentence.
    let hits = memory
        .retrieve(&alice(), query("XQ-7731-B"))
        .await
        .expect("search");
    assert_eq!(
        hits.first().map(|h| h.text.as_str()),
        Some(facts[0]),
        "{:?}",
        texts(&hits)
    );
    assert!(hits[0].keyword_rank.is_some());

    // A paraphrase with no word in common: only the vectors can find it.
    let hits = memory
        .retrieve(&alice(), query("Which pet does she have?"))
        .await
        .expect("search");
    assert_eq!(
        hits.first().map(|h| h.text.as_str()),
        Some(facts[1]),
        "{:?}",
        texts(&hits)
    );
    assert_eq!(
        hits[0].keyword_rank, None,
        "found without any keyword match"
    );
    assert!(hits[0].vector_rank.is_some());

    // Nothing relevant: the threshold keeps noise out.
    let hits = memory
        .retrieve(&alice(), query("quantum chromodynamics lecture"))
        .await
        .expect("search");
    assert!(hits.is_empty(), "{:?}", texts(&hits));
}

#[tokio::test]
async fn users_and_tenants_never_see_each_other() {
    let dir = tempfile::tempdir().expect("tempdir");
    let memory = memory_in(dir.path());
    let secret = "Alice's locker code is 4417.";
    memory
        .add_memory(&alice(), secret, "fact", "test")
        .await
        .expect("added");
    memory
        .add_memory(
            &UserScope::new("acme", "bob"),
            "Bob likes chess.",
            "fact",
            "test",
        )
        .await
        .expect("added");
    let strangers = [
        UserScope::new("acme", "bob"),
        UserScope::new("globex", "alice"),
    ];
    for stranger in &strangers {
        let hits = memory
            .retrieve(stranger, query("locker code 4417"))
            .await
            .expect("search");
        assert!(
            hits.iter().all(|h| h.text != secret),
            "{stranger:?} saw {:?}",
            texts(&hits)
        );
        let listed = memory
            .list_memories(stranger, true, Page::default())
            .await
            .expect("list");
        assert!(listed.iter().all(|m| m.text != secret));
    }
    let export = memory
        .export(&UserScope::new("acme", "bob"))
        .await
        .expect("export");
    assert!(!export.contains("4417") && export.contains("chess"));
    assert!(matches!(
        memory.export(&UserScope::new("globex", "alice")).await,
        Err(MemoryError::Store(memproxy::store::StoreError::NotFound(_)))
    ));
    let hits = memory
        .retrieve(&alice(), query("locker code"))
        .await
        .expect("search");
    assert_eq!(texts(&hits), [secret]);
}

#[tokio::test]
async fn exact_duplicates_are_dropped_and_changes_are_audited() {
    let dir = tempfile::tempdir().expect("tempdir");
    let memory = memory_in(dir.path());
    let first = memory
        .add_memory(&alice(), "Alice lives in Porto.", "fact", "chat")
        .await
        .expect("add");
    let again = memory
        .add_memory(&alice(), "  alice lives in   porto. ", "fact", "chat")
        .await
        .expect("add");
    let Inserted::New { id, .. } = first else {
        panic!("first insert is new")
    };
    assert_eq!(again, Inserted::Duplicate { id });

    memory
        .update_memory(&alice(), id, "Alice lives in Lisbon.", &[], "moved")
        .await
        .expect("update");
    let hits = memory
        .retrieve(&alice(), query("Where does Alice live? Lisbon"))
        .await
        .expect("search");
    assert_eq!(texts(&hits), ["Alice lives in Lisbon."]);

    memory
        .retire_memory(&alice(), id, false, "no longer true")
        .await
        .expect("invalidate");
    assert!(memory
        .retrieve(&alice(), query("Lisbon"))
        .await
        .expect("search")
        .is_empty());
    let all = memory
        .list_memories(&alice(), true, Page::default())
        .await
        .expect("list");
    assert!(all[0].valid_until_ms.is_some(), "invalidated, not deleted");
    assert!(memory
        .list_memories(&alice(), false, Page::default())
        .await
        .expect("list")
        .is_empty());

    let events = memory.store().memory_events(&alice()).expect("events");
    let actions: Vec<_> = events
        .iter()
        .map(|e| (e.action.as_str(), e.cause.as_str()))
        .collect();
    assert_eq!(
        actions,
        [
            ("add", "chat"),
            ("update", "moved"),
            ("invalidate", "no longer true")
        ]
    );
    assert_eq!(
        events[1].old_value.as_deref(),
        Some("Alice lives in Porto.")
    );
}

#[tokio::test]
async fn bad_input_is_refused_and_writes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let memory = memory_in(dir.path());
    let huge = "x".repeat(memory.limits().max_memory_chars + 1);
    assert!(matches!(
        memory.add_memory(&alice(), &huge, "fact", "t").await,
        Err(MemoryError::Limit(_))
    ));
    assert!(matches!(
        memory.add_memory(&alice(), "   ", "fact", "t").await,
        Err(MemoryError::Invalid(_))
    ));
    let missing = memory.retire_memory(&alice(), 999, true, "t").await;
    assert!(matches!(
        missing,
        Err(MemoryError::Store(memproxy::store::StoreError::NotFound(_)))
    ));

    let jsonl = concat!(
        "{\"type\":\"memory\",\"text\":\"valid fact\",\"kind\":\"fact\",\"created_at_ms\":1,\"updated_at_ms\":1}\n",
        "{\"type\":\"memory\",\"text\":\n",
    );
    let error = memory.import(&alice(), jsonl).await.expect_err("malformed");
    assert!(error.to_string().contains("line 2"), "{error}");
    let orphan = "{\"type\":\"message\",\"conversation\":\"nope\",\"position\":0,\"role\":\"user\",\"content\":\"hi\",\"created_at_ms\":1}\n";
    assert!(memory.import(&alice(), orphan).await.is_err());
    assert!(memory
        .list_memories(&alice(), true, Page::default())
        .await
        .expect("list")
        .is_empty());
}

#[tokio::test]
async fn recall_log_stores_each_turn_once_and_searches_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let memory = memory_in(dir.path());
    let first = vec![
        turn(0, "user", "I just adopted a cat named Miso."),
        turn(1, "assistant", "Congratulations!"),
    ];
    let stored = memory
        .record_messages(&alice(), "chat-1", "default", first.clone())
        .await
        .expect("record");
    assert_eq!(stored.stored.len(), 2);
    // The app resends the whole history plus one new turn: only the new turn is stored.
    let mut resent = first;
    resent.push(turn(2, "user", "What food is best for kittens?"));
    let stored = memory
        .record_messages(&alice(), "chat-1", "default", resent)
        .await
        .expect("record");
    assert_eq!(
        stored.stored.iter().map(|m| m.position).collect::<Vec<_>>(),
        [2]
    );

    let request = RetrievalRequest {
        corpora: vec![Corpus::Message],
        ..query("What is the name of my pet?")
    };
    let hits = memory.retrieve(&alice(), request).await.expect("search");
    assert_eq!(
        hits.first().map(|h| h.text.as_str()),
        Some("I just adopted a cat named Miso.")
    );
    assert_eq!(hits[0].conversation.as_deref(), Some("chat-1"));
    assert_eq!(hits[0].role.as_deref(), Some("user"));
}

/// Issue 48: one statement about a thing keeps it mentioned however many questions about it the
/// user stored after it (the check read only the newest 20 texts with the word, and a question
/// is not a statement: 21 questions made "my sister" unmentioned).
#[tokio::test]
async fn a_thing_told_once_stays_mentioned_after_many_questions_about_it() {
    use memproxy::memory::unmentioned::presupposed;
    let dir = tempfile::tempdir().expect("tempdir");
    let memory = memory_in(dir.path());
    let mut turns = vec![turn(
        0,
        "user",
        "Please remember that my sister Zelda moved to Lisbon last spring.",
    )];
    for n in 1..=30 {
        turns.push(turn(
            n,
            "user",
            &format!("Is my sister happy there, part {n}?"),
        ));
    }
    memory
        .record_messages(&alice(), "chat", "default", turns)
        .await
        .expect("record");
    let asked = presupposed("Where does my sister live now?");
    assert_eq!(asked.len(), 1, "{asked:?}");
    let never = memory
        .never_mentioned(&alice(), asked)
        .await
        .expect("check");
    assert!(never.is_empty(), "{never:?}");
    // A thing never told is still unmentioned.
    let never = memory
        .never_mentioned(&alice(), presupposed("What is my brother's name?"))
        .await
        .expect("check");
    assert_eq!(never.len(), 1, "{never:?}");
}
