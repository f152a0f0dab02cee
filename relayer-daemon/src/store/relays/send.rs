//! A relay's transactions in the store: the first one recorded as sent, replacements and the
//! cancellation (grown against the budget), and a replacement the node did not take.

use alloy::primitives::B256;

use super::TRANSFER_GAS;
use crate::{
    error::{Error, Result},
    store::{
        Store,
        codec::Text,
        leases::{self, Lease},
        limits::{BudgetLimits, ShareOf, Window, roll, spent_by, write_budget},
        parse_wei,
        prepared::bind,
        records::{RelayStatus, ReplaceRefusal, Replacement, Sending, TxKind},
        sql::{Lock, Sql, TextRows, Value, args},
    },
};

impl Store {
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
}

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
