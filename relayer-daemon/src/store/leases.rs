//! Lane leases: which daemon may send on which key. Each key (lane) is leased to one daemon at a
//! time for a few seconds, renewed while it lives; every change of holder raises the lane's
//! `fence`, and every transaction is recorded only under the fence its sender holds, with time
//! left on the lease ([`holds`], called by `mark_sent` and `replace`). A daemon that lost its
//! lease (it stalled, it was cut off from the database) can therefore not put a transaction on
//! the node at nonces the new holder is using: it cannot record one, and nothing unrecorded is
//! submitted. Daemons also say they are alive (`relayer_daemons`), so each can take its fair
//! share of the keys. Times are Unix seconds passed in by the caller, as everywhere in the store.

use alloy::primitives::Address;

use super::{
    Store,
    codec::Text,
    sql::{Lock, Sql, Value, args},
};
use crate::error::{Error, Result};

/// A lease a daemon holds on a lane: the key's address and the fence it was taken with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease {
    /// The key.
    pub lane: Address,
    /// The lane's fence when this daemon took it; a later holder has a higher one.
    pub fence: i64,
    /// A transaction is recorded only while the lease has at least this long left, so that its
    /// submission (right after the record) comes well before anyone can take the lane over.
    pub margin_secs: u64,
}

/// Who holds a lane, as `/status` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaneHolder {
    /// The key.
    pub lane: Address,
    /// The daemon (`RELAYER_ID`) whose lease is current, if any.
    pub holder: Option<String>,
}

/// Why a lane is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Taking {
    /// At start: lanes whose lease is free or expired, and those still leased to this daemon's
    /// own id (its previous run, killed before it could give them back).
    AtStart,
    /// Later: only lanes whose lease is free or expired.
    Free,
}

impl Store {
    /// Says that daemon `id` is alive at `now`, forgets daemons not heard from since `stale_before`
    /// and returns how many are alive (this one included): each takes its share of the keys.
    pub fn heartbeat(&self, id: &str, now: u64, stale_before: u64) -> Result<usize> {
        self.with(|connection| {
            let mut tx = connection.transaction(&[Lock::Rows])?;
            let updated =
                tx.execute("UPDATE relayer_daemons SET seen_at = ?2 WHERE id = ?1", args![id, now as i64])?;
            if updated == 0 {
                tx.execute(
                    "INSERT INTO relayer_daemons (id, seen_at) VALUES (?1, ?2) ON CONFLICT (id) DO NOTHING",
                    args![id, now as i64],
                )?;
            }
            tx.execute("DELETE FROM relayer_daemons WHERE seen_at < ?1", args![stale_before as i64])?;
            let alive: i64 = tx.query_one("SELECT COUNT(*) FROM relayer_daemons", &[])?.get(0)?;
            tx.commit()?;
            Ok(usize::try_from(alive).unwrap_or(1).max(1))
        })
    }

    /// Daemon `id` is leaving (shutdown): the others need not wait for its heartbeat to go stale
    /// before they count it out.
    pub fn farewell(&self, id: &str) -> Result<()> {
        self.with(|connection| {
            connection.execute("DELETE FROM relayer_daemons WHERE id = ?1", args![id])?;
            Ok(())
        })
    }

    /// Takes for daemon `holder` up to `wanted` of `lanes` (in their order) that `taking` allows,
    /// each until `now + lease_secs`, raising each one's fence. Lanes the table does not know yet
    /// are added first. Returns the leases taken.
    pub fn take_lanes(
        &self,
        holder: &str,
        lanes: &[Address],
        wanted: usize,
        taking: Taking,
        now: u64,
        lease_secs: u64,
    ) -> Result<Vec<Lease>> {
        self.with(|connection| {
            let mut taken = Vec::new();
            for lane in lanes {
                if taken.len() >= wanted {
                    break;
                }
                // One transaction per lane: the conditional update takes the row's lock, so of
                // two daemons racing for one free lane the second changes nothing.
                let mut tx = connection.transaction(&[Lock::Rows])?;
                tx.execute(
                    "INSERT INTO lanes (address, holder, fence, lease_until) VALUES (?1, NULL, 0, 0)
                     ON CONFLICT (address) DO NOTHING",
                    args![lane.text()],
                )?;
                let row = tx.query_opt(
                    "UPDATE lanes SET holder = ?2, fence = fence + 1, lease_until = ?3
                     WHERE address = ?1
                         AND (holder IS NULL OR lease_until <= ?4 OR (CAST(?5 AS BIGINT) = 1 AND holder = ?2))
                     RETURNING fence",
                    args![
                        lane.text(),
                        holder,
                        (now + lease_secs) as i64,
                        now as i64,
                        i64::from(taking == Taking::AtStart)
                    ],
                )?;
                tx.commit()?;
                if let Some(row) = row {
                    taken.push(Lease { lane: *lane, fence: row.get(0)?, margin_secs: margin(lease_secs) });
                }
            }
            Ok(taken)
        })
    }

