//! Cached answers in two tiers: the isolate's memory ([`memory`]), then the Cache API
//! (`caches.default`, per data centre). A hit in the Cache API is kept in memory too.
//!
//! Keys are normalised by the caller (canonical query, lowercase wallet, configuration tag). An
//! entry lives until its data is as old as its TTL: answers computed from a cached snapshot only
//! get what is left of the snapshot's five minutes, and a hit's `Cache-Control` counts down, so
//! neither tier nor a client's cache keeps data past its TTL. Only successful answers are
//! stored, and a failing Cache API costs speed, never the answer.

use std::rc::Rc;

use alloy_primitives::keccak256;
use kya_core::BlockRef;
use worker::{Cache, Context, Response};

use crate::{
    Result,
    http::{self, Answer, Source},
};

mod lru;
pub(crate) mod memory;
pub(crate) mod refresh;

use refresh::STALE_SECS;

/// When (Unix seconds) a cached answer's data reaches its TTL; sent along as a diagnostic.
pub(crate) const EXPIRES_AT: &str = "x-expires-at";

/// Which tier answered (`X-Cache-Tier`): diagnostics for operators, tests and benchmarks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tier {
    /// The isolate's memory.
    Memory,
    /// The Cache API.
    CacheApi,
}

impl Tier {
    pub(crate) const fn name(self) -> &'static str {
        match self {
            Self::Memory => "memory",
            Self::CacheApi => "cache-api",
        }
    }
}

/// An answer as both tiers hold it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CachedAnswer {
    pub(crate) answer: Answer,
    /// Strong validator of the body.
    pub(crate) etag: String,
    /// Unix seconds at which its data reaches its TTL.
    pub(crate) expires_at: u64,
}

impl CachedAnswer {
    /// Bytes held, for the memory tier's budget.
    fn size(&self) -> usize {
        self.answer.body.len() + self.etag.len() + 64
    }

    /// The 200 response at `now`: `Cache-Control` with what is left of the TTL, `ETag`,
    /// `X-Expires-At` and the block headers.
    pub(crate) fn response(&self, now: u64) -> Result<Response> {
        self.response_with(now, Vec::new())
    }

