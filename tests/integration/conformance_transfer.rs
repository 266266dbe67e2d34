//! The store conformance suite, transfer: a user's whole memory (conversations with a branch and
//! its progress, turns, live and retired facts, blocks, a shared block, passages, a summary,
//! vectors) exports, imports into another user and exports again identically, on SQLite and on
//! PostgreSQL; and an import into a user who has part of it already adds only the rest.

use memproxy::store::prelude::*;
use memproxy::store::{
    AgentMessage, CoreBlock, Embedding, NewMemory, SharedBlock, Source, Summary, UserBundle,
    UserScope,
};

use super::conformance_memory::turn;
use crate::backends::on_every_backend;

fn vector(seed: f32) -> Embedding {
    Embedding {
        model: "test-model".to_owned(),
        vector: vec![seed, 1.0 - seed, 0.25, -0.5],
    }
}

fn fill(store: &dyn Store, ana: &UserScope) {
    let opening = [
        turn("user", "I live in Porto."),
        turn("assistant", "Noted."),
    ];
    let mut first = opening.to_vec();
    first.push(turn("user", "I have a cat."));
    let known = [("I live in Porto.".to_owned(), vector(0.1))];
    store
        .sync_messages_embedded(ana, "c1", "default", &first, &known)
        .expect("sync");
    let mut other = opening.to_vec();
    other.push(turn("user", "I have a dog."));
    store
        .sync_messages(ana, "c1", "default", &other)
        .expect("branch");
    store
        .set_extraction_progress(ana, "c1", 1)
        .expect("progress");
    store
        .put_summary(
            ana,
            &Summary {
                conversation: "c1".to_owned(),
                text: "Ana lives in Porto.".to_owned(),
                through_position: 1,
                updated_at_ms: 9,
            },
        )
        .expect("summary");
    let fact = |text: &str, seed: f32, subject: Option<&str>| NewMemory {
        text: text.to_owned(),
        kind: "fact".to_owned(),
        sources: vec![Source {
            conversation: "c1".to_owned(),
            position: 0,
            quote: Some("my words".to_owned()),
        }],
        subject: subject.map(str::to_owned),
        created_at_ms: 8_000,
        embedding: Some(vector(seed)),
    };
    store
        .insert_memory(ana, &fact("Lives in Porto.", 0.2, Some("user")), "test")
        .expect("fact");
    let retired = match store
        .insert_memory(ana, &fact("Lives in Lisbon.", 0.3, None), "test")
        .expect("fact")
    {
        memproxy::store::Inserted::New { id, .. } => id,
        other => panic!("{other:?}"),
    };
    store
        .invalidate_memory(ana, retired, "moved")
        .expect("retire");
    let block = |label: &str, value: &str| CoreBlock {
        label: label.to_owned(),
        value: value.to_owned(),
        char_limit: 300,
        read_only: false,
        updated_at_ms: 0,
        shared: None,
    };
    store
        .ensure_agent(ana, "helper", &[block("persona", "I help.")])
        .expect("agent");
    store
        .put_core_block(ana, "helper", &block("human", "The user has a cat."))
        .expect("block");
    store
        .append_agent_messages(
            ana,
            "helper",
            &[(
                AgentMessage {
                    role: "user".to_owned(),
                    content: "{\"message\":\"hi\"}".to_owned(),
                    tool_calls: None,
                    tool_call_id: None,
                    search_text: "hi".to_owned(),
                    created_at_ms: 9_000,
                },
                Some(vector(0.4)),
            )],
            false,
        )
        .expect("log");
    store
        .insert_passage(
            ana,
            "helper",
            "Ana's cat is Miso.",
            9_500,
            Some(&vector(0.5)),
        )
        .expect("passage");
    store
        .put_shared_block(
            ana,
            &SharedBlock {
                name: "household".to_owned(),
                label: "family".to_owned(),
                value: "Ana lives with Rui.".to_owned(),
                char_limit: 300,
                read_only: false,
                updated_at_ms: 0,
                agents: Vec::new(),
            },
        )
        .expect("shared");
    store
        .attach_shared_block(ana, "helper", "household", &[])
        .expect("attach");
}

fn transfer_area(store: &dyn Store) {
    let ana = UserScope::new("acme", "ana");
    fill(store, &ana);
    let bundle: UserBundle = store.export_user(&ana).expect("export").expect("ana");
    assert_eq!(
        bundle.conversations.len(),
        3,
        "c1, its branch, the agent's log"
    );
    let c1 = bundle
        .conversations
        .iter()
        .find(|c| c.id == "c1")
        .expect("c1");
    assert_eq!(c1.extracted_through, Some(1));
    assert!(bundle
        .messages
        .iter()
        .any(|m| m.message.content == "I live in Porto." && m.embedding == Some(vector(0.1))));
    assert_eq!(bundle.memories.len(), 2);
    assert!(bundle.memories.iter().all(|(_, e)| e.is_some()));
    let subjects: Vec<Option<&str>> = bundle
        .memories
        .iter()
        .map(|(m, _)| m.subject.as_deref())
        .collect();
    assert_eq!(subjects, [Some("user"), None], "whom each fact is about");
    assert_eq!(bundle.passages[0].3, Some(vector(0.5)));
    assert_eq!(bundle.shared_blocks[0].agents, ["helper"]);

    let copy = UserScope::new("globex", "ana");
    let counts = store.import_user(&copy, &bundle).expect("import");
    assert_eq!(counts.memories, 2);
    assert_eq!(
        store.export_user(&copy).expect("export").expect("copy"),
        bundle,
        "the copy exports exactly as the original"
    );
    // Again into the same user: nothing is added twice.
    let again = store.import_user(&copy, &bundle).expect("import again");
    assert_eq!((again.messages, again.memories), (0, 0));
    assert_eq!(
        store.extraction_progress(&copy, "c1").expect("progress"),
        1,
        "the import does not learn from those turns again"
    );
}

#[test]
fn transfer_on_every_backend() {
    on_every_backend(|b| transfer_area(&*b.store));
}
