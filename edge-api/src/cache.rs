//! The Cache API (`caches.default`) for whole responses and for the registry snapshot.
//!
//! Keys are normalised by the caller (canonical query, lowercase wallet); an entry expires
//! through its own `Cache-Control: max-age`. Only successful answers are ever stored.

use alloy_primitives::keccak256;
use kya_core::Snapshot;
use worker::{Cache, Response};

use crate::{Result, endpoints::Answer, http};

/// `Cache-Control` of a response cached for `ttl` seconds.
pub(crate) fn cache_control(ttl: u64) -> String {
    format!("public, max-age={ttl}")
}

/// A strong validator of `body`: the first 16 bytes of its keccak-256.
pub(crate) fn etag(body: &str) -> String {
    format!("\"{}\"", alloy_primitives::hex::encode(&keccak256(body.as_bytes())[..16]))
}

/// The cached response under `key`, if it has not expired.
pub(crate) async fn lookup(key: &str) -> Result<Option<Response>> {
    Ok(Cache::default().get(key, false).await?)
}

/// The 200 response of `answer` with `Cache-Control` and `ETag`, stored under `key` with its
/// block headers, so a cached answer keeps the block it was read at.
pub(crate) async fn store(key: &str, answer: &Answer, ttl: u64) -> Result<Response> {
    let mut response = http::answer(answer, &cache_control(ttl))?;
    response.headers().set("etag", &etag(&answer.body))?;
    Cache::default().put(key, response.cloned()?).await?;
    Ok(response)
}

/// The cached snapshot under `key`.
pub(crate) async fn snapshot(key: &str) -> Result<Option<Snapshot>> {
    let Some(mut response) = lookup(key).await? else { return Ok(None) };
    // An entry that no longer decodes (an older layout) is treated as a miss and overwritten.
    Ok(serde_json::from_str(&response.text().await?).ok())
}

/// Stores `snapshot` under `key` for `ttl` seconds.
pub(crate) async fn store_snapshot(key: &str, snapshot: &Snapshot, ttl: u64) -> Result<()> {
    let body = serde_json::to_string(snapshot).map_err(worker::Error::from)?;
    let response = http::json(200, &body, &cache_control(ttl))?;
    Cache::default().put(key, response).await?;
    Ok(())
}
