//! A shard of the stream's listeners: a Durable Object (binding `FEED_STREAM`, one object per
//! shard name) that holds the open Server-Sent Events responses of the listeners the Worker sent
//! it, and writes each event of the batches the index's runs hand it ([`super::outlet`]) to
//! every listener whose filters select it.
//!
//! - **No D1 while listening.** Events arrive from the run (`POST /notify`); each is framed once
//!   for all of the shard's listeners. D1 is read only when a listener resumes from a cursor:
//!   `/changes`' cursor check and its pages from the cursor's batch, the same queries.
//! - **Nothing missed, nothing repeated.** Each listener has a position, the last event it was
//!   offered (selected or not). It is sent only events past it, in feed order. A resuming
//!   listener is registered before its D1 read; batches the run hands meanwhile wait in its
//!   backlog and follow what D1 gave, past the position that read reached.
//! - **A heartbeat** comment every `FEED_STREAM_HEARTBEAT_SECS` while the shard has listeners,
//!   from a timer in the object (the object stays in memory while a response is open); it also
//!   finds the listeners that left.
//! - **A restart** (a deployment, an eviction, a crash) ends every response the shard held. The
//!   listeners reconnect with `Last-Event-ID` (an `EventSource` does so by itself, after the
//!   `retry` the stream opened with), and resume from D1 on whichever shard the Worker picks.

use std::{
    cell::{Cell, RefCell},
    collections::BTreeMap,
    rc::Rc,
    time::Duration,
};

use futures::{StreamExt, channel::mpsc, stream};
use kya_core::feed::{ChangesQuery, Cursor, Event, sse};
use serde::Deserialize;
use worker::{Delay, DurableObject, Env, Headers, Request, Response, State, durable_object};

use crate::{Error, Result, config::Config, d1::Store, http};

/// The binding of the shards' namespace in `wrangler.toml`.
pub(crate) const BINDING: &str = "FEED_STREAM";

/// The URL a listener's request is sent to (only the path reaches the object).
pub(super) const LISTEN: &str = "https://stream-shard/listen";

/// The parameter of [`LISTEN`] naming a listener's first batch when it has no cursor: the first
/// batch the feed did not hold when the Worker accepted it.
pub(super) const START: &str = "start";

/// The URL the run's batches are sent to.
pub(super) const NOTIFY: &str = "https://stream-shard/notify";

/// The name of shard `shard` (0 to `FEED_STREAM_SHARDS` - 1).
pub(crate) fn name(shard: u64) -> String {
    format!("shard-{shard}")
}

/// The parameter of [`LISTEN`] naming the listener's client (an IPv4 address, an IPv6 /64), whose
/// open streams the shard counts: the Worker sends every stream of a client to the same shard.
pub(super) const CLIENT: &str = "client";

/// Seconds a client refused for the caps is told to wait (`Retry-After`).
const CAPPED_RETRY_SECS: u64 = 60;

/// Pages (each a `/changes` page of 16 batches) one resume reads at most. A listener further
/// behind is sent those and its stream ends: it reconnects from where they stopped.
const PAGES_PER_RESUME: u32 = 8;

/// One batch as the run hands it.
#[derive(Deserialize)]
pub(super) struct Handed {
    pub(super) events: Vec<Event>,
}

/// One Server-Sent Events message (or comment) as bytes, framed once per shard and shared by every
/// listener it is queued for.
type Frame = Rc<[u8]>;

/// One open response.
struct Listener {
    query: ChangesQuery,
    /// The last event offered to this listener, selected or not: it is sent only later ones.
    position: Option<Cursor>,
    /// Its client, whose streams the shard counts.
    client: String,
    /// Each item is what one hand-over (or heartbeat) has for the listener, written to its
    /// response as one chunk: a stream write per hand-over, not per event.
    sender: mpsc::UnboundedSender<Vec<Frame>>,
    /// Bytes queued for the response and not read from it yet: bounded by
    /// `FEED_STREAM_BACKLOG_BYTES`, so a crowd of listeners that read nothing costs the shard a
    /// known amount of memory.
    unread: Rc<Cell<u64>>,
    /// While it resumes from D1: the events handed meanwhile, sent after D1's.
    backlog: Option<Vec<Event>>,
}

