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
}
