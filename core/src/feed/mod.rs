//! The change feed (`docs/change-feed.md`), with no I/O: its events and their JSON, the changes
//! of an agent derived from the registry's logs and from time ([`Walk`]), cursors, the filters
//! and pages of `GET /changes`, the confirmation and retraction of provisional entries, and the
//! Server-Sent Events framing of `GET /changes/stream`. The Worker's index writes the feed; the
//! client reads it.

mod cursor;
mod derive;
mod event;
pub mod finality;
pub mod put_off;
mod query;
pub mod reconcile;
pub mod run;
pub mod sse;
#[cfg(any(test, feature = "test-util"))]
pub mod testing;

pub use cursor::Cursor;
pub use derive::{AgentLog, Known, LogKind, Walk};
pub use event::{Change, Detail, Event, EventBlock, EventLog, EventType, Finality, Standing};
pub use query::{
    CHANGES_DEFAULT_LIMIT, CHANGES_MAX_LIMIT, ChangesAnswer, ChangesQuery, MAX_FILTER_VALUES, Page,
    Unservable, check_cursor, page,
};
