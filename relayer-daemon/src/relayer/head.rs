//! The chain's head as this daemon's followers see it: read from the node at most once per
//! [`HEAD_FRESH`], however many relays are followed, where each follower used to ask for the
//! head and its receipts on a timer of its own (about ten calls per relay). A follower asks for
//! its receipts only once the head moved ([`crate::rules::follow`]).

use std::time::{Duration, Instant};

use crate::{chain::RelayerChain, error::Result};

/// How long a head read stays the daemon's answer: how late, at most, a follower learns of a
/// new block (a block every 1 to 12 s on the chains the relayer serves).
pub(crate) const HEAD_FRESH: Duration = Duration::from_millis(250);

/// The latest block number read, and when.
#[derive(Debug, Default)]
pub(crate) struct Head {
    /// Held across the node's answer: followers asking at once wait for one read.
    read: tokio::sync::Mutex<Option<(Instant, u64)>>,
}

impl Head {
    /// The latest block's number, read from `chain` unless a read younger than [`HEAD_FRESH`]
    /// answers.
    pub(crate) async fn latest(&self, chain: &RelayerChain) -> Result<u64> {
        let mut read = self.read.lock().await;
        if let Some((at, number)) = *read
            && at.elapsed() < HEAD_FRESH
        {
            return Ok(number);
        }
        let number = chain.block_number().await?;
        *read = Some((Instant::now(), number));
        Ok(number)
    }
}
