//! Rate windows (per IP, per signer) and the daily gas budget.

use super::{
    Store,
    codec::Text,
    is_taken, parse_wei,
    prepared::bind,
    schema::{LIVE, OPEN},
    sql::{Lock, Sql, TextRows, args},
};
use crate::{
    error::{Error, Result},
    rules::pacing::Pacing,
};
use alloy::primitives::{Address, U256};

/// How long a gas budget lasts after its first use (SPEC.md: a day; `BUDGET_WINDOW_SECS`).
pub const BUDGET_WINDOW_SECS: u64 = 24 * 60 * 60;
/// The length of the sliding rate-limit window.
pub const RATE_WINDOW_SECS: u64 = 60 * 60;

/// Which counter a rate-limit event belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RateKind {
    /// Requests per client IP.
    Ip,
    /// Requests per recovered signer.
    Signer,
}

impl RateKind {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Self::Ip => "ip",
            Self::Signer => "signer",
        }
    }
}

/// The budget as it stands at a given time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BudgetState {
    /// Wei spent in the current window, counting outstanding reservations at their worst case.
    pub used_wei: u128,
    /// The part of `used_wei` that is still a worst-case reservation awaiting its receipt.
    pub pending_wei: u128,
    /// When the current window started (first use), if it is running.
    pub window_start: Option<u64>,
}

impl BudgetState {
    /// When the budget resets, if a window of `window_secs` is running.
    pub fn resets_at(&self, window_secs: u64) -> Option<u64> {
        self.window_start.map(|start| start + window_secs)
    }
}

/// The most a budget window may spend: in all, per signer and per client, and how it opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BudgetLimits {
    /// The daily budget (`DAILY_GAS_BUDGET`).
    pub total_wei: u128,
    /// One signer's share.
    pub signer_wei: u128,
    /// One client's share (IPv4 address, IPv6 /48).
    pub client_wei: u128,
    /// The slices the window opens in (`BUDGET_SLICES`; 1: all at once). The window's length is
    /// the store's ([`Store::with_budget_window`]).
    pub slices: std::num::NonZeroU64,
}

impl BudgetLimits {
    /// One limit for everything, open at once: no shares, no pacing (the store's own tests).
    pub fn total(wei: u128) -> Self {
        Self { total_wei: wei, signer_wei: wei, client_wei: wei, slices: std::num::NonZeroU64::MIN }
    }
}

impl Store {
    /// How `limits` open the store's budget windows.
    pub(super) fn pacing(&self, limits: &BudgetLimits) -> Pacing {
        Pacing { window_secs: self.budget_window_secs, slices: limits.slices }
    }
}

/// What [`Store::count_signer`] decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignerCount {
    /// Counted: the signer had quota left.
    Counted,
    /// Not counted: the signer's quota for the hour is used up.
    Limited,
    /// Not counted: this very request is already accepted (a replay of one not mined yet).
    Duplicate,
}

impl Store {
    /// Counts one request for `key` if fewer than `limit` were counted in the last hour; returns
    /// whether it was allowed. Refused requests are not counted, so a client that keeps trying
    /// is let in again an hour after its earlier requests.
    ///
    /// On PostgreSQL in one round trip, not five: `BEGIN`, the key's lock, [`HIT_AT_ONCE`] (the
    /// expired events' deletion, the count and the new event if the count allows it, as one
    /// statement) and `COMMIT` in one batch.
    pub fn hit(&self, kind: RateKind, key: &str, limit: u32, now: u64) -> Result<bool> {
        // Only this key's expired events: under its lock no other writer touches them, where a
        // sweep of every key's could deadlock with another daemon's. `prune` sweeps the rest.
        self.with(|connection| {
            let locks = [rate_lock(kind, key)];
            if connection.is_postgres() {
                let horizon = now.saturating_sub(RATE_WINDOW_SECS) as i64;
                let values = args![kind.as_str(), key, horizon, now as i64, i64::from(limit)];
                let rows = connection.transaction_at_once(&locks, &[bind(&HIT_AT_ONCE, values)?])?;
                return recorded(&rows);
            }
            let mut tx = connection.transaction(&locks)?;
            let counted = count_if_under(&mut tx, kind, key, limit, now)?;
            if counted {
                tx.commit()?;
            }
            Ok(counted)
        })
    }

