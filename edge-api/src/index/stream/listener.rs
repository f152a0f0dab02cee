//! One open response of a shard ([`super::shard`]): its filters, its position in the feed, and
//! what its connection may still be sent.
//!
//! Every connection has a byte budget (`FEED_STREAM_CONNECTION_BYTES`) and a lifetime
//! (`FEED_STREAM_CONNECTION_SECS`). Past either the listener's stream ends with a last frame
//! naming the reason and its position ([`sse::end`]), and the client resumes from there with
//! `Last-Event-ID`. The shard cannot see whether a client reads (the runtime takes each chunk as
//! the shard makes it, under `wrangler dev` whether or not the client reads), so what it sends a
//! connection is all it can bound: a listener that never reads costs the runtime at most its
//! budget.

use std::{cell::Cell, rc::Rc};

use futures::channel::mpsc;
use kya_core::feed::{
    ChangesQuery, Cursor, Event,
    sse::{self, EndReason},
};

/// One Server-Sent Events message (or comment) as bytes, framed once per shard and shared by every
/// listener it is queued for.
pub(super) type Frame = Rc<[u8]>;

/// What a listener may be sent, from the stream's settings.
#[derive(Debug, Clone, Copy)]
pub(super) struct Allowance {
    /// Bytes of events its connection may be sent (`FEED_STREAM_CONNECTION_BYTES`).
    pub(super) bytes: u64,
    /// When its connection ends, in milliseconds since the epoch (`FEED_STREAM_CONNECTION_SECS`
    /// after it opened).
    pub(super) ends_at_ms: u64,
}

/// One open response.
pub(super) struct Listener {
    query: ChangesQuery,
    /// The last event offered to this listener, selected or not: it is sent only later ones.
    position: Option<Cursor>,
    /// Its client, whose streams the shard counts.
    pub(super) client: String,
    /// Each item is what one hand-over (or heartbeat) has for the listener, written to its
    /// response as one chunk: a stream write per hand-over, not per event.
    sender: mpsc::UnboundedSender<Vec<Frame>>,
    /// Bytes queued for the response and not taken by the runtime yet: bounded by
    /// `FEED_STREAM_BACKLOG_BYTES`, so a crowd of listeners that read nothing costs the shard a
    /// known amount of memory where the runtime applies backpressure.
    unread: Rc<Cell<u64>>,
    /// Bytes of events its connection may still be sent.
    budget: u64,
    /// Whether its connection was sent an event yet: the first goes out whatever its size, so
    /// every connection moves its listener on.
    sent_any: bool,
    /// When its connection ends (milliseconds since the epoch).
    ends_at_ms: u64,
    /// While it reads the feed from D1 (a resume, [`super::resume`]) it takes no hand-over.
    pub(super) resuming: bool,
}

/// What [`Listener::pick`] took from a run of events.
pub(super) struct Picked<F> {
    /// The frames of the events taken, in order.
    pub(super) frames: Vec<F>,
    /// Set when an event did not fit: the listener's stream must end for this reason, its
    /// position before that event.
    pub(super) full: Option<EndReason>,
}

impl Listener {
    /// A listener at `position`, on a connection allowed `allowance`, sending to `sender`.
    pub(super) fn new(
        query: ChangesQuery,
        position: Option<Cursor>,
        client: String,
        sender: mpsc::UnboundedSender<Vec<Frame>>,
        unread: Rc<Cell<u64>>,
        allowance: Allowance,
    ) -> Self {
        Self {
            query,
            position,
            client,
            sender,
            unread,
            budget: allowance.bytes,
            sent_any: false,
            ends_at_ms: allowance.ends_at_ms,
            resuming: false,
        }
    }

