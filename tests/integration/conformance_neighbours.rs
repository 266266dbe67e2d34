//! The store conformance suite, a turn's neighbours (what retrieval spreads a found turn's score
//! to): the live turns within a window of positions in the same conversation, the distance of
//! each, never another conversation's or another user's; and a turn's context (the words of the
//! turn before it, which keyword search matches at a lower weight and the search for what the user
//! said does not), on SQLite and on PostgreSQL.

use memproxy::store::prelude::*;
use memproxy::store::{Corpus, NewMessage, UserScope};

use crate::backends::on_every_backend;
use crate::conformance_memory::turn;

/// Stores `log` in `conversation` and returns the new turns' ids.
fn stored_ids(
    store: &dyn Store,
    user: &UserScope,
    conversation: &str,
    log: &[NewMessage],
) -> Vec<i64> {
    store
        .sync_messages(user, conversation, "default", log)
        .expect("sync")
        .stored
        .iter()
        .map(|m| m.id)
        .collect()
}

fn neighbours_area(store: &dyn Store) {
    let ana = UserScope::new("acme", "ana");
    let bob = UserScope::new("acme", "bob");
    let log: Vec<NewMessage> = (0..6)
        .map(|n| {
            turn(
                if n % 2 == 0 { "user" } else { "assistant" },
                &format!("turn {n}"),
            )
        })
        .collect();
    let ids = stored_ids(store, &ana, "c1", &log);
    let other = stored_ids(store, &ana, "c2", &log[..2]);
    store
        .sync_messages(&bob, "c1", "default", &log)
        .expect("sync bob");

    let mut found = store
        .message_neighbours(&ana, &[ids[0], ids[3]], 2)
        .expect("neighbours");
    found.sort_unstable();
    let mut expected = vec![
        (ids[0], ids[1], 1),
        (ids[0], ids[2], 2),
        (ids[3], ids[1], 2),
        (ids[3], ids[2], 1),
        (ids[3], ids[4], 1),
        (ids[3], ids[5], 2),
    ];
    expected.sort_unstable();
    assert_eq!(found, expected, "within two positions, in c1 only");
    assert!(!found.iter().any(|(_, n, _)| other.contains(n)));
    assert!(store
        .message_neighbours(&bob, &[ids[3]], 2)
        .expect("bob")
        .is_empty());
    assert!(store
        .message_neighbours(&ana, &[ids[3]], 0)
        .expect("no window")
        .is_empty());
    assert!(store
        .message_neighbours(&ana, &[], 2)
        .expect("no ids")
        .is_empty());
}

#[test]
fn neighbours_on_every_backend() {
    on_every_backend(|b| neighbours_area(&*b.store));
}

fn context_area(store: &dyn Store) {
    let ana = UserScope::new("acme", "ana");
    let bob = UserScope::new("acme", "bob");
    let log = [
        turn("user", "Did you ever visit the lighthouse museum?"),
        turn("assistant", "Yes, last May, with my cousin."),
        turn("user", "Which exhibit did you like?"),
        turn(
            "assistant",
            "The old lamps, and the lighthouse keeper's logbook.",
        ),
    ];
    let ids = stored_ids(store, &ana, "c1", &log);
    store
        .sync_messages(&bob, "c1", "default", &log[..2])
        .expect("sync bob");

    // "museum" is only in the question; its answer is found through its context, ranked below
    // the question itself. The third turn's context is the answer, which has no "museum".
    let found = store
        .keyword_search(&ana, Corpus::Message, "museum", 10, None)
        .expect("search");
    let order: Vec<i64> = found.iter().map(|(id, _)| *id).collect();
    assert_eq!(order, [ids[0], ids[1]], "{found:?}");
    assert!(
        found[0].1 > found[1].1,
        "own words outrank context: {found:?}"
    );
    // A turn that has the word itself outranks one that has it only in its context.
    let lighthouse = store
        .keyword_search(&ana, Corpus::Message, "lighthouse", 10, None)
        .expect("search");
    let order: Vec<i64> = lighthouse.iter().map(|(id, _)| *id).collect();
    assert_eq!(order.len(), 3, "{lighthouse:?}");
    assert!(
        !order[..2].contains(&ids[1]),
        "context ranks last: {lighthouse:?}"
    );

    // What the user said is their own words only: "cousin" is in the third turn's context.
    let cousin = store
        .texts_with(&ana, Corpus::Message, &["cousin".to_owned()], 10)
        .expect("texts");
    assert!(cousin.is_empty(), "{cousin:?}");
    let museum = store
        .texts_with(&ana, Corpus::Message, &["museum".to_owned()], 10)
        .expect("texts");
    assert_eq!(museum, ["Did you ever visit the lighthouse museum?"]);
}

#[test]
fn context_on_every_backend() {
    on_every_backend(|b| context_area(&*b.store));
}
