//! A listener of the change feed's stream (`GET /api/v1/changes/stream`) as a client sees it:
//! the Server-Sent Events parsed as they arrive by the `eventsource-stream` crate, and every byte
//! received kept, for what an event parser drops (the heartbeat's comments).

use std::{
    pin::Pin,
    sync::{Arc, Mutex},
    time::Duration,
};

use eventsource_stream::Eventsource;
use futures::{Stream, StreamExt};

use crate::edge_fixture::fresh_ip;

/// One message of the stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub id: String,
    pub event: String,
    pub data: String,
}

type Events = Pin<Box<dyn Stream<Item = Result<Message, String>> + Send>>;

/// An open stream.
pub struct SseListener {
    events: Events,
    received: Arc<Mutex<Vec<u8>>>,
    /// The response's headers.
    pub headers: reqwest::header::HeaderMap,
}

/// A refused stream: its status and body.
#[derive(Debug, Clone)]
pub struct Refused {
    pub status: u16,
    pub body: String,
    pub headers: reqwest::header::HeaderMap,
}

impl SseListener {
    /// Opens `base` + `path_and_query` from a fresh client IP, with `Last-Event-ID` when given.
    pub async fn open(
        base: &str,
        path_and_query: &str,
        last_event_id: Option<&str>,
    ) -> Result<Self, Refused> {
        Self::open_as(&fresh_ip(), base, path_and_query, last_event_id).await
    }

    /// [`SseListener::open`] from client IP `ip` (the stream's caps count a client's streams).
    pub async fn open_as(
        ip: &str,
        base: &str,
        path_and_query: &str,
        last_event_id: Option<&str>,
    ) -> Result<Self, Refused> {
        let mut request = crate::http_client()
            .get(format!("{base}{path_and_query}"))
            .header("cf-connecting-ip", ip)
            .header("accept", "text/event-stream");
        if let Some(last) = last_event_id {
            request = request.header("last-event-id", last);
        }
        let response = request.send().await.unwrap_or_else(|error| panic!("{path_and_query}: {error}"));
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        if status != 200 {
            let body = response.text().await.unwrap_or_default();
            return Err(Refused { status, body, headers });
        }
        let received = Arc::new(Mutex::new(Vec::new()));
        let kept = Arc::clone(&received);
        let bytes = futures::stream::unfold(response, |mut response| async move {
            match response.chunk().await {
                Ok(Some(chunk)) => Some((Ok(chunk), response)),
                Ok(None) => None,
                Err(error) => Some((Err(error), response)),
            }
        })
        .inspect(move |chunk| {
            if let Ok(chunk) = chunk {
                kept.lock().unwrap().extend_from_slice(chunk);
            }
        });
        let events = bytes.eventsource().map(|event| {
            event
                .map(|event| Message { id: event.id, event: event.event, data: event.data })
                .map_err(|error| error.to_string())
        });
        Ok(Self { events: Box::pin(events), received, headers })
    }

    /// The next message within `within`; `None` when none came (or the stream ended).
    pub async fn next(&mut self, within: Duration) -> Option<Message> {
        match tokio::time::timeout(within, self.events.next()).await {
            Ok(Some(Ok(message))) => Some(message),
            Ok(Some(Err(error))) => panic!("the stream broke: {error}"),
            Ok(None) | Err(_) => None,
        }
    }

    /// The next `count` messages, each within `within` of the one before (fewer if they stop).
    pub async fn take(&mut self, count: usize, within: Duration) -> Vec<Message> {
        let mut taken = Vec::with_capacity(count);
        while taken.len() < count {
            match self.next(within).await {
                Some(message) => taken.push(message),
                None => break,
            }
        }
        taken
    }

    /// Everything received so far, as text.
    pub fn received(&self) -> String {
        String::from_utf8_lossy(&self.received.lock().unwrap()).into_owned()
    }

    /// Waits up to `within` for `text` to have arrived `times` times; whether it did.
    pub async fn wait_for(&mut self, text: &str, times: usize, within: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if self.received().matches(text).count() >= times {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            // Reading drives the connection; a message arriving meanwhile is a test's surprise.
            if let Some(message) = self.next(Duration::from_millis(100)).await {
                panic!("waiting for {text:?}, an event came: {message:?}");
            }
        }
    }
}
