//! What a provider's offline verifier keeps between requests, in JavaScript: the issuer's keys
//! (`KeyCache`: when to fetch the JWKS again, and until when to trust it) and the nonces seen
//! (`NonceMemory`). The rules are [`crate::pass::KeyCache`]'s and
//! [`crate::erc8128::NonceMemory`]'s, which the Rust verifier and the Python package use too;
//! the fetching is the caller's (`fetch`), since the package does no I/O.

use serde::Deserialize;
use tsify::{Ts, Tsify};
use wasm_bindgen::prelude::*;

use super::{JsResult, from_js, pass::keys_of, whole};
use crate::{
    erc8128,
    pass::{FetchReason, FetchTicket, KeyCachePolicy},
};

/// A `KeyCache`'s settings, each optional.
#[derive(Debug, Default, Deserialize, Tsify)]
#[serde(rename_all = "camelCase")]
pub struct KeyCacheOptions {
    /// The shortest time between two fetch attempts, successful or not; default 10,000.
    #[serde(default)]
    #[tsify(optional)]
    pub refetch_interval_ms: Option<f64>,
    /// How long keys are fresh when `Cache-Control` says nothing; default 300,000.
    #[serde(default)]
    #[tsify(optional)]
    pub default_lifetime_ms: Option<f64>,
    /// The longest lifetime a `max-age` may give; default a day.
    #[serde(default)]
    #[tsify(optional)]
    pub max_lifetime_ms: Option<f64>,
}

/// The issuer's JWKS as a provider holds it. Ask `beginFetch(reason, Date.now())` before
/// fetching (`'stale'` when `isStale`, `'unknown_key'` when a pass names a key not held): it
/// says whether a fetch may start now (one at a time, one attempt per interval, whether the last
/// worked or not) and, if so, counts it; then report `fetched(jwks, cacheControl, Date.now())` or
/// `failed()`. `jwks(Date.now())` is the set to verify with, or `null` once it could not be
/// refreshed within its bound (one lifetime past its freshness): refuse then, rather than trust
/// a key its operator may have removed.
#[wasm_bindgen(js_name = KeyCache)]
pub struct JsKeyCache {
    cache: crate::pass::KeyCache<JsValue>,
    ticket: Option<FetchTicket>,
}

#[wasm_bindgen(js_class = KeyCache)]
impl JsKeyCache {
    #[wasm_bindgen(constructor)]
    pub fn new(options: Option<Ts<KeyCacheOptions>>) -> JsResult<JsKeyCache> {
        let options = match options {
            Some(options) => from_js(&options, "options")?,
            None => KeyCacheOptions::default(),
        };
        let defaults = KeyCachePolicy::default();
        let setting = |value: Option<f64>, name: &str, default: u64| match value {
            Some(value) => whole(value, name),
            None => Ok(default),
        };
        let policy = KeyCachePolicy {
            refetch_interval_ms: setting(
                options.refetch_interval_ms,
                "refetchIntervalMs",
                defaults.refetch_interval_ms,
            )?,
            default_lifetime_ms: setting(
                options.default_lifetime_ms,
                "defaultLifetimeMs",
                defaults.default_lifetime_ms,
            )?,
            max_lifetime_ms: setting(options.max_lifetime_ms, "maxLifetimeMs", defaults.max_lifetime_ms)?,
        };
        Ok(Self { cache: crate::pass::KeyCache::new(policy), ticket: None })
    }

    /// The JWKS to verify with at `nowMs`, or `null`: never fetched, or no longer trusted.
    pub fn jwks(&self, now_ms: f64) -> JsResult<JsValue> {
        Ok(self.cache.keys(whole(now_ms, "nowMs")?).cloned().unwrap_or(JsValue::NULL))
    }

    /// Whether the keys should be fetched before use: none held, or past their freshness.
    #[wasm_bindgen(js_name = isStale)]
    pub fn is_stale(&self, now_ms: f64) -> JsResult<bool> {
        Ok(self.cache.is_stale(whole(now_ms, "nowMs")?))
    }

