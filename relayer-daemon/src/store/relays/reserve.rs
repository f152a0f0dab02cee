//! A relay accepted: its worst-case cost reserved against the budget and its signer's and
//! client's shares, and its row written, in one transaction under the budget's lock.

use alloy::primitives::Address;

use super::lanes::{LANE_DEPTHS, lane_depths};
use crate::{
    error::{Error, Result},
    rules::lanes::least_busy,
    store::{
        Store,
        codec::Text,
        is_taken,
        limits::{
            BudgetLimits, BudgetState, ShareOf, WRITE_BUDGET, Window, budget_from_text, budget_values,
            current, roll, spent_by, write_budget,
        },
        new_relay_id, parse_wei,
        prepared::bind,
        records::{NewRelay, Refusal, Reservation},
        schema::LIVE,
        sql::{Connection, Lock, Sql, Transaction, Value, args},
    },
};

impl Store {
    /// Reserves the worst-case cost of a relay against the budget, its signer's and its
    /// client's shares and what pacing has opened of the budget so far, and records the relay,
    /// in one transaction: concurrent reservations cannot together exceed any of `limits`, and
    /// the same signed request cannot be accepted twice. A relay refused only by pacing still
    /// starts the window when none runs, so that the time its refusal names holds.
    ///
    /// On PostgreSQL the budget's lock, which serialises every reservation of every daemon on
    /// the database, is held for about one round trip: what the checks read goes in the same
    /// batch as the lock ([`Store::reservation_read`]), and the writes in the same batch as the
    /// commit ([`Store::reservation_written`]).
    pub fn reserve(
        &self,
        relay: &NewRelay,
        limits: &BudgetLimits,
        now: u64,
    ) -> Result<std::result::Result<Reservation, Refusal>> {
        self.with(|connection| {
            // The budget's lock: the budget, both shares and the request's uniqueness are read
            // and booked by one reservation at a time, across every daemon on the database.
            let (mut tx, read) = self.reservation_read(connection, relay, now)?;
            if read.taken {
                return Ok(Err(Refusal::Duplicate));
            }
            let state = read.state;
            let reserved_wei = u128::from(relay.gas_limit)
                .saturating_mul(relay.max_fee_wei)
                .saturating_add(relay.l1_fee_wei);
            let used_after = state.used_wei.saturating_add(reserved_wei);
            if used_after > limits.total_wei {
                tx.commit()?;
                return Ok(Err(Refusal::Budget));
            }
            if read.by_signer.saturating_add(reserved_wei) > limits.signer_wei {
                tx.commit()?;
                return Ok(Err(Refusal::SignerShare));
            }
            if read.by_client.saturating_add(reserved_wei) > limits.client_wei {
                tx.commit()?;
                return Ok(Err(Refusal::ClientShare));
            }
            let window_start = state.window_start.unwrap_or(now);
            let pacing = self.pacing(limits);
            if used_after > pacing.open_wei(limits.total_wei, Some(window_start), now) {
                let Some(opens_at) = pacing.next_slice_at(Some(window_start), now) else {
                    return Err(Error::Internal("the last slice opens the whole budget".into()));
                };
                if state.window_start.is_none() {
                    write_budget(&mut tx, &BudgetState { window_start: Some(window_start), ..state })?;
                }
                tx.commit()?;
                return Ok(Err(Refusal::Slice { opens_at }));
            }
            // Counted under the budget's lock, which every reservation takes: two reservations at
            // once cannot both see a lane as the idle one.
            let Some(lane) = least_busy(&relay.lanes, &read.depths) else {
                return Err(Error::Internal("a reservation without a lane to send it".into()));
            };
            let booked = BudgetState {
                used_wei: state.used_wei + reserved_wei,
                pending_wei: state.pending_wei + reserved_wei,
                window_start: Some(window_start),
            };
            let values = args![
                relay.signer.text(),
                relay.forwarder_nonce.text(),
                relay.digest.text(),
                relay.signature.text(),
                relay.deadline as i64,
                relay.input.text(),
                &relay.client_ip,
                relay.gas_limit as i64,
                relay.max_fee_wei.to_string(),
                relay.priority_fee_wei.to_string(),
                reserved_wei.to_string(),
                window_start as i64,
                now as i64,
                relay.l1_fee_wei.to_string(),
                new_relay_id()?,
                lane.text()
            ];
            let (id, relay_id) = self.reservation_written(tx, &booked, values, now)?;
            Ok(Ok(Reservation { id, relay_id, reserved_wei, lane }))
        })
    }

