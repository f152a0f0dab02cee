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
//!
//! The sync talks to the KV binding through two calls of its own ([`read_after`],
//! [`write_counter`]) rather than workers-rs's `Delay` and `KvStore`: those made three futures
//! (a timer's, the read's, the write's), each with its closures, and built each call's options
//! object field by field with serde, which made the sync a fifth of a polled `/kya`'s CPU
//! (docs/bench/point-answers-*.md, "of it after the response").

use std::{cell::RefCell, collections::HashMap, net::IpAddr};

use kya_core::api::client_ip::network_of;
use wasm_bindgen::{JsValue, prelude::wasm_bindgen};
use worker::{
    Context, Env, Headers, console_error, console_log,
    js_sys::{Promise, Reflect},
    wasm_bindgen_futures::JsFuture,
};

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
/// Seconds KV keeps a counter: two windows, so it outlives its window (KV's shortest is 60 s).
const KEPT_SECS: u32 = 2 * WINDOW_SECS as u32;

#[wasm_bindgen(inline_js = "export function read_after(kv, key, ms) {
  return new Promise((resolve) => setTimeout(resolve, ms)).then(function rate_limit_read() {
    return kv.get(key);
  });
}
export function write_counter(kv, key, count, ttl) {
  return kv.put(key, count, { expirationTtl: ttl });
}")]
extern "C" {
    /// After `ms` milliseconds, KV's text under `key` (null when it has none): a promise. The
    /// read is a named function for the profiles (`cpu_after_response` in tests/worker_profile.rs
    /// finds the work after a response by it).
    #[wasm_bindgen(js_name = read_after)]
    fn read_after(kv: &JsValue, key: &str, ms: f64) -> Promise;

    /// Writes `count` under `key`, kept `ttl` seconds: a promise.
    #[wasm_bindgen(catch, js_name = write_counter)]
    fn write_counter(kv: &JsValue, key: &str, count: &str, ttl: u32) -> Result<Promise, JsValue>;
}

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
    let Some(ip) = ip else { return UNKNOWN_CLIENT.to_owned() };
    let ip = ip.trim();
    match ip.parse::<IpAddr>() {
        // Read back as written: the parser takes IPv4 only in the dotted-decimal form it writes
        // (no leading zeros, no shorter forms), so the text is the key without formatting it again.
        Ok(IpAddr::V4(_)) => ip.to_owned(),
        Ok(ip) => network_of(ip).to_string(),
        Err(_) => UNKNOWN_CLIENT.to_owned(),
    }
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
    /// When (Unix milliseconds) this isolate's latest write of the key was due: a write
    /// scheduled and not yet due carries every request counted before it. Kept as a time, not
    /// a flag the write clears, so a write that never ends (a KV read that hangs until the
    /// runtime drops the request's work) holds back no later one.
    write_due_ms: Option<u64>,
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

/// Counts a request and decides its KV write, as milliseconds to wait: at the end of the second
/// that began with the first request it carries (a second after the key's last write, or after
/// this request), none while a write is scheduled and not yet due, so a burst costs one write a
/// second and no request's own answer waits behind KV (under `wrangler dev` KV's work runs on
/// the Worker's own thread).
fn count(counter: &mut Counter, now_ms: u64, weight: u64) -> (u64, Option<u64>) {
    counter.count += weight;
    let due_ms = match counter.write_due_ms {
        Some(due) if now_ms < due => return (counter.count, None),
        Some(due) if now_ms < due + WRITE_INTERVAL_MS => due + WRITE_INTERVAL_MS,
        _ => now_ms + WRITE_INTERVAL_MS,
    };
    counter.write_due_ms = Some(due_ms);
    (counter.count, Some(due_ms - now_ms))
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
/// this isolate's count, which is never less (logged if `log_writes`): the requests counted
/// while KV was read are in it.
async fn sync(store: JsValue, key: String, wait_ms: u64, log_writes: bool) {
    let stored = match JsFuture::from(read_after(&store, &key, wait_ms as f64)).await {
        Ok(value) => value.as_string().and_then(|count| count.parse().ok()).unwrap_or(0),
        Err(error) => {
            console_error!("rate limit counter not read: {}", worker::Error::from(error));
            0
        }
    };
    let count = with_counter(&key, |counter| {
        counter.count = counter.count.max(stored);
        counter.count
    });
    let written = match write_counter(&store, &key, &count.to_string(), KEPT_SECS) {
        Ok(put) => JsFuture::from(put).await.map(drop),
        Err(error) => Err(error),
    };
    match written {
        Ok(()) if log_writes => console_log!("rate limit counter written: {key} = {count}"),
        Ok(()) => {}
        Err(error) => console_error!("rate limit counter not written: {}", worker::Error::from(error)),
    }
}

/// The KV binding, looked up once per `Env` ([`crate::per_env`]).
fn store(env: &Env) -> Option<JsValue> {
    thread_local! {
        static STORE: PerEnv<Option<JsValue>> = const { PerEnv::new() };
    }
    STORE.with(|store| {
        store.get(env, || {
            let binding = Reflect::get(env.as_ref(), &JsValue::from_str(BINDING)).ok();
            let binding = binding.filter(|binding| binding.is_object());
            if binding.is_none() {
                console_error!("no KV binding {BINDING}");
            }
            binding
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clients_are_keyed_by_their_written_network() {
        let of = |cf: &str, forwarded: &str| {
            client_of(|name| match name {
                "cf-connecting-ip" if !cf.is_empty() => Some(cf.to_owned()),
                "x-forwarded-for" if !forwarded.is_empty() => Some(forwarded.to_owned()),
                _ => None,
            })
        };
        assert_eq!(of(" 203.0.113.7 ", ""), "203.0.113.7");
        assert_eq!(of("", "198.51.100.2, 10.0.0.1"), "198.51.100.2", "the first hop");
        assert_eq!(of("2001:db8:1:2:3:4:5:6", ""), "2001:db8:1:2::", "IPv6 by /64");
        assert_eq!(of("::ffff:203.0.113.7", ""), "203.0.113.7", "IPv4-mapped as IPv4");
        // IPv4 text the parser would take in another form would make two keys of one client.
        for other_form in ["0203.0.113.7", "203.0.113", "0xcb.0.113.7", "203.0.113.7.", "3405803783"] {
            assert_eq!(of(other_form, ""), UNKNOWN_CLIENT, "{other_form}");
        }
        assert_eq!(of("", ""), UNKNOWN_CLIENT);
    }

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
        assert_eq!(count(&mut counter, 10_999, 1), (61, None), "until the write is due");
        // That write was due at 11,000, whatever became of it (a write that hangs holds back none).
        assert_eq!(count(&mut counter, 11_400, 1), (62, Some(600)), "a second after the last write");
        assert_eq!(count(&mut counter, 11_999, 1), (63, None));
        assert_eq!(
            count(&mut counter, 15_000, 1),
            (64, Some(1_000)),
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
