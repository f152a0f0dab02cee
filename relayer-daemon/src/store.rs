//! The embedded on-disk store (SQLite): the daily gas budget and its reset time, the per-IP and
//! per-signer request windows, and a record of every accepted relay with its transaction hash.
//!
//! Every operation is one SQLite transaction behind one mutex, so checks and updates are atomic
//! against concurrent requests and survive a restart. Times are Unix seconds passed in by the
//! caller (no clock in here), which keeps the windows testable.

use std::{path::Path, sync::Mutex};

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use crate::error::{Error, Result};

/// How long a gas budget lasts after its first use.
pub const BUDGET_WINDOW_SECS: u64 = 24 * 60 * 60;
/// The length of the sliding rate-limit window.
pub const RATE_WINDOW_SECS: u64 = 60 * 60;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS budget (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    window_start INTEGER,
    used_wei TEXT NOT NULL,
    pending_wei TEXT NOT NULL
);
INSERT OR IGNORE INTO budget (id, window_start, used_wei, pending_wei) VALUES (1, NULL, '0', '0');
CREATE TABLE IF NOT EXISTS rate_events (
    kind TEXT NOT NULL,
    key TEXT NOT NULL,
    at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS rate_events_by_key ON rate_events (kind, key, at);
CREATE INDEX IF NOT EXISTS rate_events_by_time ON rate_events (at);
CREATE TABLE IF NOT EXISTS relays (
    id INTEGER PRIMARY KEY,
    signer TEXT NOT NULL,
    forwarder_nonce TEXT NOT NULL,
    client_ip TEXT NOT NULL,
    gas_limit INTEGER NOT NULL,
    max_fee_wei TEXT NOT NULL,
    reserved_wei TEXT NOT NULL,
    window_start INTEGER NOT NULL,
    status TEXT NOT NULL,
    relayer_nonce INTEGER,
    tx_hash TEXT,
    cost_wei TEXT,
    error TEXT,
    created_at INTEGER NOT NULL,
    settled_at INTEGER
);
DROP INDEX IF EXISTS relays_live_request;
CREATE UNIQUE INDEX IF NOT EXISTS relays_live_request_v2 ON relays (signer, forwarder_nonce)
    WHERE status IN ('reserved', 'sent', 'mined', 'executed');
CREATE INDEX IF NOT EXISTS relays_open ON relays (status, created_at);
";

/// Statuses of a relay that hold its (signer, forwarder nonce): the request is in flight or ran.
const LIVE: &str = "('reserved', 'sent', 'mined', 'executed')";

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

/// What a relay reserves before it is sent.
#[derive(Debug, Clone)]
pub struct NewRelay {
    /// The request's signer (checksummed address).
    pub signer: String,
    /// The request's forwarder nonce (decimal).
    pub forwarder_nonce: String,
    /// The client's IP address.
    pub client_ip: String,
    /// Gas limit of the transaction the relayer will send.
    pub gas_limit: u64,
    /// Max fee per gas of that transaction.
    pub max_fee_wei: u128,
}

/// A reservation made by [`Store::reserve`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reservation {
    /// Row id of the relay record.
    pub id: i64,
    /// Wei reserved: gas limit × max fee, the most the transaction can cost.
    pub reserved_wei: u128,
}

/// Why a reservation was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The budget's remainder is below the worst-case cost.
    Budget,
    /// The same (signer, nonce) is already accepted: a replay.
    Duplicate,
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

/// How a mined relay ended, from its receipt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The transaction succeeded and the forwarder's call of the registry did too.
    Mined,
    /// The transaction itself failed (the forwarder reverted, or it ran out of gas).
    Reverted,
    /// The transaction succeeded but the registry call inside it reverted (`Executed` with
    /// `success` false): the request's nonce is used up and the gas paid.
    CallFailed,
}

impl Outcome {
    /// The record's status text.
    pub const fn status(self) -> &'static str {
        match self {
            Self::Mined => "mined",
            Self::Reverted => "reverted",
            Self::CallFailed => "call_failed",
        }
    }
}

