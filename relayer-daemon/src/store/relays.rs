//! A relay's life in the store: the reservation against the budget, its transactions (the
//! first, replacements, the cancellation), and how it ends (settled, released, executed,
//! dropped).

use alloy::primitives::{Address, B256};

use super::{
    Store,
    codec::Text,
    is_taken,
    leases::{self, Lease},
    limits::{
        BudgetLimits, BudgetState, READ_BUDGET, ShareOf, WRITE_BUDGET, Window, budget_from_text,
        budget_values, current, roll, spent_by, write_budget,
    },
    new_relay_id, parse_wei,
    prepared::bind,
    records::{
        NewRelay, Refusal, RelayRecord, RelayStatus, ReplaceRefusal, Replacement, Reservation, Sending,
        Settlement, TxKind,
    },
    schema::{LIVE, OPEN},
    sql::{Connection, Lock, Row, Sql, TextRows, Transaction, Value, args},
};
use crate::{
    error::{Error, Result},
    rules::lanes::least_busy,
};

/// Gas of a plain transfer: what a cancellation (a zero-value self-transfer) uses.
pub(crate) const TRANSFER_GAS: u64 = 21_000;

impl Store {
    /// Gives the relays recorded before lanes existed (no `lane`) to `lane`: the one key of the
    /// version that wrote them, which a pool keeps as its first key. Returns how many.
    pub fn adopt_unlaned(&self, lane: Address) -> Result<usize> {
        self.with(|connection| {
            let mut tx = connection.transaction(&[])?;
            let adopted = tx.execute("UPDATE relays SET lane = ?1 WHERE lane IS NULL", args![lane.text()])?;
            tx.commit()?;
            Ok(adopted)
        })
    }

    /// Moves the relay `id`, accepted but not yet sent, to `lane`: the lease on the key it was
    /// reserved on was lost before its transaction could be recorded. Returns whether it moved
    /// (a relay sent meanwhile, or closed, stays where it is).
    pub fn move_to_lane(&self, id: i64, lane: Address, now: u64) -> Result<bool> {
        self.with(|connection| {
            let mut tx = connection.transaction(&[Lock::Relay(id)])?;
            let moved = tx.execute(
                "UPDATE relays SET lane = ?2, updated_at = ?3 WHERE id = ?1 AND status = 'accepted'",
                args![id, lane.text(), now as i64],
            )?;
            tx.commit()?;
            Ok(moved == 1)
        })
    }

    /// Open relays per lane: how busy each key is.
    pub fn lane_depths(&self) -> Result<Vec<(Address, u64)>> {
        self.with(lane_depths)
    }

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

    /// Records the relay's first signed transaction, just before it is submitted (again, with
    /// its new nonce and hash, should it be re-signed after the node refused the first: the
    /// refused hash leaves the history). A relay closed meanwhile is not reopened, and nothing is
    /// recorded for it ([`Error::LaneLost`]: nothing may be submitted); the first record of a
    /// relay handed off finds it unsent or records nothing ([`Sending::handed_off_first`]).
    /// Only under `lease`, current with its margin left: else [`Error::LaneLost`] and nothing is
    /// recorded (so nothing may be submitted).
    ///
    /// This runs under the key's send lock, where every round trip to the server delays the
    /// key's next send: on PostgreSQL without webhook events it is one round trip, not six
    /// (`BEGIN`, the locks, [`MARK_SENT_AT_ONCE`] and `COMMIT` in one batch: the lease's check,
    /// the relay's update and the history's rewrite are one statement, which changes nothing
    /// when the check fails).
    pub fn mark_sent(&self, sending: &Sending, lease: &Lease) -> Result<()> {
        let Sending { id, relayer_nonce, tx_hash, block, now, handed_off_first: unsent_only } = *sending;
        let update = args![
            id,
            relayer_nonce as i64,
            tx_hash.text(),
            now as i64,
            lease.lane.text(),
            i64::from(unsent_only)
        ];
        let history = args![id, block as i64, now as i64];
        self.with(|connection| {
            let locks = [Lock::Relay(id), Lock::Lane(lease.lane.text())];
            if connection.is_postgres() && !self.events {
                let mut values = update.to_vec();
                values.extend(leases::holds_values(lease, now));
                values.push(Value::from(block as i64));
                let [recorded] = <[TextRows; 1]>::try_from(
                    connection.transaction_at_once(&locks, &[bind(MARK_SENT_AT_ONCE, &values)?])?,
                )
                .map_err(|_| Error::Store("the send's record returned another number of results".into()))?;
                if recorded.len() != 1 {
                    // The lease's check or the update found nothing: nothing was written, so
                    // nothing may be submitted.
                    return Err(Error::LaneLost(lease.lane));
                }
                return Ok(());
            }
            let mut tx = connection.transaction(&locks)?;
            leases::holds(&mut tx, lease, now)?;
            let before = self.seen(&mut tx, id)?;
            // Nor on a relay closed meanwhile: one a frozen daemon had in hand may have been
            // dropped by the key's next holder (its request free for the client's retry), and
            // must not run as well.
            if tx.query(MARK_SENT, update)?.len() != 1 {
                // Nothing recorded, so nothing may be submitted.
                return Err(Error::LaneLost(lease.lane));
            }
            tx.execute(CLEAR_HISTORY, args![id])?;
            tx.execute(FIRST_IN_HISTORY, history)?;
            let wrote = self.record_change(&mut tx, id, &before, now)?;
            tx.commit()?;
            self.written(wrote);
            Ok(())
        })
    }

