//! `GET /api/v1/changes/stream`: the change feed as Server-Sent Events (docs/change-feed.md,
//! "Stream"), with `/changes`' filters, resumable with `Last-Event-ID` or `after=`.
//!
//! - `shard`: the Durable Objects ([`StreamShard`], binding `FEED_STREAM`) that hold the
//!   listeners' open responses and write each event to them, with a heartbeat comment.
//! - `listener`: one open response, its position, and its connection's budget and lifetime.
//! - `resume`: a listener's resume from D1, a page at a time, within that budget.
//! - `placement`: which shard a client's streams go to (a keyed hash of the client).
//! - `outlet`: after each index run, the feed's new batches sent once to every shard.
//!
//! The Worker picks a shard for a new listener and passes the shard's response on, with the
//! API's headers; for a listener without a cursor it first reads where the feed ends (one D1
//! query), the listener's start. Listeners cost no D1 query while they listen: a shard reads D1
//! only to resume a listener from its cursor (or from its start, when a run handed the shard a
//! batch past the start before the listener reached it).

mod listener;
pub(crate) mod outlet;
mod placement;
mod resume;
mod shard;

pub use shard::StreamShard;

use kya_core::feed::{ChangesQuery, Cursor};
use worker::{Env, Headers, Response, Url};

use crate::{Error, Result, config::Config};

/// The answer to `GET` (or `HEAD`) `/api/v1/changes/stream?…`: a shard's stream of the events
/// after the client's cursor (`Last-Event-ID`, else `after`) that `query`'s filters select.
pub(crate) async fn answer(
    env: &Env,
    headers: &Headers,
    mut query: ChangesQuery,
    head: bool,
) -> Result<Response> {
    // An `EventSource` reconnecting sends the last id it saw and the URL it first opened: the
    // header is the newer place.
    if let Some(last) = headers.get("last-event-id")? {
        query.after =
            Some(Cursor::parse(&last, "Last-Event-ID").map_err(|_| Error::InvalidLastEventId(last))?);
    }
    let namespace = env.durable_object(shard::BINDING).map_err(|_| Error::FeedUnavailable)?;
    let store = crate::d1::Store::open(env).ok_or(Error::FeedUnavailable)?;
    if head {
        // GET's status without opening a stream: the cursor's check, one D1 query.
        super::changes::servable(&store, query.after).await?;
        return shard::stream_response(Response::empty()?);
    }
    let mut url = Url::parse(&format!("{}?{}", shard::LISTEN, query.to_query_string()))
        .map_err(|error| Error::Runtime(worker::Error::RustError(format!("a listener's URL: {error}"))))?;
    if query.after.is_none() {
        // Without a cursor the listener gets every event appended from now on: from the first
        // batch the feed does not hold yet. The shard may have been handed it before it
        // registers the listener (a run appending right now); it then reads it from D1.
        let held = super::changes::servable(&store, None).await?;
        let start = held.map_or(1, |(_, newest)| newest + 1);
        url.query_pairs_mut().append_pair(shard::START, &start.to_string());
    }
    // Every stream of a client goes to one shard, which counts them against
    // `FEED_STREAM_MAX_PER_CLIENT`; clients spread over the shards by a keyed hash of their address.
    let client = crate::rate_limit::client_ip(headers);
    url.query_pairs_mut().append_pair(shard::CLIENT, &client);
    let shards = Config::from_env(env).stream.shards;
    let shard = placement::shard_of(&placement::ShardKey::of(env), &client, shards);
    let stub = namespace.id_from_name(&shard::name(shard))?.get_stub()?;
    let response = stub.fetch_with_str(url.as_str()).await?;
    // A subrequest's headers cannot be changed: the same status and body under headers of our
    // own, which `http::finish` then completes.
    let own = Headers::new();
    for (name, value) in response.headers().entries() {
        own.set(&name, &value)?;
    }
    let status = response.status_code();
    Ok(Response::from_body(response.body().clone())?.with_status(status).with_headers(own))
}
