//! The store conformance suite, memory areas: the recall log (alignment and branches, progress,
//! summaries), facts (duplicates, audit, retire/restore, outdated turns) and search (keywords,
//! documents, embeddings, vector search) — the same checks on SQLite and on PostgreSQL. Vector
//! search goes through [`VectorIndexes`] as retrieval uses it: index files for SQLite, pgvector
//! for PostgreSQL. Plus isolation over pgvector among many users.

use std::collections::HashSet;
use std::sync::Arc;

use memproxy::store::prelude::*;
use memproxy::store::{
    Corpus, Embedding, Inserted, NewMemory, NewMessage, Page, Source, StoreError, Summary,
    UserScope, Within,
};
use memproxy::vector::{Change, VectorIndexes};

use crate::backends::{on_every_backend, postgres, postgres_url};

const MODEL: &str = "test-model";

pub(crate) fn turn(role: &str, content: &str) -> NewMessage {
    NewMessage {
        position: 0,
        role: role.to_owned(),
        content: content.to_owned(),
        name: None,
        tool_calls: None,
        tool_call_id: None,
        created_at_ms: 1_000,
    }
}

fn fact(text: &str, sources: Vec<Source>, vector: Option<Vec<f32>>) -> NewMemory {
    NewMemory {
        text: text.to_owned(),
        kind: "fact".to_owned(),
        sources,
        subject: None,
        created_at_ms: 1_000,
        embedding: vector.map(|vector| Embedding {
            model: MODEL.to_owned(),
            vector,
        }),
    }
}

fn new_id(inserted: Inserted) -> i64 {
    match inserted {
        Inserted::New { id, .. } => id,
        other => panic!("expected a new memory, got {other:?}"),
    }
}

fn recall_area(store: &dyn Store) {
    let ana = UserScope::new("acme", "ana");
    let bob = UserScope::new("acme", "bob");
    let opening = [
        turn("user", "I live in Porto."),
        turn("assistant", "Noted."),
    ];
    let synced = store
        .sync_messages(&ana, "c1", "default", &opening)
        .expect("sync");
    assert_eq!(synced.conversation, "c1");
    assert_eq!(
        synced.stored.iter().map(|m| m.position).collect::<Vec<_>>(),
        [0, 1]
    );
    // The app sends the whole history again with one new turn: only that one is stored.
    let mut longer = opening.to_vec();
    longer.push(turn("user", "My dog is called Biscuit."));
    let synced = store
        .sync_messages(&ana, "c1", "default", &longer)
        .expect("sync again");
    assert_eq!(synced.conversation, "c1");
    assert_eq!(synced.stored.len(), 1);
    assert_eq!(synced.stored[0].position, 2);
    // Another chat with the same opening and another next turn continues in a branch.
    let mut other = opening.to_vec();
    other.push(turn("user", "Where should I travel?"));
    let branched = store
        .sync_messages(&ana, "c1", "default", &other)
        .expect("sync a branch");
    assert!(
        branched.conversation.starts_with("c1~"),
        "a branch: {}",
        branched.conversation
    );
    assert_eq!(branched.stored.len(), 1);
    assert_eq!(branched.stored[0].position, 2);
    let again = store
        .sync_messages(&ana, "c1", "default", &other)
        .expect("the same history again");
    assert_eq!(
        again.conversation, branched.conversation,
        "finds its branch again"
    );
    assert!(again.stored.is_empty());

    let conversations = store.list_conversations(&ana).expect("conversations");
    assert_eq!(conversations.len(), 2);
    let branch = conversations
        .iter()
        .find(|c| c.id == branched.conversation)
        .expect("the branch is listed");
    assert_eq!(branch.parent.as_deref(), Some("c1"));
    assert_eq!(branch.fork_position, 2);
    let log = store
        .list_messages(&ana, "c1", Page::default())
        .expect("messages");
    assert_eq!(
        log.iter().map(|m| m.content.as_str()).collect::<Vec<_>>(),
        ["I live in Porto.", "Noted.", "My dog is called Biscuit."]
    );

    assert_eq!(store.extraction_progress(&ana, "c1").expect("progress"), -1);
    store.set_extraction_progress(&ana, "c1", 2).expect("set");
    store
        .set_extraction_progress(&ana, "c1", 1)
        .expect("set lower");
    assert_eq!(
        store.extraction_progress(&ana, "c1").expect("progress"),
        2,
        "progress never goes back"
    );
    let summary = Summary {
        conversation: "c1".to_owned(),
        text: "Ana lives in Porto.".to_owned(),
        through_position: 1,
        updated_at_ms: 5,
    };
    store.put_summary(&ana, &summary).expect("summary");
    assert_eq!(store.summary(&ana, "c1").expect("read"), Some(summary));

    // Bob sees none of it.
    assert!(store.list_conversations(&bob).expect("bob").is_empty());
    store.ensure_user(&bob).expect("bob exists");
    assert!(matches!(
        store.list_messages(&bob, "c1", Page::default()),
        Err(StoreError::NotFound(_))
    ));
    assert_eq!(store.summary(&bob, "c1").expect("bob's summary"), None);
}