    /// Renews `leases` until `now + lease_secs`. Returns those that are lost: another daemon took
    /// the lane (its fence moved), so this one must stop sending on it at once.
    pub fn renew_lanes(&self, leases: &[Lease], now: u64, lease_secs: u64) -> Result<Vec<Lease>> {
        self.with(|connection| {
            let mut tx = connection.transaction(&[Lock::Rows])?;
            let mut lost = Vec::new();
            for lease in leases {
                // Renewing a lease that ran out is safe while its fence stands: nobody took the
                // lane meanwhile, so nobody sent on it.
                let renewed = tx.execute(
                    "UPDATE lanes SET lease_until = ?3 WHERE address = ?1 AND fence = ?2",
                    args![lease.lane.text(), lease.fence, (now + lease_secs) as i64],
                )?;
                if renewed == 0 {
                    lost.push(*lease);
                }
            }
            tx.commit()?;
            Ok(lost)
        })
    }

    /// Gives `leases` back (shutdown, or a daemon holding more than its share): another daemon
    /// can take them at once. A lease already lost changes nothing.
    pub fn release_lanes(&self, leases: &[Lease]) -> Result<()> {
        self.with(|connection| {
            let mut tx = connection.transaction(&[Lock::Rows])?;
            for lease in leases {
                tx.execute(
                    "UPDATE lanes SET holder = NULL, lease_until = 0 WHERE address = ?1 AND fence = ?2",
                    args![lease.lane.text(), lease.fence],
                )?;
            }
            tx.commit()?;
            Ok(())
        })
    }

    /// Who holds each of `lanes` at `now` (a lease that ran out has no holder).
    pub fn lane_holders(&self, lanes: &[Address], now: u64) -> Result<Vec<LaneHolder>> {
        self.with(|connection| {
            let mut holders = Vec::with_capacity(lanes.len());
            for lane in lanes {
                let holder = connection
                    .query_opt(
                        "SELECT holder FROM lanes WHERE address = ?1 AND lease_until > ?2",
                        args![lane.text(), now as i64],
                    )?
                    .map(|row| row.get::<Option<String>>(0))
                    .transpose()?
                    .flatten();
                holders.push(LaneHolder { lane: *lane, holder });
            }
            Ok(holders)
        })
    }
}

/// How long a lease must still run for a transaction to be recorded under it: a third of it
/// (renewals come every third, so a daemon that renews on time always has more).
pub(crate) fn margin(lease_secs: u64) -> u64 {
    (lease_secs / 3).max(1)
}

/// Refuses (with [`Error::LaneLost`]) unless `lease` is the lane's current one with at least
/// its margin left at `now`: called in the transaction that records a transaction about to be
/// submitted, which holds the lane's row ([`Lock::Lane`]) so that no takeover or renewal comes
/// between this check and its commit.
pub(super) fn holds(sql: &mut impl Sql, lease: &Lease, now: u64) -> Result<()> {
    let current = sql.query_opt(HOLDS, &holds_values(lease, now))?;
    match current {
        Some(_) => Ok(()),
        None => Err(Error::LaneLost(lease.lane)),
    }
}

/// [`holds`]' read: a row while `lease` is current with its margin left ([`holds_values`]).
pub(super) const HOLDS: &str = "SELECT 1 FROM lanes WHERE address = ?1 AND fence = ?2 AND lease_until >= ?3";

/// [`HOLDS`]' values for `lease` at `now`.
pub(super) fn holds_values(lease: &Lease, now: u64) -> Vec<Value> {
    args![lease.lane.text(), lease.fence, (now + lease.margin_secs) as i64].to_vec()
}
