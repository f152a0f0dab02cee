//! The webhook outbox: every change of a relay that clients see (its status, or its current
//! transaction) is written here as an event, in the very store transaction that makes the
//! change, so an event exists exactly when the change does, a crash loses neither. The delivery
//! task ([`crate::relayer::followers::webhooks`]) claims events with a lease and marks them delivered or due again.
//!
//! Ordering is per relay: only a relay's oldest undelivered event (its "head") can be claimed,
//! and a claim leases it to one claimer until `lease_until`, so a relay's events go out one at a
//! time, in order, whichever claimer holds them. A claimer that dies leaves a lease that simply
//! expires. The same statements (a head query, a conditional update of the lease, fenced by the
//! owner) work unchanged for several daemons on one database.

use kya_core::api::{relayer_view::RelayEvent, time::iso8601};

use super::{
    Store, new_relay_id,
    records::read_records,
    sql::{Lock, Sql, args},
};
use crate::error::{Error, Result};

/// A relay's status and current hash before a change: what tells whether clients see it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(super) struct Seen {
    status: Option<String>,
    tx_hash: Option<String>,
}

/// What a client sees of the relay `id` now (nothing, for a relay not yet recorded).
pub(super) fn seen(sql: &mut impl Sql, id: i64) -> Result<Seen> {
    match sql.query_opt("SELECT status, tx_hash FROM relays WHERE id = ?1", args![id])? {
        Some(row) => Ok(Seen { status: Some(row.get(0)?), tx_hash: row.get(1)? }),
        None => Ok(Seen::default()),
    }
}

/// Writes an event for the relay `id` if what clients see of it changed since `before`, in the
/// caller's transaction. Returns whether it wrote one.
pub(super) fn record_change(sql: &mut impl Sql, id: i64, before: &Seen, now: u64) -> Result<bool> {
    if seen(sql, id)? == *before {
        return Ok(false);
    }
    let Some(record) = read_records(sql, "id = ?1", args![id])?.pop() else {
        return Ok(false);
    };
    let view = record.view();
    // The relay's lock (every change of a relay holds it) keeps two writers from taking the
    // same next sequence.
    let sequence: i64 = sql
        .query_one("SELECT COALESCE(MAX(sequence), 0) + 1 FROM webhook_events WHERE relay = ?1", args![id])?
        .get(0)?;
    let event = RelayEvent {
        id: format!("evt_{}", new_relay_id()?),
        event_type: format!("relay.{}", view.status.as_str()),
        timestamp: iso8601(now),
        sequence: sequence as u64,
        data: view,
    };
    let body = serde_json::to_string(&event)
        .map_err(|error| Error::Internal(format!("writing a webhook event: {error}")))?;
    sql.execute(
        "INSERT INTO webhook_events (event_id, relay, relay_id, sequence, type, body, created_at,
             next_attempt_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 0)",
        args![&event.id, id, &record.relay_id, sequence, &event.event_type, body, now as i64],
    )?;
    Ok(true)
}

/// An event claimed for delivery: leased to its claimer until it is delivered, failed or the
/// lease runs out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DueEvent {
    /// Its row (the outbox's order of writing).
    pub seq: i64,
    /// Its id: the body's `id` and the `webhook-id` header.
    pub event_id: String,
    /// The relay it is about.
    pub relay_id: String,
    /// `relay.<status>`.
    pub event_type: String,
    /// The body to POST, exactly as written when the change happened.
    pub body: String,
    /// Attempts so far, this one included.
    pub attempts: u32,
}

/// An event as the outbox keeps it (the store's own tests, and the end-to-end tests).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxEvent {
    /// Its id.
    pub event_id: String,
    /// The relay it is about.
    pub relay_id: String,
    /// Its place among the relay's events, from 1.
    pub sequence: u64,
    /// `relay.<status>`.
    pub event_type: String,
    /// The body.
    pub body: String,
    /// Attempts made.
    pub attempts: u32,
    /// When it was delivered (Unix milliseconds).
    pub delivered_at: Option<u64>,
    /// The last failed attempt's error.
    pub last_error: Option<String>,
}

