//! Per-IP rate limit of the read endpoints `/status`, `/nonce/:address` and `/domain`, in memory
//! with governor. Each of them costs the node RPC calls, so an unlimited caller could use up the
//! node's quota and starve the relays. The relay limits of SPEC.md (per IP, per signer, budget)
//! are not here: they must survive a restart and live in the store; these need not.
//!
//! A client is counted by its network twice: per IPv6 /64 (an IPv4 address), and per /48 (an
//! IPv4 address again), whose quota is [`PER_48_MULTIPLE`] times a /64's: one /48 holds 65,536
//! /64s, each of which would otherwise have a quota of its own.

use std::{
    net::IpAddr,
    num::NonZeroU32,
    sync::atomic::{AtomicU64, Ordering},
};

use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use kya_core::api::client_ip::{network_of, relay_client_of};

use crate::error::{Error, Result};

/// Above this many tracked networks, entries whose quota has fully recovered are dropped, so a
/// caller rotating through addresses cannot grow the maps without bound.
const TRACKED_ADDRESSES_BEFORE_CLEANUP: usize = 10_000;

/// Checks between two cleanups at most: a cleanup is O(networks tracked), so however many are
/// tracked it costs O(1) a check, amortised.
const CHECKS_BETWEEN_CLEANUPS: u64 = 1_024;

/// A /48's read quota, in /64 quotas.
pub(crate) const PER_48_MULTIPLE: u32 = 4;

/// A GCRA limiter per /64 and one per /48: `per_minute` requests (a /48: [`PER_48_MULTIPLE`]
/// times that) as a burst, refilled over a minute.
#[derive(Debug)]
pub(crate) struct ReadLimiter {
    per_64: DefaultKeyedRateLimiter<IpAddr>,
    per_48: DefaultKeyedRateLimiter<IpAddr>,
    per_minute: NonZeroU32,
    per_minute_48: NonZeroU32,
    checks: AtomicU64,
}

impl ReadLimiter {
    pub(crate) fn new(per_minute: NonZeroU32) -> Self {
        let per_minute_48 = per_minute.saturating_mul(NonZeroU32::new(PER_48_MULTIPLE).expect("not zero"));
        Self {
            per_64: RateLimiter::keyed(Quota::per_minute(per_minute)),
            per_48: RateLimiter::keyed(Quota::per_minute(per_minute_48)),
            per_minute,
            per_minute_48,
            checks: AtomicU64::new(0),
        }
    }

    /// Counts one read request from `client` (an address), against its /64's quota, then its
    /// /48's; an error when either is over.
    pub(crate) fn check(&self, client: IpAddr) -> Result<()> {
        if (self.checks.fetch_add(1, Ordering::Relaxed) + 1).is_multiple_of(CHECKS_BETWEEN_CLEANUPS) {
            for limiter in [&self.per_64, &self.per_48] {
                if limiter.len() > TRACKED_ADDRESSES_BEFORE_CLEANUP {
                    limiter.retain_recent();
                }
            }
        }
        self.per_64
            .check_key(&network_of(client))
            .map_err(|_| Error::ReadRateLimited(self.per_minute.get()))?;
        self.per_48
            .check_key(&relay_client_of(client))
            .map_err(|_| Error::ReadRateLimited(self.per_minute_48.get()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allows_the_quota_then_refuses_per_address() {
        let limiter = ReadLimiter::new(NonZeroU32::new(3).unwrap());
        let (first, second) = (IpAddr::from([10, 0, 0, 1]), IpAddr::from([10, 0, 0, 2]));
        for _ in 0..3 {
            limiter.check(first).unwrap();
        }
        assert!(matches!(limiter.check(first), Err(Error::ReadRateLimited(3))));
        limiter.check(second).expect("another address has its own quota");
    }

    #[test]
    fn the_64s_of_one_48_share_its_quota() {
        let limiter = ReadLimiter::new(NonZeroU32::new(3).unwrap());
        let in_48 = |n: u16| IpAddr::from([0x2001, 0xdb8, 1, n, 0, 0, 0, 1]);
        // Each /64 has 3; the /48 has 12 in all.
        for n in 0..4 {
            for _ in 0..3 {
                limiter.check(in_48(n)).unwrap();
            }
        }
        assert!(matches!(limiter.check(in_48(4)), Err(Error::ReadRateLimited(12))));
        limiter.check(IpAddr::from([0x2001, 0xdb8, 2, 0, 0, 0, 0, 1])).expect("another /48");
    }

    #[test]
    fn cleanup_runs_at_most_every_so_many_checks() {
        let limiter = ReadLimiter::new(NonZeroU32::new(1).unwrap());
        for n in 0..(TRACKED_ADDRESSES_BEFORE_CLEANUP as u32 + 10) {
            let _ = limiter.check(IpAddr::from(n.to_be_bytes()));
        }
        // Every entry is recent: cleanups (a few, not one a check) drop none.
        assert!(limiter.per_64.len() > TRACKED_ADDRESSES_BEFORE_CLEANUP);
        assert_eq!(limiter.checks.load(Ordering::Relaxed), TRACKED_ADDRESSES_BEFORE_CLEANUP as u64 + 10);
    }
}
