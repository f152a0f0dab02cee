//! The Cache API (`caches.default`) for whole responses and for the registry snapshot.
//!
//! Keys are normalised by the caller (canonical query, lowercase wallet, configuration tag). An
//! entry lives until its data is as old as its TTL: answers computed from a cached snapshot only
//! get what is left of the snapshot's five minutes, and a hit's `Cache-Control` counts down, so
//! neither this cache nor a client's keeps data past its TTL. Only successful answers are stored,
//! and a failing Cache API costs speed, never the answer.

use alloy_primitives::keccak256;
use kya_core::Snapshot;
use worker::{Cache, Response};

use crate::{Result, endpoints::Answer, http};

/// When (Unix seconds) a cached answer's data reaches its TTL; sent along as a diagnostic.
const EXPIRES_AT: &str = "x-expires-at";
/// When (Unix seconds) a cached snapshot was read from the chain.
const READ_AT: &str = "x-read-at";

/// `Cache-Control` of a response that stays fresh `max_age` more seconds.
pub(crate) fn cache_control(max_age: u64) -> String {
    format!("public, max-age={max_age}")
}

/// A strong validator of `body`: the first 16 bytes of its keccak-256.
pub(crate) fn etag(body: &str) -> String {
    format!("\"{}\"", alloy_primitives::hex::encode(&keccak256(body.as_bytes())[..16]))
}

/// The cached answer under `key`, if still fresh, with `Cache-Control` set to what is left of
/// its TTL at `now`.
pub(crate) async fn lookup(key: &str, now: u64) -> Result<Option<Response>> {
    let Some(response) = get(key).await else { return Ok(None) };
    let expires_at = response.headers().get(EXPIRES_AT)?.and_then(|text| text.parse::<u64>().ok());
    match expires_at {
        Some(expires_at) if expires_at > now => {
            Ok(Some(http::with_header(response, "cache-control", &cache_control(expires_at - now))?))
        }
        // At or past its TTL (the Cache API's clock may lag ours), or an entry of an older layout.
        _ => Ok(None),
    }
}

/// The 200 response of `answer` with `Cache-Control` and `ETag`, stored under `key` (with its
/// block headers, so a cached answer keeps the block it was read at) until its data is `ttl`
/// seconds old.
pub(crate) async fn store(key: &str, answer: &Answer, ttl: u64, now: u64) -> Result<Response> {
    let expires_at = answer.read_at.saturating_add(ttl);
    let max_age = expires_at.saturating_sub(now);
    let mut response = http::answer(answer, &cache_control(max_age))?;
    response.headers().set("etag", &etag(&answer.body))?;
    response.headers().set(EXPIRES_AT, &expires_at.to_string())?;
    if max_age > 0 {
        put(key, response.cloned()?).await;
    }
    Ok(response)
}

/// The cached snapshot under `key` and when it was read, if it is younger than `ttl` at `now`.
pub(crate) async fn snapshot(key: &str, ttl: u64, now: u64) -> Option<(Snapshot, u64)> {
    let mut response = get(key).await?;
    let read_at: u64 = response.headers().get(READ_AT).ok()??.parse().ok()?;
    if read_at.saturating_add(ttl) <= now {
        return None;
    }
    // An entry that no longer decodes (an older layout) is treated as a miss and overwritten.
    let snapshot = serde_json::from_str(&response.text().await.ok()?).ok()?;
    Some((snapshot, read_at))
}

/// Stores `snapshot`, read from the chain at `read_at`, under `key` for `ttl` seconds.
pub(crate) async fn store_snapshot(key: &str, snapshot: &Snapshot, read_at: u64, ttl: u64) -> Result<()> {
    let body = serde_json::to_string(snapshot).map_err(worker::Error::from)?;
    let response = http::json(200, &body, &cache_control(ttl))?;
    response.headers().set(READ_AT, &read_at.to_string())?;
    put(key, response).await;
    Ok(())
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