    /// Requests counted for `key` in the last hour.
    pub fn hits(&self, kind: RateKind, key: &str, now: u64) -> Result<u32> {
        self.with(|connection| count_in_window(connection, kind, key, now))
    }

    /// Counts one request of `signer` (with forwarder nonce `nonce`) against `limit`, in one
    /// transaction with the re-check: concurrent requests that passed the read-only check
    /// cannot together exceed the limit. A request already accepted is not counted again.
    /// On PostgreSQL in one round trip, not five (as [`Store::hit`], with [`COUNT_SIGNER_AT_ONCE`]).
    pub fn count_signer(&self, signer: Address, nonce: U256, limit: u32, now: u64) -> Result<SignerCount> {
        let key = signer.text();
        self.with(|connection| {
            let locks = [rate_lock(RateKind::Signer, &key)];
            if connection.is_postgres() {
                let horizon = now.saturating_sub(RATE_WINDOW_SECS) as i64;
                let values = args![
                    RateKind::Signer.as_str(),
                    key.as_str(),
                    horizon,
                    now as i64,
                    i64::from(limit),
                    nonce.text()
                ];
                let rows = connection.transaction_at_once(&locks, &[bind(&COUNT_SIGNER_AT_ONCE, values)?])?;
                let taken = rows
                    .first()
                    .and_then(|rows| rows.first())
                    .and_then(|row| row.get(2).cloned().flatten())
                    .ok_or_else(|| Error::Store("the signer's count returned no row".into()))?;
                return Ok(if taken == "t" {
                    SignerCount::Duplicate
                } else if recorded(&rows)? {
                    SignerCount::Counted
                } else {
                    SignerCount::Limited
                });
            }
            let mut tx = connection.transaction(&locks)?;
            if is_taken(&mut tx, signer, nonce)? {
                return Ok(SignerCount::Duplicate);
            }
            if count_in_window(&mut tx, RateKind::Signer, &key, now)? >= limit {
                return Ok(SignerCount::Limited);
            }
            record_event(&mut tx, RateKind::Signer, &key, now)?;
            tx.commit()?;
            Ok(SignerCount::Counted)
        })
    }

    /// The budget at `now` ([`Store::budget`]) with what `signer` and `client` have spent in its
    /// window ([`Store::spent_by_signer`], [`Store::spent_by_client`]): a relay's read-only
    /// check before its checks on chain. On PostgreSQL one statement, the shares summed by the
    /// server (as `NUMERIC`: one row, not one per relay of the client, who can have thousands),
    /// while the stored window runs; else, and when it ended, one statement at a time.
    pub fn budget_and_shares(
        &self,
        signer: Address,
        client: &str,
        now: u64,
    ) -> Result<(BudgetState, u128, u128)> {
        let signer = signer.text();
        self.with(|connection| {
            if connection.is_postgres() {
                let row = connection.query_one(BUDGET_AND_SHARES, args![signer.as_str(), client])?;
                let stored = BudgetState {
                    used_wei: parse_wei(&row.get::<String>(1)?)?,
                    pending_wei: parse_wei(&row.get::<String>(2)?)?,
                    window_start: row.get::<Option<i64>>(0)?.map(|start| start as u64),
                };
                if current(stored, now, self.budget_window_secs) == stored {
                    return Ok((
                        stored,
                        parse_wei(&row.get::<String>(3)?)?,
                        parse_wei(&row.get::<String>(4)?)?,
                    ));
                }
            }
            let window = Window::read(connection, now, self.budget_window_secs)?;
            Ok((
                window.current,
                spent_by(connection, ShareOf::Signer, &signer, &window)?,
                spent_by(connection, ShareOf::Client, client, &window)?,
            ))
        })
    }

    /// What `signer` has spent in the budget window running at `now`.
    pub fn spent_by_signer(&self, signer: Address, now: u64) -> Result<u128> {
        self.with(|connection| {
            let window = Window::read(connection, now, self.budget_window_secs)?;
            spent_by(connection, ShareOf::Signer, &signer.text(), &window)
        })
    }

    /// What `client` (an IPv4 address or IPv6 /48) has spent in the budget window running at
    /// `now`.
    pub fn spent_by_client(&self, client: &str, now: u64) -> Result<u128> {
        self.with(|connection| {
            let window = Window::read(connection, now, self.budget_window_secs)?;
            spent_by(connection, ShareOf::Client, client, &window)
        })
    }

