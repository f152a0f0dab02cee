//! The change feed's stream (`GET /api/v1/changes/stream`, docs/change-feed.md) as a client
//! reads it: its Server-Sent Events parsed as they arrive (the `eventsource-stream` crate, fed
//! by [`server_sent_events`]), each message's data read back into `kya-core`'s [`Event`].
//! Comments (the heartbeat) are dropped.

use std::pin::Pin;

use eventsource_stream::{EventStreamError, Eventsource};
use futures::{Stream, StreamExt};
use kya_core::feed::Event;

use crate::{Error, Result};

type Messages = Pin<Box<dyn Stream<Item = Result<eventsource_stream::Event, String>> + Send>>;

/// One open stream of the feed ([`crate::ApiClient::change_stream`]).
pub struct ChangeStream {
    messages: Messages,
    service: &'static str,
}

impl std::fmt::Debug for ChangeStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChangeStream").field("service", &self.service).finish_non_exhaustive()
    }
}

impl ChangeStream {
    pub(crate) fn new(response: reqwest::Response, service: &'static str) -> Self {
        let bytes = futures::stream::unfold(response, |mut response| async move {
            match response.chunk().await {
                Ok(Some(chunk)) => Some((Ok(chunk), response)),
                Ok(None) => None,
                Err(error) => Some((Err(error), response)),
            }
        });
        let messages = server_sent_events(bytes).map(|message| message.map_err(|error| error.to_string()));
        Self { messages: Box::pin(messages), service }
    }

    /// The next event; `None` when the stream ended or broke (a shard restarted, the network
    /// dropped it): reconnect after the last event received, as [`crate::ChangeFollower`] does.
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
