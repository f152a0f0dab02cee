//! 60 requests per minute per client IP.
//!
//! Fixed one-minute windows, keyed by the client's network and the window's number. Each isolate
//! counts the requests it serves itself ([`SEEN_HERE`]): JavaScript runs one request's code at a
//! time, so that count is exact, and the 61st request of a window is refused in any isolate that
//! served the other 60 (all of `wrangler dev`). KV (binding `RATE_LIMIT`) carries counts between
//! isolates and locations, off the response path (`Context::wait_until`, a second after the
//! request) and within KV's limits: an isolate writes a key at most once per second (KV refuses
//! more), carrying its latest count, and learns the count other isolates wrote before it writes.
//! A failing KV is logged and changes nothing for the request; a write is logged only when
//! asked (`RATE_LIMIT_LOG_WRITES`): a line a second per client is noise, and a console call
//! the isolate's CPU pays on every write.

use std::{cell::RefCell, collections::HashMap, net::IpAddr, time::Duration};

use kya_core::api::client_ip::network_of;
use worker::{Context, Delay, Env, Headers, console_error, console_log, kv::KvStore};

use crate::{Error, Result, per_env::PerEnv};

/// Requests allowed per window (SPEC.md section 8).
pub(crate) const LIMIT: u64 = 60;
/// Window length in seconds.
pub(crate) const WINDOW_SECS: u64 = 60;
/// The KV binding of the counters.
pub(crate) const BINDING: &str = "RATE_LIMIT";
/// Shortest time between two KV writes of one key from one isolate (KV takes one per second).
const WRITE_INTERVAL_MS: u64 = 1_000;
/// Shared key for clients without an IP header (only under local tools; Cloudflare always sets it).
const UNKNOWN_CLIENT: &str = "local";
/// Counters kept per isolate before finished windows are dropped.
const MAX_KEYS: usize = 10_000;

/// The client the limit counts: the IP in `CF-Connecting-IP` (set by Cloudflare), else in the
/// first `X-Forwarded-For` hop, as its network (IPv6 by /64, [`network_of`]); one shared bucket
/// for local tools that send neither, or text that is no IP (never a key the caller chooses).
pub(crate) fn client_ip(headers: &Headers) -> String {
    client_of(|name| headers.get(name).ok().flatten())
}

/// [`client_ip`], with each header's value from `header`.
pub(crate) fn client_of(header: impl Fn(&str) -> Option<String>) -> String {
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
}

/// One counter key's state in this isolate.
#[derive(Debug, Default)]
struct Counter {
    /// Requests counted in the window: served here, or learnt from KV.
    count: u64,
    /// When (Unix milliseconds) this isolate last wrote the key, or scheduled its write.
    last_write_ms: Option<u64>,
    /// A trailing write is scheduled.
    trailing: bool,
}

thread_local! {
    /// This isolate's counters, per counter key ([`window`]), for the current windows only.
    static SEEN_HERE: RefCell<HashMap<String, Counter>> = RefCell::new(HashMap::new());
}

fn with_counter<R>(key: &str, use_counter: impl FnOnce(&mut Counter) -> R) -> R {
    SEEN_HERE.with(|seen| {
        let mut seen = seen.borrow_mut();
        // Counters of finished windows are of no use: dropped once the map has grown. A key ends
        // with its window's number ([`window`]).
        if seen.len() > MAX_KEYS {
            let this_window = key.rfind(':').map_or(key, |at| &key[at..]);
            seen.retain(|kept, _| kept.ends_with(this_window));
        }
        use_counter(seen.entry(key.to_owned()).or_default())
    })
}

/// The counter key of `ip` at `now_secs`, and the seconds left in that window.
fn window(ip: &str, now_secs: u64) -> (String, u64) {
    (format!("rate:{ip}:{}", now_secs / WINDOW_SECS), WINDOW_SECS - now_secs % WINDOW_SECS)
}

/// Counts a request and decides its KV write, as milliseconds to wait: one write per key at a
/// time, at the end of the second that began with the first request it carries (a second after
/// the key's last write, or after this request), so a burst costs one write a second and no
/// request's own answer waits behind KV (under `wrangler dev` KV's work runs on the Worker's own
/// thread).
fn count(counter: &mut Counter, now_ms: u64, weight: u64) -> (u64, Option<u64>) {
    counter.count += weight;
    if counter.trailing {
        return (counter.count, None);
    }
    counter.trailing = true;
    let wait_ms = match counter.last_write_ms {
        Some(last) if now_ms < last + WRITE_INTERVAL_MS => last + WRITE_INTERVAL_MS - now_ms,
        _ => WRITE_INTERVAL_MS,
    };
    (counter.count, Some(wait_ms))
}