    /// Records a transaction sent again at the relay's relayer nonce (a fee replacement or the
    /// cancellation), just before it is submitted. The reservation grows to the new worst case,
    /// the relay's L1 data fee reservation included (it never shrinks: an earlier, cheaper
    /// transaction may still be the one mined), and the growth is booked like a reservation, in
    /// the window running now: against the budget and against the relay's signer's and client's
    /// shares. Growth that any of them cannot cover is refused, and the refusal says which
    /// ([`ReplaceRefusal`]): cancellations too, whose fees are capped, so that stuck relays cannot
    /// spend past the budget or a share. Pacing does not hold back a relay already accepted.
    /// [`ReplaceRefusal::Closed`] if the relay is no longer open, and [`Error::LaneLost`]
    /// (recording nothing) unless `lease` is current with its margin left.
    pub fn replace(
        &self,
        id: i64,
        replacement: &Replacement,
        limits: &BudgetLimits,
        now: u64,
        lease: &Lease,
    ) -> Result<std::result::Result<u128, ReplaceRefusal>> {
        self.with(|connection| {
            // The budget's lock (the growth is booked like a reservation), the relay's, then the
            // lane's.
            let mut tx =
                connection.transaction(&[Lock::Budget, Lock::Relay(id), Lock::Lane(lease.lane.text())])?;
            leases::holds(&mut tx, lease, now)?;
            let row = tx.query_one(
                "SELECT status, reserved_wei, window_start, gas_limit, l1_fee_wei, signer, client_ip
                 FROM relays WHERE id = ?1",
                args![id],
            )?;
            let (status, reserved, window_start, gas_limit, l1_fee): (String, String, i64, i64, String) =
                (row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?, row.get(4)?);
            let (signer, client): (String, String) = (row.get(5)?, row.get(6)?);
            let status = RelayStatus::parse(&status)?;
            if !matches!(status, RelayStatus::Sent | RelayStatus::Replaced | RelayStatus::Cancelling) {
                return Ok(Err(ReplaceRefusal::Closed));
            }
            let before = self.seen(&mut tx, id)?;
            let reserved = parse_wei(&reserved)?;
            let gas = match replacement.kind {
                TxKind::Relay => gas_limit as u64,
                TxKind::Cancel => TRANSFER_GAS,
            };
            // A cancellation carries no calldata, so the relay's L1 reservation covers its L1 fee.
            let worst = u128::from(gas)
                .saturating_mul(replacement.max_fee_wei)
                .saturating_add(parse_wei(&l1_fee)?)
                .max(reserved);
            let mut state = roll(&mut tx, now, self.budget_window_secs)?;
            // A relay the window running now does not hold (recorded before windows carried
            // their open relays over) is booked in it whole, not only its growth.
            let booked_here = state.window_start == Some(window_start as u64);
            let added = if booked_here { worst - reserved } else { worst };
            if added > 0 {
                let window = Window { stored: state, current: state };
                if state.used_wei.saturating_add(added) > limits.total_wei {
                    return Ok(Err(ReplaceRefusal::Budget));
                }
                if spent_by(&mut tx, ShareOf::Signer, &signer, &window)?.saturating_add(added)
                    > limits.signer_wei
                {
                    return Ok(Err(ReplaceRefusal::SignerShare));
                }
                if spent_by(&mut tx, ShareOf::Client, &client, &window)?.saturating_add(added)
                    > limits.client_wei
                {
                    return Ok(Err(ReplaceRefusal::ClientShare));
                }
            }
            if added > 0 || !booked_here {
                let start = *state.window_start.get_or_insert(now);
                state.used_wei = state.used_wei.saturating_add(added);
                state.pending_wei = state.pending_wei.saturating_add(added);
                write_budget(&mut tx, &state)?;
                tx.execute("UPDATE relays SET window_start = ?2 WHERE id = ?1", args![id, start as i64])?;
            }
            let next = match replacement.kind {
                TxKind::Relay => RelayStatus::Replaced,
                TxKind::Cancel => RelayStatus::Cancelling,
            };
            tx.execute(
                "UPDATE relays SET status = ?2, tx_hash = ?3, max_fee_wei = ?4, priority_fee_wei = ?5,
                     reserved_wei = ?6, updated_at = ?7
                 WHERE id = ?1",
                args![
                    id,
                    next.as_str(),
                    replacement.tx_hash.text(),
                    replacement.max_fee_wei.to_string(),
                    replacement.priority_fee_wei.to_string(),
                    worst.to_string(),
                    now as i64
                ],
            )?;
            tx.execute(
                "INSERT INTO relay_txs (relay, tx_hash, kind, max_fee_wei, priority_fee_wei, sent_block,
                     sent_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                args![
                    id,
                    replacement.tx_hash.text(),
                    replacement.kind.as_str(),
                    replacement.max_fee_wei.to_string(),
                    replacement.priority_fee_wei.to_string(),
                    replacement.sent_block as i64,
                    now as i64
                ],
            )?;
            let wrote = self.record_change(&mut tx, id, &before, now)?;
            tx.commit()?;
            self.written(wrote);
            Ok(Ok(worst))
        })
    }

