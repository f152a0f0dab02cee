//! What a provider's offline verifier keeps between requests, in Python: the issuer's keys
//! (`KeyCache`: when to fetch the JWKS again, and until when to trust it) and the nonces seen
//! (`NonceMemory`). The rules are [`kya_core::pass::KeyCache`]'s and
//! [`kya_core::erc8128::NonceMemory`]'s, as in the Rust verifier and the npm package; the
//! fetching is the caller's (the package's `Gate` does it with httpx).

use kya_core::{
    erc8128,
    pass::{self, FetchReason, FetchTicket, KeyCachePolicy},
};
use pyo3::prelude::*;

use crate::{
    convert::{now_ms as now_ms_clock, now_or},
    error::{invalid, kya_error},
    pass::Jwks,
};

/// The issuer's JWKS as a provider holds it. Ask `begin_fetch(reason, now_ms)` before fetching
/// (`"stale"` when `is_stale`, `"unknown_key"` when a pass names a key not held): it says whether
/// a fetch may start now (one at a time, one attempt per interval, whether the last worked or
/// not) and, if so, counts it; then report `fetched(jwks, cache_control, now_ms)` or `failed()`.
/// `jwks(now_ms)` is the set to verify with, or `None` once it could not be refreshed within its
/// bound (one lifetime past its freshness): refuse then, rather than trust a key its operator
/// may have removed. Times are Unix milliseconds, the clock's when not given.
#[pyclass(module = "kya._core", name = "KeyCache")]
pub(crate) struct KeyCache {
    cache: pass::KeyCache<Py<Jwks>>,
    ticket: Option<FetchTicket>,
}

#[pymethods]
impl KeyCache {
    #[new]
    #[pyo3(signature = (*, refetch_interval_ms=None, default_lifetime_ms=None, max_lifetime_ms=None))]
    fn new(
        refetch_interval_ms: Option<u64>,
        default_lifetime_ms: Option<u64>,
        max_lifetime_ms: Option<u64>,
    ) -> Self {
        let defaults = KeyCachePolicy::default();
        let policy = KeyCachePolicy {
            refetch_interval_ms: refetch_interval_ms.unwrap_or(defaults.refetch_interval_ms),
            default_lifetime_ms: default_lifetime_ms.unwrap_or(defaults.default_lifetime_ms),
            max_lifetime_ms: max_lifetime_ms.unwrap_or(defaults.max_lifetime_ms),
        };
        Self { cache: pass::KeyCache::new(policy), ticket: None }
    }

    /// The keys to verify with at `now_ms`, or `None`: never fetched, or no longer trusted.
    #[pyo3(signature = (now_ms=None))]
    fn jwks(&self, py: Python<'_>, now_ms: Option<u64>) -> Option<Py<Jwks>> {
        self.cache.keys(now_ms.unwrap_or_else(now_ms_clock)).map(|keys| keys.clone_ref(py))
    }

    /// Whether the keys should be fetched before use: none held, or past their freshness.
    #[pyo3(signature = (now_ms=None))]
    fn is_stale(&self, now_ms: Option<u64>) -> bool {
        self.cache.is_stale(now_ms.unwrap_or_else(now_ms_clock))
    }

    /// Starts a fetch for `reason` (`"stale"` or `"unknown_key"`) if one may start at `now_ms`;
    /// `False`: do not fetch (one is under way, or one was tried within the interval).
    #[pyo3(signature = (reason, now_ms=None))]
    fn begin_fetch(&mut self, reason: &str, now_ms: Option<u64>) -> PyResult<bool> {
        let reason = match reason {
            "stale" => FetchReason::Stale,
            "unknown_key" => FetchReason::UnknownKey,
            other => return Err(invalid(format!("reason must be 'stale' or 'unknown_key', got {other:?}"))),
        };
        let Some(ticket) = self.cache.begin_fetch(reason, now_ms.unwrap_or_else(now_ms_clock)) else {
            return Ok(false);
        };
        // None is held: the cache starts no fetch while one is under way.
        self.ticket = Some(ticket);
        Ok(true)
    }

    /// The fetch `begin_fetch` started returned `jwks` (a `Jwks`, or the document: a `dict`,
    /// `str` or `bytes`) with the response's `Cache-Control` (`None` when absent). A document
    /// that is not a JWKS raises `InvalidInput`, and counts as a failed fetch.
    #[pyo3(signature = (jwks, cache_control=None, now_ms=None))]
    fn fetched(
        &mut self,
        py: Python<'_>,
        jwks: &Bound<'_, PyAny>,
        cache_control: Option<&str>,
        now_ms: Option<u64>,
    ) -> PyResult<()> {
        let ticket = self.take_ticket()?;
        let keys = match jwks.cast::<Jwks>() {
            Ok(keys) => Ok(keys.clone().unbind()),
            Err(_) => Jwks::read(jwks).and_then(|keys| Py::new(py, keys)),
        };
        match keys {
            Ok(keys) => {
                self.cache.fetched(ticket, keys, cache_control, now_ms.unwrap_or_else(now_ms_clock));
                Ok(())
            }
            Err(error) => {
                self.cache.failed(ticket);
                Err(error)
            }
        }
    }

    /// The fetch `begin_fetch` started failed (unreachable, an error status).
    fn failed(&mut self) -> PyResult<()> {
        let ticket = self.take_ticket()?;
        self.cache.failed(ticket);
        Ok(())
    }

    /// Whether a fetch is under way (begun, not yet reported).
    #[getter]
    fn in_flight(&self) -> bool {
        self.cache.in_flight()
    }

    /// How many fetches have started.
    #[getter]
    fn attempts(&self) -> u64 {
        self.cache.attempts()
    }

    /// How many fetches have finished, with keys or without: a caller that checked against the
    /// keys held when it read `n`, and finds more, has an outcome to go by and fetches none.
    #[getter]
    fn outcomes(&self) -> u64 {
        self.cache.outcomes()
    }

    /// When the keys held stop being trusted (Unix milliseconds; 0 with none).
    #[getter]
    fn trusted_until_ms(&self) -> u64 {
        self.cache.trusted_until_ms()
    }
}

impl KeyCache {
    fn take_ticket(&mut self) -> PyResult<FetchTicket> {
        self.ticket.take().ok_or_else(|| kya_error("no fetch was begun: call begin_fetch first"))
    }
}

/// Nonces seen, each until its signature could no longer pass, forgotten in order of expiry.
/// For one process; a provider with several claims nonces in a shared store (Redis
/// `SET key 1 NX EXAT remember_until`, say).
#[pyclass(module = "kya._core", name = "NonceMemory")]
#[derive(Default)]
pub(crate) struct NonceMemory {
    memory: erc8128::NonceMemory,
}

#[pymethods]
impl NonceMemory {
    #[new]
    fn new() -> Self {
        Self::default()
    }

    /// Claims a verified signature's `nonce_key` until `remember_until` (Unix seconds) at `now`:
    /// `False` when it was claimed already (answer `replayed`). `now` defaults to the clock.
    #[pyo3(signature = (nonce_key, remember_until, now=None))]
    fn claim(&mut self, nonce_key: &str, remember_until: u64, now: Option<u64>) -> bool {
        self.memory.claim_key(nonce_key, remember_until, now_or(now))
    }

    /// How many nonces are remembered.
    fn __len__(&self) -> usize {
        self.memory.len()
    }
}