impl Listener {
    /// Whether `event` is past the position and selected by the filters, the position moved
    /// past it either way.
    fn offered(&mut self, event: &Event) -> bool {
        if self.position.is_some_and(|position| event.id <= position) {
            return false;
        }
        self.position = Some(event.id);
        self.query.matches(event)
    }

    /// The messages of `events` that [`Listener::offered`] takes, framed for this listener
    /// alone (a resume's events, read from D1 for it).
    fn take(&mut self, events: &[Event]) -> String {
        events.iter().filter(|event| self.offered(event)).map(sse::message).collect()
    }

    /// Queues `frames` unless that would leave more than `limit` bytes unread: then the
    /// listener is told why and its stream ends (it resumes with `Last-Event-ID`). False when it
    /// is gone, or was dropped.
    fn send(&mut self, frames: Vec<Frame>, limit: u64) -> bool {
        let bytes: u64 = frames.iter().map(|frame| frame.len() as u64).sum();
        if self.sender.is_closed() {
            return false;
        }
        if self.unread.get() + bytes > limit {
            let _ = self.sender.unbounded_send(vec![Rc::from(BEHIND.as_bytes())]);
            self.sender.close_channel();
            return false;
        }
        self.unread.set(self.unread.get() + bytes);
        frames.is_empty() || self.sender.unbounded_send(frames).is_ok()
    }

    /// Ends the stream after a last comment.
    fn end_with(&mut self, comment: &str) {
        let _ = self.sender.unbounded_send(vec![Rc::from(comment.as_bytes())]);
        self.sender.close_channel();
    }
}

/// The last words to a listener dropped for the events it left unread.
const BEHIND: &str =
    ": dropped: more than FEED_STREAM_BACKLOG_BYTES of events unread; reconnect with Last-Event-ID\n\n";

/// The shard's listeners, shared by its requests and its heartbeat.
#[derive(Default)]
struct Listeners {
    next: u64,
    open: BTreeMap<u64, Listener>,
    /// The newest event this shard was handed: where a listener without a cursor starts.
    newest: Option<Cursor>,
    /// Whether the heartbeat's timer runs.
    beating: bool,
}

/// The Durable Object of one shard of listeners.
#[durable_object]
pub struct StreamShard {
    env: Env,
    listeners: Rc<RefCell<Listeners>>,
}

impl DurableObject for StreamShard {
    fn new(_state: State, env: Env) -> Self {
        Self { env, listeners: Rc::default() }
    }

    /// `GET /listen?<query>`: a new listener's stream (or the error `/changes` gives its
    /// cursor). `POST /notify`: the batches of a run, a JSON array of `{batch, events}`.
    async fn fetch(&self, mut request: Request) -> worker::Result<Response> {
        let url = request.url()?;
        let answer = match url.path() {
            "/notify" => match serde_json::from_str::<Vec<Handed>>(&request.text().await?) {
                Ok(batches) => {
                    let listeners = self.deliver(batches);
                    Response::ok(listeners.to_string()).map_err(Error::from)
                }
                Err(error) => Err(Error::Runtime(worker::Error::RustError(format!(
                    "the run's batches do not decode: {error}"
                )))),
            },
            "/listen" => {
                let pairs: Vec<(String, String)> = url.query_pairs().into_owned().collect();
                let start =
                    pairs.iter().find(|(name, _)| name == START).and_then(|(_, value)| value.parse().ok());
                let client = pairs
                    .iter()
                    .find(|(name, _)| name == CLIENT)
                    .map_or_else(String::new, |(_, value)| value.clone());
                let query_pairs = pairs.iter().filter(|(name, _)| name != START && name != CLIENT);
                match ChangesQuery::parse(query_pairs.map(|(name, value)| (name.as_str(), value.as_str()))) {
                    Ok(query) => self.listen(query, start, client).await,
                    Err(error) => Err(error.into()),
                }
            }
            path => Err(Error::NoRoute(path.to_owned())),
        };
        answer
            .or_else(|error| http::error(&error))
            .map_err(|error| worker::Error::RustError(error.to_string()))
    }
}