    /// Takes back the record of a transaction [`Store::replace`] recorded but the node did not
    /// take (refused, underpriced, its nonce already mined): the relay's current transaction is
    /// again the one before it, so no one looks for a hash the node never had. The grown
    /// reservation stays (a worst case, settled to the real cost in the end).
    pub fn unreplace(&self, id: i64, tx_hash: B256, now: u64) -> Result<()> {
        self.with(|connection| {
            let mut tx = connection.transaction(&[Lock::Relay(id)])?;
            let status: String =
                tx.query_one("SELECT status FROM relays WHERE id = ?1", args![id])?.get(0)?;
            if !RelayStatus::parse(&status)?.is_open() {
                return Ok(());
            }
            let before = self.seen(&mut tx, id)?;
            tx.execute("DELETE FROM relay_txs WHERE relay = ?1 AND tx_hash = ?2", args![id, tx_hash.text()])?;
            let remaining: Vec<(String, String, String, String)> = tx
                .query(
                    "SELECT tx_hash, kind, max_fee_wei, priority_fee_wei FROM relay_txs WHERE relay = ?1
                     ORDER BY rowid",
                    args![id],
                )?
                .into_iter()
                .map(|row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?)))
                .collect::<Result<_>>()?;
            let Some((hash, kind, max_fee, priority_fee)) = remaining.last() else {
                return Ok(());
            };
            let status = if kind == TxKind::Cancel.as_str() {
                RelayStatus::Cancelling
            } else if remaining.len() > 1 {
                RelayStatus::Replaced
            } else {
                RelayStatus::Sent
            };
            tx.execute(
                "UPDATE relays SET status = ?2, tx_hash = ?3, max_fee_wei = ?4, priority_fee_wei = ?5,
                     updated_at = ?6
                 WHERE id = ?1",
                args![id, status.as_str(), hash, max_fee, priority_fee, now as i64],
            )?;
            let wrote = self.record_change(&mut tx, id, &before, now)?;
            tx.commit()?;
            self.written(wrote);
            Ok(())
        })
    }

    /// Gives back the reservation of a relay that was never sent.
    pub fn release(&self, id: i64, error: &str, now: u64) -> Result<()> {
        self.finish(id, RelayStatus::Failed, Some(0), Some(error), now, None)
    }

    /// [`Store::release`], unless a transaction was recorded for the relay meanwhile (another
    /// daemon, holding its lane now, sent it): what a daemon that lost the lane gives up.
    pub fn release_unsent(&self, id: i64, error: &str, now: u64) -> Result<()> {
        self.finish_if(
            id,
            Only::Status(RelayStatus::Accepted),
            RelayStatus::Failed,
            Some(0),
            Some(error),
            now,
            None,
        )
    }

    /// Replaces the reservation of a mined relay by what it really cost, and records how it
    /// ended.
    pub fn settle(&self, id: i64, settlement: &Settlement, now: u64) -> Result<()> {
        self.finish(id, settlement.outcome.status(), Some(settlement.cost_wei), None, now, Some(settlement))
    }

    /// Closes a relay whose request ran on chain without a receipt of ours to show for it: the
    /// worst-case reservation becomes its cost (the budget is never under-counted), and the
    /// (signer, nonce) stays taken.
    pub fn mark_executed(&self, id: i64, now: u64) -> Result<()> {
        self.finish(
            id,
            RelayStatus::Executed,
            None,
            Some("the request ran; no receipt of ours found"),
            now,
            None,
        )
    }

    /// Closes a relay whose transaction will never be mined: its reservation is released and its
    /// (signer, nonce) freed, so the request can be relayed again.
    pub fn drop_relay(&self, id: i64, reason: &str, now: u64) -> Result<()> {
        self.finish(id, RelayStatus::Dropped, Some(0), Some(reason), now, None)
    }

    /// The reconciler's [`Store::drop_relay`] and [`Store::mark_executed`] (`executed`), only
    /// while the relay is still as `seen` shows it: its status, current hash and lane. The
    /// reconciler decides on a record read before its calls to the node; a relay changed since
    /// (moved to another key and sent by a daemon that holds it, sent again) is not what it
    /// decided on, and is left for its next pass. Closing it anyway would drop a relay whose
    /// transaction is on its way: the request would run with nothing booked for it.
    pub fn close_as_seen(&self, seen: &RelayRecord, executed: bool, reason: &str, now: u64) -> Result<()> {
        let (status, cost_wei, reason) = if executed {
            (RelayStatus::Executed, None, "the request ran; no receipt of ours found")
        } else {
            (RelayStatus::Dropped, Some(0), reason)
        };
        self.finish_if(seen.id, Only::AsSeen(seen), status, cost_wei, Some(reason), now, None)
    }

    /// `cost_wei` replaces the reservation; `None` keeps the reservation as the cost.
    fn finish(
        &self,
        id: i64,
        status: RelayStatus,
        cost_wei: Option<u128>,
        error: Option<&str>,
        now: u64,
        mined: Option<&Settlement>,
    ) -> Result<()> {
        self.finish_if(id, Only::Open, status, cost_wei, error, now, mined)
    }

    /// [`Store::finish`], only while the relay is as `only` says (and open).
    #[allow(clippy::too_many_arguments)]
    fn finish_if(
        &self,
        id: i64,
        only: Only<'_>,
        status: RelayStatus,
        cost_wei: Option<u128>,
        error: Option<&str>,
        now: u64,
        mined: Option<&Settlement>,
    ) -> Result<()> {
        self.with(|connection| {
            // The budget's lock (the cost replaces the reservation in it), and then the relay's.
            // On PostgreSQL without webhook events, the reads go in the locks' round trip and
            // the writes in the commit's: every settlement takes the budget's lock, which every
            // reservation of every daemon waits for.
            let locks = [Lock::Budget, Lock::Relay(id)];
            let batched = connection.is_postgres() && !self.events;
            let relay_sql =
                "SELECT reserved_wei, window_start, status, tx_hash, lane FROM relays WHERE id = ?1";
            let (mut tx, closing, stored) = if batched {
                let reads = [bind(relay_sql, args![id])?, bind(READ_BUDGET, &[])?];
                let (tx, rows) = connection.transaction_reading(&locks, &reads)?;
                let [relay, budget] = <[TextRows; 2]>::try_from(rows).map_err(|_| {
                    Error::Store("a settlement's reads returned another number of results".into())
                })?;
                let relay = relay
                    .into_iter()
                    .next()
                    .ok_or_else(|| Error::Store("no row where one was expected".into()))?;
                let budget = budget
                    .into_iter()
                    .next()
                    .ok_or_else(|| Error::Store("no budget row where one was expected".into()))?;
                (tx, Closing::from_text(&relay)?, Some(budget_from_text(&budget)?))
            } else {
                let mut tx = connection.transaction(&locks)?;
                let row = tx.query_one(relay_sql, args![id])?;
                (tx, Closing::from_row(&row)?, None)
            };
            let Closing { reserved, window_start, status: previous, tx_hash, lane } = closing;
            let as_expected = match only {
                Only::Open => true,
                Only::Status(status) => status == previous,
                Only::AsSeen(seen) => {
                    seen.status == previous
                        && tx_hash == seen.tx_hash.map(|hash| hash.text())
                        && lane == seen.lane.map(|lane| lane.text())
                }
            };
            if !previous.is_open() || !as_expected {
                // Already settled (a settlement after a restart racing a live one): once only.
                return Ok(());
            }
            let before = self.seen(&mut tx, id)?;
            let cost_wei = cost_wei.unwrap_or(reserved);
            // The cost is booked in the window running now: a reservation still open at a reset
            // was carried into it ([`roll`]). The stored budget read with the locks is that
            // window unless it ended.
            let mut state = match stored {
                Some(stored) if current(stored, now, self.budget_window_secs) == stored => stored,
                _ => roll(&mut tx, now, self.budget_window_secs)?,
            };
            let mut writes: Vec<(&str, Vec<Value>)> = Vec::new();
            if state.window_start == Some(window_start as u64) {
                state.used_wei = state.used_wei.saturating_sub(reserved).saturating_add(cost_wei);
                state.pending_wei = state.pending_wei.saturating_sub(reserved);
                writes.push((WRITE_BUDGET, budget_values(&state)));
            } else if cost_wei > 0 {
                // A relay this window does not hold (recorded before windows carried their open
                // relays over): what it cost is paid now, so booked now.
                let start = *state.window_start.get_or_insert(now);
                state.used_wei = state.used_wei.saturating_add(cost_wei);
                writes.push((WRITE_BUDGET, budget_values(&state)));
                writes.push((
                    "UPDATE relays SET window_start = ?2 WHERE id = ?1",
                    args![id, start as i64].to_vec(),
                ));
            }
            writes.push((
                "UPDATE relays SET status = ?2, cost_wei = ?3, error = ?4, settled_at = ?5, updated_at = ?5
                 WHERE id = ?1",
                args![id, status.as_str(), cost_wei.to_string(), error, now as i64].to_vec(),
            ));
            if let Some(mined) = mined {
                writes.push((
                    "UPDATE relays SET tx_hash = ?2, block_number = ?3, gas_used = ?4, revert_reason = ?5
                     WHERE id = ?1",
                    args![
                        id,
                        mined.tx_hash.text(),
                        mined.block_number.map(|block| block as i64),
                        mined.gas_used.map(|gas| gas as i64),
                        &mined.revert_reason
                    ]
                    .to_vec(),
                ));
            }
            if batched {
                let batch =
                    writes.iter().map(|(sql, values)| bind(sql, values)).collect::<Result<Vec<_>>>()?;
                tx.commit_after(&batch)?;
                return Ok(());
            }
            for (sql, values) in &writes {
                tx.execute(sql, values)?;
            }
            let wrote = self.record_change(&mut tx, id, &before, now)?;
            tx.commit()?;
            self.written(wrote);
            Ok(())
        })
    }
}

