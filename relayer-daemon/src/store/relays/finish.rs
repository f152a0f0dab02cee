//! How a relay ends: settled at what it cost, released, executed without a receipt of ours, or
//! dropped, each only while the relay is still as its caller saw it.

use crate::{
    error::{Error, Result},
    store::{
        Store,
        codec::Text,
        limits::{READ_BUDGET, WRITE_BUDGET, budget_from_text, budget_values, current, roll},
        parse_wei,
        prepared::bind,
        records::{RelayRecord, RelayStatus, Settlement},
        sql::{Lock, Row, Sql, TextRows, Value, args},
    },
};

impl Store {
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