impl StreamShard {
    /// Writes the events of `batches` to every listener, each event framed once; how many
    /// listeners the shard holds. A hand-over that starts past the batch after the newest this
    /// shard was handed means it missed batches (a hand-over it could not take): its live
    /// listeners are told so and dropped, and resume from D1 with `Last-Event-ID`.
    fn deliver(&self, batches: Vec<Handed>) -> usize {
        let limit = Config::from_env(&self.env).stream.backlog_bytes;
        let first_batch = batches.first().and_then(|batch| batch.events.first()).map(|event| event.id.batch);
        let events: Vec<Event> = batches.into_iter().flat_map(|batch| batch.events).collect();
        let frames: Vec<(Event, Frame)> =
            events.iter().map(|event| (*event, Rc::from(sse::message(event).into_bytes()))).collect();
        let mut listeners = self.listeners.borrow_mut();
        let missed = match (listeners.newest, first_batch) {
            (Some(newest), Some(first)) if first > newest.batch + 1 => Some((newest.batch + 1, first - 1)),
            _ => None,
        };
        if let Some((from, to)) = missed {
            worker::console_warn!(
                "feed stream: this shard missed batches {from} to {to}: its listeners resume from D1"
            );
        }
        listeners.open.retain(|_, listener| match (&mut listener.backlog, missed) {
            (Some(backlog), _) => {
                backlog.extend_from_slice(&events);
                true
            }
            (None, Some((from, to))) => {
                listener.end_with(&format!(
                    ": dropped: this shard missed batches {from} to {to}; reconnect with Last-Event-ID\n\n"
                ));
                false
            }
            (None, None) => {
                let picked: Vec<Frame> = frames
                    .iter()
                    .filter(|(event, _)| listener.offered(event))
                    .map(|(_, frame)| Rc::clone(frame))
                    .collect();
                listener.send(picked, limit)
            }
        });
        if let Some(last) = events.last() {
            listeners.newest = listeners.newest.max(Some(last.id));
        }
        listeners.open.len()
    }

    /// A new listener: its stream, opened with the events after its cursor that D1 holds, or,
    /// without a cursor, every event from batch `start` on (the Worker's reading of where the
    /// feed ended when it accepted the listener; without it, from what the shard was last
    /// handed).
    async fn listen(&self, query: ChangesQuery, start: Option<u64>, client: String) -> Result<Response> {
        let config = Config::from_env(&self.env).stream;
        let (sender, receiver) = mpsc::unbounded();
        let unread = Rc::new(Cell::new(0));
        let after = query.after;
        let (id, resume) = {
            let mut listeners = self.listeners.borrow_mut();
            // The caps, counted on the listeners still there, before anything is opened.
            listeners.open.retain(|_, listener| !listener.sender.is_closed());
            let of_client =
                listeners.open.values().filter(|listener| listener.client == client).count() as u64;
            if listeners.open.len() as u64 >= config.max_listeners || of_client >= config.max_per_client {
                return Err(Error::RateLimited { retry_after: CAPPED_RETRY_SECS });
            }
            let id = listeners.next;
            listeners.next += 1;
            let (position, resume) = starting_point(after, start, listeners.newest);
            let backlog = resume.as_ref().map(|_| Vec::new());
            let listener = Listener { query, position, client, sender, unread: Rc::clone(&unread), backlog };
            listeners.open.insert(id, listener);
            (id, resume)
        };
        let mut opening = sse::opening(after, start);
        if let Some(resume) = resume {
            let resumed = match self.resume(resume).await {
                Ok(resumed) => resumed,
                Err(error) => {
                    self.listeners.borrow_mut().open.remove(&id);
                    return Err(error);
                }
            };
            let mut listeners = self.listeners.borrow_mut();
            let listener = listeners.open.get_mut(&id).expect("a resuming listener is never dropped");
            opening.push_str(&listener.take(&resumed.events));
            let backlog = listener.backlog.take().unwrap_or_default();
            if resumed.whole {
                opening.push_str(&listener.take(&backlog));
            } else {
                // Not the backlog: it is later than batches D1 still holds for this listener.
                // Dropping its sender ends the stream after what it was given; it reconnects
                // from there.
                listeners.open.remove(&id);
            }
        }
        self.beat();
        let first = stream::once(async move { Ok::<_, worker::Error>(opening.into_bytes()) });
        // A hand-over's frames leave the listener's unread bytes as the response reads them,
        // copied into one chunk there.
        let queued = receiver.map(move |frames: Vec<Frame>| {
            let chunk: Vec<u8> = frames.iter().flat_map(|frame| frame.iter().copied()).collect();
            unread.set(unread.get().saturating_sub(chunk.len() as u64));
            Ok(chunk)
        });
        stream_response(Response::from_stream(first.chain(queued))?)
    }

