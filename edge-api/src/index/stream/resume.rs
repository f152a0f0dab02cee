//! A listener's resume from D1: the events after its cursor (or from its start batch), read a
//! page at a time as its response takes them, and sent within its connection's budget.
//!
//! Each page (`/changes`' page of 16 batches, the same query) is read only once the response
//! has taken the chunk before: a resume is never built whole, and what it holds at once is one
//! page of events and one chunk of frames. The shard's resumes read their pages one at a time
//! ([`PageTurn`]): a hundred listeners resuming at once from the oldest event each read the same
//! megabytes, and all of them in flight at once took the shard's isolate past its memory. While it resumes, the listener takes no hand-over:
//! a run hands out only batches it committed to D1, so reading on until the pages reach the
//! newest batch the shard was handed misses none of them. The switch to the hand-overs happens
//! between two reads, with no await between the last read's check and the switch.
//!
//! A resume ends its connection (the client resumes from the position named) when the budget
//! runs out, or after [`PAGES_PER_RESUME`] pages without catching up, which bounds one
//! connection's D1 reads.

use std::{cell::RefCell, rc::Rc};

use futures::{Stream, stream};
use kya_core::feed::{Cursor, sse, sse::EndReason};

use super::listener::Listeners;
use crate::{d1::Store, index::changes::BATCHES_PER_PAGE};

/// Pages (each a `/changes` page of 16 batches) one connection's resume reads at most. A listener
/// further behind is sent those (within its budget) and its stream ends: it reconnects from
/// where they stopped.
pub(super) const PAGES_PER_RESUME: u32 = 8;

/// Where a listener resumes from D1: from batch `from`, after its client's cursor `checked` (none
/// for a listener without a cursor, whose start the Worker read from D1 itself).
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Resume {
    pub(super) from: u64,
    pub(super) checked: Option<Cursor>,
}

/// A new listener's position, and whether it resumes from D1 first: from its cursor `after`; else
/// from batch `start` (none: from what the shard was last handed, `newest`), read from D1 when
/// the shard was handed batches from `start` on before the listener reached it (a run appending
/// while the Worker passed the listener on).
pub(super) fn starting_point(
    after: Option<Cursor>,
    start: Option<u64>,
    newest: Option<Cursor>,
) -> (Option<Cursor>, Option<Resume>) {
    // Just before the start: the position that skips every earlier batch.
    let before_start = start.map(|start| Cursor { batch: start.saturating_sub(1), index: u32::MAX });
    match (after, before_start) {
        (Some(after), _) => (Some(after), Some(Resume { from: after.batch, checked: Some(after) })),
        (None, Some(before)) if newest > Some(before) => {
            (Some(before), Some(Resume { from: before.batch + 1, checked: None }))
        }
        (None, before) => (newest.max(before), None),
    }
}

/// The shard's turn to read a resume's page: one page read, decoded and framed at a time, whatever
/// the number of listeners resuming.
pub(super) type PageTurn = Rc<futures::lock::Mutex<()>>;

/// A resume in progress.
struct Reading {
    store: Store,
    turn: PageTurn,
    listeners: Rc<RefCell<Listeners>>,
    /// The listener's key in the shard.
    id: u64,
    /// The batch the resume started from (for the log).
    started: u64,
    /// The next page's first batch.
    from: u64,
    pages: u32,
    done: bool,
}

