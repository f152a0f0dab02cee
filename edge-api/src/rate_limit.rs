//! 60 requests per minute per client IP, counted in KV (binding `RATE_LIMIT`).
//!
//! Fixed one-minute windows: the key is the IP and the window's number, so counters expire on
//! their own. KV alone cannot count a burst: every request of it reads the counter before any
//! write lands (measured: 61 requests at once all passed). So each isolate also counts the
//! requests it serves itself ([`SEEN_HERE`]); JavaScript runs one request's code at a time, so
//! that count is exact, and a request counts as the larger of it and KV's count plus one. The
//! limit is exact for everything one isolate serves (all of `wrangler dev`); across isolates and
//! locations KV, eventually consistent, adds the rest.

use std::{cell::RefCell, collections::HashMap, net::IpAddr};

use kya_core::client_ip::network_of;
use worker::{Env, Headers, console_error, kv::KvStore};

use crate::{Error, Result};

/// Requests allowed per window (SPEC.md section 8).
pub(crate) const LIMIT: u64 = 60;
/// Window length in seconds.
pub(crate) const WINDOW_SECS: u64 = 60;
/// The KV binding of the counters.
pub(crate) const BINDING: &str = "RATE_LIMIT";
/// Shared key for clients without an IP header (only under local tools; Cloudflare always sets it).
const UNKNOWN_CLIENT: &str = "local";

/// The client the limit counts: the IP in `CF-Connecting-IP` (set by Cloudflare), else in the
/// first `X-Forwarded-For` hop, as its network (IPv6 by /64, [`network_of`]); one shared bucket
/// for local tools that send neither, or text that is no IP (never a key the caller chooses).
pub(crate) fn client_ip(headers: &Headers) -> String {
    let header = |name| headers.get(name).ok().flatten();
    let ip = header("cf-connecting-ip")
        .filter(|ip| !ip.trim().is_empty())
        .or_else(|| header("x-forwarded-for").and_then(|hops| hops.split(',').next().map(str::to_owned)));
    ip.and_then(|ip| ip.trim().parse::<IpAddr>().ok())
        .map_or_else(|| UNKNOWN_CLIENT.to_owned(), |ip| network_of(ip).to_string())
}

/// Where a client stands in the current window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Quota {
    /// Requests left after this one.
    pub(crate) remaining: u64,
    /// Seconds until the window resets.
    pub(crate) reset_in: u64,
}

thread_local! {
    /// Requests this isolate counted per counter key (`window`), for the current windows only.
    static SEEN_HERE: RefCell<HashMap<String, u64>> = RefCell::new(HashMap::new());
}

/// Counts a request under `key` in this isolate (before any `await`, so overlapping requests
/// each get their own number) and returns the count including it.
fn count_here(key: &str) -> u64 {
    SEEN_HERE.with(|seen| {
        let mut seen = seen.borrow_mut();
        // Counters of finished windows are of no use: dropped once the map has grown. A key ends
        // with its window's number ([`window`]).
        if seen.len() > 10_000 {
            let this_window = key.rfind(':').map_or(key, |at| &key[at..]);
            seen.retain(|kept, _| kept.ends_with(this_window));
        }
        let count = seen.entry(key.to_owned()).or_default();
        *count += 1;
        *count
    })
}

/// What this isolate has counted under `key`, without counting, after raising it to `at_least`
/// (a count learnt from KV).
fn seen_here(key: &str, at_least: u64) -> u64 {
    SEEN_HERE.with(|seen| {
        let mut seen = seen.borrow_mut();
        let count = seen.entry(key.to_owned()).or_default();
        *count = (*count).max(at_least);
        *count
    })
}

/// The counter key of `ip` at `now_secs`, and the seconds left in that window.
fn window(ip: &str, now_secs: u64) -> (String, u64) {
    (format!("rate:{ip}:{}", now_secs / WINDOW_SECS), WINDOW_SECS - now_secs % WINDOW_SECS)
}

/// Counts this request; past the limit it is refused with [`Error::RateLimited`].
/// When KV itself fails the request is let through: the limit protects the RPC quota, and an
/// outage of the counter store should not take the read API down with it.
pub(crate) async fn consume(env: &Env, ip: &str, now_secs: u64) -> Result<Quota> {
    let (key, reset_in) = window(ip, now_secs);
    let here = count_here(&key);
    let Some(store) = store(env) else { return Ok(Quota { remaining: LIMIT, reset_in }) };
    // This request's number in the window: after what KV knows, and after what this isolate saw.
    let number = (read(&store, &key).await + 1).max(here);
    // Later requests here count after what KV showed (other isolates' requests).
    seen_here(&key, number);
    if number > LIMIT {
        return Err(Error::RateLimited { retry_after: reset_in });
    }
    // KV's shortest expiry is 60 s; two windows keep the counter until its window is over.
    match store.put(&key, number.to_string()) {
        Ok(put) => {
            if let Err(error) = put.expiration_ttl(2 * WINDOW_SECS).execute().await {
                console_error!("rate limit counter not written: {error}");
            }
        }
        Err(error) => console_error!("rate limit counter not written: {error}"),
    }
    Ok(Quota { remaining: LIMIT - number, reset_in })
}

/// The quota left without counting a request (OPTIONS preflights do not use it up).
pub(crate) async fn peek(env: &Env, ip: &str, now_secs: u64) -> Quota {
    let (key, reset_in) = window(ip, now_secs);
    let used = match store(env) {
        Some(store) => read(&store, &key).await,
        None => 0,
    };
    let used = seen_here(&key, used);
    Quota { remaining: LIMIT.saturating_sub(used), reset_in }
}

fn store(env: &Env) -> Option<KvStore> {
    env.kv(BINDING).map_err(|error| console_error!("no KV binding {BINDING}: {error}")).ok()
}

async fn read(store: &KvStore, key: &str) -> u64 {
    match store.get(key).text().await {
        Ok(value) => value.and_then(|count| count.parse().ok()).unwrap_or(0),
        Err(error) => {
            console_error!("rate limit counter not read: {error}");
            0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_are_per_ip_and_minute() {
        assert_eq!(window("1.2.3.4", 120), ("rate:1.2.3.4:2".to_owned(), 60));
        assert_eq!(window("1.2.3.4", 179), ("rate:1.2.3.4:2".to_owned(), 1));
        assert_ne!(window("1.2.3.4", 180).0, window("1.2.3.4", 179).0);
    }

    #[test]
    fn this_isolate_numbers_each_request_and_learns_from_kv() {
        let key = "rate:9.9.9.9:7";
        assert_eq!((count_here(key), count_here(key)), (1, 2));
        assert_eq!(seen_here(key, 10), 10, "KV saw more: later requests count after them");
        assert_eq!(count_here(key), 11);
        assert_eq!(seen_here(key, 3), 11, "never lowered");
        assert_eq!(count_here("rate:9.9.9.9:8"), 1, "a new window starts over");
    }
}