/// What [`Store::finish_if`] reads of the relay it closes.
struct Closing {
    reserved: u128,
    window_start: i64,
    status: RelayStatus,
    tx_hash: Option<String>,
    lane: Option<String>,
}

impl Closing {
    fn from_row(row: &Row) -> Result<Self> {
        Ok(Self {
            reserved: parse_wei(&row.get::<String>(0)?)?,
            window_start: row.get(1)?,
            status: RelayStatus::parse(&row.get::<String>(2)?)?,
            tx_hash: row.get(3)?,
            lane: row.get(4)?,
        })
    }

    /// The same columns read through a batch, as text.
    fn from_text(row: &[Option<String>]) -> Result<Self> {
        let text = |index: usize| {
            row.get(index)
                .cloned()
                .flatten()
                .ok_or_else(|| Error::StoreCorrupt(format!("column {index} of the relay's read is NULL")))
        };
        Ok(Self {
            reserved: parse_wei(&text(0)?)?,
            window_start: i64::from_text(&text(1)?, "window start")?,
            status: RelayStatus::parse(&text(2)?)?,
            tx_hash: row.get(3).cloned().flatten(),
            lane: row.get(4).cloned().flatten(),
        })
    }
}

/// Which open relays [`Store::finish_if`] closes.
#[derive(Debug, Clone, Copy)]
enum Only<'a> {
    /// Any open relay.
    Open,
    /// One with this status.
    Status(RelayStatus),
    /// One still as this record shows it: status, current hash and lane.
    AsSeen(&'a RelayRecord),
}

