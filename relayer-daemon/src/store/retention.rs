//! Retention: what the store forgets, so that its size is bounded by the traffic of the retention
//! window rather than growing with every relay ever made.
//!
//! A finished relay's call data (up to the gas cap's worth, tens of KB) is only needed to send a
//! stuck relay again, so it goes first; the rest of the record (its lookups, a retry answered
//! with it) goes later. Open relays are never touched, and a relay is kept at least as long as
//! the budget window whose shares it counts towards. A relay's webhook events go with it: by then
//! they are delivered, or the receiver has refused them for the whole retention window.

use super::{
    RATE_WINDOW_SECS, Store,
    schema::OPEN,
    sql::{Lock, Sql, args},
};
use crate::error::Result;

/// What one [`Store::prune`] removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pruned {
    /// Finished relays whose call data was dropped.
    pub calldata: usize,
    /// Finished relays deleted, with their transactions.
    pub relays: usize,
    /// Webhook events deleted with their relays (delivered, or given up undelivered).
    pub events: usize,
}

impl Store {
    /// Drops the call data of relays finished at or before `calldata_before`, deletes relays
    /// finished at or before `relays_before`, and rate events older than the rate window.
    pub fn prune(&self, calldata_before: u64, relays_before: u64, now: u64) -> Result<Pruned> {
        self.with(|connection| {
            // Finished relays and expired rate events: rows no other writer changes any more.
            let mut tx = connection.transaction(&[Lock::Rows])?;
            let finished = format!("settled_at IS NOT NULL AND status NOT IN {OPEN}");
            let calldata = tx.execute(
                &format!("UPDATE relays SET input = NULL WHERE {finished} AND settled_at <= ?1 AND input IS NOT NULL"),
                args![seconds(calldata_before)],
            )?;
            let events = tx.execute(
                &format!(
                    "DELETE FROM webhook_events WHERE relay IN (SELECT id FROM relays WHERE {finished} AND settled_at <= ?1)"
                ),
                args![seconds(relays_before)],
            )?;
            tx.execute(
                &format!(
                    "DELETE FROM relay_txs WHERE relay IN (SELECT id FROM relays WHERE {finished} AND settled_at <= ?1)"
                ),
                args![seconds(relays_before)],
            )?;
            let relays = tx.execute(
                &format!("DELETE FROM relays WHERE {finished} AND settled_at <= ?1"),
                args![seconds(relays_before)],
            )?;
            // Hand-offs whose relay closed (the holder deletes its own once the node has the
            // transaction). Not those of open relays: one recorded as sent may not be with the
            // node yet (recorded before its submission, or its answer lost), and its standby,
            // reading the hand-off, must not answer it as sent.
            tx.execute(
                &format!("DELETE FROM handoffs WHERE relay NOT IN (SELECT id FROM relays WHERE status IN {OPEN})"),
                &[],
            )?;
            tx.execute(
                "DELETE FROM rate_events WHERE at <= ?1",
                args![now.saturating_sub(RATE_WINDOW_SECS) as i64],
            )?;
            tx.commit()?;
            Ok(Pruned { calldata, relays, events })
        })
    }
}

/// Unix seconds as SQLite stores them; far-future times clamp rather than wrap negative.
fn seconds(time: u64) -> i64 {
    i64::try_from(time).unwrap_or(i64::MAX)
}