fn facts_area(store: &dyn Store) {
    let ana = UserScope::new("acme", "ana");
    let bob = UserScope::new("acme", "bob");
    store
        .sync_messages(&ana, "c1", "default", &[turn("user", "I work at Acme.")])
        .expect("a turn");
    let source = Source {
        conversation: "c1".to_owned(),
        position: 0,
        quote: Some("I work at Acme".to_owned()),
    };
    let id = new_id(
        store
            .insert_memory(
                &ana,
                &NewMemory {
                    subject: Some("user".to_owned()),
                    ..fact("Works at Acme.", vec![source.clone()], None)
                },
                "test",
            )
            .expect("insert"),
    );
    // The words that state it are kept with its source, and whom it is about.
    let all = store
        .list_memories(&ana, false, Page::default())
        .expect("list");
    let stored = all.iter().find(|m| m.id == id).expect("stored");
    assert_eq!(stored.sources, vec![source.clone()]);
    assert_eq!(stored.subject.as_deref(), Some("user"));
    assert_eq!(
        store
            .insert_memory(&ana, &fact("  works at  ACME. ", vec![], None), "test")
            .expect("again"),
        Inserted::Duplicate { id },
        "the same text (case and spaces aside) is one memory"
    );
    let other = new_id(
        store
            .insert_memory(&ana, &fact("Has a dog.", vec![], None), "test")
            .expect("insert"),
    );
    assert!(matches!(
        store.update_memory(&ana, other, "Works at Acme.", None, &[], "test"),
        Err(StoreError::DuplicateText)
    ));
    // The live memory that says a text (one memory under every mode finds an agent's line so).
    assert_eq!(
        store
            .live_memory_id(&ana, " Works at Acme. ")
            .expect("find"),
        Some(id)
    );
    assert_eq!(store.live_memory_id(&ana, "Works at").expect("find"), None);
    assert_eq!(
        store.live_memory_id(&bob, "Works at Acme.").expect("find"),
        None
    );
    // A new version drawn from the same turn (other words of it) keeps that turn current.
    let same_turn = Source {
        quote: Some("I work at Acme.".to_owned()),
        ..source.clone()
    };
    store
        .update_memory(
            &ana,
            id,
            "Works at Acme, in Lisbon.",
            None,
            &[same_turn],
            "more",
        )
        .expect("update");
    let turn_id = store
        .list_messages(&ana, "c1", Page::default())
        .expect("log")[0]
        .id;
    let documents = store
        .documents(&ana, Corpus::Message, &[turn_id])
        .expect("documents");
    assert!(
        !documents[0].outdated,
        "the turn the new version comes from stays current"
    );
    store
        .update_memory(&ana, id, "Works at Globex.", None, &[], "moved")
        .expect("update");
    assert_eq!(
        store.live_memory_id(&ana, "Works at Acme.").expect("find"),
        None
    );
    assert_eq!(
        store
            .live_memory_id(&ana, "Works at Globex.")
            .expect("find"),
        Some(id)
    );
    let documents = store
        .documents(&ana, Corpus::Message, &[turn_id])
        .expect("documents");
    assert!(
        documents[0].outdated,
        "the turn the old fact came from is outdated"
    );
    store
        .invalidate_memory(&ana, other, "gone")
        .expect("retire");
    let live = store
        .list_memories(&ana, false, Page::default())
        .expect("live");
    assert_eq!(
        live.iter().map(|m| m.text.as_str()).collect::<Vec<_>>(),
        ["Works at Globex."]
    );
    let all = store
        .list_memories(&ana, true, Page::default())
        .expect("all");
    assert_eq!(all.len(), 2);
    assert!(all
        .iter()
        .any(|m| m.id == other && m.valid_until_ms.is_some()));
    store.restore_memory(&ana, other, "back").expect("restore");
    assert!(matches!(
        store.restore_memory(&ana, other, "twice"),
        Err(StoreError::NotFound(_))
    ));
    store.delete_memory(&ana, other, "delete").expect("delete");
    let actions: Vec<String> = store
        .memory_events(&ana)
        .expect("events")
        .into_iter()
        .map(|e| format!("{}:{}", e.memory_id == id, e.action))
        .collect();
    assert_eq!(
        actions,
        [
            "true:add",
            "false:add",
            "true:update",
            "true:update",
            "false:invalidate",
            "false:restore",
            "false:delete"
        ]
    );
    // Bob reaches none of Ana's memories by id.
    store.ensure_user(&bob).expect("bob");
    assert!(matches!(
        store.update_memory(&bob, id, "Mine now.", None, &[], "x"),
        Err(StoreError::NotFound(_))
    ));
    assert!(matches!(
        store.delete_memory(&bob, id, "x"),
        Err(StoreError::NotFound(_))
    ));
    assert!(store
        .list_memories(&bob, true, Page::default())
        .expect("bob")
        .is_empty());
    assert!(store.memory_events(&bob).expect("bob").is_empty());
}

