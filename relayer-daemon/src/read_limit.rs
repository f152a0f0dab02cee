//! Per-IP rate limit of the read endpoints `/status`, `/nonce/:address` and `/domain`, in memory
//! with governor. Each of them costs the node RPC calls, so an unlimited caller could use up the
//! node's quota and starve the relays. The relay limits of SPEC.md (per IP, per signer, budget)
//! are not here: they must survive a restart and live in the store; these need not.

use std::{net::IpAddr, num::NonZeroU32};

use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

use crate::error::{Error, Result};

/// Above this many tracked addresses, entries whose quota has fully recovered are dropped, so a
/// caller rotating through addresses cannot grow the map without bound.
const TRACKED_ADDRESSES_BEFORE_CLEANUP: usize = 10_000;

/// A GCRA limiter per client address: `per_minute` requests as a burst, refilled over a minute.
#[derive(Debug)]
pub(crate) struct ReadLimiter {
    limiter: DefaultKeyedRateLimiter<IpAddr>,
    per_minute: NonZeroU32,
}

impl ReadLimiter {
    pub(crate) fn new(per_minute: NonZeroU32) -> Self {
        Self { limiter: RateLimiter::keyed(Quota::per_minute(per_minute)), per_minute }
    }

    /// Counts one read request from `client`; an error when it is over the limit.
    pub(crate) fn check(&self, client: IpAddr) -> Result<()> {
        if self.limiter.len() > TRACKED_ADDRESSES_BEFORE_CLEANUP {
            self.limiter.retain_recent();
        }
        self.limiter.check_key(&client).map_err(|_| Error::ReadRateLimited(self.per_minute.get()))
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
}
