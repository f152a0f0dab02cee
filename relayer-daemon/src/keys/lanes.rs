//! The key pool: one [`Sender`] per relayer key, each its own nonce lane, with this daemon's
//! lease on it. A stuck transaction holds up only the relays behind it on its own key's nonces;
//! the other lanes go on. The pure rules of the pool are [`crate::rules::lanes`]'s.

use alloy::{primitives::Address, signers::local::PrivateKeySigner};

use crate::{chain::RelayerChain, keys::sender::Sender, store::Lease};

/// The relayer's keys, in the configured order (the first is the one a single-key relayer had).
#[derive(Debug)]
pub(crate) struct Pool {
    senders: Vec<Sender>,
}

impl Pool {
    /// A lane per signer; `signers` is never empty (the configuration refuses that).
    pub(crate) fn new(chain: &RelayerChain, signers: &[PrivateKeySigner], chain_id: u64) -> Self {
        assert!(!signers.is_empty(), "the configuration gives at least one key");
        Self {
            senders: signers
                .iter()
                .map(|signer| Sender::new(chain.clone(), signer.clone(), chain_id))
                .collect(),
        }
    }

    /// Every lane's address, in the configured order.
    pub(crate) fn addresses(&self) -> Vec<Address> {
        self.senders.iter().map(Sender::address).collect()
    }

    /// The first lane: the key of relays recorded before lanes were (their `lane` is filled with
    /// it at start), and the `from` of simulations and estimates, which any key would do for.
    pub(crate) fn first(&self) -> &Sender {
        &self.senders[0]
    }

    /// The lane of `address`, if it is one of this pool's keys.
    pub(crate) fn lane(&self, address: Address) -> Option<&Sender> {
        self.senders.iter().find(|sender| sender.address() == address)
    }

    /// Every lane, in the configured order.
    pub(crate) fn senders(&self) -> &[Sender] {
        &self.senders
    }

    /// The leases this daemon holds, in pool order.
    pub(crate) fn held(&self) -> Vec<Lease> {
        self.senders.iter().filter_map(Sender::lease).collect()
    }

    /// The lanes (keys' addresses) this daemon holds the lease of now.
    pub(crate) fn held_lanes(&self) -> Vec<Address> {
        self.senders.iter().filter_map(|sender| sender.lease().map(|lease| lease.lane)).collect()
    }

    /// How many keys this daemon holds the lease of now: [`Pool::held`]'s length, without
    /// building it (asked by every request at its turn).
    pub(crate) fn held_count(&self) -> usize {
        self.senders.iter().filter(|sender| sender.lease().is_some()).count()
    }

    /// Whether this daemon should look after a relay on `lane` (follow it, reconcile it): it
    /// holds the lane's lease, or the key is not in this pool at all (removed from the
    /// configuration: its relays are still settled from their receipts). A lane of the pool
    /// that another daemon holds is that daemon's to look after.
    pub(crate) fn looks_after(&self, lane: Address) -> bool {
        self.lane(lane).is_none_or(|sender| sender.lease().is_some())
    }
}