    /// Begins a reservation's transaction under the budget's lock and reads what its checks
    /// need. On PostgreSQL the reads go in the lock's round trip, while the stored window runs
    /// (a window that ended is rolled over first, as [`roll`] does, in more round trips: once a
    /// day at most); on SQLite they follow `BEGIN IMMEDIATE`, on the local file.
    fn reservation_read<'c>(
        &self,
        connection: &'c mut Connection,
        relay: &NewRelay,
        now: u64,
    ) -> Result<(Transaction<'c>, ReservationRead)> {
        let (signer, nonce) = (relay.signer.text(), relay.forwarder_nonce.text());
        if !connection.is_postgres() {
            let mut tx = connection.transaction(&[Lock::Budget])?;
            let read = read_for_reservation(&mut tx, relay, now, self.budget_window_secs)?;
            return Ok((tx, read));
        }
        let mut reads = vec![bind(
            &format!(
                "SELECT b.window_start, b.used_wei, b.pending_wei,
                         EXISTS (SELECT 1 FROM relays WHERE signer = ?1 AND forwarder_nonce = ?2
                             AND status IN {LIVE}),
                         (SELECT COALESCE(SUM(CAST(COALESCE(cost_wei, reserved_wei) AS NUMERIC)), 0)
                          FROM relays WHERE signer = ?1 AND window_start = b.window_start),
                         (SELECT COALESCE(SUM(CAST(COALESCE(cost_wei, reserved_wei) AS NUMERIC)), 0)
                          FROM relays WHERE client_ip = ?3 AND window_start = b.window_start)
                     FROM budget b WHERE b.id = 1"
            ),
            args![signer.as_str(), nonce.as_str(), relay.client_ip.as_str()],
        )?];
        if chooses_between_lanes(relay) {
            reads.push(bind(&LANE_DEPTHS, &[])?);
        }
        let (mut tx, rows) = connection.transaction_reading(&[Lock::Budget], &reads)?;
        if rows.len() != reads.len() {
            return Err(Error::Store("the reservation's reads returned another number of results".into()));
        }
        let mut rows = rows.into_iter();
        let (budget, depths) = (rows.next().unwrap_or_default(), rows.next().unwrap_or_default());
        let row = budget
            .into_iter()
            .next()
            .ok_or_else(|| Error::Store("no budget row where one was expected".into()))?;
        let text = |index: usize| {
            row.get(index)
                .cloned()
                .flatten()
                .ok_or_else(|| Error::StoreCorrupt(format!("column {index} of the budget's read is NULL")))
        };
        let stored = budget_from_text(&row)?;
        if current(stored, now, self.budget_window_secs) != stored {
            // The stored window ended: the shares read were the old window's. Rolled over and
            // read again, under the lock already held.
            let read = read_for_reservation(&mut tx, relay, now, self.budget_window_secs)?;
            return Ok((tx, read));
        }
        let depths = depths
            .into_iter()
            .map(|row| match row.as_slice() {
                [Some(lane), Some(count)] => {
                    Ok((Address::from_text(lane, "lane")?, u64::from_text(count, "lane depth")?))
                }
                _ => Err(Error::StoreCorrupt("a lane depth with a NULL".into())),
            })
            .collect::<Result<_>>()?;
        Ok((
            tx,
            ReservationRead {
                taken: text(3)? == "t",
                state: stored,
                by_signer: parse_wei(&text(4)?)?,
                by_client: parse_wei(&text(5)?)?,
                depths,
            },
        ))
    }

    /// Books `booked` in the budget, inserts the relay (`values`, in [`INSERT_RELAY`]'s order)
    /// with its event, and commits. On PostgreSQL without webhook events, in one round trip;
    /// else one statement at a time. Returns the relay's row id and relay id.
    fn reservation_written(
        &self,
        mut tx: Transaction<'_>,
        booked: &BudgetState,
        values: &[Value],
        now: u64,
    ) -> Result<(i64, String)> {
        if tx.is_postgres() && !self.events {
            let writes = [bind(WRITE_BUDGET, &budget_values(booked))?, bind(INSERT_RELAY, values)?];
            let results = tx.commit_after(&writes)?;
            let inserted = results.get(1).and_then(|rows| rows.first());
            let Some([Some(id), Some(relay_id)]) = inserted.map(Vec::as_slice) else {
                return Err(Error::Store("the relay's insert returned no row".into()));
            };
            return Ok((i64::from_text(id, "relay row id")?, relay_id.clone()));
        }
        write_budget(&mut tx, booked)?;
        let row = tx.query_one(INSERT_RELAY, values)?;
        let (id, relay_id): (i64, String) = (row.get(0)?, row.get(1)?);
        let wrote = self.record_change(&mut tx, id, &Default::default(), now)?;
        tx.commit()?;
        self.written(wrote);
        Ok((id, relay_id))
    }
}