    /// The budget at `now`: a window that ended gives way to the next, which starts with the
    /// reservations still open ([`current`]).
    pub fn budget(&self, now: u64) -> Result<BudgetState> {
        self.with(|connection| Ok(Window::read(connection, now, self.budget_window_secs)?.current))
    }

    /// The same store, with budget windows of `secs` (a day unless set: `BUDGET_WINDOW_SECS`).
    pub fn with_budget_window(mut self, secs: u64) -> Self {
        self.budget_window_secs = secs.max(1);
        self
    }
}

/// The budget row as stored and as it stands at a given time: they differ when the stored
/// window has ended and no write has rolled it over yet ([`roll`]).
pub(super) struct Window {
    /// The row as stored.
    pub(super) stored: BudgetState,
    /// The row at the time asked: [`current`] of `stored`.
    pub(super) current: BudgetState,
}

impl Window {
    /// Reads the budget row and rolls it forward to `now` in memory, writing nothing.
    pub(super) fn read(sql: &mut impl Sql, now: u64, window_secs: u64) -> Result<Self> {
        let stored = read_budget(sql)?;
        Ok(Self { stored, current: current(stored, now, window_secs) })
    }
}

/// What the relays whose `column` is `key` cost in the budget window running now (`window`):
/// settled relays at their cost, open ones at their reservation (a worst case). A relay still
/// open when the stored window ended belongs to the one running now, whether or not a write has
/// moved it there yet ([`roll`]). Summed here, not in SQL: wei amounts are decimal text beyond
/// SQLite's 64-bit integers.
pub(super) fn spent_by(sql: &mut impl Sql, column: ShareOf, key: &str, window: &Window) -> Result<u128> {
    let Some(window_start) = window.current.window_start else { return Ok(0) };
    // The stored window, when it ended and its open relays carried into the current one;
    // else the current one again (the condition adds nothing).
    let carried_from = window.stored.window_start.unwrap_or(window_start);
    let column = match column {
        ShareOf::Signer => "signer",
        ShareOf::Client => "client_ip",
    };
    let amounts = sql.query(
        &format!(
            "SELECT COALESCE(cost_wei, reserved_wei) FROM relays WHERE {column} = ?1
             AND (window_start = ?2 OR (window_start = ?3 AND status IN {OPEN}))"
        ),
        args![key, window_start as i64, carried_from as i64],
    )?;
    let mut spent = 0u128;
    for amount in amounts {
        spent = spent.saturating_add(parse_wei(&amount.get::<String>(0)?)?);
    }
    Ok(spent)
}

/// Whose share [`spent_by`] sums.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ShareOf {
    Signer,
    Client,
}

/// The budget row with what a signer (`?1`) and a client (`?2`) spent in its window, summed by
/// PostgreSQL ([`Store::budget_and_shares`]). A relay's amounts are wei as decimal text: summed
/// as `NUMERIC`, read back as text.
const BUDGET_AND_SHARES: &str = "SELECT b.window_start, b.used_wei, b.pending_wei,
         CAST((SELECT COALESCE(SUM(CAST(COALESCE(cost_wei, reserved_wei) AS NUMERIC)), 0)
               FROM relays WHERE signer = ?1 AND window_start = b.window_start) AS TEXT),
         CAST((SELECT COALESCE(SUM(CAST(COALESCE(cost_wei, reserved_wei) AS NUMERIC)), 0)
               FROM relays WHERE client_ip = ?2 AND window_start = b.window_start) AS TEXT)
     FROM budget b WHERE b.id = 1";

/// A rate key's events older than the window (`?1` kind, `?2` key, `?3` the horizon).
const DELETE_EXPIRED: &str = "DELETE FROM rate_events WHERE kind = ?1 AND key = ?2 AND at <= ?3";

/// The count of a rate key's events in the window (`?1` kind, `?2` key, `?3` the horizon).
pub(super) const COUNT_IN_WINDOW: &str =
    "SELECT COUNT(*) FROM rate_events WHERE kind = ?1 AND key = ?2 AND at > ?3";

/// A new event of a rate key (`?1` kind, `?2` key, `?3` now).
const RECORD_EVENT: &str = "INSERT INTO rate_events (kind, key, at) VALUES (?1, ?2, ?3)";