/// Where and how the counters are kept: the request's context (KV's sync runs after the
/// response, `Context::wait_until`), and whether each KV write is logged.
pub(crate) struct Counters<'a> {
    pub(crate) env: &'a Env,
    pub(crate) context: &'a Context,
    pub(crate) log_writes: bool,
}

/// Counts this request as `weight` requests (a batch counts one per 10 wallets); past the limit
/// it is refused with [`Error::RateLimited`]. The KV sync runs after the response.
pub(crate) fn admit(counters: &Counters<'_>, ip: &str, now_ms: u64, weight: u64) -> Result<Quota> {
    let (key, reset_in) = window(ip, now_ms / 1000);
    let (number, wait_ms) = with_counter(&key, |counter| count(counter, now_ms, weight));
    if let (Some(wait_ms), Some(store)) = (wait_ms, store(counters.env)) {
        counters.context.wait_until(sync(store, key, wait_ms, counters.log_writes));
    }
    if number > LIMIT {
        return Err(Error::RateLimited { retry_after: reset_in });
    }
    Ok(Quota { remaining: LIMIT - number })
}

/// The quota left without counting a request (OPTIONS preflights do not use it up).
pub(crate) fn peek(ip: &str, now_secs: u64) -> Quota {
    let (key, _) = window(ip, now_secs);
    let used = with_counter(&key, |counter| counter.count);
    Quota { remaining: LIMIT.saturating_sub(used) }
}

/// After `wait_ms`, learns the count KV holds for `key` (other isolates' writes), then writes
/// this isolate's count, which is never less (logged if `log_writes`).
async fn sync(store: KvStore, key: String, wait_ms: u64, log_writes: bool) {
    Delay::from(Duration::from_millis(wait_ms)).await;
    with_counter(&key, |counter| {
        counter.trailing = false;
        counter.last_write_ms = Some(worker::Date::now().as_millis());
    });
    let stored = match store.get(&key).text().await {
        Ok(value) => value.and_then(|count| count.parse().ok()).unwrap_or(0),
        Err(error) => {
            console_error!("rate limit counter not read: {error}");
            0
        }
    };
    let count = with_counter(&key, |counter| {
        counter.count = counter.count.max(stored);
        counter.count
    });
    // KV's shortest expiry is 60 s; two windows keep the counter until its window is over.
    let written = match store.put(&key, count.to_string()) {
        Ok(put) => put.expiration_ttl(2 * WINDOW_SECS).execute().await.map_err(|error| error.to_string()),
        Err(error) => Err(error.to_string()),
    };
    match written {
        Ok(()) if log_writes => console_log!("rate limit counter written: {key} = {count}"),
        Ok(()) => {}
        Err(error) => console_error!("rate limit counter not written: {error}"),
    }
}

/// The KV binding, looked up once per `Env` ([`crate::per_env`]).
fn store(env: &Env) -> Option<KvStore> {
    thread_local! {
        static STORE: PerEnv<Option<KvStore>> = const { PerEnv::new() };
    }
    STORE.with(|store| {
        store.get(env, || {
            env.kv(BINDING).map_err(|error| console_error!("no KV binding {BINDING}: {error}")).ok()
        })
    })
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
    fn a_burst_writes_once_a_second_after_its_first_request() {
        let mut counter = Counter::default();
        assert_eq!(
            count(&mut counter, 10_000, 1),
            (1, Some(1_000)),
            "the first request: a write a second later"
        );
        for n in 2..=60 {
            assert_eq!(count(&mut counter, 10_500, 1), (n, None), "request {n}: the write is scheduled");
        }
        // That write ran (it marks the key written and clears the flag).
        counter.trailing = false;
        counter.last_write_ms = Some(11_000);
        assert_eq!(count(&mut counter, 11_400, 1), (61, Some(600)), "a second after the last write");
        counter.trailing = false;
        counter.last_write_ms = Some(12_000);
        assert_eq!(
            count(&mut counter, 15_000, 1),
            (62, Some(1_000)),
            "long after it: a second after this one"
        );
    }

    #[test]
    fn counts_are_per_key_and_learn_from_kv() {
        let key = "rate:9.9.9.9:7";
        assert_eq!(with_counter(key, |counter| count(counter, 0, 1).0), 1);
        with_counter(key, |counter| counter.count = counter.count.max(10));
        assert_eq!(
            with_counter(key, |counter| count(counter, 5, 1).0),
            11,
            "after what other isolates counted"
        );
        assert_eq!(peek("9.9.9.9", 7 * 60).remaining, 49);
        assert_eq!(
            with_counter("rate:9.9.9.9:8", |counter| count(counter, 0, 1).0),
            1,
            "a new window starts over"
        );
    }
}
