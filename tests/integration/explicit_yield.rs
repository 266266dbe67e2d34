//! Background work gives way to turns (issue 51): a turn that arrives while a background save or
//! a re-warm runs on the upstream takes the model first; the save is redone afterwards, the
//! re-warm dropped.

use std::time::Duration;

use memproxy::agent::Rewarm;
use memproxy::mock::Reply;
use serde_json::Value;

use crate::common::{eventually, facts, harness_with, Harness};
use crate::explicit::{model_requests, say, send};

/// Longer than any test runs: a call that is not cancelled never answers in time.
const FOREVER: Duration = Duration::from_secs(600);

/// `say`, bounded: a turn left waiting behind a stalled background call fails the test.
async fn say_now(h: &Harness, user: &str, text: &str) -> Value {
    tokio::time::timeout(Duration::from_secs(60), say(h, user, text))
        .await
        .expect("the turn did not wait for the background call")
}

#[tokio::test]
async fn a_turn_takes_the_model_before_a_background_save_which_is_redone_after() {
    let h = harness_with(|c| {
        c.explicit.background_save = true;
        c.explicit.yield_to_turns = Rewarm::Always;
    })
    .await;
    let fact = "The user keeps three hives of bees on their roof.";
    h.mock.push(send("How lovely!"));
    h.mock.push_marked(
        "MEMPROXY-EXTRACT",
        Reply::Stall(FOREVER, Box::new(facts(&[fact]))),
    );
    h.mock.push_marked("MEMPROXY-EXTRACT", facts(&[fact]));
    say_now(&h, "by", "I keep three hives of bees on my roof.").await;
    eventually("the background save asks the memory LLM", || async {
        h.mock.chat_requests(Some("MEMPROXY-EXTRACT")).len() == 1
    })
    .await;
    h.mock.push(send("Hello again."));
    // (Too short to set off a save of its own.)
    say_now(&h, "by", "Hi again.").await;
    // The save asked again once the turn was over, and saved the fact.
    eventually("the save is redone", || async {
        crate::common::memories(&h, "by")
            .await
            .contains(&fact.to_owned())
    })
    .await;
    assert_eq!(h.mock.chat_requests(Some("MEMPROXY-EXTRACT")).len(), 2);
    assert_eq!(
        h.mock.abandoned_stalls(),
        1,
        "the first save's call was cancelled"
    );
}

#[tokio::test]
async fn a_re_warm_a_turn_overtakes_is_dropped() {
    let h = harness_with(|c| {
        c.explicit.rewarm_cache = Rewarm::Always;
        c.explicit.yield_to_turns = Rewarm::Always;
    })
    .await;
    h.mock.push(send("Hi there."));
    h.mock
        .push(Reply::Stall(FOREVER, Box::new(Reply::Text(".".to_owned()))));
    say_now(&h, "rw", "Hello, I am back from my trip.").await;
    let warms = |h: &Harness| {
        model_requests(h)
            .iter()
            .filter(|r| r["max_tokens"] == 1)
            .count()
    };
    eventually("the re-warm is sent", || async { warms(&h) == 1 }).await;
    h.mock.push(send("Welcome back."));
    say_now(&h, "rw", "It was a long flight.").await;
    // The turn cancelled the re-warm in flight: the upstream saw its client go.
    eventually("the re-warm is cancelled", || async {
        h.mock.abandoned_stalls() == 1
    })
    .await;
    // The second turn's own re-warm follows it; the first one is not sent again.
    h.mock.push(Reply::Text(".".to_owned()));
    eventually("the second turn's re-warm", || async { warms(&h) == 2 }).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(warms(&h), 2);
}
