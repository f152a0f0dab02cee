//! The key pool's rules, pure: which key a new relay goes to, and how many keys each daemon of a
//! cluster takes. The pool itself is [`crate::keys::lanes`]; the store counts the depths these read.

use alloy::primitives::Address;

/// The lane a new relay goes to: of `candidates` (in pool order), the one with the fewest live
/// relays in `depths` (a lane missing there has none); a tie goes to the earlier candidate, so
/// a quiet relayer keeps using its first key. `None` when there is no candidate.
pub(crate) fn least_busy(candidates: &[Address], depths: &[(Address, u64)]) -> Option<Address> {
    let depth =
        |lane: &Address| depths.iter().find(|(address, _)| address == lane).map_or(0, |(_, depth)| *depth);
    // `min_by_key` keeps the first of equal keys.
    candidates.iter().copied().min_by_key(depth)
}

/// How many keys each of `daemons` live daemons takes: an even share, rounded up, so that every
/// key has a holder (with more daemons than keys, some hold none and stand by).
pub(crate) fn fair_share(keys: usize, daemons: usize) -> usize {
    keys.div_ceil(daemons.max(1))
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
