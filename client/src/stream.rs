//! The change feed's stream (`GET /api/v1/changes/stream`, docs/change-feed.md) as a client
//! reads it: its Server-Sent Events parsed as they arrive (the `eventsource-stream` crate, fed
//! by [`server_sent_events`]), each message's data read back into `kya-core`'s [`Event`].
//! Comments (the heartbeat) are dropped. A message with an id and no data, which that crate
//! drops as an `EventSource` dispatches nothing for it, is the server's end of a connection
//! (`kya_core::feed::sse::end`): its id is where to resume ([`ChangeStream::resume_after`]).

use std::{
    pin::Pin,
    sync::{Arc, Mutex},
};

use eventsource_stream::{EventStreamError, Eventsource};
use futures::{Stream, StreamExt};
use kya_core::feed::{Cursor, Event};

use crate::{Error, Result};

type Messages = Pin<Box<dyn Stream<Item = Result<eventsource_stream::Event, String>> + Send>>;

/// One open stream of the feed ([`crate::ApiClient::change_stream`]).
pub struct ChangeStream {
    messages: Messages,
    service: &'static str,
    /// The ids of the messages without data, as the bytes pass to the parser.
    ends: Arc<Mutex<DatalessIds>>,
}

impl std::fmt::Debug for ChangeStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChangeStream").field("service", &self.service).finish_non_exhaustive()
    }
}

impl ChangeStream {
    pub(crate) fn new(response: reqwest::Response, service: &'static str) -> Self {
        let ends = Arc::new(Mutex::new(DatalessIds::default()));
        let watched = Arc::clone(&ends);
        let bytes = futures::stream::unfold(response, |mut response| async move {
            match response.chunk().await {
                Ok(Some(chunk)) => Some((Ok(chunk), response)),
                Ok(None) => None,
                Err(error) => Some((Err(error), response)),
            }
        })
        .inspect(move |chunk| {
            if let Ok(chunk) = chunk {
                watched.lock().unwrap_or_else(std::sync::PoisonError::into_inner).read(chunk);
            }
        });
        let messages = server_sent_events(bytes).map(|message| message.map_err(|error| error.to_string()));
        Self { messages: Box::pin(messages), service, ends }
    }

    /// Where to resume once [`ChangeStream::next`] has returned `None`, when the server ended the
    /// stream on purpose (a connection's byte budget or lifetime): the last event it offered this
    /// stream, sent or passed over by the filters. `None` when the stream broke or ended without
    /// naming one (a shard restarted, the network dropped it): resume after the last event
    /// received then.
    pub fn resume_after(&self) -> Option<Cursor> {
        let ends = self.ends.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        ends.named.as_deref().and_then(|id| Cursor::parse(id, "Last-Event-ID").ok())
    }

    /// The next event; `None` when the stream ended or broke (a shard restarted, the network
    /// dropped it, the server ended the connection): reconnect after
    /// [`ChangeStream::resume_after`], else after the last event received, as
    /// [`crate::ChangeFollower`] does.
    pub async fn next(&mut self) -> Result<Option<Event>> {
        match self.messages.next().await {
            Some(Ok(message)) => {
                serde_json::from_str(&message.data).map(Some).map_err(|error| Error::Unexpected {
                    service: self.service,
                    reason: format!("an event that does not decode: {error}"),
                })
            }
            Some(Err(_)) | None => Ok(None),
        }
    }
}

/// Longest line [`DatalessIds`] keeps: an `id` field of the feed is at most 41 bytes; of a longer
/// line only its field's name matters.
const KEPT_LINE_BYTES: usize = 64;

/// The ids of a Server-Sent Events stream's messages that carry no data, read from its bytes as
/// the HTML standard splits them into lines (CRLF, LF or CR) and messages (a blank line). Only a
/// whole message counts: an id whose message the connection cut is no place to resume from.
#[derive(Debug, Default)]
struct DatalessIds {
    /// The line being read, up to [`KEPT_LINE_BYTES`].
    line: Vec<u8>,
    /// The line being read is longer than what is kept of it.
    long: bool,
    /// The last byte was a CR, so a LF next is the same line end.
    after_cr: bool,
    /// The `id` field of the message being read.
    id: Option<String>,
    /// Whether the message being read has a `data` field.
    data: bool,
    /// The id of the last whole message without data.
    named: Option<String>,
}

impl DatalessIds {
    fn read(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            let after_cr = std::mem::replace(&mut self.after_cr, byte == b'\r');
            match byte {
                b'\n' if after_cr => {}
                b'\r' | b'\n' => self.line_ends(),
                _ if self.line.len() < KEPT_LINE_BYTES => self.line.push(byte),
                _ => self.long = true,
            }
        }
    }

    fn line_ends(&mut self) {
        let line = std::mem::take(&mut self.line);
        let long = std::mem::take(&mut self.long);
        if line.is_empty() {
            if let (false, Some(id)) = (self.data, self.id.take()) {
                self.named = Some(id);
            }
            (self.id, self.data) = (None, false);
            return;
        }
        let (field, value) = match line.iter().position(|&byte| byte == b':') {
            Some(colon) => (&line[..colon], &line[colon + 1..]),
            None => (&line[..], &[][..]),
        };
        let value = value.strip_prefix(b" ").unwrap_or(value);
        match field {
            b"data" => self.data = true,
            b"id" if !long => self.id = Some(String::from_utf8_lossy(value).into_owned()),
            _ => {}
        }
    }
}

