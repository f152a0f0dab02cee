//! Correctness after a configuration, read from the chain: every accepted relay registered its
//! agent exactly once, and every relayer key's nonces have no gap.

use std::collections::BTreeMap;

use alloy::{
    primitives::{Address, B256, U256},
    signers::local::PrivateKeySigner,
};
use kya_tests::TestChain;

use crate::{chain, load::Outcome};

/// What the checks found.
#[derive(Debug, Clone)]
pub(crate) struct Checks {
    /// Relays accepted (200 or 202), and seen `mined`.
    pub(crate) accepted: usize,
    pub(crate) mined: usize,
    /// Agents the registry gained during the configuration (`nextAgentId` after − before).
    pub(crate) registrations: u64,
    /// Signers of accepted relays whose wallet is an agent's now.
    pub(crate) accepted_registered: usize,
    /// Signers whose request was refused but whose wallet is registered all the same.
    pub(crate) refused_registered: usize,
    /// Per relayer key, in configured order.
    pub(crate) keys: Vec<KeyNonces>,
    /// The gas used and the gas limit of the block holding the most of the row's relays.
    pub(crate) fullest_block_gas: Option<(u64, u64)>,
}

/// One relayer key's nonces at the end (its keys are fresh: they start at 0).
#[derive(Debug, Clone)]
pub(crate) struct KeyNonces {
    /// Transactions mined from it (its nonce at the latest block).
    pub(crate) mined_nonce: u64,
    /// Its nonce counting the node's pool: above `mined_nonce` while a transaction waits.
    pub(crate) pending_nonce: u64,
    /// The nonces of the mined relays' transactions it sent.
    pub(crate) nonces: Vec<u64>,
}

impl KeyNonces {
    /// No gap: every nonce below the mined one went to exactly one mined relay, and nothing
    /// waits in the pool.
    pub(crate) fn ok(&self) -> bool {
        let mut nonces = self.nonces.clone();
        nonces.sort_unstable();
        self.pending_nonce == self.mined_nonce && nonces == (0..self.mined_nonce).collect::<Vec<_>>()
    }
}

impl Checks {
    /// Every accepted relay mined and registered its agent, and no agent more.
    pub(crate) fn exactly_once(&self) -> bool {
        self.mined == self.accepted
            && self.accepted_registered == self.accepted
            && self.registrations == self.accepted as u64
            && self.refused_registered == 0
    }

    pub(crate) fn ok(&self) -> bool {
        self.exactly_once() && self.keys.iter().all(KeyNonces::ok)
    }
}

/// Reads the chain once the configuration's relays ended (or its patience ran out).
/// `next_before`: `nextAgentId` before the burst.
pub(crate) async fn check(
    chain: &TestChain,
    next_before: U256,
    signers: &[PrivateKeySigner],
    outcomes: &[Outcome],
    keys: &[PrivateKeySigner],
) -> Checks {
    let registrations = u64::try_from(chain::next_agent_id(chain).await - next_before).expect("a count");
    let (mut accepted_registered, mut refused_registered) = (0, 0);
    for (signer, outcome) in signers.iter().zip(outcomes) {
        if chain::is_registered(chain, signer.address()).await {
            if outcome.accepted() { accepted_registered += 1 } else { refused_registered += 1 }
        }
    }
    let mut by_key: BTreeMap<Address, Vec<u64>> = BTreeMap::new();
    for outcome in outcomes.iter().filter(|outcome| outcome.mined()) {
        let hash: Option<B256> = outcome.view.as_ref().and_then(|view| view["txHash"].as_str()?.parse().ok());
        if let Some((from, nonce)) = match hash {
            Some(hash) => chain::sender_and_nonce(chain, hash).await,
            None => None,
        } {
            by_key.entry(from).or_default().push(nonce);
        }
    }
    let mut key_nonces = Vec::new();
    for key in keys {
        let (mined_nonce, pending_nonce) = chain::nonces(chain, key.address()).await;
        let nonces = by_key.remove(&key.address()).unwrap_or_default();
        key_nonces.push(KeyNonces { mined_nonce, pending_nonce, nonces });
    }
    let mut per_block: BTreeMap<u64, usize> = BTreeMap::new();
    for view in outcomes.iter().filter(|outcome| outcome.mined()).filter_map(|outcome| outcome.view.as_ref())
    {
        if let Some(block) = view["blockNumber"].as_u64() {
            *per_block.entry(block).or_default() += 1;
        }
    }
    let fullest = per_block.iter().max_by_key(|(block, count)| (**count, std::cmp::Reverse(**block)));
    let fullest_block_gas = match fullest {
        Some((block, _)) => Some(chain::block_gas(chain, *block).await),
        None => None,
    };
    Checks {
        fullest_block_gas,
        accepted: outcomes.iter().filter(|outcome| outcome.accepted()).count(),
        mined: outcomes.iter().filter(|outcome| outcome.mined()).count(),
        registrations,
        accepted_registered,
        refused_registered,
        keys: key_nonces,
    }
}
