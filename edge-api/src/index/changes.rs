//! `GET /api/v1/changes`: a page of the change feed (docs/change-feed.md) from the index's
//! `feed_batches`, oldest first, with the query's filters (`kya_core::feed`).
//!
//! A page reads at most [`BATCHES_PER_PAGE`] batches from its cursor's, by the table's key: its
//! cost depends neither on the registry's size nor on how far back the cursor is. A page ends at
//! its limit or where those batches end, whichever comes first; `more` then says whether the
//! feed holds entries past `next`.

use kya_core::feed::{ChangesAnswer, ChangesQuery, Cursor, Event, Unservable, check_cursor, page};
use serde::Deserialize;
use worker::{Env, Response};

use crate::d1::{Param, Store};
use crate::{Error, Result, http};

/// The most batches a page reads (and a stream's resume, per page). A run writes a batch of at most `CHUNK_BYTES` (250 KB), so
/// a page reads at most 4 MB however the feed was written; most batches hold a few events.
pub(super) const BATCHES_PER_PAGE: u64 = 16;

/// The answer to `GET /api/v1/changes?…`.
pub(crate) async fn answer(env: &Env, query: &ChangesQuery) -> Result<Response> {
    let store = Store::open(env).ok_or(Error::FeedUnavailable)?;
    let held = servable(&store, query.after).await?;
    let from = match (query.after, held) {
        (Some(after), _) => after.batch,
        (None, Some((oldest, _))) => oldest,
        (None, None) => return reply(ChangesAnswer { events: Vec::new(), next: None, more: false }),
    };
    let batches = store.feed_batches(from, BATCHES_PER_PAGE).await?;
    let newest_read = batches.last().map(|(batch, _)| *batch);
    let entries: Vec<Event> = batches.into_iter().flat_map(|(_, events)| events).collect();
    let found = page(&entries, query);
    let filled = found.events.len() as u64 == query.limit;
    let more = match (held, newest_read) {
        (Some((_, newest)), Some(read)) => {
            read < newest || (filled && found.next != entries.last().map(|entry| entry.id))
        }
        _ => false,
    };
    reply(ChangesAnswer { events: found.events, next: found.next, more })
}

/// The batches the feed holds (oldest, newest), once `after` is known to be a cursor they can
/// serve: the 410 of one past the retention, the 404 of one past the newest batch, the 503 of a
/// deployment without the feed's tables. One D1 query; `/changes` and the stream's resumes
/// answer alike through it.
pub(super) async fn servable(store: &Store, after: Option<Cursor>) -> Result<Option<(u64, u64)>> {
    let held = store.feed_held().await.map_err(|error| {
        // A deployment whose index tables were never created: the feed is not set up, which
        // the request cannot help (503), not a fault of the Worker's.
        if error.to_string().contains("no such table") { Error::FeedUnavailable } else { error }
    })?;
    check_cursor(after, held).map_err(|unservable| match unservable {
        Unservable::Gone { oldest } => Error::ChangesGone { oldest },
        Unservable::Unknown { newest } => Error::ChangesCursorUnknown {
            after: after.map(|after| after.to_string()).unwrap_or_default(),
            newest,
        },
    })?;
    Ok(held)
}

/// A page, never cached: the feed moves every run.
fn reply(answer: ChangesAnswer) -> Result<Response> {
    let body = serde_json::to_string(&answer)
        .map_err(|error| Error::Runtime(worker::Error::RustError(format!("a page serialises: {error}"))))?;
    http::json(200, &body, "no-store")
}

impl Store {
    /// The oldest and the newest batch the feed holds, `None` while it holds none.
    async fn feed_held(&self) -> Result<Option<(u64, u64)>> {
        #[derive(Deserialize)]
        struct Held {
            oldest: Option<u64>,
            newest: Option<u64>,
        }
        // One subquery each: SQLite answers a lone MIN or MAX of the key from one end of it,
        // but both in one SELECT scan the table (D1 counted every batch kept as a row read).
        let statement = self.statement(
            "SELECT (SELECT MIN(batch) FROM feed_batches) AS oldest, (SELECT MAX(batch) FROM feed_batches) AS newest",
            vec![],
        )?;
        let rows: Vec<Held> = self.all(statement).await?;
        Ok(rows.first().and_then(|held| held.oldest.zip(held.newest)))
    }

    /// Up to `count` batches from `from` on, each with its events.
    pub(super) async fn feed_batches(&self, from: u64, count: u64) -> Result<Vec<(u64, Vec<Event>)>> {
        #[derive(Deserialize)]
        struct Batch {
            batch: u64,
            events: String,
        }
        let statement = self.statement(
            "SELECT batch, events FROM feed_batches WHERE batch >= ?1 ORDER BY batch LIMIT ?2",
            vec![Param::Number(from), Param::Number(count)],
        )?;
        let rows: Vec<Batch> = self.all(statement).await?;
        rows.into_iter().map(|row| Ok((row.batch, decode_events(row.batch, &row.events)?))).collect()
    }
}

/// The events of batch `batch`, stored as `text` (a JSON array of [`Event`]).
pub(crate) fn decode_events(batch: u64, text: &str) -> Result<Vec<Event>> {
    serde_json::from_str(text).map_err(|error| {
        Error::Runtime(worker::Error::RustError(format!("feed batch {batch} does not decode: {error}")))
    })
}
