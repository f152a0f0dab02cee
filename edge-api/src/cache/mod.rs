//! Cached answers in two tiers: the isolate's memory ([`crate::memory`]), then the Cache API
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
        let response = http::answer(&self.answer, &cache_control(self.expires_at.saturating_sub(now)))?;
        response.headers().set("etag", &self.etag)?;
        response.headers().set(EXPIRES_AT, &self.expires_at.to_string())?;
        Ok(response)
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

/// The cached answer under `key` if still fresh at `now`, and the tier that had it.
pub(crate) async fn lookup(key: &str, now: u64, memory_budget: usize) -> Option<(Rc<CachedAnswer>, Tier)> {
    if let Some(hit) = memory::get::<CachedAnswer>(key, now) {
        return Some((hit, Tier::Memory));
    }
    let mut response = get(key).await?;
    let header =
        |name: &str| response.headers().get(name).ok().flatten().and_then(|text| text.parse::<u64>().ok());
    // At or past its TTL (the Cache API's clock may lag ours), or an entry of an older layout.
    let expires_at = header(EXPIRES_AT).filter(|&expires_at| expires_at > now)?;
    let block = BlockRef { number: header("x-block-number")?, timestamp: header("x-block-timestamp")? };
    let etag = response.headers().get("etag").ok().flatten()?;
    let body = response.text().await.ok()?;
    let source = Source::from_headers(response.headers());
    let cached =
        Rc::new(CachedAnswer { answer: Answer { body, block, read_at: 0, source }, etag, expires_at });
    memory::keep(key, Rc::clone(&cached), cached.size(), expires_at, memory_budget);
    Some((cached, Tier::CacheApi))
}

/// `answer`, stored in both tiers under `key` until its data is `ttl` seconds old.
pub(crate) async fn store(
    key: &str,
    answer: Answer,
    ttl: u64,
    now: u64,
    memory_budget: usize,
) -> Rc<CachedAnswer> {
    let expires_at = answer.read_at.saturating_add(ttl);
    let cached = Rc::new(CachedAnswer { etag: etag(&answer.body), expires_at, answer });
    if expires_at > now {
        memory::keep(key, Rc::clone(&cached), cached.size(), expires_at, memory_budget);
        match cached.response(now) {
            Ok(response) => put(key, response).await,
            Err(error) => worker::console_warn!("caching {key} failed: {error}"),
        }
    }
    cached
}

/// A streamed answer (`/agents/compliance` from the index: no `ETag`, never held whole) under
/// `key` in the Cache API while fresh at `now`, its body streamed on as the Cache API gives it,
/// its `Cache-Control` counting down.
pub(crate) async fn lookup_streamed(key: &str, now: u64) -> Option<Response> {
    let mut cached = get(key).await?;
    let headers = cached.headers().clone();
    let expires_at: u64 = headers.get(EXPIRES_AT).ok().flatten()?.parse().ok()?;
    if expires_at <= now || headers.has("etag").unwrap_or(true) {
        return None;
    }
    let response = Response::from_stream(cached.stream().ok()?).ok()?;
    headers.set("cache-control", &cache_control(expires_at - now)).ok()?;
    Some(response.with_headers(headers))
}

/// Keeps a copy of the streamed `response` in the Cache API under `key`: the body is teed, and
/// the copy stored once the response is sent (`wait_until`), so neither is held whole.
pub(crate) fn keep_streamed(key: String, response: &mut Response, context: &Context) -> Result<()> {
    let copy = response.cloned()?;
    context.wait_until(async move { put(&key, copy).await });
    Ok(())
}

/// The body of the Cache API entry under `key` and the value of its `header`.
pub(crate) async fn get_text(key: &str, header: &str) -> Option<(String, String)> {
    let mut response = get(key).await?;
    let value = response.headers().get(header).ok().flatten()?;
    Some((response.text().await.ok()?, value))
}

/// Stores `body` under `key` in the Cache API for `ttl` seconds, with `header` set to `value`.
pub(crate) async fn put_text(key: &str, body: String, ttl: u64, header: (&str, &str)) {
    let response = http::json(200, &body, &cache_control(ttl))
        .and_then(|response| Ok(response.headers().set(header.0, header.1).map(|()| response)?));
    match response {
        Ok(response) => put(key, response).await,
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

async fn put(key: &str, response: Response) {
    if let Err(error) = Cache::default().put(key, response).await {
        worker::console_warn!("caching {key} failed; the answer is served uncached: {error}");
    }
}