/// Open relays (accepted and not yet ended) per lane, read on `sql`.
fn lane_depths(sql: &mut impl Sql) -> Result<Vec<(Address, u64)>> {
    let rows = sql.query(&LANE_DEPTHS, &[])?;
    rows.iter()
        .map(|row| Ok((Address::from_text(&row.get::<String>(0)?, "lane")?, row.get::<i64>(1)? as u64)))
        .collect()
}

/// Open relays (accepted and not yet ended) per lane: the lane and its count.
static LANE_DEPTHS: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!("SELECT lane, COUNT(*) FROM relays WHERE status IN {OPEN} AND lane IS NOT NULL GROUP BY lane")
});

/// [`Store::mark_sent`]'s update of the relay: `id`, relayer nonce, hash, now, the lease's lane,
/// whether it must find the relay unsent (`?6`: a hand-off's first record). Only on the lease's
/// own lane: a relay moved to another lane meanwhile (a hand-off's holder and the daemon that
/// lost the lane both at it) is that lane's to send. Returns the relay's id if it changed it.
const MARK_SENT: &str = "UPDATE relays SET status = 'sent', relayer_nonce = ?2, tx_hash = ?3, sent_at = ?4,
         updated_at = ?4
     WHERE id = ?1 AND (status = 'accepted' OR (status = 'sent' AND CAST(?6 AS BIGINT) = 0))
         AND lane = ?5
     RETURNING id";

