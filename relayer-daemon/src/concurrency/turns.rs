//! Turns at the checks on chain (stages 7 to 11): how many requests one daemon checks against
//! the node at once, as many as the keys it holds now can take.
//!
//! A key sends one relay per submit round trip, and a relay's checks take about three, so a few
//! checked requests per key keep every lane fed. The rest wait their turn in arrival order: a
//! burst is checked and sent first come, first served, instead of every request of it sharing
//! the cores and the node at once and none reaching a lane until most are checked; and the node
//! never sees a burst's whole fan-out at once (providers cap concurrent requests).
//!
//! Counted by the keys the daemon holds, not those it is configured with: in a cluster each
//! daemon holds a share of the keys, and turns by the configured keys gave every daemon turns
//! for all of them, so a cluster of `n` daemons checked `n` times what the keys could send.

use std::sync::Mutex;

use tokio::sync::{Semaphore, SemaphorePermit};

use super::lock;
use crate::error::{Error, Result};

/// Requests checked at once per key this daemon holds.
const CHECKS_PER_KEY: usize = 8;
/// At least this many at once, whatever the keys held: a daemon holding none (a standby) checks
/// the relays it hands to the keys' holders.
const CHECKS_AT_LEAST: usize = 16;

/// The turns of one daemon.
#[derive(Debug)]
pub(crate) struct Turns {
    semaphore: Semaphore,
    size: Mutex<Size>,
}

/// How many turns there are to be, and how many of those given out are to be taken back as
/// they end (the number fell while they were out).
#[derive(Debug)]
struct Size {
    turns: usize,
    owed: usize,
}

/// A turn: held until the request's checks on chain are done.
#[derive(Debug)]
pub(crate) struct Turn<'a> {
    permit: Option<SemaphorePermit<'a>>,
    size: &'a Mutex<Size>,
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        let Some(permit) = self.permit.take() else { return };
        let mut size = lock(self.size);
        if size.owed > 0 {
            size.owed -= 1;
            permit.forget();
        }
    }
}

impl Turns {
    /// Turns for a daemon holding `keys_held` keys.
    pub(crate) fn new(keys_held: usize) -> Self {
        let turns = Self::for_keys(keys_held);
        Self { semaphore: Semaphore::new(turns), size: Mutex::new(Size { turns, owed: 0 }) }
    }

    /// The turns `keys_held` keys can take.
    pub(crate) fn for_keys(keys_held: usize) -> usize {
        CHECKS_AT_LEAST.max(CHECKS_PER_KEY.saturating_mul(keys_held))
    }

    /// Waits for a turn, in arrival order, once the number of turns is matched to the
    /// `keys_held` keys this daemon holds now.
    pub(crate) async fn take(&self, keys_held: usize) -> Result<Turn<'_>> {
        self.resize(Self::for_keys(keys_held));
        let permit = self
            .semaphore
            .acquire()
            .await
            .map_err(|_| Error::Internal("the checks' turns were closed".into()))?;
        Ok(Turn { permit: Some(permit), size: &self.size })
    }

    /// Makes the turns number `turns`: more at once, or fewer, those out taken back as they end.
    fn resize(&self, turns: usize) {
        let mut size = lock(&self.size);
        if turns > size.turns {
            let more = turns - size.turns;
            // Turns owed back first: they stay out, and count again.
            let kept = more.min(size.owed);
            size.owed -= kept;
            self.semaphore.add_permits(more - kept);
        } else if turns < size.turns {
            let fewer = size.turns - turns;
            let taken_back = self.semaphore.forget_permits(fewer);
            size.owed += fewer - taken_back;
        }
        size.turns = turns;
    }

    /// Turns free now (for tests).
    #[cfg(test)]
    fn free(&self) -> usize {
        self.semaphore.available_permits()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn turns_are_eight_a_key_held_and_sixteen_at_least() {
        assert_eq!(Turns::for_keys(0), 16);
        assert_eq!(Turns::for_keys(1), 16);
        assert_eq!(Turns::for_keys(2), 16);
        assert_eq!(Turns::for_keys(3), 24);
        assert_eq!(Turns::for_keys(4), 32);
    }

    #[tokio::test]
    async fn the_turns_follow_the_keys_held_those_out_taken_back_as_they_end() {
        let turns = Turns::new(4);
        let mut out = Vec::new();
        for _ in 0..20 {
            out.push(turns.take(4).await.unwrap());
        }
        assert_eq!(turns.free(), 12);
        // Down to one key: 16 turns, and 20 are out, so none is free and four are owed.
        let waiting = turns.take(1);
        tokio::pin!(waiting);
        assert!(futures::poll!(waiting.as_mut()).is_pending(), "no turn while 20 of 16 are out");
        assert_eq!((turns.free(), lock(&turns.size).owed), (0, 4));
        // Four end: taken back, still no turn free.
        out.truncate(16);
        assert_eq!((turns.free(), lock(&turns.size).owed), (0, 0));
        assert!(futures::poll!(waiting.as_mut()).is_pending());
        // One more ends: its turn goes to the waiting request.
        out.pop();
        let turn = waiting.await.unwrap();
        out.push(turn);
        assert_eq!(turns.free(), 0);
        // Up to three keys: 24 turns, eight more free at once.
        drop(turns.take(3).await.unwrap());
        assert_eq!(turns.free(), 8);
        drop(out);
        assert_eq!(turns.free(), 24);
    }

    #[tokio::test]
    async fn turns_owed_back_count_again_when_the_keys_come_back() {
        let turns = Turns::new(4);
        let out: Vec<_> = futures::future::join_all((0..32).map(|_| turns.take(4))).await;
        // One key: 16 owed back; all four again before any ended: nothing owed, none added.
        turns.resize(Turns::for_keys(1));
        assert_eq!(lock(&turns.size).owed, 16);
        turns.resize(Turns::for_keys(4));
        assert_eq!((turns.free(), lock(&turns.size).owed), (0, 0));
        drop(out);
        assert_eq!(turns.free(), 32);
    }
}