impl Store {
    /// Leases up to `limit` events due at `now_ms` to `owner` for `lease_ms`: of each relay with
    /// undelivered events only the oldest, and only if it is not leased already. Each claim
    /// counts as an attempt.
    pub fn claim_events(
        &self,
        owner: &str,
        limit: usize,
        now_ms: u64,
        lease_ms: u64,
    ) -> Result<Vec<DueEvent>> {
        self.with(|connection| {
            // No lock: each claim is a conditional update that only a free lease passes, so of
            // two claimers (two daemons) of one event the second changes nothing and leaves it.
            // Several daemons would add `FOR UPDATE SKIP LOCKED` to the head query, to pass over
            // heads another is claiming rather than wait for it.
            let mut tx = connection.transaction(&[Lock::Rows])?;
            let candidates = tx.query(
                "SELECT seq, event_id, relay_id, type, body, attempts FROM webhook_events head
                 WHERE delivered_at IS NULL AND next_attempt_at <= ?1
                     AND (lease_until IS NULL OR lease_until <= ?1)
                     AND sequence = (SELECT MIN(sequence) FROM webhook_events earlier
                         WHERE earlier.relay = head.relay AND earlier.delivered_at IS NULL)
                 ORDER BY next_attempt_at, seq LIMIT ?2",
                args![ms(now_ms), limit as i64],
            )?;
            let mut due = Vec::with_capacity(candidates.len());
            for row in candidates {
                let event = DueEvent {
                    seq: row.get(0)?,
                    event_id: row.get(1)?,
                    relay_id: row.get(2)?,
                    event_type: row.get(3)?,
                    body: row.get(4)?,
                    attempts: row.get::<u32>(5)? + 1,
                };
                let claimed = tx.execute(
                    "UPDATE webhook_events SET lease_owner = ?2, lease_until = ?3, attempts = attempts + 1
                     WHERE seq = ?1 AND delivered_at IS NULL AND (lease_until IS NULL OR lease_until <= ?4)",
                    args![event.seq, owner, ms(now_ms.saturating_add(lease_ms)), ms(now_ms)],
                )?;
                if claimed == 1 {
                    due.push(event);
                }
            }
            tx.commit()?;
            Ok(due)
        })
    }

    /// Marks the event `seq` delivered (a 2xx came back): the relay's next event is free to go.
    /// Delivered is delivered, whoever holds the lease by now.
    pub fn event_delivered(&self, seq: i64, now_ms: u64) -> Result<()> {
        self.with(|connection| {
            connection.execute(
                "UPDATE webhook_events SET delivered_at = ?2, lease_owner = NULL, lease_until = NULL,
                     last_error = NULL
                 WHERE seq = ?1 AND delivered_at IS NULL",
                args![seq, ms(now_ms)],
            )?;
            Ok(())
        })
    }

    /// Records a failed attempt of `owner` at the event `seq`: due again at `retry_at_ms`. A
    /// claimer whose lease was taken over changes nothing.
    pub fn event_failed(&self, seq: i64, owner: &str, retry_at_ms: u64, error: &str) -> Result<()> {
        self.with(|connection| {
            connection.execute(
                "UPDATE webhook_events SET lease_owner = NULL, lease_until = NULL, next_attempt_at = ?3,
                     last_error = ?4
                 WHERE seq = ?1 AND lease_owner = ?2 AND delivered_at IS NULL",
                args![seq, owner, ms(retry_at_ms), error],
            )?;
            Ok(())
        })
    }

    /// Gives back every lease `owner` holds (shutdown, its attempts cut short): their events are
    /// due again at once, for the next claimer.
    pub fn release_events(&self, owner: &str) -> Result<usize> {
        self.with(|connection| {
            connection.execute(
                "UPDATE webhook_events SET lease_owner = NULL, lease_until = NULL
                 WHERE lease_owner = ?1 AND delivered_at IS NULL",
                args![owner],
            )
        })
    }

    /// Events not yet delivered.
    pub fn events_pending(&self) -> Result<u64> {
        self.with(|connection| {
            let count: i64 = connection
                .query_one("SELECT COUNT(*) FROM webhook_events WHERE delivered_at IS NULL", &[])?
                .get(0)?;
            Ok(count as u64)
        })
    }

    /// Every event in the outbox, in the order written.
    pub fn events(&self) -> Result<Vec<OutboxEvent>> {
        self.with(|connection| {
            connection
                .query(
                    "SELECT event_id, relay_id, sequence, type, body, attempts, delivered_at, last_error
                     FROM webhook_events ORDER BY seq",
                    &[],
                )?
                .into_iter()
                .map(|row| {
                    Ok(OutboxEvent {
                        event_id: row.get(0)?,
                        relay_id: row.get(1)?,
                        sequence: row.get::<i64>(2)? as u64,
                        event_type: row.get(3)?,
                        body: row.get(4)?,
                        attempts: row.get(5)?,
                        delivered_at: row.get::<Option<i64>>(6)?.map(|at| at as u64),
                        last_error: row.get(7)?,
                    })
                })
                .collect()
        })
    }
}

/// Unix milliseconds as the store keeps them (64-bit integers); far-future times clamp rather than wrap negative.
fn ms(time: u64) -> i64 {
    i64::try_from(time).unwrap_or(i64::MAX)
}
