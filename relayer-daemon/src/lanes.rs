//! The key pool: one [`Sender`] per relayer key, each its own nonce lane, and the pure rule that
//! picks the lane of a new relay. A stuck transaction holds up only the relays behind it on its
//! own key's nonces; the other lanes go on.

use alloy::{primitives::Address, signers::local::PrivateKeySigner};

use crate::{chain::RelayerChain, sender::Sender, store::Lease};

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

    /// Whether this daemon should look after a relay on `lane` (follow it, reconcile it): it
    /// holds the lane's lease, or the key is not in this pool at all (removed from the
    /// configuration: its relays are still settled from their receipts). A lane of the pool
    /// that another daemon holds is that daemon's to look after.
    pub(crate) fn looks_after(&self, lane: Address) -> bool {
        self.lane(lane).is_none_or(|sender| sender.lease().is_some())
    }
}

/// How many keys each of `daemons` live daemons takes: an even share, rounded up, so that every
/// key has a holder (with more daemons than keys, some hold none and stand by).
pub(crate) fn fair_share(keys: usize, daemons: usize) -> usize {
    keys.div_ceil(daemons.max(1))
}

/// The lane a new relay goes to: of `candidates` (in pool order), the one with the fewest live
/// relays in `depths` (a lane missing there has none); a tie goes to the earlier candidate, so
/// a quiet relayer keeps using its first key. `None` when there is no candidate.
pub(crate) fn least_busy(candidates: &[Address], depths: &[(Address, u64)]) -> Option<Address> {
    let depth =
        |lane: &Address| depths.iter().find(|(address, _)| address == lane).map_or(0, |(_, depth)| *depth);
    // `min_by_key` keeps the first of equal keys.
    candidates.iter().copied().min_by_key(depth)
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: Address = Address::repeat_byte(0xa);
    const B: Address = Address::repeat_byte(0xb);
    const C: Address = Address::repeat_byte(0xc);

    #[test]
    fn the_least_busy_candidate_wins_and_ties_go_to_the_first() {
        assert_eq!(least_busy(&[A, B, C], &[]), Some(A));
        assert_eq!(least_busy(&[A, B, C], &[(A, 1)]), Some(B));
        assert_eq!(least_busy(&[A, B, C], &[(A, 1), (B, 1)]), Some(C));
        assert_eq!(least_busy(&[A, B, C], &[(A, 2), (B, 1), (C, 1)]), Some(B));
        assert_eq!(least_busy(&[A, B, C], &[(C, 0), (A, 3), (B, 3)]), Some(C));
    }

    #[test]
    fn every_key_has_a_holder_and_shares_are_even() {
        assert_eq!(fair_share(3, 1), 3);
        assert_eq!(fair_share(3, 2), 2);
        assert_eq!(fair_share(4, 2), 2);
        assert_eq!(fair_share(1, 4), 1);
        assert_eq!(fair_share(4, 3), 2);
        assert_eq!(fair_share(2, 0), 2, "no daemon counted (this one is): all keys");
    }

    #[test]
    fn only_candidates_are_picked() {
        // B is idle but not a candidate (below the minimum balance, say).
        assert_eq!(least_busy(&[A, C], &[(A, 5), (C, 7)]), Some(A));
        // Depths of lanes not in the pool (a key removed from the configuration) are ignored.
        assert_eq!(least_busy(&[C], &[(A, 0), (B, 0), (C, 9)]), Some(C));
        assert_eq!(least_busy(&[], &[(A, 0)]), None);
    }
}
