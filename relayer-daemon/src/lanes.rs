//! The key pool: one [`Sender`] per relayer key, each its own nonce lane, and the pure rule that
//! picks the lane of a new relay. A stuck transaction holds up only the relays behind it on its
//! own key's nonces; the other lanes go on.

use alloy::{primitives::Address, signers::local::PrivateKeySigner};

use crate::{chain::RelayerChain, sender::Sender};

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
    fn only_candidates_are_picked() {
        // B is idle but not a candidate (below the minimum balance, say).
        assert_eq!(least_busy(&[A, C], &[(A, 5), (C, 7)]), Some(A));
        // Depths of lanes not in the pool (a key removed from the configuration) are ignored.
        assert_eq!(least_busy(&[C], &[(A, 0), (B, 0), (C, 9)]), Some(C));
        assert_eq!(least_busy(&[], &[(A, 0)]), None);
    }
}
