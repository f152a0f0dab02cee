//! Server-Sent Events framing of the feed (`GET /changes/stream`, WHATWG HTML §9.2).

use crate::feed::{Cursor, Event};

/// How long a browser's `EventSource` waits before reconnecting, sent once at the start.
pub const RECONNECT_MS: u64 = 3_000;

/// A comment line: keeps proxies from closing a quiet stream, and carries nothing a client sees.
pub const HEARTBEAT: &str = ": keep-alive\n\n";

/// The stream's first frame: the reconnection delay, and where it starts (a comment, so an
/// `EventSource`'s `Last-Event-ID` stays the last event's).
/// `after`: the client's cursor; else `start`, the first batch a stream without a cursor sends.
pub fn opening(after: Option<Cursor>, start: Option<u64>) -> String {
    match (after, start) {
        (Some(after), _) => format!("retry: {RECONNECT_MS}\n: after {after}\n\n"),
        (None, Some(start)) => format!("retry: {RECONNECT_MS}\n: from batch {start}\n\n"),
        (None, None) => format!("retry: {RECONNECT_MS}\n\n"),
    }
}

/// Why a stream ended on purpose, named in its last comment ([`end`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndReason {
    /// The connection was sent its byte budget (`FEED_STREAM_CONNECTION_BYTES`).
    Budget,
    /// The connection reached its lifetime (`FEED_STREAM_CONNECTION_SECS`).
    Lifetime,
    /// The listener left more than `FEED_STREAM_BACKLOG_BYTES` unread in its shard's queue.
    Unread,
    /// The listener is further behind than one connection's resume reads from storage.
    ResumePages,
    /// The shard missed batches a run handed out: the listener resumes from storage.
    MissedBatches,
    /// Storage failed while the stream resumed from it.
    Unavailable,
}

impl EndReason {
    /// The reason's word in the last comment.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Budget => "budget",
            Self::Lifetime => "lifetime",
            Self::Unread => "unread",
            Self::ResumePages => "resume-pages",
            Self::MissedBatches => "missed-batches",
            Self::Unavailable => "unavailable",
        }
    }
}

/// The last frame of a stream the server ends on purpose: a comment naming the reason and the
/// id to resume after (`: end budget last-event-id=12-3`), then that id alone as a message with
/// no data. A message without data dispatches no event, but it sets an `EventSource`'s last event
/// id, which it sends back as `Last-Event-ID` when it reconnects: so even a client that parses no
/// comment resumes after `last`, the last event offered to the listener (sent, or passed over by
/// its filters), and not only after the last event it was sent. `last` is `None` when the listener
/// has no position a cursor can name (it started on an empty feed and was offered nothing).
pub fn end(reason: EndReason, last: Option<Cursor>) -> String {
    match last {
        Some(last) => format!(": end {} last-event-id={last}\nid: {last}\n\n", reason.as_str()),
        None => format!(": end {}\n\n", reason.as_str()),
    }
}

/// One entry as an SSE message: `id` is its cursor (an `EventSource` sends it back as
/// `Last-Event-ID` on reconnecting), `event` its type, `data` its JSON on one line.
pub fn message(event: &Event) -> String {
    // serde_json writes no raw newline (those inside strings are escaped), so one `data:` line
    // carries the whole entry.
    format!("id: {}\nevent: {}\ndata: {}\n\n", event.id, event.change.kind.as_str(), event.to_json())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        AgentStatus,
        feed::{Change, Detail, EventBlock, EventType, Standing},
    };
    use alloy_primitives::{Address, B256};

    #[test]
    fn a_message_is_one_id_one_event_and_one_data_line() {
        let event = Event::provisional(
            Cursor { batch: 9, index: 4 },
            Change {
                kind: EventType::ComplianceChanged,
                agent_id: 3,
                wallet: Address::ZERO,
                block: EventBlock { number: 5, hash: B256::ZERO, time: 0 },
                log: None,
                standing: Standing {
                    is_registered: true,
                    is_compliant: false,
                    status: Some(AgentStatus::Revoked),
                },
                detail: Detail::Compliance { from: true, to: false },
            },
        );
        let text = message(&event);
        let lines: Vec<&str> = text.split('\n').collect();
        assert_eq!(&lines[..2], ["id: 9-4", "event: agent.compliance_changed"]);
        assert!(lines[2].starts_with("data: {"), "{text}");
        assert_eq!(&lines[3..], ["", ""], "one blank line ends the message");
        let data: Event = serde_json::from_str(lines[2].strip_prefix("data: ").unwrap()).unwrap();
        assert_eq!(data, event);
        assert_eq!(opening(Some(Cursor { batch: 9, index: 4 }), None), "retry: 3000\n: after 9-4\n\n");
        assert_eq!(opening(None, Some(12)), "retry: 3000\n: from batch 12\n\n");
        assert!(HEARTBEAT.starts_with(':') && HEARTBEAT.ends_with("\n\n"));
    }

    #[test]
    fn an_end_names_its_reason_and_the_id_to_resume_after_as_a_comment_and_a_data_less_message() {
        let at = Cursor { batch: 12, index: 3 };
        assert_eq!(end(EndReason::Budget, Some(at)), ": end budget last-event-id=12-3\nid: 12-3\n\n");
        assert_eq!(end(EndReason::Lifetime, None), ": end lifetime\n\n");
        assert_eq!(
            end(EndReason::ResumePages, Some(at)).lines().next(),
            Some(": end resume-pages last-event-id=12-3")
        );
    }
}