/// A new relay's row, accepted on its lane: [`Store::reserve`]'s values, in order.
const INSERT_RELAY: &str =
    "INSERT INTO relays (relay_id, signer, forwarder_nonce, digest, signature, deadline,
         input, client_ip, gas_limit, max_fee_wei, priority_fee_wei, reserved_wei,
         window_start, status, created_at, updated_at, l1_fee_wei, lane)
     VALUES (?15, ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12,
         'accepted', ?13, ?13, ?14, ?16)
     RETURNING id, relay_id";

/// What a reservation's checks read under the budget's lock.
struct ReservationRead {
    /// The signed request already has a live relay.
    taken: bool,
    /// The budget, rolled to now.
    state: BudgetState,
    /// What the relay's signer has spent in the window running now.
    by_signer: u128,
    /// What the relay's client has spent in it.
    by_client: u128,
    /// Open relays per lane.
    depths: Vec<(Address, u64)>,
}

/// [`ReservationRead`] one statement at a time, in `tx` (under the budget's lock): the window
/// rolled over when it ended ([`roll`]).
fn read_for_reservation(
    tx: &mut Transaction<'_>,
    relay: &NewRelay,
    now: u64,
    window_secs: u64,
) -> Result<ReservationRead> {
    let taken = is_taken(tx, relay.signer, relay.forwarder_nonce)?;
    let state = roll(tx, now, window_secs)?;
    let window = Window { stored: state, current: state };
    Ok(ReservationRead {
        taken,
        state,
        by_signer: spent_by(tx, ShareOf::Signer, &relay.signer.text(), &window)?,
        by_client: spent_by(tx, ShareOf::Client, &relay.client_ip, &window)?,
        depths: if chooses_between_lanes(relay) { lane_depths(tx)? } else { Vec::new() },
    })
}

/// Whether a reservation picks its lane among several, and so reads the lanes' depths. With one
/// lane the pick is that lane whatever the depths, and the count, a scan of the open relays
/// under the budget's lock that every reservation waits for, is skipped. In the cluster bench's
/// one-key row on PostgreSQL it was the costliest statement a relay ran, and skipping it took
/// the row from 108 relays a second to 149 and 186 (two runs of each build, alternated).
fn chooses_between_lanes(relay: &NewRelay) -> bool {
    relay.lanes.len() > 1
}