/// Most bytes of a response body [`server_sent_events`] hands the parser at once, give or take
/// the rest of a line.
const PIECE_BYTES: usize = 4 * 1024;

/// The Server-Sent Events of a response body's `chunks`, parsed as they arrive by
/// `eventsource-stream`, which is fed each chunk in pieces of about [`PIECE_BYTES`], cut after a
/// line's end.
///
/// Why in pieces: the parser keeps the text it has not parsed yet in one `String` and, for each
/// line it reads, moves the rest of that string into a new one, so a chunk handed over whole
/// costs a copy of the chunk for each of its lines. A reader catching up on a backlog gets
/// chunks as large as hyper's read buffer (it grows to about 400 KiB, thousands of lines), and
/// the copies grew with the square of that: most of the CPU of the tests' stream listeners
/// (`perf`: `memmove`, under the parser). Cut so, each copy is at most a piece and a line.
/// Cuts fall after a `\n`, so a `\r\n` and a character's UTF-8 bytes are never parted.
pub fn server_sent_events<S, B, E>(
    chunks: S,
) -> impl Stream<Item = std::result::Result<eventsource_stream::Event, EventStreamError<E>>>
where
    S: Stream<Item = std::result::Result<B, E>>,
    B: AsRef<[u8]>,
{
    chunks
        .flat_map(|chunk| {
            let pieces = match chunk {
                Ok(chunk) => pieces(chunk.as_ref()).map(|piece| Ok(piece.to_vec())).collect(),
                Err(error) => vec![Err(error)],
            };
            futures::stream::iter(pieces)
        })
        .eventsource()
}

/// `chunk` cut after the first `\n` at or past each [`PIECE_BYTES`]; a rest without one stays whole.
fn pieces(chunk: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut rest = chunk;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let end = match rest.get(PIECE_BYTES..).and_then(|tail| tail.iter().position(|&byte| byte == b'\n')) {
            Some(newline) => PIECE_BYTES + newline + 1,
            None => rest.len(),
        };
        let (piece, after) = rest.split_at(end);
        rest = after;
        Some(piece)
    })
}

#[cfg(test)]
mod tests {
    use futures::StreamExt;

    use super::*;

    #[test]
    fn pieces_end_after_a_newline_and_keep_every_byte() {
        let line = "data: ".to_owned() + &"é".repeat(700) + "\r\n";
        let chunk = line.repeat(20) + "data: unfinished";
        let cut: Vec<&[u8]> = pieces(chunk.as_bytes()).collect();
        assert!(cut.len() > 5, "{} pieces", cut.len());
        assert_eq!(cut.concat(), chunk.as_bytes());
        for piece in &cut[..cut.len() - 1] {
            assert!(piece.ends_with(b"\r\n"), "a piece cut inside a line");
            assert!(piece.len() >= PIECE_BYTES && piece.len() < PIECE_BYTES + line.len());
        }
        assert!(cut.last().unwrap().ends_with(b"\r\ndata: unfinished"), "the rest stays whole");
        assert_eq!(pieces(b"short").collect::<Vec<_>>(), [b"short"]);
        assert_eq!(pieces(b"").count(), 0);
    }

    #[test]
    fn the_id_of_a_whole_message_without_data_is_where_the_server_says_to_resume() {
        let read = |chunks: &[&str]| {
            let mut ids = DatalessIds::default();
            for chunk in chunks {
                ids.read(chunk.as_bytes());
            }
            ids.named
        };
        let long = "x".repeat(500);
        let end = format!("id: 3-0\nevent: a\ndata: {long}\n\n: end budget last-event-id=3-4\nid: 3-4\n\n");
        assert_eq!(read(&[&end]).as_deref(), Some("3-4"));
        // Cut anywhere, with CRLF and CR line ends: the same.
        let crlf = end.replace('\n', "\r\n");
        for at in 1..crlf.len() {
            assert_eq!(read(&[&crlf[..at], &crlf[at..]]).as_deref(), Some("3-4"), "cut at {at}");
        }
        assert_eq!(read(&[&end.replace('\n', "\r")]).as_deref(), Some("3-4"));
        // An event's own id is not one; nor an id whose message was cut before its blank line.
        assert_eq!(read(&["id: 3-0\ndata: {}\n\n"]), None);
        assert_eq!(read(&["id: 3-0\ndata: {}\n\nid: 3-4\n"]), None);
        // A data line longer than what is kept still counts as data.
        assert_eq!(read(&[&format!("id: 5-0\ndata: {long}\n\n")]), None);
    }

    #[tokio::test]
    async fn a_large_chunk_gives_every_event_in_order() {
        let chunk: String =
            (0..3_000).map(|n| format!("id: {n}\nevent: e\ndata: {}\n\n", "x".repeat(n % 90))).collect();
        let tail = "id: 3000\ndata: last\n\n";
        let chunks =
            futures::stream::iter([Ok::<_, String>(chunk.into_bytes()), Ok(tail.as_bytes().to_vec())]);
        let events: Vec<_> = server_sent_events(chunks).map(|event| event.expect("an event")).collect().await;
        assert_eq!(events.len(), 3_001);
        for (n, event) in events.iter().take(3_000).enumerate() {
            assert_eq!((event.id.as_str(), event.event.as_str()), (n.to_string().as_str(), "e"));
            assert_eq!(event.data, "x".repeat(n % 90));
        }
        assert_eq!((events[3_000].id.as_str(), events[3_000].data.as_str()), ("3000", "last"));
    }
}