/// Requests of `kind` counted for `key` in the hour before `now`.
pub(super) fn count_in_window(sql: &mut impl Sql, kind: RateKind, key: &str, now: u64) -> Result<u32> {
    let horizon = now.saturating_sub(RATE_WINDOW_SECS) as i64;
    sql.query_one(COUNT_IN_WINDOW, args![kind.as_str(), key, horizon])?.get(0)
}

/// Counts one request of `kind` for `key` at `now` if fewer than `limit` were counted in the
/// last hour, in the caller's transaction (which holds the key's lock): the key's expired events
/// deleted first. Returns whether it counted it; the caller commits.
pub(super) fn count_if_under(
    sql: &mut impl Sql,
    kind: RateKind,
    key: &str,
    limit: u32,
    now: u64,
) -> Result<bool> {
    let horizon = now.saturating_sub(RATE_WINDOW_SECS) as i64;
    sql.execute(DELETE_EXPIRED, args![kind.as_str(), key, horizon])?;
    if count_in_window(sql, kind, key, now)? >= limit {
        return Ok(false);
    }
    record_event(sql, kind, key, now)?;
    Ok(true)
}

/// [`count_if_under`] on PostgreSQL, as the common table expressions of one statement (`?1` kind,
/// `?2` key, `?3` the horizon, `?4` now, `?5` the limit): `expired`, the key's expired events
/// deleted; `counted`, its events in the window (`n`); `recorded`, a new event if fewer than the
/// limit were and `also` holds (an SQL condition, or empty). They read one snapshot; the
/// deletion and the count look at disjoint rows (at or before the horizon, after it).
pub(super) fn count_if_under_at_once(also: &str) -> String {
    format!(
        "expired AS (DELETE FROM rate_events WHERE kind = ?1 AND key = ?2 AND at <= ?3),
         counted AS (SELECT COUNT(*) AS n FROM rate_events WHERE kind = ?1 AND key = ?2 AND at > ?3),
         recorded AS (INSERT INTO rate_events (kind, key, at)
             SELECT ?1, ?2, CAST(?4 AS BIGINT) FROM counted WHERE n < ?5 {also} RETURNING 1)"
    )
}

/// [`Store::hit`] on PostgreSQL, as one statement ([`count_if_under_at_once`]'s values): one
/// row, the count before, and 1 if the event was recorded, else 0.
static HIT_AT_ONCE: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!("WITH {} SELECT n, (SELECT COUNT(*) FROM recorded) FROM counted", count_if_under_at_once(""))
});

/// [`Store::count_signer`] on PostgreSQL, as one statement ([`HIT_AT_ONCE`]'s values, then `?6`
/// the forwarder nonce): the signer's events in the window counted and a new event recorded if
/// fewer than the limit were and the signed request is not live already (as
/// `is_taken` reads it). One row:
/// the count, 1 if recorded, and whether the request was taken (`t` or `f`).
static COUNT_SIGNER_AT_ONCE: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "WITH taken AS (SELECT 1 FROM relays WHERE signer = ?2 AND forwarder_nonce = ?6 AND status IN {LIVE}),
             counted AS (SELECT COUNT(*) AS n FROM rate_events WHERE kind = ?1 AND key = ?2 AND at > ?3),
             recorded AS (INSERT INTO rate_events (kind, key, at)
                 SELECT ?1, ?2, CAST(?4 AS BIGINT) FROM counted
                 WHERE n < ?5 AND NOT EXISTS (SELECT 1 FROM taken) RETURNING 1)
         SELECT n, (SELECT COUNT(*) FROM recorded), EXISTS (SELECT 1 FROM taken) FROM counted"
    )
});

/// Whether a one-statement count ([`HIT_AT_ONCE`], [`COUNT_SIGNER_AT_ONCE`]) recorded its event.
pub(super) fn recorded(rows: &[TextRows]) -> Result<bool> {
    let recorded = rows.first().and_then(|rows| rows.first()).and_then(|row| row.get(1).cloned().flatten());
    match recorded.as_deref() {
        Some("1") => Ok(true),
        Some("0") => Ok(false),
        other => Err(Error::Store(format!("a rate count recorded {other:?} events"))),
    }
}

