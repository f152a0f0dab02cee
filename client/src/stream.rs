//! The change feed's stream (`GET /api/v1/changes/stream`, docs/change-feed.md) as a client
//! reads it: its Server-Sent Events parsed as they arrive (the `eventsource-stream` crate), each
//! message's data read back into `kya-core`'s [`Event`]. Comments (the heartbeat) are dropped.

use std::pin::Pin;

use eventsource_stream::Eventsource;
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
        let messages = bytes.eventsource().map(|message| message.map_err(|error| error.to_string()));
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
