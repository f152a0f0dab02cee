//! One refresh at a time per data centre and cached answer (issue 29, "No stampede"): when a
//! registry-wide answer from the index expires, the requests arriving at that moment would each
//! read every row of it (`/agents/compliance`: the whole index) before the first has stored its
//! copy. A Durable Object per (data centre, cache key), [`RefreshLease`], grants the refresh to
//! one request; the others serve the copy that just expired (stale by at most
//! [`STALE_SECS`]), or, with none, wait for the refreshed copy.
//!
//! Production runs many isolates per data centre, so a map in one isolate's memory would not do:
//! the object is one per name, worldwide, and handles one request at a time. It keeps its lease
//! in memory only (no storage write per refresh): an object evicted midway forgets a lease, and
//! at worst one more request refreshes.

use std::cell::Cell;

use serde::{Deserialize, Serialize};
use worker::{Date, DurableObject, Env, Method, Request, RequestInit, Response, State, durable_object};

use crate::{Error, Result};

/// The binding of the leases' namespace in `wrangler.toml`.
const BINDING: &str = "REFRESHES";

/// Milliseconds a refresh may take before another request may try: far more than the largest
/// answer takes (`/agents/compliance` at 100,000 agents, about 1 s), so a lease ends early only
/// when its holder died.
pub(crate) const LEASE_MS: u64 = 15_000;

/// Seconds past its expiry an answer is still served while another request refreshes it (and
/// kept that much longer in both tiers for it). A copy older than that is not served: the
/// request waits for the refresh instead.
pub(crate) const STALE_SECS: u64 = 30;

/// Milliseconds between two looks of a request waiting for a refresh.
pub(crate) const WAIT_STEP_MS: u64 = 50;

/// What the lease's object answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) enum Grant {
    /// This request refreshes; it releases the lease when its copy is stored.
    Refresh,
    /// Another request is refreshing.
    Busy,
    /// A refresh just stored a copy fresh until now: look again (a request that looked before
    /// the copy was stored must not read the rows again).
    Stored,
}

/// What a request asks of the lease's object.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "camelCase")]
enum Ask {
    Acquire,
    /// The refresh ended: its copy, if stored, is fresh until `fresh_until` (Unix seconds; 0
    /// when it failed).
    Release {
        #[serde(rename = "freshUntil")]
        fresh_until: u64,
    },
}

/// A lease on refreshing one cached answer in one data centre, or no coordination (no binding).
pub(crate) struct Lease {
    env: Env,
    name: String,
}

impl Lease {
    /// The lease of the answer under `key` in data centre `colo`; `None` without the binding
    /// (each request then refreshes by itself, as before).
    pub(crate) fn of(env: &Env, colo: &str, key: &str) -> Option<Self> {
        env.durable_object(BINDING).ok()?;
        Some(Self { env: env.clone(), name: format!("{colo} {key}") })
    }

    /// Asks to refresh. A lease that cannot be asked (the object failing) grants the refresh:
    /// coordination costs speed when it fails, never the answer.
    pub(crate) async fn acquire(&self) -> Grant {
        match self.ask(&Ask::Acquire).await {
            Ok(grant) => grant,
            Err(error) => {
                worker::console_warn!("the refresh lease {} failed, refreshing: {error}", self.name);
                Grant::Refresh
            }
        }
    }

    /// Ends this request's refresh: its copy is fresh until `fresh_until` (0: none stored).
    pub(crate) async fn release(&self, fresh_until: u64) {
        if let Err(error) = self.ask(&Ask::Release { fresh_until }).await {
            worker::console_warn!("releasing the refresh lease {} failed: {error}", self.name);
        }
    }

    async fn ask(&self, ask: &Ask) -> Result<Grant> {
        let stub = self.env.durable_object(BINDING)?.id_from_name(&self.name)?.get_stub()?;
        let body = serde_json::to_string(ask).map_err(|error| Error::Runtime(error.into()))?;
        let mut init = RequestInit::new();
        init.with_method(Method::Post).with_body(Some(body.into()));
        // The URL is the object's own: only its path reaches it.
        let request = Request::new_with_init("https://refreshes/lease", &init)?;
        let mut response = stub.fetch_with_request(request).await?;
        if response.status_code() != 200 {
            let text = response.text().await.unwrap_or_default();
            return Err(Error::Runtime(worker::Error::RustError(format!("the lease answered: {text}"))));
        }
        Ok(response.json().await?)
    }
}

/// The lease of one cached answer in one data centre: who refreshes it, and until when the last
/// refresh's copy is fresh. One request at a time, so deciding is one step.
#[durable_object]
pub struct RefreshLease {
    /// Unix milliseconds the current refresh's lease ends (0: none running).
    leased_until: Cell<u64>,
    /// Unix seconds the last stored copy is fresh until.
    fresh_until: Cell<u64>,
}

impl DurableObject for RefreshLease {
    fn new(_state: State, _env: Env) -> Self {
        Self { leased_until: Cell::new(0), fresh_until: Cell::new(0) }
    }

    async fn fetch(&self, mut request: Request) -> worker::Result<Response> {
        if request.method() != Method::Post {
            return Response::error("POST an ask", 405);
        }
        let Ok(ask) = request.json::<Ask>().await else {
            return Response::error("an ask is {op: acquire} or {op: release, freshUntil}", 400);
        };
        let now_ms = Date::now().as_millis();
        let grant = match ask {
            Ask::Acquire => decide(now_ms, &self.leased_until, &self.fresh_until),
            Ask::Release { fresh_until } => {
                self.leased_until.set(0);
                self.fresh_until.set(fresh_until);
                Grant::Stored
            }
        };
        Response::from_json(&grant)
    }
}

/// The decision on an acquire at `now_ms`: busy while a lease runs, "look again" while the last
/// refresh's copy is fresh, else a lease for this request.
fn decide(now_ms: u64, leased_until: &Cell<u64>, fresh_until: &Cell<u64>) -> Grant {
    if now_ms < leased_until.get() {
        Grant::Busy
    } else if now_ms / 1000 < fresh_until.get() {
        Grant::Stored
    } else {
        leased_until.set(now_ms + LEASE_MS);
        Grant::Refresh
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One acquire in a row refreshes; the others are told it runs, then that its copy is
    /// stored; a lease whose holder died ends after [`LEASE_MS`].
    #[test]
    fn one_refresh_at_a_time() {
        let (leased, fresh) = (Cell::new(0), Cell::new(0));
        assert_eq!(decide(1_000_000, &leased, &fresh), Grant::Refresh);
        assert_eq!(decide(1_000_010, &leased, &fresh), Grant::Busy);
        // Released with a copy fresh until second 1,030.
        leased.set(0);
        fresh.set(1_030);
        assert_eq!(decide(1_000_020, &leased, &fresh), Grant::Stored);
        assert_eq!(decide(1_030_000, &leased, &fresh), Grant::Refresh, "expired: refresh again");
        assert_eq!(decide(1_030_000 + LEASE_MS - 1, &leased, &fresh), Grant::Busy);
        assert_eq!(decide(1_030_000 + LEASE_MS, &leased, &fresh), Grant::Refresh, "its holder died");
    }

    #[test]
    fn asks_round_trip_as_json() {
        assert_eq!(serde_json::to_string(&Ask::Acquire).unwrap(), r#"{"op":"acquire"}"#);
        let release = serde_json::to_string(&Ask::Release { fresh_until: 7 }).unwrap();
        assert_eq!(release, r#"{"op":"release","freshUntil":7}"#);
        assert_eq!(serde_json::to_string(&Grant::Busy).unwrap(), r#""busy""#);
    }
}