/// A relay record, as kept on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelayRecord {
    /// Row id.
    pub id: i64,
    /// The request's signer.
    pub signer: String,
    /// The request's forwarder nonce.
    pub forwarder_nonce: String,
    /// `reserved`, `sent`, `mined`, `reverted` (mined but the transaction failed),
    /// `call_failed` (mined, the forwarder consumed the nonce, but the registry call reverted:
    /// the state changed between the simulation and the block), `failed`
    /// (never sent; its reservation was released), `executed` (the request ran but no receipt
    /// of ours shows it: the worst case stays charged) or `dropped` (the transaction will never
    /// be mined: reservation released, the request may be relayed again).
    pub status: String,
    /// The relayer-account nonce of the transaction.
    pub relayer_nonce: Option<u64>,
    /// The transaction hash, once sent.
    pub tx_hash: Option<String>,
    /// Wei reserved.
    pub reserved_wei: u128,
    /// Wei actually paid (`gasUsed × effectiveGasPrice`), once settled.
    pub cost_wei: Option<u128>,
}

/// The store: one SQLite connection behind a mutex.
#[derive(Debug)]
pub struct Store {
    connection: Mutex<Connection>,
}

impl Store {
    /// Opens (creating when needed) the store at `path`, creating its folder too.
    pub fn open(path: &Path) -> Result<Self> {
        if let Some(parent) = path.parent().filter(|parent| !parent.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)
                .map_err(|error| Error::Config(format!("creating {}: {error}", parent.display())))?;
        }
        let connection = Connection::open(path)?;
        // WAL keeps readers off the writer's lock; FULL sync so an accepted relay is on disk
        // before its answer leaves.
        connection.pragma_update(None, "journal_mode", "WAL")?;
        connection.pragma_update(None, "synchronous", "FULL")?;
        connection.busy_timeout(std::time::Duration::from_secs(5))?;
        connection.execute_batch(SCHEMA)?;
        Ok(Self { connection: Mutex::new(connection) })
    }

    fn with<T>(&self, f: impl FnOnce(&mut Connection) -> Result<T>) -> Result<T> {
        // A panic while holding the lock cannot leave SQLite half-written (transactions roll
        // back on drop), so a poisoned mutex is safe to reuse.
        let mut connection = self.connection.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        f(&mut connection)
    }

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
    pub fn count_signer(&self, signer: &str, nonce: &str, limit: u32, now: u64) -> Result<SignerCount> {
        self.with(|connection| {
            let tx = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
            if is_taken(&tx, signer, nonce)? {
                return Ok(SignerCount::Duplicate);
            }
            if count_in_window(&tx, RateKind::Signer, signer, now)? >= limit {
                return Ok(SignerCount::Limited);
            }
            record_event(&tx, RateKind::Signer, signer, now)?;
            tx.commit()?;
            Ok(SignerCount::Counted)
        })
    }

    /// The budget at `now`: a window that ended reads as unused.
    pub fn budget(&self, now: u64) -> Result<BudgetState> {
        self.with(|connection| {
            let state = read_budget(connection)?;
            Ok(current(state, now))
        })
    }

    /// Reserves the worst-case cost of a relay against the budget and records the relay, in one
    /// transaction: concurrent reservations cannot together exceed `limit_wei`, and the same
    /// signed request cannot be accepted twice.
    pub fn reserve(
        &self,
        relay: &NewRelay,
        limit_wei: u128,
        now: u64,
    ) -> Result<std::result::Result<Reservation, Refusal>> {
        self.with(|connection| {
            let tx = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
            if is_taken(&tx, &relay.signer, &relay.forwarder_nonce)? {
                return Ok(Err(Refusal::Duplicate));
            }
            let state = current(read_budget(&tx)?, now);
            let reserved_wei = u128::from(relay.gas_limit).saturating_mul(relay.max_fee_wei);
            if state.used_wei.saturating_add(reserved_wei) > limit_wei {
                return Ok(Err(Refusal::Budget));
            }
            let window_start = state.window_start.unwrap_or(now);
            write_budget(
                &tx,
                &BudgetState {
                    used_wei: state.used_wei + reserved_wei,
                    pending_wei: state.pending_wei + reserved_wei,
                    window_start: Some(window_start),
                },
            )?;
            tx.execute(
                "INSERT INTO relays (signer, forwarder_nonce, client_ip, gas_limit, max_fee_wei,
                     reserved_wei, window_start, status, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'reserved', ?8)",
                params![
                    relay.signer,
                    relay.forwarder_nonce,
                    relay.client_ip,
                    relay.gas_limit as i64,
                    relay.max_fee_wei.to_string(),
                    reserved_wei.to_string(),
                    window_start as i64,
                    now as i64
                ],
            )?;
            let id = tx.last_insert_rowid();
            tx.commit()?;
            Ok(Ok(Reservation { id, reserved_wei }))
        })
    }

    /// Records the relay's signed transaction, just before it is submitted (again, with its new
    /// nonce and hash, should it be re-signed). A closed relay is never reopened.
    pub fn mark_sent(&self, id: i64, relayer_nonce: u64, tx_hash: &str) -> Result<()> {
        self.with(|connection| {
            connection.execute(
                "UPDATE relays SET status = 'sent', relayer_nonce = ?2, tx_hash = ?3
                 WHERE id = ?1 AND status IN ('reserved', 'sent')",
                params![id, relayer_nonce as i64, tx_hash],
            )?;
            Ok(())
        })
    }

    /// Gives back the reservation of a relay that was never sent.
    pub fn release(&self, id: i64, error: &str, now: u64) -> Result<()> {
        self.finish(id, "failed", Some(0), Some(error), now)
    }

    /// Replaces the reservation of a mined relay by what it really cost.
    pub fn settle(&self, id: i64, cost_wei: u128, outcome: Outcome, now: u64) -> Result<()> {
        self.finish(id, outcome.status(), Some(cost_wei), None, now)
    }

    /// Closes a relay whose request ran on chain without a receipt of ours to show for it: the
    /// worst-case reservation becomes its cost (the budget is never under-counted), and the
    /// (signer, nonce) stays taken.
    pub fn mark_executed(&self, id: i64, now: u64) -> Result<()> {
        self.finish(id, "executed", None, Some("the request ran; no receipt of ours found"), now)
    }

    /// Closes a relay whose transaction will never be mined: its reservation is released and its
    /// (signer, nonce) freed, so the request can be relayed again.
    pub fn drop_relay(&self, id: i64, reason: &str, now: u64) -> Result<()> {
        self.finish(id, "dropped", Some(0), Some(reason), now)
    }

    /// `cost_wei` replaces the reservation; `None` keeps the reservation as the cost.
    fn finish(
        &self,
        id: i64,
        status: &str,
        cost_wei: Option<u128>,
        error: Option<&str>,
        now: u64,
    ) -> Result<()> {
        self.with(|connection| {
            let tx = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let (reserved, window_start, previous): (String, i64, String) = tx.query_row(
                "SELECT reserved_wei, window_start, status FROM relays WHERE id = ?1",
                params![id],
                |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
            )?;
            if previous != "reserved" && previous != "sent" {
                // Already settled (a settlement after a restart racing a live one): once only.
                return Ok(());
            }
            let reserved = parse_wei(&reserved)?;
            let cost_wei = cost_wei.unwrap_or(reserved);
            let mut state = read_budget(&tx)?;
            // A reservation from a window that has since reset belongs to that old window.
            if state.window_start == Some(window_start as u64) {
                state.used_wei = state.used_wei.saturating_sub(reserved).saturating_add(cost_wei);
                state.pending_wei = state.pending_wei.saturating_sub(reserved);
                write_budget(&tx, &state)?;
            }
            tx.execute(
                "UPDATE relays SET status = ?2, cost_wei = ?3, error = ?4, settled_at = ?5
                 WHERE id = ?1",
                params![id, status, cost_wei.to_string(), error, now as i64],
            )?;
            tx.commit()?;
            Ok(())
        })
    }

    /// Relays still `reserved` or `sent` that were created at or before `created_by`: what the
    /// reconciler looks at.
    pub fn open_since(&self, created_by: u64) -> Result<Vec<RelayRecord>> {
        self.records_where(&format!("status IN ('reserved', 'sent') AND created_at <= {}", created_by as i64))
    }

    /// Every relay record, oldest first.
    pub fn records(&self) -> Result<Vec<RelayRecord>> {
        self.records_where("1 = 1")
    }

    fn records_where(&self, condition: &str) -> Result<Vec<RelayRecord>> {
        self.with(|connection| {
            let mut statement = connection.prepare(&format!(
                "SELECT id, signer, forwarder_nonce, status, relayer_nonce, tx_hash, reserved_wei,
                     cost_wei
                 FROM relays WHERE {condition} ORDER BY id"
            ))?;
            let rows = statement.query_map([], |row| {
                Ok((
                    row.get::<_, i64>(0)?,
                    row.get::<_, String>(1)?,
                    row.get::<_, String>(2)?,
                    row.get::<_, String>(3)?,
                    row.get::<_, Option<i64>>(4)?,
                    row.get::<_, Option<String>>(5)?,
                    row.get::<_, String>(6)?,
                    row.get::<_, Option<String>>(7)?,
                ))
            })?;
            let mut records = Vec::new();
            for row in rows {
                let (id, signer, forwarder_nonce, status, relayer_nonce, tx_hash, reserved, cost) = row?;
                records.push(RelayRecord {
                    id,
                    signer,
                    forwarder_nonce,
                    status,
                    relayer_nonce: relayer_nonce.map(|nonce| nonce as u64),
                    tx_hash,
                    reserved_wei: parse_wei(&reserved)?,
                    cost_wei: cost.as_deref().map(parse_wei).transpose()?,
                });
            }
            Ok(records)
        })
    }
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

