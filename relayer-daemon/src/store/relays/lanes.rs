//! Which key (lane) each relay is sent on: lanes given to old relays, a relay moved to another
//! lane, and how busy each lane is.

use alloy::primitives::Address;

use crate::{
    error::Result,
    store::{
        Store,
        codec::Text,
        schema::OPEN,
        sql::{Lock, Sql, args},
    },
};

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
}

/// Open relays (accepted and not yet ended) per lane, read on `sql`.
pub(super) fn lane_depths(sql: &mut impl Sql) -> Result<Vec<(Address, u64)>> {
    let rows = sql.query(&LANE_DEPTHS, &[])?;
    rows.iter()
        .map(|row| Ok((Address::from_text(&row.get::<String>(0)?, "lane")?, row.get::<i64>(1)? as u64)))
        .collect()
}

/// Open relays (accepted and not yet ended) per lane: the lane and its count.
pub(super) static LANE_DEPTHS: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!("SELECT lane, COUNT(*) FROM relays WHERE status IN {OPEN} AND lane IS NOT NULL GROUP BY lane")
});
