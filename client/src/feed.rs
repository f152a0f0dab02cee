//! Following the change feed (`GET /api/v1/changes`, docs/change-feed.md): a typed iterator over
//! its events that pages from a cursor, waits when it has caught up, and tells where to resume.

use std::{collections::VecDeque, time::Duration};

use kya_core::feed::{ChangesQuery, Cursor, Event};

use crate::{ApiClient, Result};

/// The events of the feed that `query` selects, from its cursor on, one at a time.
///
/// It reads a page when it has no event left, and [`ChangeFollower::next`] waits `poll` between
/// pages once it has caught up. [`ChangeFollower::position`] is where to start again (`after=`)
/// to miss nothing and repeat nothing: the last event handed out, or past the events the filters
/// skipped.
#[derive(Debug, Clone)]
pub struct ChangeFollower {
    api: ApiClient,
    query: ChangesQuery,
    poll: Duration,
    /// Read but not handed out yet.
    waiting: VecDeque<Event>,
    /// Where the last page ended (the next page's `after`).
    read_through: Option<Cursor>,
    /// Everything up to here was handed out or skipped.
    position: Option<Cursor>,
}

impl ChangeFollower {
    /// Follows `query` from its `after` (none: from the oldest event kept) on `api`.
    pub fn new(api: ApiClient, query: ChangesQuery, poll: Duration) -> Self {
        let start = query.after;
        Self { api, query, poll, waiting: VecDeque::new(), read_through: start, position: start }
    }

    /// The next event, waiting as long as it takes for one.
    pub async fn next(&mut self) -> Result<Event> {
        loop {
            if let Some(event) = self.try_next().await? {
                return Ok(event);
            }
            tokio::time::sleep(self.poll).await;
        }
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
