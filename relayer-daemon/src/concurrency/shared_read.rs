//! Reads of the node that the relays being checked at once all ask (the latest block, the fee,
//! the balances of the keys this daemon sends on): one call answers every relay that asked while
//! it was on its way, where a burst of relays used to ask the node once each.
//!
//! A relay takes an answer the node gave after the relay asked, never an older one, so it is as
//! fresh as the relay's own read would have been: relays asked one after another still read one
//! after another. Only relays asking together share, and a burst costs the node one read per
//! round trip instead of one per relay, and failures included: while the node does not answer,
//! the relays waiting behind a read share its failure instead of each waiting out one of its own.

use std::time::Instant;

use alloy::primitives::{Address, U256};

use crate::{
    error::{Error, Result},
    rules::fees::Fees,
};

/// The reads a relay's checks share with the relays checked beside it.
#[derive(Debug, Default)]
pub(crate) struct ChecksReads {
    /// The latest block's number and time.
    pub(crate) head: SharedRead<(), (u64, u64)>,
    /// The suggested fees.
    pub(crate) fees: SharedRead<(), Fees>,
    /// The balances of the keys asked about, in their order.
    pub(crate) balances: SharedRead<Vec<Address>, Vec<(Address, U256)>>,
}

/// The last answer to one kind of read, and who may take it.
#[derive(Debug)]
pub(crate) struct SharedRead<K, T> {
    /// Held across the node's answer, so relays asking meanwhile wait for this one read.
    last: tokio::sync::Mutex<Option<Answer<K, T>>>,
}

impl<K, T> Default for SharedRead<K, T> {
    fn default() -> Self {
        Self { last: tokio::sync::Mutex::new(None) }
    }
}

/// One answer of the node: what was asked, what it said (a failure as its detail), and when.
#[derive(Debug)]
struct Answer<K, T> {
    asked: K,
    said: std::result::Result<T, String>,
    at: Instant,
}

impl<K: PartialEq, T: Clone> SharedRead<K, T> {
    /// `read`'s outcome for `asked`: the answer to a read of the same `asked` that came after
    /// this call began, if there is one, else a read of its own.
    pub(crate) async fn read<F>(&self, asked: K, read: impl FnOnce() -> F) -> Result<T>
    where
        F: Future<Output = Result<T>>,
    {
        let began = Instant::now();
        let mut last = self.last.lock().await;
        if let Some(answer) = &*last
            && answer.asked == asked
            && answer.at > began
        {
            return answer.said.clone().map_err(Error::Rpc);
        }
        let outcome = read().await;
        // The node's answers are shared, its failures too; anything else is this call's own.
        let said = match &outcome {
            Ok(value) => Some(Ok(value.clone())),
            Err(Error::Rpc(detail)) => Some(Err(detail.clone())),
            Err(_) => None,
        };
        *last = said.map(|said| Answer { asked, said, at: Instant::now() });
        outcome
    }
}

#[cfg(test)]
pub(super) mod tests {
    use std::{
        sync::{
            Arc,
            atomic::{AtomicUsize, Ordering},
        },
        time::Duration,
    };

    use super::*;

    /// A read that takes `took` and answers how many reads were made before it (also the
    /// stand-in read of `fresh`'s tests).
    pub(in crate::concurrency) async fn counted(reads: &AtomicUsize, took: Duration) -> Result<usize> {
        let made = reads.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep(took).await;
        Ok(made)
    }

    #[tokio::test]
    async fn calls_made_while_a_read_is_on_its_way_share_its_answer() {
        let (shared, reads) = (Arc::new(SharedRead::<(), usize>::default()), Arc::new(AtomicUsize::new(0)));
        let calls: Vec<_> = (0..10)
            .map(|_| {
                let (shared, reads) = (Arc::clone(&shared), Arc::clone(&reads));
                tokio::spawn(async move {
                    shared.read((), || counted(&reads, Duration::from_millis(50))).await.unwrap()
                })
            })
            .collect();
        let mut answers = Vec::new();
        for call in calls {
            answers.push(call.await.unwrap());
        }
        // The first call reads; the nine that began before its answer take it.
        assert_eq!(reads.load(Ordering::SeqCst), 1);
        assert_eq!(answers, [0; 10]);
    }

    #[tokio::test]
    async fn a_call_after_an_answer_reads_again_and_other_questions_are_not_answered_alike() {
        let (shared, reads) = (SharedRead::<u8, usize>::default(), AtomicUsize::new(0));
        assert_eq!(shared.read(1, || counted(&reads, Duration::ZERO)).await.unwrap(), 0);
        // Asked after that answer came: a read of its own, however soon.
        assert_eq!(shared.read(1, || counted(&reads, Duration::ZERO)).await.unwrap(), 1);
        assert_eq!(shared.read(2, || counted(&reads, Duration::ZERO)).await.unwrap(), 2);
        assert_eq!(reads.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn the_nodes_failure_is_shared_and_another_error_is_not() {
        let shared = Arc::new(SharedRead::<(), u8>::default());
        let failing = {
            let shared = Arc::clone(&shared);
            tokio::spawn(async move {
                shared
                    .read((), || async {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        Err(Error::Rpc("connection refused".into()))
                    })
                    .await
            })
        };
        tokio::time::sleep(Duration::from_millis(10)).await;
        // Began while the failing read was on its way: its failure, without a read.
        let waited = shared.read((), || async { Ok(7) }).await;
        assert!(matches!(&waited, Err(Error::Rpc(detail)) if detail == "connection refused"), "{waited:?}");
        assert!(matches!(failing.await.unwrap(), Err(Error::Rpc(_))));

        let internal = shared.read((), || async { Err(Error::Internal("not the node's".into())) }).await;
        assert!(matches!(internal, Err(Error::Internal(_))));
        // Not kept: the next call reads.
        assert_eq!(shared.read((), || async { Ok(9) }).await.unwrap(), 9);
    }
}