/// The lock of one rate-window key: its count and its new event are one step.
pub(super) fn rate_lock(kind: RateKind, key: &str) -> Lock {
    Lock::Key(format!("rate:{}:{key}", kind.as_str()))
}

/// Counts one request of `kind` for `key` at `now`.
fn record_event(sql: &mut impl Sql, kind: RateKind, key: &str, now: u64) -> Result<()> {
    sql.execute(RECORD_EVENT, args![kind.as_str(), key, now as i64])?;
    Ok(())
}

pub(super) fn read_budget(sql: &mut impl Sql) -> Result<BudgetState> {
    let row = sql.query_one(READ_BUDGET, &[])?;
    Ok(BudgetState {
        used_wei: parse_wei(&row.get::<String>(1)?)?,
        pending_wei: parse_wei(&row.get::<String>(2)?)?,
        window_start: row.get::<Option<i64>>(0)?.map(|start| start as u64),
    })
}

pub(super) fn write_budget(sql: &mut impl Sql, state: &BudgetState) -> Result<()> {
    sql.execute(WRITE_BUDGET, &budget_values(state))?;
    Ok(())
}

/// The budget row's read: its window's start, what it used and what of that is pending.
pub(super) const READ_BUDGET: &str = "SELECT window_start, used_wei, pending_wei FROM budget WHERE id = 1";

/// [`READ_BUDGET`]'s row read through a batch, every cell as text.
pub(super) fn budget_from_text(row: &[Option<String>]) -> Result<BudgetState> {
    let text = |index: usize| {
        row.get(index)
            .cloned()
            .flatten()
            .ok_or_else(|| crate::error::Error::StoreCorrupt(format!("column {index} of the budget is NULL")))
    };
    Ok(BudgetState {
        window_start: row
            .first()
            .cloned()
            .flatten()
            .map(|start| i64::from_text(&start, "window start"))
            .transpose()?
            .map(|start| start as u64),
        used_wei: parse_wei(&text(1)?)?,
        pending_wei: parse_wei(&text(2)?)?,
    })
}

/// The budget row's update: [`budget_values`] are its values.
pub(super) const WRITE_BUDGET: &str =
    "UPDATE budget SET window_start = ?1, used_wei = ?2, pending_wei = ?3 WHERE id = 1";

/// [`WRITE_BUDGET`]'s values for `state`.
pub(super) fn budget_values(state: &BudgetState) -> Vec<super::sql::Value> {
    args![
        state.window_start.map(|start| start as i64),
        state.used_wei.to_string(),
        state.pending_wei.to_string()
    ]
    .to_vec()
}

/// The budget at `now`, in windows of `window_secs`: the budget resets a window after its first
/// use. The reservations still open then (`pending_wei`) are not forgotten: they are paid in the
/// window that follows, which starts at the reset with them as its use, and their later costs
/// (fee bumps, the receipt's cost) are booked there. Only an idle budget reads as unused.
pub(super) fn current(state: BudgetState, now: u64, window_secs: u64) -> BudgetState {
    let window_secs = window_secs.max(1);
    match state.window_start {
        Some(start) if now >= start.saturating_add(window_secs) => {
            if state.pending_wei == 0 {
                return BudgetState { used_wei: 0, pending_wei: 0, window_start: None };
            }
            // Windows follow each other while reservations stay open: the one running at `now`.
            let elapsed = (now - start) / window_secs * window_secs;
            BudgetState {
                used_wei: state.pending_wei,
                pending_wei: state.pending_wei,
                window_start: Some(start + elapsed),
            }
        }
        _ => state,
    }
}

/// Rolls the stored budget forward to `now` under the budget's lock, in the caller's
/// transaction: when its window ended, the open relays of that window move to the next with
/// their reservations ([`current`]). Returns the budget as it now stands.
pub(super) fn roll(sql: &mut impl Sql, now: u64, window_secs: u64) -> Result<BudgetState> {
    let Window { stored, current } = Window::read(sql, now, window_secs)?;
    if current != stored {
        if let (Some(from), Some(to)) = (stored.window_start, current.window_start) {
            sql.execute(
                &format!("UPDATE relays SET window_start = ?2 WHERE window_start = ?1 AND status IN {OPEN}"),
                args![from as i64, to as i64],
            )?;
        }
        write_budget(sql, &current)?;
    }
    Ok(current)
}
