//! A cacheable endpoint's answer: from either cache tier while fresh, else read and stored. For
//! the registry-wide answers (the index's: each reads up to every row), one request per data
//! centre refreshes an expired answer while the others serve the copy that just expired, or wait
//! for the refreshed one ([`crate::cache::refresh`]).

use std::time::Duration;

use worker::{Context, Date, Delay, Response};

use crate::{
    Result,
    answers::{self, Reply},
    cache::{
        self, CachedAnswer, Entry, Found, Tier,
        refresh::{Grant, LEASE_MS, Lease, WAIT_STEP_MS},
    },
    deps::Deps,
    http,
    routes::Endpoint,
};

/// What a cacheable request needs besides its endpoint.
pub(crate) struct Request<'a> {
    /// The answer's cache key.
    pub(crate) key: String,
    /// The endpoint's TTL ([`crate::routes::CachePolicy`]) and `INDEX_ANSWER_TTL_SECS`.
    pub(crate) ttl: u64,
    /// Whether a copy may be cached to look up (false: the answer is read at once).
    pub(crate) look_up: bool,
    pub(crate) index_ttl: u64,
    pub(crate) now: u64,
    pub(crate) memory_budget: usize,
    pub(crate) if_none_match: Option<String>,
    pub(crate) context: &'a Context,
    /// The refresh lease, for the answers refreshed one at a time (`None`: each request reads).
    pub(crate) lease: Option<Lease>,
}

/// `endpoint`'s answer for `request`; `deps` are built only when the answer is read.
pub(crate) async fn answer<'d>(
    endpoint: &Endpoint,
    deps: impl Fn() -> Result<Deps<'d>>,
    mut request: Request<'_>,
) -> Result<Response> {
    if !request.look_up {
        return refresh(endpoint, &deps()?, &request, None).await;
    }
    let streamed = *endpoint == Endpoint::AgentsCompliance;
    let mut stale = match look(&request, streamed).await {
        Found::Fresh(copy) => return respond(copy, "HIT", &request),
        Found::Stale(copy) => Some(copy),
        Found::Missing => None,
    };
    let Some(lease) = request.lease.take() else {
        return refresh(endpoint, &deps()?, &request, None).await;
    };
    let deadline = Date::now().as_millis() + LEASE_MS;
    loop {
        let grant = lease.acquire().await;
        match grant {
            Grant::Refresh => return refresh(endpoint, &deps()?, &request, Some(lease)).await,
            Grant::Busy => {
                if let Some(copy) = stale.take() {
                    return respond(copy, "STALE", &request);
                }
                Delay::from(Duration::from_millis(WAIT_STEP_MS)).await;
            }
            Grant::Stored => {}
        }
        match look(&request, streamed).await {
            Found::Fresh(copy) => return respond(copy, "HIT", &request),
            // Stored, yet not here (the Cache API stores nothing on `*.workers.dev`), or the
            // wait's bound passed: read it.
            _ if grant == Grant::Stored || Date::now().as_millis() >= deadline => {
                return refresh(endpoint, &deps()?, &request, None).await;
            }
            _ => {}
        }
    }
}

/// The copy the tiers hold under the request's key: one Cache API lookup, a streamed entry
/// taken only for `streamed` (`/agents/compliance`; the index not answering, its direct answer
/// is cached whole as any other).
async fn look(request: &Request<'_>, streamed: bool) -> Found<Entry> {
    cache::lookup(&request.key, request.now, request.memory_budget, streamed).await
}

/// A cached copy's response, `X-Cache` set to `how` (`HIT` or `STALE`).
fn respond(copy: Entry, how: &str, request: &Request<'_>) -> Result<Response> {
    let (response, tier) = match copy {
        Entry::Streamed(response) => (response, Tier::CacheApi),
        Entry::Whole(cached, tier) => (cached_response(&cached, request)?, tier),
    };
    response.headers().set("x-cache", how)?;
    response.headers().set("x-cache-tier", tier.name())?;
    Ok(response)
}

/// `cached`'s response, or a 304 when the request names its `ETag`.
fn cached_response(cached: &CachedAnswer, request: &Request<'_>) -> Result<Response> {
    match &request.if_none_match {
        Some(candidates) if http::etag_matches(candidates, &cached.etag) => {
            let max_age = cached.expires_at.saturating_sub(request.now);
            http::not_modified(&cached.etag, &cache::cache_control(max_age))
        }
        _ => cached.response(request.now),
    }
}

/// Reads the answer and stores it; with `lease`, releases it once the copy is stored (or the
/// read failed).
async fn refresh(
    endpoint: &Endpoint,
    deps: &Deps<'_>,
    request: &Request<'_>,
    lease: Option<Lease>,
) -> Result<Response> {
    let reply = match answers::answer(endpoint, deps).await {
        Ok(reply) => reply,
        Err(error) => {
            if let Some(lease) = lease {
                request.context.wait_until(async move { lease.release(0).await });
            }
            return Err(error);
        }
    };
    let response = match reply {
        Reply::Answer(answer) => {
            let ttl = answer.source.ttl(request.ttl, request.index_ttl);
            // Kept in memory at once; the Cache API's copy is stored once the response is sent,
            // and only then is the lease released, so the others look again when it is there.
            let (cached, put) = cache::store(&request.key, answer, ttl, request.now, request.memory_budget);
            let fresh_until = cached.expires_at;
            if put.is_some() || lease.is_some() {
                request.context.wait_until(async move {
                    if let Some(put) = put {
                        put.await;
                    }
                    if let Some(lease) = lease {
                        lease.release(fresh_until).await;
                    }
                });
            }
            cached_response(&cached, request)?
        }
        // Streamed from the index: never held whole, so kept in the Cache API only, as a stream
        // teed off the one sent; the lease ends once the copy is stored.
        Reply::Stream(mut response) => {
            let expires_at = response
                .headers()
                .get(cache::EXPIRES_AT)?
                .and_then(|text| text.parse::<u64>().ok())
                .unwrap_or(request.now);
            if request.index_ttl > 0 {
                cache::keep_streamed(
                    request.key.clone(),
                    &mut response,
                    (request.now, expires_at),
                    request.context,
                    move |stored| async move {
                        if let Some(lease) = lease {
                            lease.release(if stored { expires_at } else { 0 }).await;
                        }
                    },
                )?;
            } else if let Some(lease) = lease {
                request.context.wait_until(async move { lease.release(0).await });
            }
            response
        }
    };
    response.headers().set("x-cache", "MISS")?;
    Ok(response)
}