/// The chunks of listener `id`'s resume from batch `from`, read from `store` page by page as
/// they are taken. Once it has caught up the listener takes the shard's hand-overs; if its
/// connection ends first (its budget, the page cap, D1 failing), its last frame is queued for
/// the response after these chunks, and the listener is dropped.
pub(super) fn pages(
    store: Store,
    turn: PageTurn,
    listeners: Rc<RefCell<Listeners>>,
    id: u64,
    from: u64,
) -> impl Stream<Item = Result<Vec<u8>, worker::Error>> {
    let reading = Reading { store, turn, listeners, id, started: from, from, pages: 0, done: false };
    stream::unfold(reading, |mut reading| async move {
        loop {
            if reading.done {
                worker::console_log!(
                    "feed stream: a resume from batch {} read {} D1 rows in {} queries",
                    reading.started,
                    reading.store.rows_read(),
                    reading.store.queries()
                );
                return None;
            }
            let turn = Rc::clone(&reading.turn);
            let held = turn.lock().await;
            let page = reading.store.feed_batches(reading.from, BATCHES_PER_PAGE).await;
            let chunk = reading.take(page);
            drop(held);
            if !chunk.is_empty() {
                return Some((Ok(chunk), reading));
            }
        }
    })
}

impl Reading {
    /// The listener's chunk of `page` (read from [`Reading::from`]), and what follows it: the
    /// next page, the hand-overs once caught up, or the connection's end.
    fn take(&mut self, page: crate::Result<Vec<(u64, Vec<kya_core::feed::Event>)>>) -> Vec<u8> {
        let mut listeners = self.listeners.borrow_mut();
        let newest = listeners.newest;
        let Some(listener) = listeners.open.get_mut(&self.id) else {
            // Gone: its response was dropped.
            self.done = true;
            return Vec::new();
        };
        let batches = match page {
            Ok(batches) => batches,
            Err(error) => {
                worker::console_error!("feed stream: a resume's page failed: {error}");
                listener.end(EndReason::Unavailable);
                listeners.open.remove(&self.id);
                self.done = true;
                return Vec::new();
            }
        };
        self.pages += 1;
        let whole_page = batches.len() as u64 >= BATCHES_PER_PAGE;
        let next = batches.last().map_or(self.from, |(batch, _)| batch + 1);
        let events = batches.iter().flat_map(|(_, events)| events);
        let picked = listener.pick(events, |event| event, |event| sse::message(event).into_bytes(), u64::MAX);
        let chunk = picked.frames.concat();
        // Caught up: D1 held nothing past this page when it was read, and the shard was handed
        // nothing past it since.
        let caught_up = !whole_page && newest.is_none_or(|newest| newest.batch < next);
        let keep = match picked.full {
            Some(reason) => listener.end(reason),
            None if caught_up => {
                listener.resuming = false;
                listener.live_on(worker::Date::now().as_millis())
            }
            None if self.pages >= PAGES_PER_RESUME => listener.end(EndReason::ResumePages),
            None => {
                self.from = next;
                return chunk;
            }
        };
        if !keep {
            listeners.open.remove(&self.id);
        }
        self.done = true;
        chunk
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listener_without_a_cursor_starts_at_its_start_batch_from_d1_when_the_shard_is_past_it() {
        let at = |batch, index| Some(Cursor { batch, index });
        let before_5 = at(4, u32::MAX);
        // The shard was handed up to batch 4: batch 5 on comes live.
        assert_eq!(starting_point(None, Some(5), at(4, 2)), (before_5, None));
        // A shard not handed anything yet (started since): the same.
        assert_eq!(starting_point(None, Some(5), None), (before_5, None));
        // A run appended batch 5 and handed it to the shard before the listener got there: batch
        // 5 on is read from D1 (no cursor to check).
        assert_eq!(
            starting_point(None, Some(5), at(5, 0)),
            (before_5, Some(Resume { from: 5, checked: None }))
        );
        assert_eq!(
            starting_point(None, Some(1), at(1, 3)),
            (at(0, u32::MAX), Some(Resume { from: 1, checked: None }))
        );
        // A cursor: resumed from it, checked.
        assert_eq!(
            starting_point(at(3, 1), Some(9), at(8, 0)),
            (at(3, 1), Some(Resume { from: 3, checked: at(3, 1) }))
        );
        // No start (a Worker of before): from what the shard was last handed.
        assert_eq!(starting_point(None, None, at(4, 2)), (at(4, 2), None));
    }
}
