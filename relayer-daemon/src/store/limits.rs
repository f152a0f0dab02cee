//! Rate windows (per IP, per signer) and the daily gas budget.

use super::{
    Store,
    codec::Text,
    is_taken, parse_wei,
    sql::{Lock, Sql, args},
};
use crate::error::Result;
use alloy::primitives::{Address, U256};

/// How long a gas budget lasts after its first use.
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
    fn as_str(self) -> &'static str {
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
    /// When the budget resets, if a window is running.
    pub fn resets_at(&self) -> Option<u64> {
        self.window_start.map(|start| start + BUDGET_WINDOW_SECS)
    }
}

/// The most a budget window may spend: in all, per signer and per client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BudgetLimits {
    /// The daily budget (`DAILY_GAS_BUDGET`).
    pub total_wei: u128,
    /// One signer's share.
    pub signer_wei: u128,
    /// One client's share (IPv4 address, IPv6 /48).
    pub client_wei: u128,
}

impl BudgetLimits {
    /// One limit for everything: no shares (the store's own tests).
    pub fn total(wei: u128) -> Self {
        Self { total_wei: wei, signer_wei: wei, client_wei: wei }
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
    pub fn hit(&self, kind: RateKind, key: &str, limit: u32, now: u64) -> Result<bool> {
        self.with(|connection| {
            let mut tx = connection.transaction(&[rate_lock(kind, key)])?;
            // Only this key's expired events: under its lock no other writer touches them, where
            // a sweep of every key's could deadlock with another daemon's. `prune` sweeps the rest.
            let horizon = now.saturating_sub(RATE_WINDOW_SECS) as i64;
            tx.execute(
                "DELETE FROM rate_events WHERE kind = ?1 AND key = ?2 AND at <= ?3",
                args![kind.as_str(), key, horizon],
            )?;
            if count_in_window(&mut tx, kind, key, now)? >= limit {
                return Ok(false);
            }
            record_event(&mut tx, kind, key, now)?;
            tx.commit()?;
            Ok(true)
        })
    }

    /// Requests counted for `key` in the last hour.
    pub fn hits(&self, kind: RateKind, key: &str, now: u64) -> Result<u32> {
        self.with(|connection| count_in_window(connection, kind, key, now))
    }

    /// Counts one request of `signer` (with forwarder nonce `nonce`) against `limit`, in one
    /// transaction with the re-check: concurrent requests that passed the read-only check
    /// cannot together exceed the limit. A request already accepted is not counted again.
    pub fn count_signer(&self, signer: Address, nonce: U256, limit: u32, now: u64) -> Result<SignerCount> {
        let key = signer.text();
        self.with(|connection| {
            let mut tx = connection.transaction(&[rate_lock(RateKind::Signer, &key)])?;
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

    /// What `signer` has spent in the budget window running at `now`.
    pub fn spent_by_signer(&self, signer: Address, now: u64) -> Result<u128> {
        self.with(|connection| {
            let state = current(read_budget(connection)?, now);
            spent_by(connection, ShareOf::Signer, &signer.text(), state.window_start)
        })
    }

    /// What `client` (an IPv4 address or IPv6 /48) has spent in the budget window running at
    /// `now`.
    pub fn spent_by_client(&self, client: &str, now: u64) -> Result<u128> {
        self.with(|connection| {
            let state = current(read_budget(connection)?, now);
            spent_by(connection, ShareOf::Client, client, state.window_start)
        })
    }

    /// The budget at `now`: a window that ended reads as unused.
    pub fn budget(&self, now: u64) -> Result<BudgetState> {
        self.with(|connection| {
            let state = read_budget(connection)?;
            Ok(current(state, now))
        })
    }
}

/// What the relays whose `column` is `key` cost in the budget window that started at
/// `window_start`: settled relays at their cost, open ones at their reservation (a worst case).
/// Summed here, not in SQL: wei amounts are decimal text beyond SQLite's 64-bit integers.
pub(super) fn spent_by(
    sql: &mut impl Sql,
    column: ShareOf,
    key: &str,
    window_start: Option<u64>,
) -> Result<u128> {
    let Some(window_start) = window_start else { return Ok(0) };
    let amounts = sql.query(match column {
        ShareOf::Signer => {
            "SELECT COALESCE(cost_wei, reserved_wei) FROM relays WHERE signer = ?1 AND window_start = ?2"
        }
        ShareOf::Client => {
            "SELECT COALESCE(cost_wei, reserved_wei) FROM relays WHERE client_ip = ?1 AND window_start = ?2"
        }
    }, args![key, window_start as i64])?;
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

/// Requests of `kind` counted for `key` in the hour before `now`.
fn count_in_window(sql: &mut impl Sql, kind: RateKind, key: &str, now: u64) -> Result<u32> {
    let horizon = now.saturating_sub(RATE_WINDOW_SECS) as i64;
    sql.query_one(
        "SELECT COUNT(*) FROM rate_events WHERE kind = ?1 AND key = ?2 AND at > ?3",
        args![kind.as_str(), key, horizon],
    )?
    .get(0)
}

/// The lock of one rate-window key: its count and its new event are one step.
fn rate_lock(kind: RateKind, key: &str) -> Lock {
    Lock::Key(format!("rate:{}:{key}", kind.as_str()))
}

/// Counts one request of `kind` for `key` at `now`.
fn record_event(sql: &mut impl Sql, kind: RateKind, key: &str, now: u64) -> Result<()> {
    sql.execute(
        "INSERT INTO rate_events (kind, key, at) VALUES (?1, ?2, ?3)",
        args![kind.as_str(), key, now as i64],
    )?;
    Ok(())
}

pub(super) fn read_budget(sql: &mut impl Sql) -> Result<BudgetState> {
    let row = sql.query_one("SELECT window_start, used_wei, pending_wei FROM budget WHERE id = 1", &[])?;
    Ok(BudgetState {
        used_wei: parse_wei(&row.get::<String>(1)?)?,
        pending_wei: parse_wei(&row.get::<String>(2)?)?,
        window_start: row.get::<Option<i64>>(0)?.map(|start| start as u64),
    })
}

pub(super) fn write_budget(sql: &mut impl Sql, state: &BudgetState) -> Result<()> {
    sql.execute(
        "UPDATE budget SET window_start = ?1, used_wei = ?2, pending_wei = ?3 WHERE id = 1",
        args![
            state.window_start.map(|start| start as i64),
            state.used_wei.to_string(),
            state.pending_wei.to_string()
        ],
    )?;
    Ok(())
}

/// The budget with an elapsed window reset: the budget resets 24 hours after its first use.
pub(super) fn current(state: BudgetState, now: u64) -> BudgetState {
    match state.resets_at() {
        Some(resets_at) if now >= resets_at => {
            BudgetState { used_wei: 0, pending_wei: 0, window_start: None }
        }
        _ => state,
    }
}
