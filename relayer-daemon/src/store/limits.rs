//! Rate windows (per IP, per signer) and the daily gas budget.

use alloy::primitives::{Address, U256};
use rusqlite::{Connection, TransactionBehavior, params};

use super::{Store, codec::Text, is_taken, parse_wei};
use crate::error::Result;

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
            let tx = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let horizon = now.saturating_sub(RATE_WINDOW_SECS) as i64;
            tx.execute("DELETE FROM rate_events WHERE at <= ?1", params![horizon])?;
            if count_in_window(&tx, kind, key, now)? >= limit {
                return Ok(false);
            }
            record_event(&tx, kind, key, now)?;
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
        self.with(|connection| {
            let tx = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
            if is_taken(&tx, signer, nonce)? {
                return Ok(SignerCount::Duplicate);
            }
            let key = signer.text();
            if count_in_window(&tx, RateKind::Signer, &key, now)? >= limit {
                return Ok(SignerCount::Limited);
            }
            record_event(&tx, RateKind::Signer, &key, now)?;
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
    connection: &Connection,
    column: ShareOf,
    key: &str,
    window_start: Option<u64>,
) -> Result<u128> {
    let Some(window_start) = window_start else { return Ok(0) };
    let mut statement = connection.prepare_cached(match column {
        ShareOf::Signer => {
            "SELECT COALESCE(cost_wei, reserved_wei) FROM relays WHERE signer = ?1 AND window_start = ?2"
        }
        ShareOf::Client => {
            "SELECT COALESCE(cost_wei, reserved_wei) FROM relays WHERE client_ip = ?1 AND window_start = ?2"
        }
    })?;
    let amounts = statement.query_map(params![key, window_start as i64], |row| row.get::<_, String>(0))?;
    let mut spent = 0u128;
    for amount in amounts {
        spent = spent.saturating_add(parse_wei(&amount?)?);
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
fn count_in_window(connection: &Connection, kind: RateKind, key: &str, now: u64) -> Result<u32> {
    let horizon = now.saturating_sub(RATE_WINDOW_SECS) as i64;
    Ok(connection.query_row(
        "SELECT COUNT(*) FROM rate_events WHERE kind = ?1 AND key = ?2 AND at > ?3",
        params![kind.as_str(), key, horizon],
        |row| row.get(0),
    )?)
}

/// Counts one request of `kind` for `key` at `now`.
fn record_event(connection: &Connection, kind: RateKind, key: &str, now: u64) -> Result<()> {
    connection.execute(
        "INSERT INTO rate_events (kind, key, at) VALUES (?1, ?2, ?3)",
        params![kind.as_str(), key, now as i64],
    )?;
    Ok(())
}

pub(super) fn read_budget(connection: &Connection) -> Result<BudgetState> {
    let (window_start, used, pending): (Option<i64>, String, String) = connection.query_row(
        "SELECT window_start, used_wei, pending_wei FROM budget WHERE id = 1",
        [],
        |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
    )?;
    Ok(BudgetState {
        used_wei: parse_wei(&used)?,
        pending_wei: parse_wei(&pending)?,
        window_start: window_start.map(|start| start as u64),
    })
}

pub(super) fn write_budget(connection: &Connection, state: &BudgetState) -> Result<()> {
    connection.execute(
        "UPDATE budget SET window_start = ?1, used_wei = ?2, pending_wei = ?3 WHERE id = 1",
        params![
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
