//! Reads of the node that may be a little old: the chain's head for the followers, and the
//! keys' balances for `/status` and the metrics. Each is read at most once per its freshness,
//! however many ask, and callers asking while a read is on its way wait for that one read.
//!
//! Where a read must be newer than the call (the checks of a relay), `shared_read` applies
//! instead: it shares only an answer given after the call began.

use std::{
    sync::atomic::{AtomicU64, Ordering},
    time::{Duration, Instant},
};

use crate::error::Result;

/// How long a head read stays the daemon's answer: how late, at most, a follower learns of a
/// new block (a block every 1 to 12 s on the chains the relayer serves). Each follower used to
/// ask for the head and its receipts on a timer of its own (about ten calls per relay); one read
/// now answers them all, and a follower asks for its receipts only once the head moved
/// ([`crate::rules::follow`]).
pub(crate) const HEAD_FRESH: Duration = Duration::from_millis(250);

/// How long the keys' balances stay the answer of `/status` and the metrics: a scrape must not
/// cost a chain read each (Prometheus scrapes every 15 s by default; anyone who can reach the
/// listener could scrape far more often).
pub(crate) const BALANCES_FRESH: Duration = Duration::from_secs(15);

/// A value read from the node, kept for `fresh_for`.
#[derive(Debug)]
pub(crate) struct Fresh<T> {
    fresh_for: Duration,
    /// Held across the node's answer: callers asking at once wait for one read.
    kept: tokio::sync::Mutex<Option<Kept<T>>>,
    /// Moved on by [`Fresh::forget`]; a value read under an earlier one is not used again.
    generation: AtomicU64,
}

/// A value, when it was read, and under which generation.
#[derive(Debug)]
struct Kept<T> {
    value: T,
    at: Instant,
    generation: u64,
}

impl<T: Clone> Fresh<T> {
    pub(crate) fn new(fresh_for: Duration) -> Self {
        Self { fresh_for, kept: tokio::sync::Mutex::new(None), generation: AtomicU64::new(0) }
    }

    /// The value kept, if younger than `fresh_for` and not forgotten since it was read; else what
    /// `read` gives, kept when it succeeds (a failure is not kept: the next caller reads again).
    pub(crate) async fn get<F>(&self, read: impl FnOnce() -> F) -> Result<T>
    where
        F: Future<Output = Result<T>>,
    {
        let mut kept = self.kept.lock().await;
        let generation = self.generation.load(Ordering::SeqCst);
        if let Some(value) = kept
            .as_ref()
            .filter(|kept| kept.generation == generation && kept.at.elapsed() < self.fresh_for)
            .map(|kept| kept.value.clone())
        {
            return Ok(value);
        }
        let value = read().await?;
        *kept = Some(Kept { value: value.clone(), at: Instant::now(), generation });
        Ok(value)
    }

    /// The value changed (a relay was sent or settled): the next call reads again, and a read on
    /// its way now is not kept for later callers.
    pub(crate) fn forget(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, atomic::AtomicUsize};

    use super::*;
    use crate::{concurrency::shared_read::tests::counted, error::Error};

    #[tokio::test]
    async fn callers_asking_at_once_share_one_read_and_later_ones_its_value() {
        let (fresh, reads) = (Arc::new(Fresh::new(Duration::from_secs(60))), Arc::new(AtomicUsize::new(0)));
        let asked = (0..8).map(|_| {
            let (fresh, reads) = (fresh.clone(), reads.clone());
            tokio::spawn(async move { fresh.get(|| counted(&reads, Duration::from_millis(50))).await })
        });
        for answer in futures::future::join_all(asked).await {
            assert_eq!(answer.unwrap().unwrap(), 0);
        }
        assert_eq!(fresh.get(|| counted(&reads, Duration::ZERO)).await.unwrap(), 0, "still fresh");
        assert_eq!(reads.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_value_older_than_its_freshness_is_read_again() {
        let (fresh, reads) = (Fresh::new(Duration::from_millis(20)), AtomicUsize::new(0));
        assert_eq!(fresh.get(|| counted(&reads, Duration::ZERO)).await.unwrap(), 0);
        tokio::time::sleep(Duration::from_millis(40)).await;
        assert_eq!(fresh.get(|| counted(&reads, Duration::ZERO)).await.unwrap(), 1);
    }

    #[tokio::test]
    async fn a_forgotten_value_is_read_again_and_so_is_one_read_while_it_was_forgotten() {
        let (fresh, reads) = (Arc::new(Fresh::new(Duration::from_secs(60))), Arc::new(AtomicUsize::new(0)));
        assert_eq!(fresh.get(|| counted(&reads, Duration::ZERO)).await.unwrap(), 0);
        fresh.forget();
        assert_eq!(fresh.get(|| counted(&reads, Duration::ZERO)).await.unwrap(), 1, "forgotten");
        // A read on its way when the value changes answers its caller, and is not kept.
        let slow = {
            let (fresh, reads) = (fresh.clone(), reads.clone());
            tokio::spawn(async move {
                fresh.forget();
                fresh.get(|| async { counted(&reads, Duration::from_millis(50)).await }).await
            })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        fresh.forget();
        assert_eq!(slow.await.unwrap().unwrap(), 2);
        assert_eq!(fresh.get(|| counted(&reads, Duration::ZERO)).await.unwrap(), 3, "not kept");
    }

    #[tokio::test]
    async fn a_failed_read_is_not_kept() {
        let (fresh, reads) = (Fresh::<usize>::new(Duration::from_secs(60)), AtomicUsize::new(0));
        let failed = fresh.get(|| async { Err(Error::Rpc("the node did not answer".into())) }).await;
        assert!(failed.is_err());
        assert_eq!(fresh.get(|| counted(&reads, Duration::ZERO)).await.unwrap(), 0);
    }
}