/// [`Store::mark_sent`] on PostgreSQL, as one statement: [`MARK_SENT`]'s update (`?1` to `?6`)
/// only while the key's lease holds ([`leases::HOLDS`]: `?7` lane, `?8` fence, `?9` the margin's
/// end), then the relay's history cleared and its transaction written as the history's first
/// (`?10`: the block the checks read). Returns the history's new row, or no row when the lease
/// or the relay's status refused the update (then nothing changed). The history's delete and
/// insert read one snapshot, so the delete never sees the row the insert adds.
const MARK_SENT_AT_ONCE: &str = "WITH marked AS (
         UPDATE relays SET status = 'sent', relayer_nonce = ?2, tx_hash = ?3, sent_at = ?4,
             updated_at = ?4
         WHERE id = ?1 AND (status = 'accepted' OR (status = 'sent' AND CAST(?6 AS BIGINT) = 0))
             AND lane = ?5
             AND EXISTS (SELECT 1 FROM lanes WHERE address = ?7 AND fence = ?8 AND lease_until >= ?9)
         RETURNING id, tx_hash, max_fee_wei, priority_fee_wei),
     cleared AS (DELETE FROM relay_txs WHERE relay IN (SELECT id FROM marked))
     INSERT INTO relay_txs (relay, tx_hash, kind, max_fee_wei, priority_fee_wei, sent_block, sent_at)
     SELECT id, tx_hash, 'relay', max_fee_wei, priority_fee_wei, CAST(?10 AS BIGINT), CAST(?4 AS BIGINT)
     FROM marked
     RETURNING relay";

/// [`Store::mark_sent`]: the relay's history, cleared of a transaction refused before (`?1`: id).
const CLEAR_HISTORY: &str = "DELETE FROM relay_txs WHERE relay = ?1";

/// [`Store::mark_sent`]: the relay's transaction just recorded, as its history's first (`id`, the
/// block the checks read, now). Typed by CAST: in a SELECT list PostgreSQL would take a bare
/// placeholder for text, whatever the column it goes to.
const FIRST_IN_HISTORY: &str =
    "INSERT INTO relay_txs (relay, tx_hash, kind, max_fee_wei, priority_fee_wei, sent_block, sent_at)
     SELECT id, tx_hash, 'relay', max_fee_wei, priority_fee_wei, CAST(?2 AS BIGINT), CAST(?3 AS BIGINT)
     FROM relays WHERE id = ?1";

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
