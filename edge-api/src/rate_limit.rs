//! 60 requests per minute per client IP, counted in KV (binding `RATE_LIMIT`).
//!
//! Fixed one-minute windows: the key is the IP and the window's number, so counters expire on
//! their own. KV is eventually consistent and allows one write per second per key, so at the
//! edge this is a soft limit (a burst spread over several locations can pass a few extra
//! requests); it is exact under `wrangler dev`, which the tests use.

use std::net::IpAddr;

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

/// The counter key of `ip` at `now_secs`, and the seconds left in that window.
fn window(ip: &str, now_secs: u64) -> (String, u64) {
    (format!("rate:{ip}:{}", now_secs / WINDOW_SECS), WINDOW_SECS - now_secs % WINDOW_SECS)
}

/// Counts this request; past the limit it is refused with [`Error::RateLimited`].
/// When KV itself fails the request is let through: the limit protects the RPC quota, and an
/// outage of the counter store should not take the read API down with it.
pub(crate) async fn consume(env: &Env, ip: &str, now_secs: u64) -> Result<Quota> {
    let (key, reset_in) = window(ip, now_secs);
    let Some(store) = store(env) else { return Ok(Quota { remaining: LIMIT, reset_in }) };
    let used = read(&store, &key).await;
    if used >= LIMIT {
        return Err(Error::RateLimited { retry_after: reset_in });
    }
    // KV's shortest expiry is 60 s; two windows keep the counter until its window is over.
    match store.put(&key, (used + 1).to_string()) {
        Ok(put) => {
            if let Err(error) = put.expiration_ttl(2 * WINDOW_SECS).execute().await {
                console_error!("rate limit counter not written: {error}");
            }
        }
        Err(error) => console_error!("rate limit counter not written: {error}"),
    }
    Ok(Quota { remaining: LIMIT - used - 1, reset_in })
}

/// The quota left without counting a request (OPTIONS preflights do not use it up).
pub(crate) async fn peek(env: &Env, ip: &str, now_secs: u64) -> Quota {
    let (key, reset_in) = window(ip, now_secs);
    let used = match store(env) {
        Some(store) => read(&store, &key).await,
        None => 0,
    };
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
}
