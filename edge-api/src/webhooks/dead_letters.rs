//! The webhooks' dead letters in D1 (`webhook_dead_letters`, migration 0008): what a receiver's
//! sender gave up on, recorded by the dead-letter queue's consumer where an operator reads it,
//! and counted per receiver for `/health` (`webhook_dead_letter_counts`, migration 0009, kept by
//! triggers).

use kya_core::feed::Event;
use serde::Deserialize;

use crate::Result;
use crate::d1::{Param, Store};

impl Store {
    /// Records `events` as dead for `receiver`, after `attempts`, with the last error; a copy
    /// of a row already recorded changes nothing.
    pub(crate) async fn record_dead_letters(
        &self,
        receiver: &str,
        events: &[Event],
        attempts: u32,
        last_error: &str,
        now: u64,
    ) -> Result<()> {
        if events.is_empty() {
            return Ok(());
        }
        // One statement for the handoff's events, whatever their number (a handoff holds at
        // most 100 KB of them): the events' JSON array unrolled by `json_each`.
        let array = format!("[{}]", events.iter().map(Event::to_json).collect::<Vec<_>>().join(","));
        let statement = self.statement(
            "INSERT INTO webhook_dead_letters (receiver, event_id, agent_id, attempts, last_error, event, dead_at) \
             SELECT ?1, json_extract(value, '$.id'), json_extract(value, '$.agentId'), ?2, ?3, value, ?4 \
             FROM json_each(?5) WHERE true ON CONFLICT (receiver, event_id) DO NOTHING",
            vec![
                receiver.into(),
                Param::Number(u64::from(attempts)),
                last_error.into(),
                Param::Number(now),
                array.into(),
            ],
        )?;
        self.commit(vec![statement]).await
    }

    /// The dead letters kept per receiver that has any, by name: one row read per receiver,
    /// however many dead letters are kept.
    pub(crate) async fn dead_letter_counts(&self) -> Result<Vec<DeadLetterCount>> {
        let sql = "SELECT receiver, events, newest_at FROM webhook_dead_letter_counts ORDER BY receiver";
        self.all(self.statement(sql, Vec::new())?).await
    }
}

/// One receiver's dead letters, as `/health` reports them.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub(crate) struct DeadLetterCount {
    /// The receiver's name in `WEBHOOKS`.
    pub(crate) receiver: String,
    /// Its dead letters kept in `webhook_dead_letters`.
    pub(crate) events: u64,
    /// When the newest was recorded (Unix seconds).
    pub(crate) newest_at: u64,
}
