//! Following the change feed (docs/change-feed.md): a typed iterator over its events that pages
//! `GET /api/v1/changes` from a cursor until it has caught up, then follows the stream
//! (`GET /api/v1/changes/stream`) or polls, and tells where to resume.

use std::{collections::VecDeque, time::Duration};

use kya_core::feed::{ChangesQuery, Cursor, Event};

use crate::{ApiClient, ChangeStream, Error, Result};

/// How long a follower waits before it reconnects a stream that ended (the stream's own `retry`).
const RECONNECT: Duration = Duration::from_millis(kya_core::feed::sse::RECONNECT_MS);

/// The events of the feed that `query` selects, from its cursor on, one at a time.
///
/// It reads pages while it has no event left and the feed holds more. Once it has caught up,
/// [`ChangeFollower::next`] follows the stream from where the pages stopped (built with
/// [`ChangeFollower::streaming`]), reconnecting it with `Last-Event-ID` when it ends; or it waits
/// `poll` between pages (built with [`ChangeFollower::new`], and for an API without the stream).
/// A stream the server ends on purpose (a connection's byte budget or lifetime) is reconnected at
/// once from the id it names; one that broke, after the stream's `retry`.
/// [`ChangeFollower::position`] is where to start again (`after=`) to miss nothing and repeat
/// nothing: the last event handed out, or past the events the filters skipped.
#[derive(Debug)]
pub struct ChangeFollower {
    api: ApiClient,
    query: ChangesQuery,
    /// `None`: follow the stream once caught up.
    poll: Option<Duration>,
    /// The open stream, once the pages have caught up.
    stream: Option<ChangeStream>,
    /// Read but not handed out yet.
    waiting: VecDeque<Event>,
    /// Where the last page ended (the next page's `after`).
    read_through: Option<Cursor>,
    /// Everything up to here was handed out or skipped.
    position: Option<Cursor>,
}

impl ChangeFollower {
    /// Follows `query` from its `after` (none: from the oldest event kept) on `api`, reading a
    /// page every `poll` once caught up.
    pub fn new(api: ApiClient, query: ChangesQuery, poll: Duration) -> Self {
        Self::with(api, query, Some(poll))
    }

    /// Follows `query` from its `after` (none: from the oldest event kept) on `api`, through the
    /// stream once caught up.
    pub fn streaming(api: ApiClient, query: ChangesQuery) -> Self {
        Self::with(api, query, None)
    }

    fn with(api: ApiClient, query: ChangesQuery, poll: Option<Duration>) -> Self {
        let start = query.after;
        Self {
            api,
            query,
            poll,
            stream: None,
            waiting: VecDeque::new(),
            read_through: start,
            position: start,
        }
    }

    /// The next event, waiting as long as it takes for one.
    pub async fn next(&mut self) -> Result<Event> {
        loop {
            if self.stream.is_none()
                && let Some(event) = self.try_next().await?
            {
                return Ok(event);
            }
            match self.poll {
                Some(poll) => tokio::time::sleep(poll).await,
                None => {
                    if let Some(event) = self.streamed().await? {
                        return Ok(event);
                    }
                }
            }
        }
    }

    /// The stream's next event: `None` when it ended (reconnected on the
    /// next call), or when the API has no stream (the follower polls from then on).
    async fn streamed(&mut self) -> Result<Option<Event>> {
        let stream = match &mut self.stream {
            Some(stream) => stream,
            None => match self.api.change_stream(&self.query, self.position).await {
                Ok(stream) => self.stream.insert(stream),
                // An API older than the stream: no route, so poll as before.
                Err(Error::Api { status: 404, message, .. }) if message.contains("no resource at") => {
                    self.poll = Some(RECONNECT);
                    return Ok(None);
                }
                Err(error) => return Err(error),
            },
        };
        match stream.next().await? {
            Some(event) => {
                self.advance(event.id);
                Ok(Some(event))
            }
            None => {
                // A stream the server ended on purpose (its byte budget, its lifetime) names
                // where to resume, past what the filters passed over: at once, from there.
                // One that broke is reconnected after the last event, a moment later.
                let named = stream.resume_after();
                self.stream = None;
                match named {
                    Some(named) => self.advance(named),
                    None => tokio::time::sleep(RECONNECT).await,
                }
                Ok(None)
            }
        }
    }

    /// Moves past `cursor`, reached on the stream: both where to resume and where the next page
    /// starts, since [`ChangeFollower::next`] pages from there once a stream has ended (a page
    /// from where the pages had stopped before the stream gave its events again).
    fn advance(&mut self, cursor: Cursor) {
        self.position = self.position.max(Some(cursor));
        self.read_through = self.read_through.max(Some(cursor));
    }

    /// The next event if the feed holds one now; `None` once caught up.
    pub async fn try_next(&mut self) -> Result<Option<Event>> {
        if self.waiting.is_empty() {
            self.read_page().await?;
        }
        let Some(event) = self.waiting.pop_front() else {
            self.position = self.read_through;
            return Ok(None);
        };
        // Past the skipped events too once the page is handed out whole.
        self.position =
            if self.waiting.is_empty() { self.read_through.max(Some(event.id)) } else { Some(event.id) };
        Ok(Some(event))
    }

    /// Where to start again to miss nothing and repeat nothing.
    pub fn position(&self) -> Option<Cursor> {
        self.position
    }

    /// Reads pages until one has an event or the feed has no more.
    async fn read_page(&mut self) -> Result<()> {
        loop {
            let query = ChangesQuery { after: self.read_through, ..self.query.clone() };
            let page = self.api.changes(&query).await?;
            self.read_through = page.next.or(self.read_through);
            self.waiting.extend(page.events);
            if !self.waiting.is_empty() || !page.more {
                return Ok(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_follower_starts_where_its_query_does() {
        crate::install_crypto_provider();
        let api = ApiClient::new("http://127.0.0.1:9").unwrap();
        let after = Cursor { batch: 3, index: 1 };
        let follower = ChangeFollower::new(
            api,
            ChangesQuery { after: Some(after), ..ChangesQuery::default() },
            Duration::ZERO,
        );
        assert_eq!(follower.position(), Some(after));
    }
}