    /// Walks `items` (events, each found by `event_of`) in feed order. Each past the position
    /// moves it on; each the filters select is framed by `frame` and taken, while the
    /// connection's budget and `room` (bytes that may still be queued unread) last. The first
    /// selected event that does not fit stops the walk, before the position moves past it.
    pub(super) fn pick<'a, T: 'a, F: AsRef<[u8]>>(
        &mut self,
        items: impl IntoIterator<Item = &'a T>,
        event_of: impl Fn(&T) -> &Event,
        mut frame: impl FnMut(&T) -> F,
        room: u64,
    ) -> Picked<F> {
        let mut picked = Picked { frames: Vec::new(), full: None };
        let mut queued = 0_u64;
        for item in items {
            let event = event_of(item);
            if self.position.is_some_and(|position| event.id <= position) {
                continue;
            }
            if self.query.matches(event) {
                let framed = frame(item);
                let size = framed.as_ref().len() as u64;
                if self.sent_any && size > self.budget {
                    picked.full = Some(EndReason::Budget);
                    return picked;
                }
                if self.sent_any && queued + size > room {
                    picked.full = Some(EndReason::Unread);
                    return picked;
                }
                self.budget = self.budget.saturating_sub(size);
                self.sent_any = true;
                queued += size;
                picked.frames.push(framed);
            }
            self.position = Some(event.id);
        }
        picked
    }

    /// Queues what a hand-over has for this listener (events framed once for the shard), and ends
    /// its stream when they do not all fit (or its lifetime is over by `now_ms`). False when the
    /// stream is gone or ended.
    pub(super) fn hand(&mut self, events: &[(Event, Frame)], limit: u64, now_ms: u64) -> bool {
        if self.sender.is_closed() {
            return false;
        }
        let room = limit.saturating_sub(self.unread.get());
        let picked = self.pick(events, |(event, _)| event, |(_, frame)| Rc::clone(frame), room);
        if !self.queue(picked.frames) {
            return false;
        }
        match picked.full {
            Some(reason) => self.end(reason),
            None => self.live_on(now_ms),
        }
    }

    /// Queues a heartbeat comment (which counts against `limit`'s unread bytes, not the budget:
    /// 13 bytes every `FEED_STREAM_HEARTBEAT_SECS` for at most the lifetime), and ends the stream
    /// if its lifetime is over by `now_ms`. False when the stream is gone or ended.
    pub(super) fn beat(&mut self, heartbeat: &Frame, limit: u64, now_ms: u64) -> bool {
        if self.sender.is_closed() {
            return false;
        }
        if self.unread.get() + heartbeat.len() as u64 > limit {
            return self.end(EndReason::Unread);
        }
        self.queue(vec![Rc::clone(heartbeat)]) && self.live_on(now_ms)
    }

    /// True while its lifetime lasts; else its stream ends. A listener with no position a cursor
    /// can name (it started on an empty feed, and was offered nothing since) is kept past it: it
    /// could only reconnect without a cursor, and miss what is appended meanwhile. It has been
    /// sent nothing but heartbeats.
    pub(super) fn live_on(&mut self, now_ms: u64) -> bool {
        if now_ms < self.ends_at_ms || self.resumable().is_none() {
            return true;
        }
        self.end(EndReason::Lifetime)
    }

    /// Queues `frames` for the response. False when it is gone.
    fn queue(&mut self, frames: Vec<Frame>) -> bool {
        if frames.is_empty() {
            return true;
        }
        let bytes: u64 = frames.iter().map(|frame| frame.len() as u64).sum();
        self.unread.set(self.unread.get() + bytes);
        self.sender.unbounded_send(frames).is_ok()
    }

    /// Ends the stream after its last frame, naming `reason` and where to resume. Always false
    /// (the listener is to be dropped). A client reconnects at once to the id an end names; after
    /// D1 failed none is named, so that clients wait their `retry` rather than meet the same
    /// failure at once (they resume from the last event they were sent).
    pub(super) fn end(&mut self, reason: EndReason) -> bool {
        let resume_after = if reason == EndReason::Unavailable { None } else { self.resumable() };
        let last = sse::end(reason, resume_after);
        let _ = self.sender.unbounded_send(vec![Rc::from(last.into_bytes())]);
        self.sender.close_channel();
        false
    }

    /// Whether its stream is gone (the response dropped) or ended.
    pub(super) fn is_closed(&self) -> bool {
        self.sender.is_closed()
    }

    /// Its position, when a cursor can name it: a listener that started on an empty feed sits
    /// before batch 1, which no cursor names.
    fn resumable(&self) -> Option<Cursor> {
        self.position.filter(|position| position.batch >= 1)
    }
}