    /// [`CachedAnswer::response`] with the headers `extra` too, all set at once.
    pub(crate) fn response_with(&self, now: u64, mut extra: Vec<(&'static str, String)>) -> Result<Response> {
        extra.extend([("etag", self.etag.clone()), (EXPIRES_AT, self.expires_at.to_string())]);
        http::answer_with(&self.answer, &cache_control(self.expires_at.saturating_sub(now)), extra)
    }
}

/// The cache key of `path` (starting with `/`) under the request's `origin` (scheme and host, the
/// namespace the Cache API requires) and the configuration's `cache_tag`.
pub(crate) fn key(origin: &str, cache_tag: &str, path: &str) -> String {
    format!("{origin}/__kya/{cache_tag}{path}")
}

/// `Cache-Control` of a response that stays fresh `max_age` more seconds.
pub(crate) fn cache_control(max_age: u64) -> String {
    format!("public, max-age={max_age}")
}

/// A strong validator of `body`: the first 16 bytes of its keccak-256.
pub(crate) fn etag(body: &str) -> String {
    format!("\"{}\"", alloy_primitives::hex::encode(&keccak256(body.as_bytes())[..16]))
}

/// What the tiers hold under a key at `now`.
pub(crate) enum Found<T> {
    Fresh(T),
    /// Past its TTL by at most [`STALE_SECS`]: served only while another request refreshes it
    /// ([`refresh`]).
    Stale(T),
    Missing,
}

/// A cached copy as the tiers hold it.
pub(crate) enum Entry {
    /// An answer held whole, and the tier that had it.
    Whole(Rc<CachedAnswer>, Tier),
    /// A streamed answer (`/agents/compliance` from the index: no `ETag`, never held whole)
    /// from the Cache API, its body streamed on as the Cache API gives it, its `Cache-Control`
    /// counting down.
    Streamed(Response),
}

/// The copy under `key` at `now`, with one Cache API lookup: a whole answer fresh in memory,
/// else the Cache API's entry (a streamed one only if `streamed`), else a stale copy in memory.
pub(crate) async fn lookup(key: &str, now: u64, memory_budget: usize, streamed: bool) -> Found<Entry> {
    let held = memory::get::<CachedAnswer>(key, now);
    if let Some(hit) = held.as_ref().filter(|hit| hit.expires_at > now) {
        return Found::Fresh(Entry::Whole(Rc::clone(hit), Tier::Memory));
    }
    let found = match get(key).await {
        // An entry without an `ETag` is a streamed one.
        Some(response) if !response.headers().has("etag").unwrap_or(true) => {
            if streamed {
                streamed_of(response, now)
            } else {
                Found::Missing
            }
        }
        Some(response) => match whole_of(response, now).await {
            Some(cached) => {
                let found = Rc::new(cached);
                memory::keep(
                    key,
                    Rc::clone(&found),
                    found.size(),
                    found.expires_at + STALE_SECS,
                    memory_budget,
                );
                let entry = Entry::Whole(Rc::clone(&found), Tier::CacheApi);
                if found.expires_at > now { Found::Fresh(entry) } else { Found::Stale(entry) }
            }
            None => Found::Missing,
        },
        None => Found::Missing,
    };
    match found {
        Found::Missing => held.map_or(Found::Missing, |held| Found::Stale(Entry::Whole(held, Tier::Memory))),
        found => found,
    }
}

/// The Cache API's whole answer `response`, unless past its TTL and [`STALE_SECS`] at `now`.
async fn whole_of(mut response: Response, now: u64) -> Option<CachedAnswer> {
    let header =
        |name: &str| response.headers().get(name).ok().flatten().and_then(|text| text.parse::<u64>().ok());
    // Past the staleness allowed (the Cache API's clock may lag ours), or an entry of an older
    // layout.
    let expires_at = header(EXPIRES_AT).filter(|&expires_at| expires_at + STALE_SECS > now)?;
    let block = BlockRef { number: header("x-block-number")?, timestamp: header("x-block-timestamp")? };
    let grace_period = header(crate::http::GRACE_PERIOD);
    let etag = response.headers().get("etag").ok().flatten()?;
    let body = response.text().await.ok()?;
    let source = Source::from_headers(response.headers());
    Some(CachedAnswer { answer: Answer { body, block, grace_period, read_at: 0, source }, etag, expires_at })
}

/// `answer`, kept in memory at once until its data is `ttl` seconds old, and the Cache API's
/// copy: a future storing it, for the caller to run once the response is sent (`wait_until`),
/// `None` when the answer is already past its TTL (nothing is kept).
pub(crate) fn store(
    key: &str,
    answer: Answer,
    ttl: u64,
    now: u64,
    memory_budget: usize,
) -> (Rc<CachedAnswer>, Option<impl std::future::Future<Output = ()> + 'static>) {
    let expires_at = answer.read_at.saturating_add(ttl);
    let cached = Rc::new(CachedAnswer { etag: etag(&answer.body), expires_at, answer });
    if expires_at <= now {
        return (cached, None);
    }
    // Kept past the TTL for a while: the copy served while one request refreshes it.
    memory::keep(key, Rc::clone(&cached), cached.size(), expires_at + STALE_SECS, memory_budget);
    let kept = cached.response(now).and_then(|response| {
        response.headers().set("cache-control", &cache_control(expires_at - now + STALE_SECS))?;
        Ok(response)
    });
    let key = key.to_owned();
    let put = async move {
        match kept {
            Ok(response) => {
                put(&key, response).await;
            }
            Err(error) => worker::console_warn!("caching {key} failed: {error}"),
        }
    };
    (cached, Some(put))
}

/// The Cache API's streamed entry `cached` at `now`, fresh or stale ([`Found`]).
fn streamed_of(mut cached: Response, now: u64) -> Found<Entry> {
    let headers = cached.headers().clone();
    let Some(expires_at) = headers.get(EXPIRES_AT).ok().flatten().and_then(|text| text.parse::<u64>().ok())
    else {
        return Found::Missing;
    };
    if expires_at + STALE_SECS <= now {
        return Found::Missing;
    }
    let Some(response) = cached.stream().ok().and_then(|body| Response::from_stream(body).ok()) else {
        return Found::Missing;
    };
    if headers.set("cache-control", &cache_control(expires_at.saturating_sub(now))).is_err() {
        return Found::Missing;
    }
    let response = Entry::Streamed(response.with_headers(headers));
    if expires_at > now { Found::Fresh(response) } else { Found::Stale(response) }
}

/// Keeps a copy of the streamed `response` (fresh until `expires_at`, at `now`) in the Cache API
/// under `key`: the body is teed, and the copy stored once the response is sent (`wait_until`),
/// so neither is held whole. Then `stored` runs, with whether the copy was stored.
pub(crate) fn keep_streamed<F>(
    key: String,
    response: &mut Response,
    (now, expires_at): (u64, u64),
    context: &Context,
    stored: impl FnOnce(bool) -> F + 'static,
) -> Result<()>
where
    F: std::future::Future<Output = ()> + 'static,
{
    let copy = response.cloned()?;
    // Kept past the TTL for a while: the copy served while one request refreshes it.
    copy.headers().set("cache-control", &cache_control(expires_at.saturating_sub(now) + STALE_SECS))?;
    context.wait_until(async move {
        let kept = put(&key, copy).await;
        stored(kept).await;
    });
    Ok(())
}

/// The body of the Cache API entry under `key` and the value of its `header`.
pub(crate) async fn get_text(key: &str, header: &str) -> Option<(String, String)> {
    let mut response = get(key).await?;
    let Some(value) = response.headers().get(header).ok().flatten() else {
        worker::console_warn!("the Cache API's entry under {key} has no {header}: passed over");
        return None;
    };
    match response.text().await {
        Ok(text) => Some((text, value)),
        Err(error) => {
            worker::console_warn!("reading the Cache API's entry under {key} failed, passed over: {error}");
            None
        }
    }
}

/// Stores `body` under `key` in the Cache API for `ttl` seconds, with `header` set to `value`.
pub(crate) async fn put_text(key: &str, body: String, ttl: u64, header: (&str, &str)) {
    let response = http::json(200, &body, &cache_control(ttl))
        .and_then(|response| Ok(response.headers().set(header.0, header.1).map(|()| response)?));
    match response {
        Ok(response) => {
            put(key, response).await;
        }
        Err(error) => worker::console_warn!("caching {key} failed: {error}"),
    }
}

async fn get(key: &str) -> Option<Response> {
    match Cache::default().get(key, false).await {
        Ok(response) => response,
        Err(error) => {
            worker::console_warn!("cache lookup of {key} failed, reading the chain: {error}");
            None
        }
    }
}

/// Stores `response` under `key`; false when the Cache API refused it.
async fn put(key: &str, response: Response) -> bool {
    match Cache::default().put(key, response).await {
        Ok(()) => true,
        Err(error) => {
            worker::console_warn!("caching {key} failed; the answer is served uncached: {error}");
            false
        }
    }
}