fn unit(seed: &[f32]) -> Vec<f32> {
    let norm = seed.iter().map(|x| x * x).sum::<f32>().sqrt();
    seed.iter().map(|x| x / norm).collect()
}

fn search_area(store: Arc<dyn Store>, vectors: &VectorIndexes) {
    let ana = UserScope::new("acme", "ana");
    let bob = UserScope::new("acme", "bob");
    let mut ids = Vec::new();
    for (text, vector) in [
        ("Lives in Porto with two cats.", [1.0, 0.0, 0.0, 0.0]),
        ("Is allergic to penicillin.", [0.0, 1.0, 0.0, 0.0]),
        ("Plays the cello on Sundays.", [0.0, 0.0, 1.0, 0.0]),
    ] {
        let inserted = store
            .insert_memory(&ana, &fact(text, vec![], Some(vector.to_vec())), "test")
            .expect("insert");
        let Inserted::New { id, generation } = inserted else {
            panic!("new")
        };
        let uid = store.find_user(&ana).expect("uid").expect("ana");
        vectors
            .apply(
                uid,
                Corpus::Memory,
                &[(generation, Change::Add(id, &vector))],
            )
            .expect("index");
        ids.push(id);
    }
    let bobs = new_id(
        store
            .insert_memory(
                &bob,
                &fact(
                    "Lives in Porto too.",
                    vec![],
                    Some(vec![1.0, 0.0, 0.0, 0.0]),
                ),
                "test",
            )
            .expect("bob's"),
    );
    let ana_uid = store.find_user(&ana).expect("uid").expect("ana");
    let bob_uid = store.find_user(&bob).expect("uid").expect("bob");
    vectors.verify(bob_uid).expect("bob's index");

    // Keywords: word forms found ("living" → "lives"), only the user's own rows.
    let hits = store
        .keyword_search(&ana, Corpus::Memory, "Where am I living?", 10, None)
        .expect("keywords");
    assert_eq!(hits.iter().map(|h| h.0).collect::<Vec<_>>(), [ids[0]]);
    let hits = store
        .keyword_search(&ana, Corpus::Memory, "porto cello", 10, None)
        .expect("keywords");
    assert_eq!(
        hits.iter().map(|h| h.0).collect::<HashSet<_>>(),
        HashSet::from([ids[0], ids[2]])
    );
    assert!(store
        .keyword_search(&ana, Corpus::Memory, "the of and", 10, None)
        .expect("stopwords only")
        .is_empty());
    // Vectors: nearest first, only the user's own rows, `among` respected.
    let query = unit(&[0.9, 0.1, 0.0, 0.0]);
    let nearest = vectors
        .search(ana_uid, Corpus::Memory, &query, 2)
        .expect("vector search");
    assert_eq!(nearest.len(), 2);
    assert_eq!(nearest[0].0, ids[0]);
    assert!(nearest[0].1 > 0.9, "cosine similarity {}", nearest[0].1);
    assert!(nearest.iter().all(|(id, _)| *id != bobs));
    let among = HashSet::from([ids[2]]);
    let only = vectors
        .search_among(ana_uid, Corpus::Memory, &query, 3, Some(&among))
        .expect("among");
    assert_eq!(only.iter().map(|h| h.0).collect::<Vec<_>>(), [ids[2]]);
    // A retired memory is not found any more (the store is the source of truth).
    let generation = store
        .invalidate_memory(&ana, ids[0], "gone")
        .expect("retire");
    vectors
        .apply(
            ana_uid,
            Corpus::Memory,
            &[(generation, Change::Remove(ids[0]))],
        )
        .expect("index");
    let after = vectors
        .search(ana_uid, Corpus::Memory, &query, 3)
        .expect("search");
    let documents = store
        .documents(
            &ana,
            Corpus::Memory,
            &after.iter().map(|h| h.0).collect::<Vec<_>>(),
        )
        .expect("documents");
    assert!(documents.iter().all(|d| d.id != ids[0]));
    // Documents of another user's ids are skipped; embeddings come back as stored.
    assert!(store
        .documents(&ana, Corpus::Memory, &[bobs])
        .expect("documents")
        .is_empty());
    let document = store
        .documents(&ana, Corpus::Memory, &[ids[1]])
        .expect("documents")
        .pop()
        .expect("one");
    assert_eq!(
        document.embedding,
        Some(Embedding {
            model: MODEL.to_owned(),
            vector: vec![0.0, 1.0, 0.0, 0.0]
        })
    );
    // Turns without embeddings are found for the background embedder, and embedded.
    let synced = store
        .sync_messages(&ana, "c1", "default", &[turn("user", "I sing in a choir.")])
        .expect("a turn");
    let turn_id = synced.stored[0].id;
    let waiting = store
        .rows_to_embed(Corpus::Message, MODEL, 100)
        .expect("rows to embed");
    assert!(waiting
        .iter()
        .any(|(id, uid, text)| *id == turn_id && *uid == ana_uid && text == "I sing in a choir."));
    let changed = store
        .set_embeddings(
            Corpus::Message,
            &[(
                turn_id,
                Embedding {
                    model: MODEL.to_owned(),
                    vector: vec![0.0, 0.0, 0.0, 1.0],
                },
            )],
        )
        .expect("embed");
    assert_eq!(changed[0].0, turn_id);
    assert_eq!(changed[0].1, ana_uid);
    vectors
        .apply(
            ana_uid,
            Corpus::Message,
            &[(changed[0].2, Change::Add(turn_id, &[0.0, 0.0, 0.0, 1.0]))],
        )
        .expect("index");
    let found = vectors
        .search(ana_uid, Corpus::Message, &[0.0, 0.0, 0.0, 1.0], 1)
        .expect("turn search");
    assert_eq!(found.iter().map(|h| h.0).collect::<Vec<_>>(), [turn_id]);
    assert!(!store
        .rows_to_embed(Corpus::Message, MODEL, 100)
        .expect("rows")
        .iter()
        .any(|(id, _, _)| *id == turn_id));
    let within = Within::Conversation("c1".to_owned());
    assert_eq!(
        store
            .ids_within(&ana, Corpus::Message, &within)
            .expect("within"),
        [turn_id]
    );
    assert!(store
        .ids_within(&bob, Corpus::Message, &within)
        .expect("bob within")
        .is_empty());
    assert_eq!(
        store
            .keyword_search(&ana, Corpus::Message, "choir", 5, Some(&within))
            .expect("within keywords")
            .len(),
        1
    );
    // An agent's recall memory: its own log and the user's chats, never another agent's log.
    let agent_turn = |agent: &str, text: &str| {
        let turns = [turn("user", text)];
        store
            .sync_messages(
                &ana,
                &memproxy::store::agent_conversation(agent),
                agent,
                &turns,
            )
            .expect("an agent's turn")
            .stored[0]
            .id
    };
    let own = agent_turn("coach", "The choir sings on Friday.");
    let other = agent_turn("tutor", "The choir rehearses on Monday.");
    let recall = Within::Recall(memproxy::store::agent_conversation("coach"));
    let mut ids = store
        .ids_within(&ana, Corpus::Message, &recall)
        .expect("recall within");
    ids.sort_unstable();
    assert_eq!(ids, [turn_id, own], "not {other}");
    let found: Vec<i64> = store
        .keyword_search(&ana, Corpus::Message, "choir", 5, Some(&recall))
        .expect("recall keywords")
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    assert!(found.contains(&own) && !found.contains(&other), "{found:?}");
    assert!(store
        .ids_within(&bob, Corpus::Message, &recall)
        .expect("bob recall")
        .is_empty());
}