/// A shard's listeners, shared by its requests, its resumes and its heartbeat (here, beside
/// the listener, so that the shard and its resumes both read them without importing each other).
#[derive(Default)]
pub(super) struct Listeners {
    /// The id the next listener gets.
    pub(super) next: u64,
    pub(super) open: std::collections::BTreeMap<u64, Listener>,
    /// The newest event this shard was handed: where a listener without a cursor starts, and
    /// how far a resume reads D1 before it takes the hand-overs.
    pub(super) newest: Option<kya_core::feed::Cursor>,
    /// Whether the heartbeat's timer runs.
    pub(super) beating: bool,
}

#[cfg(test)]
mod tests {
    use alloy_primitives::{Address, B256};
    use kya_core::feed::{Change, Detail, EventBlock, EventType, Standing};

    use super::*;

    pub(crate) fn event(batch: u64, index: u32, agent_id: u64) -> Event {
        Event::provisional(
            Cursor { batch, index },
            Change {
                kind: EventType::Registered,
                agent_id,
                wallet: Address::repeat_byte(agent_id as u8),
                block: EventBlock { number: batch, hash: B256::ZERO, time: 0 },
                log: None,
                standing: Standing { is_registered: true, is_compliant: false, status: None },
                detail: Detail::None {},
            },
        )
    }

    fn listener(
        query: ChangesQuery,
        position: Option<Cursor>,
        bytes: u64,
    ) -> (Listener, mpsc::UnboundedReceiver<Vec<Frame>>, Rc<Cell<u64>>) {
        let (sender, receiver) = mpsc::unbounded();
        let unread = Rc::new(Cell::new(0));
        let allowance = Allowance { bytes, ends_at_ms: 1_000 };
        (
            Listener::new(query, position, String::new(), sender, Rc::clone(&unread), allowance),
            receiver,
            unread,
        )
    }

    fn framed(events: &[Event]) -> Vec<(Event, Frame)> {
        events.iter().map(|event| (*event, Rc::from(sse::message(event).into_bytes()))).collect()
    }

    /// Everything queued for the response, as text, one item per chunk.
    fn queued(receiver: &mut mpsc::UnboundedReceiver<Vec<Frame>>) -> Vec<String> {
        let mut chunks = Vec::new();
        while let Ok(frames) = receiver.try_recv() {
            chunks.push(frames.iter().map(|frame| String::from_utf8(frame.to_vec()).unwrap()).collect());
        }
        chunks
    }

    #[test]
    fn a_listener_is_offered_each_event_once_in_order_and_sent_what_it_selects() {
        let query = ChangesQuery { agent_ids: [2].into(), ..ChangesQuery::default() };
        let (mut listener, _receiver, _) = listener(query, Some(Cursor { batch: 1, index: 0 }), u64::MAX);
        let take = |listener: &mut Listener, events: &[Event]| {
            listener.pick(events, |event| event, sse::message, u64::MAX).frames.concat()
        };
        let batch = [event(1, 0, 2), event(1, 1, 1), event(1, 2, 2)];
        // 1-0 is its position already, 1-1 another agent's.
        assert_eq!(take(&mut listener, &batch), sse::message(&batch[2]));
        assert_eq!(listener.position, Some(Cursor { batch: 1, index: 2 }));
        assert_eq!(take(&mut listener, &batch), "", "handed again (an outlet's retry): nothing twice");
        assert_eq!(take(&mut listener, &[event(2, 0, 1)]), "");
        assert_eq!(listener.position, Some(Cursor { batch: 2, index: 0 }), "a skipped event moves it on");
        assert_eq!(take(&mut listener, &[event(1, 3, 2)]), "", "an older event, late: never out of order");
    }