/// True when the signed request (`signer`, forwarder `nonce`) already has a live relay: a
/// replay, which is neither counted nor reserved for again.
fn is_taken(connection: &Connection, signer: &str, nonce: &str) -> Result<bool> {
    let live: Option<i64> = connection
        .query_row(
            &format!("SELECT id FROM relays WHERE signer = ?1 AND forwarder_nonce = ?2 AND status IN {LIVE}"),
            params![signer, nonce],
            |row| row.get(0),
        )
        .optional()?;
    Ok(live.is_some())
}

fn read_budget(connection: &Connection) -> Result<BudgetState> {
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

fn write_budget(connection: &Connection, state: &BudgetState) -> Result<()> {
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
fn current(state: BudgetState, now: u64) -> BudgetState {
    match state.resets_at() {
        Some(resets_at) if now >= resets_at => {
            BudgetState { used_wei: 0, pending_wei: 0, window_start: None }
        }
        _ => state,
    }
}

fn parse_wei(text: &str) -> Result<u128> {
    text.parse().map_err(|_| Error::Config(format!("corrupt wei amount in the store: {text:?}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("nested/relayer.db")).unwrap();
        (dir, store)
    }

    fn relay(signer: &str, nonce: u64, gas_limit: u64) -> NewRelay {
        NewRelay {
            signer: signer.into(),
            forwarder_nonce: nonce.to_string(),
            client_ip: "127.0.0.1".into(),
            gas_limit,
            max_fee_wei: 10,
        }
    }

    #[test]
    fn rate_windows_slide_and_refusals_do_not_count() {
        let (_dir, store) = store();
        for second in 0..3 {
            assert!(store.hit(RateKind::Ip, "a", 3, 1_000 + second).unwrap());
        }
        assert!(!store.hit(RateKind::Ip, "a", 3, 1_100).unwrap());
        assert!(store.hit(RateKind::Ip, "b", 3, 1_100).unwrap(), "keys are separate");
        assert!(store.hit(RateKind::Signer, "a", 3, 1_100).unwrap(), "kinds are separate");
        assert_eq!(store.hits(RateKind::Ip, "a", 1_100).unwrap(), 3);
        // The first event leaves the window exactly one hour later.
        assert!(!store.hit(RateKind::Ip, "a", 3, 1_000 + RATE_WINDOW_SECS - 1).unwrap());
        assert!(store.hit(RateKind::Ip, "a", 3, 1_000 + RATE_WINDOW_SECS).unwrap());
        assert!(!store.hit(RateKind::Ip, "a", 3, 1_000 + RATE_WINDOW_SECS).unwrap());
    }

    #[test]
    fn reservations_cannot_overdraw_and_settle_to_the_real_cost() {
        let (_dir, store) = store();
        let first = store.reserve(&relay("s1", 0, 50), 1_000, 100).unwrap().unwrap();
        assert_eq!(first.reserved_wei, 500);
        assert_eq!(
            store.reserve(&relay("s2", 0, 51), 1_000, 101).unwrap(),
            Err(Refusal::Budget),
            "500 + 510 > 1000"
        );
        let second = store.reserve(&relay("s2", 0, 50), 1_000, 101).unwrap().unwrap();
        let state = store.budget(102).unwrap();
        assert_eq!((state.used_wei, state.pending_wei), (1_000, 1_000));
        assert_eq!(state.resets_at(), Some(100 + BUDGET_WINDOW_SECS));

        store.mark_sent(first.id, 7, "0xabc").unwrap();
        store.settle(first.id, 123, Outcome::Mined, 103).unwrap();
        store.settle(first.id, 999, Outcome::Mined, 104).unwrap();
        store.release(second.id, "node refused", 104).unwrap();
        let state = store.budget(105).unwrap();
        assert_eq!((state.used_wei, state.pending_wei), (123, 0));

        let records = store.records().unwrap();
        assert_eq!(records[0].status, "mined");
        assert_eq!(records[0].cost_wei, Some(123));
        assert_eq!(records[0].tx_hash.as_deref(), Some("0xabc"));
        assert_eq!(records[1].status, "failed");
    }

    #[test]
    fn the_same_request_is_reserved_once_unless_it_failed() {
        let (_dir, store) = store();
        let first = store.reserve(&relay("s", 3, 1), 1_000, 0).unwrap().unwrap();
        assert_eq!(store.reserve(&relay("s", 3, 1), 1_000, 0).unwrap(), Err(Refusal::Duplicate));
        store.release(first.id, "node refused", 0).unwrap();
        assert!(store.reserve(&relay("s", 3, 1), 1_000, 0).unwrap().is_ok());
    }

    #[test]
    fn signer_counts_recheck_the_limit_and_skip_requests_already_accepted() {
        let (_dir, store) = store();
        // Two requests passed the read-only check at 1 of 2; only one more may be counted.
        assert_eq!(store.count_signer("s", "0", 2, 10).unwrap(), SignerCount::Counted);
        assert_eq!(store.hits(RateKind::Signer, "s", 10).unwrap(), 1);
        assert_eq!(store.count_signer("s", "1", 2, 10).unwrap(), SignerCount::Counted);
        assert_eq!(store.count_signer("s", "2", 2, 10).unwrap(), SignerCount::Limited);
        assert_eq!(store.hits(RateKind::Signer, "s", 10).unwrap(), 2);
        // A copy of a request already accepted is not counted, even with quota left.
        store.reserve(&relay("t", 4, 1), 1_000, 10).unwrap().unwrap();
        assert_eq!(store.count_signer("t", "4", 2, 10).unwrap(), SignerCount::Duplicate);
        assert_eq!(store.hits(RateKind::Signer, "t", 10).unwrap(), 0);
        assert_eq!(store.count_signer("s", "0", 2, 10 + RATE_WINDOW_SECS).unwrap(), SignerCount::Counted);
    }

    #[test]
    fn dropped_relays_free_their_request_and_executed_ones_keep_the_worst_case() {
        let (_dir, store) = store();
        let dropped = store.reserve(&relay("s", 0, 10), 1_000, 5).unwrap().unwrap();
        let executed = store.reserve(&relay("t", 0, 20), 1_000, 5).unwrap().unwrap();
        assert_eq!(store.open_since(4).unwrap().len(), 0, "newer than the horizon");
        assert_eq!(store.open_since(5).unwrap().len(), 2);
        store.drop_relay(dropped.id, "never sent", 6).unwrap();
        store.mark_executed(executed.id, 6).unwrap();
        // A late mark_sent does not reopen a closed relay.
        store.mark_sent(dropped.id, 3, "0x01").unwrap();
        let state = store.budget(7).unwrap();
        assert_eq!((state.used_wei, state.pending_wei), (200, 0));
        let statuses: Vec<_> = store.records().unwrap().into_iter().map(|r| (r.status, r.cost_wei)).collect();
        assert_eq!(statuses, [("dropped".to_owned(), Some(0)), ("executed".to_owned(), Some(200))]);
        assert!(store.open_since(10).unwrap().is_empty());
        assert!(store.reserve(&relay("s", 0, 10), 1_000, 8).unwrap().is_ok(), "the slot is free again");
        assert_eq!(store.reserve(&relay("t", 0, 10), 1_000, 8).unwrap(), Err(Refusal::Duplicate));
    }

    #[test]
    fn the_budget_resets_a_day_after_first_use_and_persists() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("relayer.db");
        {
            let store = Store::open(&path).unwrap();
            let reservation = store.reserve(&relay("s", 0, 10), 1_000, 50).unwrap().unwrap();
            store.mark_sent(reservation.id, 0, "0x01").unwrap();
            assert!(store.hit(RateKind::Signer, "s", 1, 50).unwrap());
        }
        let store = Store::open(&path).unwrap();
        assert_eq!(store.budget(60).unwrap().used_wei, 100, "survives reopening");
        assert!(!store.hit(RateKind::Signer, "s", 1, 60).unwrap());
        assert_eq!(store.open_since(60).unwrap().len(), 1, "the sent relay is still open");

        let later = 50 + BUDGET_WINDOW_SECS;
        assert_eq!(store.budget(later - 1).unwrap().used_wei, 100);
        assert_eq!(
            store.budget(later).unwrap(),
            BudgetState { used_wei: 0, pending_wei: 0, window_start: None }
        );
        // The old window's reservation settling late leaves the new window alone.
        let fresh = store.reserve(&relay("t", 0, 1), 1_000, later).unwrap().unwrap();
        store.settle(1, 40, Outcome::Mined, later).unwrap();
        assert_eq!(store.budget(later).unwrap().used_wei, fresh.reserved_wei);
    }
}