#[test]
fn recall_log_on_every_backend() {
    on_every_backend(|b| recall_area(&*b.store));
}

#[test]
fn facts_on_every_backend() {
    on_every_backend(|b| facts_area(&*b.store));
}

#[test]
fn search_on_every_backend() {
    on_every_backend(|b| {
        let vectors = b.vectors(MODEL, 4);
        // Where the vectors live is the backend's: pgvector in PostgreSQL, files beside SQLite.
        assert_eq!(b.store.keeps_vectors(), b.name == "postgres");
        search_area(Arc::clone(&b.store), &vectors);
    });
}

/// Many users on one pgvector index: each search returns only the searching user's rows, and a
/// small user among big ones still gets their own nearest rows (the others' rows are all nearer
/// to the query, so an index scan that filtered too late would come back empty or short).
#[test]
fn pgvector_search_is_isolated_among_many_users() {
    let Some(url) = postgres_url() else {
        return;
    };
    let store: Arc<dyn Store> = Arc::new(postgres(&url));
    let vectors = VectorIndexes::in_store(MODEL, 4, Arc::clone(&store));
    let near = |i: usize| unit(&[1.0, 0.01 * (i % 50) as f32, 0.001 * i as f32, 0.0]);
    let mut owner = std::collections::HashMap::new();
    for user in 0..40 {
        let scope = UserScope::new("acme", format!("big{user}"));
        for i in 0..50 {
            let id = new_id(
                store
                    .insert_memory(
                        &scope,
                        &fact(&format!("big {user} fact {i}"), vec![], Some(near(i))),
                        "test",
                    )
                    .expect("insert"),
            );
            owner.insert(id, scope.user.clone());
        }
    }
    let small = UserScope::new("acme", "small");
    let mut own = HashSet::new();
    for (i, seed) in [
        [0.0, 1.0, 0.0, 0.0],
        [0.0, 0.0, 1.0, 0.0],
        [0.0, 0.0, 0.0, 1.0],
    ]
    .iter()
    .enumerate()
    {
        own.insert(new_id(
            store
                .insert_memory(
                    &small,
                    &fact(&format!("small {i}"), vec![], Some(seed.to_vec())),
                    "test",
                )
                .expect("insert"),
        ));
    }
    let other_tenant = UserScope::new("globex", "small");
    store
        .insert_memory(
            &other_tenant,
            &fact("globex small", vec![], Some(near(1))),
            "test",
        )
        .expect("insert");
    let query = unit(&[1.0, 0.0, 0.0, 0.0]);
    let small_uid = store.find_user(&small).expect("uid").expect("small");
    let found = vectors
        .search(small_uid, Corpus::Memory, &query, 3)
        .expect("search");
    assert_eq!(
        found.iter().map(|h| h.0).collect::<HashSet<_>>(),
        own,
        "the small user's three rows, none of the 2,000 nearer ones of others"
    );
    for user in [0, 17, 39] {
        let scope = UserScope::new("acme", format!("big{user}"));
        let uid = store.find_user(&scope).expect("uid").expect("big");
        let found = vectors
            .search(uid, Corpus::Memory, &query, 10)
            .expect("search");
        assert_eq!(found.len(), 10);
        assert!(
            found
                .iter()
                .all(|(id, _)| owner.get(id) == Some(&scope.user)),
            "only big{user}'s rows"
        );
    }
}
