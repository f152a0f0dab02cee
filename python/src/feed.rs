//! The change feed in Python (docs/change-feed.md): an event read back as kya-core reads it, and
//! what a provider's gate takes from it (`compliance_lost_at`), so that the Python follower
//! revokes passes exactly as the Rust one does; and event ids ordered as the feed orders them
//! (`cursor_key`), so that a follower resumes without a gap or a repeat.

use kya_core::feed::{Cursor, Event};
use pyo3::prelude::*;

use crate::{convert::json_text, error::invalid};

/// How long a follower waits before it reconnects a stream that broke, until the stream names
/// its own `retry` (milliseconds).
pub(crate) const RECONNECT_MS: u64 = kya_core::feed::sse::RECONNECT_MS;

/// `(wallet, block)` when the feed's `event` (a `dict`, `str` or `bytes` of its JSON) shows its
/// agent not compliant (`Event::lost_compliance_at`, the Rust follower's rule): the wallet (EIP-55)
/// lost compliance at that block, and its passes of that block or before are revoked
/// (`Gate.compliance_lost`). `None` for an event that leaves the agent compliant. Raises
/// `InvalidInput` for what is not one of the feed's events.
#[pyfunction]
pub(crate) fn compliance_lost_at(event: &Bound<'_, PyAny>) -> PyResult<Option<(String, u64)>> {
    let text = json_text(event, "the event")?;
    let event: Event =
        serde_json::from_str(&text).map_err(|error| invalid(format!("not a change feed event: {error}")))?;
    Ok(event.lost_compliance_at().map(|(wallet, block)| (wallet.to_checksum(None), block)))
}

/// An event id (`<batch>-<index>`, as `after=` and `Last-Event-ID` take it) as a pair that
/// compares as the feed is ordered. Raises `InvalidInput` for a malformed id.
#[pyfunction]
pub(crate) fn cursor_key(id: &str) -> PyResult<(u64, u32)> {
    let cursor = Cursor::parse(id, "event id").map_err(invalid)?;
    Ok((cursor.batch, cursor.index))
}