    /// Starts a fetch for `reason` (`'stale'` or `'unknown_key'`) if one may start at `nowMs`;
    /// `false`: do not fetch (one is under way, or one was tried within the interval).
    #[wasm_bindgen(js_name = beginFetch)]
    pub fn begin_fetch(&mut self, reason: &str, now_ms: f64) -> JsResult<bool> {
        let reason = match reason {
            "stale" => FetchReason::Stale,
            "unknown_key" => FetchReason::UnknownKey,
            other => {
                return Err(JsError::new(&format!("reason must be 'stale' or 'unknown_key', got {other:?}")));
            }
        };
        let Some(ticket) = self.cache.begin_fetch(reason, whole(now_ms, "nowMs")?) else { return Ok(false) };
        // None is held: the cache starts no fetch while one is under way.
        self.ticket = Some(ticket);
        Ok(true)
    }

    /// The fetch started by `beginFetch` returned `jwks` (the parsed JSON) with the response's
    /// `Cache-Control` (`null` when absent). A document that is not a JWKS throws, and counts as
    /// a failed fetch.
    pub fn fetched(&mut self, jwks: JsValue, cache_control: Option<String>, now_ms: f64) -> JsResult<()> {
        let ticket = self.take_ticket()?;
        if let Err(error) = keys_of(&jwks) {
            self.cache.failed(ticket);
            return Err(error);
        }
        let now = match whole(now_ms, "nowMs") {
            Ok(now) => now,
            Err(error) => {
                self.cache.failed(ticket);
                return Err(error);
            }
        };
        self.cache.fetched(ticket, jwks, cache_control.as_deref(), now);
        Ok(())
    }

    /// The fetch started by `beginFetch` failed (unreachable, an error status).
    pub fn failed(&mut self) -> JsResult<()> {
        let ticket = self.take_ticket()?;
        self.cache.failed(ticket);
        Ok(())
    }

    /// Whether a fetch is under way (begun, not yet reported).
    #[wasm_bindgen(getter, js_name = inFlight)]
    pub fn in_flight(&self) -> bool {
        self.cache.in_flight()
    }

    /// How many fetches have started.
    #[wasm_bindgen(getter)]
    pub fn attempts(&self) -> f64 {
        self.cache.attempts() as f64
    }

    /// When the keys held stop being trusted (Unix milliseconds; 0 with none).
    #[wasm_bindgen(getter, js_name = trustedUntilMs)]
    pub fn trusted_until_ms(&self) -> f64 {
        self.cache.trusted_until_ms() as f64
    }

    fn take_ticket(&mut self) -> JsResult<FetchTicket> {
        self.ticket.take().ok_or_else(|| JsError::new("no fetch was begun: call beginFetch first"))
    }
}

/// Nonces seen, each until its signature could no longer pass, forgotten in order of expiry
/// (not by scanning them all on every request). For one process; a provider with several claims
/// nonces in a shared store (Redis `SET key 1 NX EXAT rememberUntil`, say).
#[wasm_bindgen(js_name = NonceMemory)]
#[derive(Default)]
pub struct JsNonceMemory {
    memory: erc8128::NonceMemory,
}

#[wasm_bindgen(js_class = NonceMemory)]
impl JsNonceMemory {
    #[wasm_bindgen(constructor)]
    pub fn new() -> JsNonceMemory {
        Self::default()
    }

    /// Claims a verified signature's `nonceKey` until `rememberUntil` (Unix seconds) at `now`:
    /// `false` when it was claimed already (answer `replayed`).
    pub fn claim(&mut self, nonce_key: &str, remember_until: f64, now: f64) -> JsResult<bool> {
        let until = whole(remember_until, "rememberUntil")?;
        Ok(self.memory.claim_key(nonce_key, until, whole(now, "now")?))
    }

    /// How many nonces are remembered.
    #[wasm_bindgen(getter)]
    pub fn size(&self) -> f64 {
        self.memory.len() as f64
    }
}