    #[test]
    fn a_connection_past_its_budget_ends_naming_the_last_event_offered_and_resumes_from_there() {
        let events: Vec<Event> =
            (0..6).map(|index| event(3, index, if index == 3 { 1 } else { 2 })).collect();
        let size = sse::message(&events[0]).len() as u64;
        // Two events' bytes and a little: agent 2's 3-0 and 3-1 fit, 3-2 does not.
        let query = ChangesQuery { agent_ids: [2].into(), ..ChangesQuery::default() };
        let (mut first, mut receiver, unread) = listener(query.clone(), None, 2 * size + 10);
        assert!(!first.hand(&framed(&events), u64::MAX, 0), "ended");
        let chunks = queued(&mut receiver);
        assert_eq!(chunks[0], sse::message(&events[0]) + &sse::message(&events[1]));
        assert_eq!(chunks[1], ": end budget last-event-id=3-1\nid: 3-1\n\n");
        assert_eq!(chunks.len(), 2);
        assert_eq!(unread.get(), 2 * size, "the end frame is no event");
        assert!(first.is_closed());
        // The next connection, from the id the end named: 3-2, and 3-3 passed over (agent 1's)
        // before 3-4 does not fit; from there the third takes 3-4 and 3-5. Each event once.
        let (mut second, mut receiver, _) =
            listener(query.clone(), Some(Cursor { batch: 3, index: 1 }), 2 * size - 1);
        assert!(!second.hand(&framed(&events), u64::MAX, 0));
        let chunks = queued(&mut receiver);
        assert_eq!(
            chunks,
            [sse::message(&events[2]), ": end budget last-event-id=3-3\nid: 3-3\n\n".to_owned()]
        );
        let (mut third, mut receiver, _) = listener(query, Some(Cursor { batch: 3, index: 3 }), 2 * size);
        assert!(third.hand(&framed(&events), u64::MAX, 0), "all fit: it stays");
        assert_eq!(queued(&mut receiver), [sse::message(&events[4]) + &sse::message(&events[5])]);
    }

    #[test]
    fn a_connections_first_event_goes_out_whatever_its_size_so_every_connection_moves_on() {
        let events = [event(4, 0, 1), event(4, 1, 1)];
        let (mut listener, mut receiver, _) = listener(ChangesQuery::default(), None, 1);
        assert!(!listener.hand(&framed(&events), u64::MAX, 0));
        assert_eq!(
            queued(&mut receiver),
            [sse::message(&events[0]), sse::end(EndReason::Budget, Some(events[0].id))]
        );
    }

    #[test]
    fn a_listener_that_reads_nothing_is_dropped_past_its_unread_bytes_with_its_position() {
        let events = [event(1, 0, 1), event(1, 1, 1), event(1, 2, 1), event(1, 3, 1)];
        let frames = framed(&events);
        let size = frames[0].1.len() as u64;
        let (mut listener, mut receiver, unread) = listener(ChangesQuery::default(), None, u64::MAX);
        // Three frames fit in three frames' bytes, shared, not copied.
        for at in 0..3 {
            assert!(listener.hand(&frames[at..=at], 3 * size, 0));
        }
        assert_eq!((unread.get(), Rc::strong_count(&frames[0].1)), (3 * size, 2));
        // A fourth would pass the limit: dropped, told why and where it stood.
        assert!(!listener.hand(&frames[3..], 3 * size, 0));
        assert!(!listener.hand(&frames[3..], 3 * size, 0), "gone for good");
        let chunks = queued(&mut receiver);
        assert_eq!(chunks.len(), 4);
        assert_eq!(chunks[3], ": end unread last-event-id=1-2\nid: 1-2\n\n");
    }

    #[test]
    fn a_connection_ends_at_its_lifetime_unless_no_cursor_can_name_its_position() {
        let heartbeat: Frame = Rc::from(sse::HEARTBEAT.as_bytes());
        let (mut placed, mut receiver, _) =
            listener(ChangesQuery::default(), Some(Cursor { batch: 5, index: 2 }), 99);
        assert!(placed.beat(&heartbeat, u64::MAX, 999), "before its end");
        assert!(!placed.beat(&heartbeat, u64::MAX, 1_000), "at its end");
        assert_eq!(
            queued(&mut receiver),
            [sse::HEARTBEAT, sse::HEARTBEAT, ": end lifetime last-event-id=5-2\nid: 5-2\n\n"]
        );
        // Started on an empty feed (before batch 1) and offered nothing since: kept, until its
        // first event gives it a position; the next check past its end then ends it.
        let before_feed = Some(Cursor { batch: 0, index: u32::MAX });
        let (mut waiting, mut receiver, _) = listener(ChangesQuery::default(), before_feed, 99_999);
        assert!(waiting.beat(&heartbeat, u64::MAX, 5_000));
        assert!(!waiting.hand(&framed(&[event(1, 0, 1)]), u64::MAX, 5_000));
        assert_eq!(queued(&mut receiver).last().unwrap(), ": end lifetime last-event-id=1-0\nid: 1-0\n\n");
    }
}