    /// The events D1 holds from batch `resume.from` on, a client's cursor first checked as
    /// `/changes` checks it (410, 404, 503).
    async fn resume(&self, resume: Resume) -> Result<Resumed> {
        let store = Store::open(&self.env).ok_or(Error::FeedUnavailable)?;
        let held = crate::index::changes::servable(&store, resume.checked).await?;
        let newest = held.map_or(0, |(_, newest)| newest);
        let mut resumed = Resumed { events: Vec::new(), whole: false };
        let mut from = resume.from;
        for _ in 0..PAGES_PER_RESUME {
            let batches = store.feed_batches(from, crate::index::changes::BATCHES_PER_PAGE).await?;
            let last = batches.last().map(|(batch, _)| *batch);
            resumed.events.extend(batches.into_iter().flat_map(|(_, events)| events));
            match last {
                Some(last) if last < newest => from = last + 1,
                _ => {
                    resumed.whole = true;
                    break;
                }
            }
        }
        worker::console_log!(
            "feed stream: a resume from batch {} read {} D1 rows in {} queries",
            resume.from,
            store.rows_read(),
            store.queries()
        );
        Ok(resumed)
    }

    /// Starts the heartbeat's timer unless it runs. It stops once no listener is left.
    fn beat(&self) {
        if std::mem::replace(&mut self.listeners.borrow_mut().beating, true) {
            return;
        }
        let config = Config::from_env(&self.env).stream;
        let every = Duration::from_secs(config.heartbeat_secs);
        let heartbeat: Frame = Rc::from(sse::HEARTBEAT.as_bytes());
        let listeners = Rc::clone(&self.listeners);
        worker::wasm_bindgen_futures::spawn_local(async move {
            loop {
                Delay::from(every).await;
                let mut listeners = listeners.borrow_mut();
                listeners.open.retain(|_, listener| {
                    listener.backlog.is_some()
                        || listener.send(vec![Rc::clone(&heartbeat)], config.backlog_bytes)
                });
                if listeners.open.is_empty() {
                    listeners.beating = false;
                    return;
                }
            }
        });
    }
}

