//! Background work yields to turns. A local model server answers one request at a time (a
//! one-slot llama.cpp, `../shared/tools/real-llm`): a background save or re-warm that is running
//! when the user's next turn arrives makes that turn wait for it, often 20 s and more on a small
//! machine. So while any turn runs, background model calls wait; and a turn that starts while one
//! runs cancels it (the request is dropped, and a llama.cpp-style server stops generating when
//! its client disconnects). A cancelled save is redone once the turns are over; a re-warm that a
//! turn overtook is dropped (the turn itself processed the prompt).
//!
//! `explicit.yield_to_turns` decides where this applies: `auto` for an upstream on this machine
//! or a private network (a local server with few slots); a remote API serves requests in
//! parallel, and cancelling there would only waste tokens.

use std::future::Future;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// The turns running now, and the token that cancels the background call in flight.
#[derive(Default)]
pub struct Foreground {
    running: AtomicUsize,
    /// Turns started since the process started (a re-warm checks none started since its turn).
    started: AtomicU64,
    cancel: Mutex<CancellationToken>,
    idle: Notify,
}

/// A running turn; dropping it ends it.
pub struct TurnGuard<'a>(&'a Foreground);

impl Drop for TurnGuard<'_> {
    fn drop(&mut self) {
        if self.0.running.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

/// Whether a background call ran to its end or a turn took the model first.
#[derive(Debug, PartialEq, Eq)]
pub enum Ran<T> {
    Done(T),
    Overtaken,
}

impl Foreground {
    /// Marks a turn as running until the guard drops, cancelling the background call in flight.
    pub fn turn(&self) -> TurnGuard<'_> {
        self.running.fetch_add(1, Ordering::SeqCst);
        self.started.fetch_add(1, Ordering::SeqCst);
        if let Ok(mut cancel) = self.cancel.lock() {
            cancel.cancel();
            *cancel = CancellationToken::new();
        }
        TurnGuard(self)
    }

    /// How many turns have started so far.
    pub fn turns_started(&self) -> u64 {
        self.started.load(Ordering::SeqCst)
    }

    /// Waits until no turn runs, then runs `work` until it ends or a turn starts.
    pub async fn background<F: Future>(&self, work: F) -> Ran<F::Output> {
        self.background_since(None, work).await
    }

    /// [`Self::background`], but not at all when a turn started after `since`
    /// ([`Self::turns_started`]): work for a state that a turn has since moved on from.
    pub async fn background_since<F: Future>(&self, since: Option<u64>, work: F) -> Ran<F::Output> {
        let token = self.when_idle().await;
        if since.is_some_and(|since| self.turns_started() != since) {
            return Ran::Overtaken;
        }
        tokio::select! {
            biased;
            _ = token.cancelled() => Ran::Overtaken,
            output = work => Ran::Done(output),
        }
    }

    /// Runs `attempt` when no turn runs, again after each turn that overtook it, until it ends.
    pub async fn background_until_done<F: Future>(
        &self,
        mut attempt: impl FnMut() -> F,
    ) -> F::Output {
        loop {
            if let Ran::Done(output) = self.background(attempt()).await {
                return output;
            }
        }
    }

    /// The current cancellation token, once no turn runs.
    async fn when_idle(&self) -> CancellationToken {
        loop {
            let idle = self.idle.notified();
            tokio::pin!(idle);
            // Registered before the check, so a turn ending in between still wakes this.
            idle.as_mut().enable();
            if self.running.load(Ordering::SeqCst) == 0 {
                if let Ok(cancel) = self.cancel.lock() {
                    return cancel.clone();
                }
            }
            idle.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn a_turn_cancels_the_call_in_flight_and_waits_for_nobody() {
        let foreground = Arc::new(Foreground::default());
        let running = Arc::clone(&foreground);
        let call = tokio::spawn(async move {
            running
                .background(tokio::time::sleep(Duration::from_secs(30)))
                .await
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        let turn = foreground.turn();
        let ran = tokio::time::timeout(Duration::from_secs(5), call).await;
        assert!(matches!(ran, Ok(Ok(Ran::Overtaken))), "{ran:?}");
        // While the turn runs, background work waits; it runs once the turn is over.
        let waiting = Arc::clone(&foreground);
        let later = tokio::spawn(async move { waiting.background(async { 7 }).await });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!later.is_finished());
        drop(turn);
        let ran = tokio::time::timeout(Duration::from_secs(5), later).await;
        assert!(matches!(ran, Ok(Ok(Ran::Done(7)))), "{ran:?}");
        assert_eq!(foreground.turns_started(), 1);
    }
}
