//! The store conformance suite, a turn's neighbours (what retrieval spreads a found turn's score
//! to): the live turns within a window of positions in the same conversation, the distance of
//! each, never another conversation's or another user's, on SQLite and on PostgreSQL.

use memproxy::store::prelude::*;
use memproxy::store::{NewMessage, UserScope};

use crate::backends::on_every_backend;
use crate::conformance_memory::turn;

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
    let ids: Vec<i64> = store
        .sync_messages(&ana, "c1", "default", &log)
        .expect("sync")
        .stored
        .iter()
        .map(|m| m.id)
        .collect();
    let other: Vec<i64> = store
        .sync_messages(&ana, "c2", "default", &log[..2])
        .expect("sync c2")
        .stored
        .iter()
        .map(|m| m.id)
        .collect();
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
