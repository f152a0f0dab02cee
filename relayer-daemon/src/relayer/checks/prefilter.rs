//! The relay pre-filter: the per-IP limit's refusals answered from memory, before any store
//! access, so a flood of well-formed posts from one client never queues on the store's lock
//! (the one the lease keeper needs too).
//!
//! It remembers, per client (IPv4 address or IPv6 /48, as the store-backed limit keys it), when
//! this daemon's requests were counted by the store in the last [`RATE_WINDOW_SECS`]. The store
//! keeps every one of those events for that long, so when `limit` of them are still in the window
//! the store would refuse too: the pre-filter refuses only what is certainly over. It never knows
//! of other daemons' counts (it may let more through, which the store then refuses), and the
//! store stays the source of truth. A refusal is the store's own [`Error::IpRateLimited`].
//!
//! A retry of one of those very requests that the relayer accepted (the same EIP-712 digest) is
//! let through: the relayer holds it, and a retry of a held request answers with its relay, never
//! a refusal (INTERFACE.md section 3). A request the store counted and then refused (a forged
//! signature, say) earns no such pass, so repeating one refused post is no way past the filter.
//! Another daemon has no count of this client, so it lets a retry through too.

use std::{
    collections::{HashMap, VecDeque},
    sync::Mutex,
};

use alloy::primitives::B256;

use crate::{
    error::{Error, Result},
    store::RATE_WINDOW_SECS,
};

/// Checks between sweeps of clients with no event left in the window: the sweep is O(clients),
/// so it runs at most once every this many checks (amortised O(1) a check).
const CHECKS_BETWEEN_SWEEPS: u64 = 1_024;

/// Per client, the times (Unix seconds, oldest first) the store counted its requests, with each
/// request's EIP-712 digest and whether the relayer accepted it.
#[derive(Debug, Default)]
pub(crate) struct PreFilter {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    counted: HashMap<String, VecDeque<Counted>>,
    checks: u64,
}

/// One request the store counted.
#[derive(Debug)]
struct Counted {
    at: u64,
    request: B256,
    accepted: bool,
}

/// Drops the events of `times` the store no longer counts at `now` (`at <= now - window`).
fn expire(times: &mut VecDeque<Counted>, now: u64) {
    let horizon = now.saturating_sub(RATE_WINDOW_SECS);
    while times.front().is_some_and(|counted| counted.at <= horizon) {
        times.pop_front();
    }
}

impl PreFilter {
    /// Refuses `client` when this daemon alone has had `limit` of its requests counted in the
    /// window ending at `now`, unless `request` (its EIP-712 digest) is one of them that the
    /// relayer accepted; otherwise lets it go on to the store.
    pub(crate) fn check(&self, client: &str, request: B256, limit: u32, now: u64) -> Result<()> {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        inner.checks = inner.checks.wrapping_add(1);
        if inner.checks.is_multiple_of(CHECKS_BETWEEN_SWEEPS) {
            inner.counted.retain(|_, times| {
                expire(times, now);
                !times.is_empty()
            });
        }
        let Some(times) = inner.counted.get_mut(client) else { return Ok(()) };
        expire(times, now);
        let over = times.len() >= limit as usize;
        if over && !times.iter().any(|counted| counted.accepted && counted.request == request) {
            return Err(Error::IpRateLimited(limit));
        }
        Ok(())
    }

    /// Remembers that the store counted `request` of `client` at `now`. At most `limit` times
    /// are kept a client: more cannot change an answer.
    pub(crate) fn counted(&self, client: &str, request: B256, limit: u32, now: u64) {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let times = inner.counted.entry(client.to_owned()).or_default();
        times.push_back(Counted { at: now, request, accepted: false });
        while times.len() > (limit as usize).max(1) {
            times.pop_front();
        }
    }

    /// Remembers that the relayer accepted `request` of `client`, counted before: a retry of it
    /// goes on to the held lookup even past the limit.
    pub(crate) fn accepted(&self, client: &str, request: B256) {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let Some(times) = inner.counted.get_mut(client) else { return };
        if let Some(counted) = times.iter_mut().rev().find(|counted| counted.request == request) {
            counted.accepted = true;
        }
    }

    /// Clients remembered (for tests).
    #[cfg(test)]
    fn clients(&self) -> usize {
        self.inner.lock().unwrap().counted.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A request the filter has not counted.
    const NEW: B256 = B256::repeat_byte(0xee);

    #[test]
    fn a_retry_of_an_accepted_request_goes_on_to_the_held_lookup() {
        let filter = PreFilter::default();
        let first = B256::repeat_byte(1);
        filter.counted("a", first, 1, 5);
        assert!(matches!(filter.check("a", NEW, 1, 6), Err(Error::IpRateLimited(1))));
        assert!(filter.check("a", first, 1, 6).is_err(), "counted and refused by the store: no pass");
        filter.accepted("a", first);
        filter.check("a", first, 1, 6).expect("a retry of the accepted request is not refused");
        assert!(filter.check("a", NEW, 1, 6).is_err());
    }

    #[test]
    fn refuses_only_once_the_store_counted_the_limit_in_the_window() {
        let filter = PreFilter::default();
        for at in 0..3 {
            filter.check("a", B256::ZERO, 3, 1_000 + at).unwrap();
            filter.counted("a", B256::with_last_byte(at as u8), 3, 1_000 + at);
        }
        assert!(matches!(filter.check("a", NEW, 3, 1_010), Err(Error::IpRateLimited(3))));
        filter.check("b", NEW, 3, 1_010).expect("another client has its own count");
        // As the store: an event at `at` counts while `at > now - window`.
        assert!(filter.check("a", NEW, 3, 1_000 + RATE_WINDOW_SECS - 1).is_err());
        filter.check("a", NEW, 3, 1_000 + RATE_WINDOW_SECS).expect("the oldest event left the window");
    }

    #[test]
    fn a_refusal_of_the_store_is_not_counted() {
        // Only `counted` (the store accepted) adds; checks alone never refuse.
        let filter = PreFilter::default();
        for _ in 0..100 {
            filter.check("a", NEW, 1, 5).unwrap();
        }
        filter.counted("a", B256::ZERO, 1, 5);
        assert!(filter.check("a", NEW, 1, 5).is_err());
    }

    #[test]
    fn keeps_at_most_limit_times_and_sweeps_expired_clients() {
        let filter = PreFilter::default();
        for at in 0..50 {
            filter.counted("a", B256::ZERO, 2, at);
        }
        assert_eq!(filter.inner.lock().unwrap().counted["a"].len(), 2);
        for client in 0..100 {
            filter.counted(&client.to_string(), B256::ZERO, 2, 10);
        }
        let later = 50 + RATE_WINDOW_SECS;
        for _ in 0..CHECKS_BETWEEN_SWEEPS {
            filter.check("x", NEW, 2, later).unwrap();
        }
        assert_eq!(filter.clients(), 0, "every client's events left the window");
    }
}
