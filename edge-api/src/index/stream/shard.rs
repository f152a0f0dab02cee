//! A shard of the stream's listeners: a Durable Object (binding `FEED_STREAM`, one object per
//! shard name) that holds the open Server-Sent Events responses of the listeners the Worker sent
//! it, and writes each event of the batches the index's runs hand it ([`super::outlet`]) to
//! every listener whose filters select it.
//!
//! - **No D1 while listening.** Events arrive from the run (`POST /notify`); each is framed once
//!   for all of the shard's listeners. D1 is read only when a listener resumes from a cursor
//!   ([`super::resume`]): `/changes`' cursor check and its pages from the cursor's batch, the
//!   same queries, a page at a time as the response takes them.
//! - **Nothing missed, nothing repeated.** Each listener has a position, the last event it was
//!   offered (selected or not). It is sent only events past it, in feed order. A resuming
//!   listener reads D1 until it has caught up with what the shard was handed, and only then
//!   takes the hand-overs.
//! - **Bounded connections.** Each connection has a byte budget and a lifetime
//!   ([`super::listener`]); past either its stream ends with a last frame naming the reason and
//!   the id to resume after, and the client resumes with `Last-Event-ID`.
//! - **A heartbeat** comment every `FEED_STREAM_HEARTBEAT_SECS` while the shard has listeners,
//!   from a timer in the object (the object stays in memory while a response is open); it also
//!   finds the listeners that left, and ends the connections past their lifetime.
//! - **A restart** (a deployment, an eviction, a crash) ends every response the shard held. The
//!   listeners reconnect with `Last-Event-ID` (an `EventSource` does so by itself, after the
//!   `retry` the stream opened with), and resume from D1 on whichever shard the Worker picks.

use std::{
    cell::{Cell, RefCell},
    rc::Rc,
    time::Duration,
};

use futures::{StreamExt, channel::mpsc, stream};
use kya_core::feed::{ChangesQuery, Event, sse, sse::EndReason};
use serde::Deserialize;
use worker::{Delay, DurableObject, Env, Headers, Request, Response, State, durable_object};

use super::{
    listener::{Allowance, Frame, Listener, Listeners},
    resume::{self, PageTurn, starting_point},
};
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

/// One batch as the run hands it.
#[derive(Deserialize)]
pub(super) struct Handed {
    pub(super) events: Vec<Event>,
}

/// The Durable Object of one shard of listeners.
#[durable_object]
pub struct StreamShard {
    env: Env,
    listeners: Rc<RefCell<Listeners>>,
    /// The resumes' turn to read a page from D1.
    page_turn: PageTurn,
}

impl DurableObject for StreamShard {
    fn new(_state: State, env: Env) -> Self {
        Self { env, listeners: Rc::default(), page_turn: Rc::default() }
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
        let now = worker::Date::now().as_millis();
        let first_batch = batches.first().and_then(|batch| batch.events.first()).map(|event| event.id.batch);
        let framed: Vec<(Event, Frame)> = batches
            .into_iter()
            .flat_map(|batch| batch.events)
            .map(|event| {
                let frame = Rc::from(sse::message(&event).into_bytes());
                (event, frame)
            })
            .collect();
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
        listeners.open.retain(|_, listener| {
            if listener.resuming {
                // It reads D1 until it is past what this shard was handed, these batches too.
                return true;
            }
            if missed.is_some() {
                return listener.end(EndReason::MissedBatches);
            }
            listener.hand(&framed, limit, now)
        });
        if let Some((last, _)) = framed.last() {
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
        let opening = sse::opening(after, start);
        let allowance = Allowance {
            bytes: config.connection_bytes,
            ends_at_ms: worker::Date::now().as_millis() + config.connection_secs * 1_000,
        };
        let (id, resume) = {
            let mut listeners = self.listeners.borrow_mut();
            // The caps, counted on the listeners still there, before anything is opened.
            listeners.open.retain(|_, listener| !listener.is_closed());
            let of_client =
                listeners.open.values().filter(|listener| listener.client == client).count() as u64;
            if listeners.open.len() as u64 >= config.max_listeners || of_client >= config.max_per_client {
                return Err(Error::RateLimited { retry_after: CAPPED_RETRY_SECS });
            }
            let id = listeners.next;
            listeners.next += 1;
            let (position, resume) = starting_point(after, start, listeners.newest);
            let mut listener = Listener::new(query, position, client, sender, Rc::clone(&unread), allowance);
            listener.resuming = resume.is_some();
            listeners.open.insert(id, listener);
            (id, resume)
        };
        let resumed = match resume {
            Some(resume) => {
                // The cursor is checked as `/changes` checks it (410, 404, 503) before the stream
                // opens; its pages are read as the response takes them.
                let checked = match Store::open(&self.env).ok_or(Error::FeedUnavailable) {
                    Ok(store) => crate::index::changes::servable(&store, resume.checked).await.map(|_| store),
                    Err(error) => Err(error),
                };
                match checked {
                    Ok(store) => {
                        let turn = Rc::clone(&self.page_turn);
                        resume::pages(store, turn, Rc::clone(&self.listeners), id, resume.from).left_stream()
                    }
                    Err(error) => {
                        self.listeners.borrow_mut().open.remove(&id);
                        return Err(error);
                    }
                }
            }
            None => stream::empty().right_stream(),
        };
        self.beat();
        let first = stream::once(async move { Ok::<_, worker::Error>(opening.into_bytes()) });
        // A hand-over's frames leave the listener's unread bytes as the response takes them,
        // copied into one chunk there.
        let queued = receiver.map(move |frames: Vec<Frame>| {
            let chunk: Vec<u8> = frames.iter().flat_map(|frame| frame.iter().copied()).collect();
            unread.set(unread.get().saturating_sub(chunk.len() as u64));
            Ok(chunk)
        });
        stream_response(Response::from_stream(first.chain(resumed).chain(queued))?)
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
                let now = worker::Date::now().as_millis();
                let mut listeners = listeners.borrow_mut();
                listeners.open.retain(|_, listener| {
                    // A resuming listener's frames come from its pages: it only ends at its
                    // lifetime (the page it waits on, if any, then finds it gone).
                    if listener.resuming {
                        listener.live_on(now)
                    } else {
                        listener.beat(&heartbeat, config.backlog_bytes, now)
                    }
                });
                if listeners.open.is_empty() {
                    listeners.beating = false;
                    return;
                }
            }
        });
    }
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