/// A new listener's position, and whether it resumes from D1 first: from its cursor `after`; else
/// from batch `start` (none: from what the shard was last handed, `newest`), read from D1 when
/// the shard was handed batches from `start` on before the listener reached it (a run appending
/// while the Worker passed the listener on).
fn starting_point(
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

/// Where a listener resumes from D1: from batch `from`, after its client's cursor `checked` (none
/// for a listener without a cursor, whose start the Worker read from D1 itself).
#[derive(Debug, PartialEq, Eq)]
struct Resume {
    from: u64,
    checked: Option<Cursor>,
}

/// What a resume read from D1.
struct Resumed {
    events: Vec<Event>,
    /// False when the listener is further behind than one resume reads.
    whole: bool,
}

/// `response` with a stream's headers: `text/event-stream`, never cached, never buffered by a
/// proxy that honours `X-Accel-Buffering`.
pub(super) fn stream_response(response: Response) -> Result<Response> {
    let headers = Headers::new();
    headers.set("content-type", "text/event-stream; charset=utf-8")?;
    headers.set("cache-control", "no-store")?;
    headers.set("x-accel-buffering", "no")?;
    Ok(response.with_headers(headers))
}

#[cfg(test)]
mod tests {
    use alloy_primitives::{Address, B256};
    use kya_core::feed::{Change, Detail, EventBlock, EventType, Standing};

    use super::*;

    fn event(batch: u64, index: u32, agent_id: u64) -> Event {
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

    #[test]
    fn a_listener_is_offered_each_event_once_in_order_and_sent_what_it_selects() {
        let (sender, _receiver) = mpsc::unbounded();
        let query = ChangesQuery { agent_ids: [2].into(), ..ChangesQuery::default() };
        let position = Some(Cursor { batch: 1, index: 0 });
        let mut listener =
            Listener { query, position, client: String::new(), sender, unread: Rc::default(), backlog: None };
        let batch = [event(1, 0, 2), event(1, 1, 1), event(1, 2, 2)];
        // 1-0 is its position already, 1-1 another agent's.
        assert_eq!(listener.take(&batch), sse::message(&batch[2]));
        assert_eq!(listener.position, Some(Cursor { batch: 1, index: 2 }));
        assert_eq!(listener.take(&batch), "", "handed again (an outlet's retry): nothing twice");
        assert_eq!(listener.take(&[event(2, 0, 1)]), "");
        assert_eq!(listener.position, Some(Cursor { batch: 2, index: 0 }), "a skipped event moves it on");
        assert_eq!(listener.take(&[event(1, 3, 2)]), "", "an older event, late: never out of order");
    }

    #[test]
    fn a_listener_that_reads_nothing_is_dropped_past_its_bytes_with_a_last_word() {
        let (sender, mut receiver) = mpsc::unbounded();
        let unread = Rc::new(Cell::new(0));
        let mut listener = Listener {
            query: ChangesQuery::default(),
            position: None,
            client: String::new(),
            sender,
            unread: Rc::clone(&unread),
            backlog: None,
        };
        let frame: Frame = Rc::from(sse::message(&event(1, 0, 1)).into_bytes());
        let size = frame.len() as u64;
        // Three frames fit in three frames' bytes, shared, not copied.
        for _ in 0..3 {
            assert!(listener.send(vec![Rc::clone(&frame)], 3 * size));
        }
        assert_eq!((unread.get(), Rc::strong_count(&frame)), (3 * size, 4));
        // A fourth would pass the limit: dropped, told why, and nothing more is queued.
        assert!(!listener.send(vec![Rc::clone(&frame)], 3 * size));
        assert!(!listener.send(vec![Rc::clone(&frame)], 3 * size), "gone for good");
        let mut queued = Vec::new();
        while let Ok(frames) = receiver.try_recv() {
            queued.extend(frames.iter().map(|frame| String::from_utf8(frame.to_vec()).unwrap()));
        }
        assert_eq!(queued.len(), 4);
        assert_eq!(queued[3], BEHIND);
        assert!(BEHIND.starts_with(':') && BEHIND.ends_with("\n\n"), "a comment an EventSource ignores");
    }

    #[test]
    fn a_listener_without_a_cursor_starts_at_its_start_batch_from_d1_when_the_shard_is_past_it() {
        let at = |batch, index| Some(Cursor { batch, index });
        let before_5 = at(4, u32::MAX);
        // The shard was handed up to batch 4: batch 5 on comes live.
        assert_eq!(starting_point(None, Some(5), at(4, 2)), (before_5, None));
        // A shard not handed anything yet (started since): the same.
        assert_eq!(starting_point(None, Some(5), None), (before_5, None));
        // A run appended batch 5 and handed it to the shard before the listener got there: batch
        // 5 on is read from D1 (no cursor to check), later hand-overs wait in its backlog.
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
