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
CREATE TABLE IF NOT EXISTS relay_txs (
    relay INTEGER NOT NULL,
    tx_hash TEXT NOT NULL,
    kind TEXT NOT NULL,
    max_fee_wei TEXT NOT NULL,
    priority_fee_wei TEXT NOT NULL,
    sent_block INTEGER,
    sent_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS relay_txs_by_hash ON relay_txs (tx_hash);
CREATE INDEX IF NOT EXISTS relay_txs_by_relay ON relay_txs (relay);
";

/// Columns added to `relays` by the relay lifecycle (id, retries, replacement, outcome): added
/// to a store written by an earlier version when it is opened.
const ADDED_COLUMNS: [(&str, &str); 11] = [
    ("relay_id", "TEXT"),
    ("digest", "TEXT"),
    ("signature", "TEXT"),
    ("deadline", "INTEGER NOT NULL DEFAULT 0"),
    ("input", "TEXT"),
    ("priority_fee_wei", "TEXT NOT NULL DEFAULT '0'"),
    ("block_number", "INTEGER"),
    ("gas_used", "INTEGER"),
    ("revert_reason", "TEXT"),
    ("sent_at", "INTEGER"),
    ("updated_at", "INTEGER"),
];

/// Run after [`ADDED_COLUMNS`]: ids for earlier records, the old name of `accepted`, the earlier
/// records' hashes in the history, and the indexes over the new columns.
const MIGRATION: &str = "
UPDATE relays SET relay_id = lower(hex(randomblob(16))) WHERE relay_id IS NULL;
UPDATE relays SET status = 'accepted' WHERE status = 'reserved';
INSERT INTO relay_txs (relay, tx_hash, kind, max_fee_wei, priority_fee_wei, sent_block, sent_at)
    SELECT id, tx_hash, 'relay', max_fee_wei, priority_fee_wei, NULL, created_at FROM relays
    WHERE tx_hash IS NOT NULL AND id NOT IN (SELECT relay FROM relay_txs);
CREATE UNIQUE INDEX IF NOT EXISTS relays_by_relay_id ON relays (relay_id);
DROP INDEX IF EXISTS relays_live_request;
DROP INDEX IF EXISTS relays_live_request_v2;
CREATE UNIQUE INDEX IF NOT EXISTS relays_live_request_v3 ON relays (signer, forwarder_nonce)
    WHERE status IN ('accepted', 'sent', 'replaced', 'cancelling', 'mined', 'executed');
CREATE INDEX IF NOT EXISTS relays_open ON relays (status, created_at);
CREATE INDEX IF NOT EXISTS relays_by_request ON relays (signer, forwarder_nonce);
";

/// Statuses of a relay that hold its (signer, forwarder nonce): the request is in flight or ran.
const LIVE: &str = "('accepted', 'sent', 'replaced', 'cancelling', 'mined', 'executed')";
/// Statuses of a relay still waiting for the chain.
const OPEN: &str = "('accepted', 'sent', 'replaced', 'cancelling')";
/// Gas of a plain transfer: what a cancellation (a zero-value self-transfer) uses.
pub(crate) const TRANSFER_GAS: u64 = 21_000;

/// Where a relay stands. Stored as [`RelayStatus::as_str`]; clients see [`RelayStatus::public`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RelayStatus {
    /// Checked and reserved for; not sent yet.
    Accepted,
    /// Its transaction is with the node, not mined yet.
    Sent,
    /// It was stuck and is now sent again at the same relayer nonce with higher fees.
    Replaced,
    /// It was stuck past its deadline or the fee cap: a zero-value self-transfer at its relayer
    /// nonce is on its way to cancel it. Clients read `expired`; should the relay's own
    /// transaction win the race, it ends `mined` all the same.
    Cancelling,
    /// Mined, and the registry call succeeded.
    Mined,
    /// Mined, but the registry call inside `execute` failed: gas paid, request nonce used up.
    CallFailed,
    /// Mined, but the transaction itself failed (the forwarder reverted, or it ran out of gas).
    Reverted,
    /// The request ran on chain with no receipt of ours to show for it: worst case charged.
    Executed,
    /// Never sent: the node refused it; the reservation was released.
    Failed,
    /// It will never be mined: reservation released, the request may be relayed again.
    Dropped,
    /// Its relayer nonce was cancelled: the request never ran, and may be signed afresh.
    Expired,
}

impl RelayStatus {
    const ALL: [Self; 11] = [
        Self::Accepted,
        Self::Sent,
        Self::Replaced,
        Self::Cancelling,
        Self::Mined,
        Self::CallFailed,
        Self::Reverted,
        Self::Executed,
        Self::Failed,
        Self::Dropped,
        Self::Expired,
    ];

    /// The text kept in the store.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Accepted => "accepted",
            Self::Sent => "sent",
            Self::Replaced => "replaced",
            Self::Cancelling => "cancelling",
            Self::Mined => "mined",
            Self::CallFailed => "call_failed",
            Self::Reverted => "reverted",
            Self::Executed => "executed",
            Self::Failed => "failed",
            Self::Dropped => "dropped",
            Self::Expired => "expired",
        }
    }

    /// The status `GET /relay/:id` reports (INTERFACE.md section 3).
    pub const fn public(self) -> &'static str {
        match self {
            Self::Cancelling => "expired",
            other => other.as_str(),
        }
    }

    /// Still waiting for the chain (the reconciler's and the follower's business).
    pub const fn is_open(self) -> bool {
        matches!(self, Self::Accepted | Self::Sent | Self::Replaced | Self::Cancelling)
    }

    /// A retry of the same signed request is answered with this relay rather than relayed again:
    /// the request is on its way or ran. Dropped, failed, reverted and expired relays never ran,
    /// so their request may be relayed again.
    pub const fn is_held(self) -> bool {
        self.is_open() || matches!(self, Self::Mined | Self::CallFailed | Self::Executed)
    }

    fn parse(text: &str) -> Result<Self> {
        Self::ALL
            .into_iter()
            .find(|status| status.as_str() == text)
            .ok_or_else(|| Error::StoreCorrupt(format!("unknown relay status {text:?}")))
    }
}

/// What a transaction of a relay does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxKind {
    /// `execute` of the request (the first send or a fee replacement).
    Relay,
    /// A zero-value self-transfer cancelling the relayer nonce.
    Cancel,
}

impl TxKind {
    const fn as_str(self) -> &'static str {
        match self {
            Self::Relay => "relay",
            Self::Cancel => "cancel",
        }
    }
}

/// One transaction sent for a relay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentTx {
    /// Its hash.
    pub hash: String,
    /// What it does.
    pub kind: TxKind,
    /// Its max fee per gas.
    pub max_fee_wei: u128,
    /// Its priority fee per gas.
    pub priority_fee_wei: u128,
    /// The latest block when it was sent.
    pub sent_block: Option<u64>,
    /// When it was sent (Unix seconds).
    pub sent_at: u64,
}

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
    /// The request's EIP-712 digest (hex): with the signature, what makes a retry "the same".
    pub digest: String,
    /// The request's signature (hex).
    pub signature: String,
    /// The request's deadline (Unix seconds; 0: none).
    pub deadline: u64,
    /// The calldata of `execute` (hex), kept so a stuck transaction can be sent again.
    pub input: String,
    /// The client's IP address.
    pub client_ip: String,
    /// Gas limit of the transaction the relayer will send.
    pub gas_limit: u64,
    /// Max fee per gas of that transaction.
    pub max_fee_wei: u128,
    /// Priority fee per gas of that transaction.
    pub priority_fee_wei: u128,
}

/// A reservation made by [`Store::reserve`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reservation {
    /// Row id of the relay record.
    pub id: i64,
    /// The relay id clients see (random, stable across replacements).
    pub relay_id: String,
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
    /// The cancellation (a self-transfer at the relay's relayer nonce) was mined.
    Cancelled,
}

impl Outcome {
    /// The relay's status after this outcome.
    pub const fn status(self) -> RelayStatus {
        match self {
            Self::Mined => RelayStatus::Mined,
            Self::Reverted => RelayStatus::Reverted,
            Self::CallFailed => RelayStatus::CallFailed,
            Self::Cancelled => RelayStatus::Expired,
        }
    }
}

/// What a mined transaction of a relay says, for [`Store::settle`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settlement {
    /// The mined transaction's hash.
    pub tx_hash: String,
    /// `gasUsed × effectiveGasPrice`.
    pub cost_wei: u128,
    /// How the relay ended.
    pub outcome: Outcome,
    /// The block it is in.
    pub block_number: Option<u64>,
    /// Gas it used.
    pub gas_used: Option<u64>,
    /// The registry's revert reason, when its call failed.
    pub revert_reason: Option<String>,
}

impl Settlement {
    /// A settlement with only a cost and an outcome (the store's own tests).
    pub fn of(tx_hash: &str, cost_wei: u128, outcome: Outcome) -> Self {
        Self {
            tx_hash: tx_hash.to_owned(),
            cost_wei,
            outcome,
            block_number: None,
            gas_used: None,
            revert_reason: None,
        }
    }
}

/// A relay record, as kept on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelayRecord {
    /// Row id.
    pub id: i64,
    /// The relay id clients see.
    pub relay_id: String,
    /// The request's signer.
    pub signer: String,
    /// The request's forwarder nonce.
    pub forwarder_nonce: String,
    /// The request's EIP-712 digest (hex), if recorded (records of earlier versions lack it).
    pub digest: Option<String>,
    /// The request's signature (hex), if recorded.
    pub signature: Option<String>,
    /// The request's deadline (Unix seconds; 0: none).
    pub deadline: u64,
    /// The calldata of `execute` (hex), if recorded.
    pub input: Option<String>,
    /// Where the relay stands.
    pub status: RelayStatus,
    /// The relayer-account nonce of its transactions.
    pub relayer_nonce: Option<u64>,
    /// The current transaction hash (the latest sent, or the one mined).
    pub tx_hash: Option<String>,
    /// Every transaction sent for it, oldest first.
    pub txs: Vec<SentTx>,
    /// Gas limit of the relay's transactions.
    pub gas_limit: u64,
    /// Max fee per gas of the latest transaction.
    pub max_fee_wei: u128,
    /// Priority fee per gas of the latest transaction.
    pub priority_fee_wei: u128,
    /// Wei reserved.
    pub reserved_wei: u128,
    /// Wei actually paid (`gasUsed × effectiveGasPrice`), once settled.
    pub cost_wei: Option<u128>,
    /// The block of the mined transaction.
    pub block_number: Option<u64>,
    /// Gas the mined transaction used.
    pub gas_used: Option<u64>,
    /// The registry's revert reason, for `call_failed`.
    pub revert_reason: Option<String>,
    /// Why it was dropped or failed, for the record.
    pub error: Option<String>,
    /// When it was accepted (Unix seconds).
    pub created_at: u64,
    /// When its first transaction was sent.
    pub sent_at: Option<u64>,
    /// When it last changed.
    pub updated_at: Option<u64>,
    /// When it ended.
    pub settled_at: Option<u64>,
}

/// A relay transaction sent again at the same nonce, for [`Store::replace`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replacement {
    /// The new transaction's hash.
    pub tx_hash: String,
    /// A fee replacement of `execute`, or the cancellation.
    pub kind: TxKind,
    /// Its max fee per gas.
    pub max_fee_wei: u128,
    /// Its priority fee per gas.
    pub priority_fee_wei: u128,
    /// The latest block when it is sent.
    pub sent_block: u64,
}

/// The store: one SQLite connection behind a mutex.
#[derive(Debug)]
pub struct Store {
    connection: Mutex<Connection>,
}

const RECORD_COLUMNS: &str = "id, relay_id, signer, forwarder_nonce, digest, signature, deadline, input,
    status, relayer_nonce, tx_hash, gas_limit, max_fee_wei, priority_fee_wei, reserved_wei, cost_wei,
    block_number, gas_used, revert_reason, error, created_at, sent_at, updated_at, settled_at";

impl Store {
    /// Opens (creating when needed) the store at `path`, creating its folder too, and brings a
    /// store of an earlier version up to date.
    pub fn open(path: &Path) -> Result<Self> {
        if let Some(parent) = path.parent().filter(|parent| !parent.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)
                .map_err(|error| Error::Config(format!("creating {}: {error}", parent.display())))?;
        }
        let mut connection = Connection::open(path)?;
        // WAL keeps readers off the writer's lock; FULL sync so an accepted relay is on disk
        // before its answer leaves.
        connection.pragma_update(None, "journal_mode", "WAL")?;
        connection.pragma_update(None, "synchronous", "FULL")?;
        connection.busy_timeout(std::time::Duration::from_secs(5))?;
        let tx = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
        tx.execute_batch(SCHEMA)?;
        let existing: Vec<String> = tx
            .prepare("SELECT name FROM pragma_table_info('relays')")?
            .query_map([], |row| row.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        for (name, declaration) in ADDED_COLUMNS {
            if !existing.iter().any(|column| column == name) {
                tx.execute_batch(&format!("ALTER TABLE relays ADD COLUMN {name} {declaration}"))?;
            }
        }
        tx.execute_batch(MIGRATION)?;
        tx.commit()?;
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
            let (id, relay_id): (i64, String) = tx.query_row(
                "INSERT INTO relays (relay_id, signer, forwarder_nonce, digest, signature, deadline,
                     input, client_ip, gas_limit, max_fee_wei, priority_fee_wei, reserved_wei,
                     window_start, status, created_at, updated_at)
                 VALUES (lower(hex(randomblob(16))), ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12,
                     'accepted', ?13, ?13)
                 RETURNING id, relay_id",
                params![
                    relay.signer,
                    relay.forwarder_nonce,
                    relay.digest,
                    relay.signature,
                    relay.deadline as i64,
                    relay.input,
                    relay.client_ip,
                    relay.gas_limit as i64,
                    relay.max_fee_wei.to_string(),
                    relay.priority_fee_wei.to_string(),
                    reserved_wei.to_string(),
                    window_start as i64,
                    now as i64
                ],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )?;
            tx.commit()?;
            Ok(Ok(Reservation { id, relay_id, reserved_wei }))
        })
    }

    /// Records the relay's first signed transaction, just before it is submitted (again, with
    /// its new nonce and hash, should it be re-signed after the node refused the first: the
    /// refused hash leaves the history). A closed relay is never reopened.
    pub fn mark_sent(&self, id: i64, relayer_nonce: u64, tx_hash: &str, block: u64, now: u64) -> Result<()> {
        self.with(|connection| {
            let tx = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let changed = tx.execute(
                "UPDATE relays SET status = 'sent', relayer_nonce = ?2, tx_hash = ?3, sent_at = ?4,
                     updated_at = ?4
                 WHERE id = ?1 AND status IN ('accepted', 'sent')",
                params![id, relayer_nonce as i64, tx_hash, now as i64],
            )?;
            if changed == 1 {
                tx.execute("DELETE FROM relay_txs WHERE relay = ?1", params![id])?;
                tx.execute(
                    "INSERT INTO relay_txs (relay, tx_hash, kind, max_fee_wei, priority_fee_wei,
                         sent_block, sent_at)
                     SELECT id, tx_hash, 'relay', max_fee_wei, priority_fee_wei, ?2, ?3
                     FROM relays WHERE id = ?1",
                    params![id, block as i64, now as i64],
                )?;
            }
            tx.commit()?;
            Ok(())
        })
    }

    /// Records a transaction sent again at the relay's relayer nonce (a fee replacement or the
    /// cancellation), just before it is submitted. The reservation grows to the new worst case
    /// (it never shrinks: an earlier, cheaper transaction may still be the one mined). A fee
    /// replacement the budget cannot cover is refused ([`Refusal::Budget`]); a cancellation is
    /// always recorded, as it is the way out. Returns `Ok(Err(Refusal::Duplicate))` if the relay
    /// is no longer open.
    pub fn replace(
        &self,
        id: i64,
        replacement: &Replacement,
        limit_wei: u128,
        now: u64,
    ) -> Result<std::result::Result<u128, Refusal>> {
        self.with(|connection| {
            let tx = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let (status, reserved, window_start, gas_limit): (String, String, i64, i64) = tx.query_row(
                "SELECT status, reserved_wei, window_start, gas_limit FROM relays WHERE id = ?1",
                params![id],
                |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?)),
            )?;
            let status = RelayStatus::parse(&status)?;
            if !matches!(status, RelayStatus::Sent | RelayStatus::Replaced | RelayStatus::Cancelling) {
                return Ok(Err(Refusal::Duplicate));
            }
            let reserved = parse_wei(&reserved)?;
            let gas = match replacement.kind {
                TxKind::Relay => gas_limit as u64,
                TxKind::Cancel => TRANSFER_GAS,
            };
            let worst = u128::from(gas).saturating_mul(replacement.max_fee_wei).max(reserved);
            let growth = worst - reserved;
            let mut state = read_budget(&tx)?;
            let same_window = state.window_start == Some(window_start as u64);
            if replacement.kind == TxKind::Relay
                && same_window
                && state.used_wei.saturating_add(growth) > limit_wei
            {
                return Ok(Err(Refusal::Budget));
            }
            if same_window {
                state.used_wei = state.used_wei.saturating_add(growth);
                state.pending_wei = state.pending_wei.saturating_add(growth);
                write_budget(&tx, &state)?;
            }
            let next = match replacement.kind {
                TxKind::Relay => RelayStatus::Replaced,
                TxKind::Cancel => RelayStatus::Cancelling,
            };
            tx.execute(
                "UPDATE relays SET status = ?2, tx_hash = ?3, max_fee_wei = ?4, priority_fee_wei = ?5,
                     reserved_wei = ?6, updated_at = ?7
                 WHERE id = ?1",
                params![
                    id,
                    next.as_str(),
                    replacement.tx_hash,
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
                params![
                    id,
                    replacement.tx_hash,
                    replacement.kind.as_str(),
                    replacement.max_fee_wei.to_string(),
                    replacement.priority_fee_wei.to_string(),
                    replacement.sent_block as i64,
                    now as i64
                ],
            )?;
            tx.commit()?;
            Ok(Ok(worst))
        })
    }

    /// Takes back the record of a transaction [`Store::replace`] recorded but the node did not
    /// take (refused, underpriced, its nonce already mined): the relay's current transaction is
    /// again the one before it, so no one looks for a hash the node never had. The grown
    /// reservation stays (a worst case, settled to the real cost in the end).
    pub fn unreplace(&self, id: i64, tx_hash: &str, now: u64) -> Result<()> {
        self.with(|connection| {
            let tx = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let status: String =
                tx.query_row("SELECT status FROM relays WHERE id = ?1", params![id], |row| row.get(0))?;
            if !RelayStatus::parse(&status)?.is_open() {
                return Ok(());
            }
            tx.execute("DELETE FROM relay_txs WHERE relay = ?1 AND tx_hash = ?2", params![id, tx_hash])?;
            let remaining: Vec<(String, String, String, String)> = tx
                .prepare(
                    "SELECT tx_hash, kind, max_fee_wei, priority_fee_wei FROM relay_txs WHERE relay = ?1
                     ORDER BY rowid",
                )?
                .query_map(params![id], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?)))?
                .collect::<rusqlite::Result<_>>()?;
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
                params![id, status.as_str(), hash, max_fee, priority_fee, now as i64],
            )?;
            tx.commit()?;
            Ok(())
        })
    }

    /// Gives back the reservation of a relay that was never sent.
    pub fn release(&self, id: i64, error: &str, now: u64) -> Result<()> {
        self.finish(id, RelayStatus::Failed, Some(0), Some(error), now, None)
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
        self.with(|connection| {
            let tx = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let (reserved, window_start, previous): (String, i64, String) = tx.query_row(
                "SELECT reserved_wei, window_start, status FROM relays WHERE id = ?1",
                params![id],
                |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
            )?;
            if !RelayStatus::parse(&previous)?.is_open() {
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
                "UPDATE relays SET status = ?2, cost_wei = ?3, error = ?4, settled_at = ?5, updated_at = ?5
                 WHERE id = ?1",
                params![id, status.as_str(), cost_wei.to_string(), error, now as i64],
            )?;
            if let Some(mined) = mined {
                tx.execute(
                    "UPDATE relays SET tx_hash = ?2, block_number = ?3, gas_used = ?4, revert_reason = ?5
                     WHERE id = ?1",
                    params![
                        id,
                        mined.tx_hash,
                        mined.block_number.map(|block| block as i64),
                        mined.gas_used.map(|gas| gas as i64),
                        mined.revert_reason
                    ],
                )?;
            }
            tx.commit()?;
            Ok(())
        })
    }

    /// Relays still open that were created at or before `created_by`: what the reconciler looks
    /// at.
    pub fn open_since(&self, created_by: u64) -> Result<Vec<RelayRecord>> {
        self.records_where(&format!("status IN {OPEN} AND created_at <= ?1"), params![created_by as i64])
    }

    /// Relays whose transaction is with the node (sent, replaced or being cancelled): what the
    /// follower watches.
    pub fn in_the_pool(&self) -> Result<Vec<RelayRecord>> {
        self.records_where("status IN ('sent', 'replaced', 'cancelling')", [])
    }

    /// The relay with row id `id`.
    pub fn relay(&self, id: i64) -> Result<Option<RelayRecord>> {
        Ok(self.records_where("id = ?1", params![id])?.pop())
    }

    /// The relay clients know as `relay_id`.
    pub fn relay_by_id(&self, relay_id: &str) -> Result<Option<RelayRecord>> {
        Ok(self.records_where("relay_id = ?1", params![relay_id])?.pop())
    }

    /// The latest relay of the request (`signer`, forwarder `nonce`).
    pub fn relay_by_request(&self, signer: &str, nonce: &str) -> Result<Option<RelayRecord>> {
        Ok(self.records_where("signer = ?1 AND forwarder_nonce = ?2", params![signer, nonce])?.pop())
    }

    /// The relay that sent the transaction `tx_hash` (any of its hashes).
    pub fn relay_by_hash(&self, tx_hash: &str) -> Result<Option<RelayRecord>> {
        Ok(self
            .records_where(
                "tx_hash = ?1 OR id IN (SELECT relay FROM relay_txs WHERE tx_hash = ?1)",
                params![tx_hash],
            )?
            .pop())
    }

    /// The relay holding this very signed request (same signer, nonce, digest and signature),
    /// if it is in flight or ran: a retry is answered with it.
    pub fn held(
        &self,
        signer: &str,
        nonce: &str,
        digest: &str,
        signature: &str,
    ) -> Result<Option<RelayRecord>> {
        Ok(self
            .records_where(
                "signer = ?1 AND forwarder_nonce = ?2 AND digest = ?3 AND signature = ?4",
                params![signer, nonce, digest, signature],
            )?
            .pop()
            .filter(|record| record.status.is_held()))
    }

    /// Every relay record, oldest first.
    pub fn records(&self) -> Result<Vec<RelayRecord>> {
        self.records_where("1 = 1", [])
    }

    fn records_where(&self, condition: &str, values: impl rusqlite::Params) -> Result<Vec<RelayRecord>> {
        self.with(|connection| {
            let mut statement = connection
                .prepare(&format!("SELECT {RECORD_COLUMNS} FROM relays WHERE {condition} ORDER BY id"))?;
            let rows = statement.query_map(values, RawRecord::read)?;
            let mut records = Vec::new();
            for row in rows {
                records.push(row?.into_record()?);
            }
            let mut txs = connection.prepare(
                "SELECT tx_hash, kind, max_fee_wei, priority_fee_wei, sent_block, sent_at FROM relay_txs
                 WHERE relay = ?1 ORDER BY rowid",
            )?;
            for record in &mut records {
                let rows = txs.query_map(params![record.id], |row| {
                    Ok((
                        row.get::<_, String>(0)?,
                        row.get::<_, String>(1)?,
                        row.get::<_, String>(2)?,
                        row.get::<_, String>(3)?,
                        row.get::<_, Option<i64>>(4)?,
                        row.get::<_, i64>(5)?,
                    ))
                })?;
                for row in rows {
                    let (hash, kind, max_fee, priority_fee, sent_block, sent_at) = row?;
                    record.txs.push(SentTx {
                        hash,
                        kind: if kind == "cancel" { TxKind::Cancel } else { TxKind::Relay },
                        max_fee_wei: parse_wei(&max_fee)?,
                        priority_fee_wei: parse_wei(&priority_fee)?,
                        sent_block: sent_block.map(|block| block as u64),
                        sent_at: sent_at as u64,
                    });
                }
            }
            Ok(records)
        })
    }
}

/// A `relays` row as SQLite gives it, before its text is parsed.
struct RawRecord {
    id: i64,
    relay_id: String,
    signer: String,
    forwarder_nonce: String,
    digest: Option<String>,
    signature: Option<String>,
    deadline: i64,
    input: Option<String>,
    status: String,
    relayer_nonce: Option<i64>,
    tx_hash: Option<String>,
    gas_limit: i64,
    max_fee_wei: String,
    priority_fee_wei: String,
    reserved_wei: String,
    cost_wei: Option<String>,
    block_number: Option<i64>,
    gas_used: Option<i64>,
    revert_reason: Option<String>,
    error: Option<String>,
    created_at: i64,
    sent_at: Option<i64>,
    updated_at: Option<i64>,
    settled_at: Option<i64>,
}

impl RawRecord {
    /// Reads the columns of [`RECORD_COLUMNS`], in its order.
    fn read(row: &rusqlite::Row<'_>) -> rusqlite::Result<Self> {
        Ok(Self {
            id: row.get(0)?,
            relay_id: row.get(1)?,
            signer: row.get(2)?,
            forwarder_nonce: row.get(3)?,
            digest: row.get(4)?,
            signature: row.get(5)?,
            deadline: row.get(6)?,
            input: row.get(7)?,
            status: row.get(8)?,
            relayer_nonce: row.get(9)?,
            tx_hash: row.get(10)?,
            gas_limit: row.get(11)?,
            max_fee_wei: row.get(12)?,
            priority_fee_wei: row.get(13)?,
            reserved_wei: row.get(14)?,
            cost_wei: row.get(15)?,
            block_number: row.get(16)?,
            gas_used: row.get(17)?,
            revert_reason: row.get(18)?,
            error: row.get(19)?,
            created_at: row.get(20)?,
            sent_at: row.get(21)?,
            updated_at: row.get(22)?,
            settled_at: row.get(23)?,
        })
    }

    fn into_record(self) -> Result<RelayRecord> {
        let unsigned = |value: i64| value as u64;
        Ok(RelayRecord {
            id: self.id,
            relay_id: self.relay_id,
            signer: self.signer,
            forwarder_nonce: self.forwarder_nonce,
            digest: self.digest,
            signature: self.signature,
            deadline: unsigned(self.deadline),
            input: self.input,
            status: RelayStatus::parse(&self.status)?,
            relayer_nonce: self.relayer_nonce.map(unsigned),
            tx_hash: self.tx_hash,
            txs: Vec::new(),
            gas_limit: unsigned(self.gas_limit),
            max_fee_wei: parse_wei(&self.max_fee_wei)?,
            priority_fee_wei: parse_wei(&self.priority_fee_wei)?,
            reserved_wei: parse_wei(&self.reserved_wei)?,
            cost_wei: self.cost_wei.as_deref().map(parse_wei).transpose()?,
            block_number: self.block_number.map(unsigned),
            gas_used: self.gas_used.map(unsigned),
            revert_reason: self.revert_reason,
            error: self.error,
            created_at: unsigned(self.created_at),
            sent_at: self.sent_at.map(unsigned),
            updated_at: self.updated_at.map(unsigned),
            settled_at: self.settled_at.map(unsigned),
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
    text.parse().map_err(|_| Error::StoreCorrupt(format!("wei amount {text:?}")))
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
            digest: format!("digest-{signer}-{nonce}"),
            signature: "0x01".into(),
            deadline: 0,
            input: "0x".into(),
            client_ip: "127.0.0.1".into(),
            gas_limit,
            max_fee_wei: 10,
            priority_fee_wei: 1,
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

        store.mark_sent(first.id, 7, "0xabc", 1, 102).unwrap();
        store.settle(first.id, &Settlement::of("0xabc", 123, Outcome::Mined), 103).unwrap();
        store.settle(first.id, &Settlement::of("0xabc", 999, Outcome::Mined), 104).unwrap();
        store.release(second.id, "node refused", 104).unwrap();
        let state = store.budget(105).unwrap();
        assert_eq!((state.used_wei, state.pending_wei), (123, 0));

        let records = store.records().unwrap();
        assert_eq!(records[0].status, RelayStatus::Mined);
        assert_eq!(records[0].cost_wei, Some(123));
        assert_eq!(records[0].tx_hash.as_deref(), Some("0xabc"));
        assert_eq!(records[1].status, RelayStatus::Failed);
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
        store.mark_sent(dropped.id, 3, "0x01", 1, 6).unwrap();
        let state = store.budget(7).unwrap();
        assert_eq!((state.used_wei, state.pending_wei), (200, 0));
        let statuses: Vec<_> = store.records().unwrap().into_iter().map(|r| (r.status, r.cost_wei)).collect();
        assert_eq!(statuses, [(RelayStatus::Dropped, Some(0)), (RelayStatus::Executed, Some(200))]);
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
            store.mark_sent(reservation.id, 0, "0x01", 1, 50).unwrap();
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
        store.settle(1, &Settlement::of("0x01", 40, Outcome::Mined), later).unwrap();
        assert_eq!(store.budget(later).unwrap().used_wei, fresh.reserved_wei);
    }

    #[test]
    fn a_replacement_grows_the_reservation_and_keeps_every_hash() {
        let (_dir, store) = store();
        let first = store.reserve(&relay("s", 0, 100), 10_000, 5).unwrap().unwrap();
        assert_eq!(first.reserved_wei, 1_000);
        assert_eq!(first.relay_id.len(), 32);
        store.mark_sent(first.id, 4, "0xaa", 7, 6).unwrap();
        let bumped = Replacement {
            tx_hash: "0xbb".into(),
            kind: TxKind::Relay,
            max_fee_wei: 12,
            priority_fee_wei: 2,
            sent_block: 9,
        };
        assert_eq!(store.replace(first.id, &bumped, 10_000, 8).unwrap(), Ok(1_200));
        assert_eq!(store.budget(8).unwrap().pending_wei, 1_200);
        let too_dear = Replacement { tx_hash: "0xcc".into(), max_fee_wei: 1_000, ..bumped.clone() };
        assert_eq!(store.replace(first.id, &too_dear, 10_000, 8).unwrap(), Err(Refusal::Budget));
        // A replacement the node did not take leaves no trace but the grown reservation.
        let refused = Replacement { tx_hash: "0xee".into(), max_fee_wei: 13, ..bumped.clone() };
        assert_eq!(store.replace(first.id, &refused, 10_000, 8).unwrap(), Ok(1_300));
        store.unreplace(first.id, "0xee", 8).unwrap();
        let record = store.relay(first.id).unwrap().unwrap();
        assert_eq!(
            (record.status, record.tx_hash.as_deref(), record.max_fee_wei),
            (RelayStatus::Replaced, Some("0xbb"), 12)
        );
        assert_eq!((record.txs.len(), record.reserved_wei), (2, 1_300));
        assert!(store.relay_by_hash("0xee").unwrap().is_none());
        // A cancellation is recorded whatever the budget says (a limit of 0 here), and reserves
        // its own worst case when that is the larger.
        let cancel = Replacement { tx_hash: "0xdd".into(), kind: TxKind::Cancel, max_fee_wei: 14, ..bumped };
        assert_eq!(store.replace(first.id, &cancel, 0, 9).unwrap(), Ok(21_000 * 14));
        let record = store.relay_by_hash("0xaa").unwrap().unwrap();
        assert_eq!(record.relay_id, first.relay_id);
        assert_eq!(record.status, RelayStatus::Cancelling);
        assert_eq!(record.status.public(), "expired");
        let hashes: Vec<_> = record.txs.iter().map(|tx| (tx.hash.as_str(), tx.kind)).collect();
        assert_eq!(hashes, [("0xaa", TxKind::Relay), ("0xbb", TxKind::Relay), ("0xdd", TxKind::Cancel)]);
        assert_eq!(record.txs[1].sent_block, Some(9));
        // The original transaction wins the race after all: the relay is mined, at its cost.
        store.settle(first.id, &Settlement::of("0xaa", 300, Outcome::Mined), 10).unwrap();
        let record = store.relay_by_id(&first.relay_id).unwrap().unwrap();
        assert_eq!(
            (record.status, record.tx_hash.as_deref(), record.cost_wei),
            (RelayStatus::Mined, Some("0xaa"), Some(300))
        );
        assert_eq!(
            store.budget(10).unwrap(),
            BudgetState { used_wei: 300, pending_wei: 0, window_start: Some(5) }
        );
        assert_eq!(store.replace(first.id, &cancel, 0, 11).unwrap(), Err(Refusal::Duplicate), "closed");
    }

    #[test]
    fn a_retry_finds_the_held_relay_by_its_exact_signed_request() {
        let (_dir, store) = store();
        let new = relay("s", 2, 10);
        let reservation = store.reserve(&new, 1_000, 5).unwrap().unwrap();
        let held = store.held("s", "2", &new.digest, "0x01").unwrap().unwrap();
        assert_eq!(
            (held.relay_id.as_str(), held.status),
            (reservation.relay_id.as_str(), RelayStatus::Accepted)
        );
        assert!(store.held("s", "2", &new.digest, "0x02").unwrap().is_none(), "another signature");
        assert!(store.held("s", "2", "other", "0x01").unwrap().is_none(), "another request");
        assert_eq!(store.relay_by_request("s", "2").unwrap().unwrap().id, reservation.id);
        store.drop_relay(reservation.id, "the node lost it", 6).unwrap();
        assert!(store.held("s", "2", &new.digest, "0x01").unwrap().is_none(), "dropped: relay it again");
        let again = store.reserve(&new, 1_000, 7).unwrap().unwrap();
        assert_ne!(again.relay_id, reservation.relay_id);
        assert_eq!(store.relay_by_request("s", "2").unwrap().unwrap().relay_id, again.relay_id, "the latest");
    }

    #[test]
    fn a_store_of_the_earlier_version_is_brought_up_to_date() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("relayer.db");
        {
            let connection = Connection::open(&path).unwrap();
            connection
                .execute_batch(
                    "CREATE TABLE relays (id INTEGER PRIMARY KEY, signer TEXT NOT NULL,
                         forwarder_nonce TEXT NOT NULL, client_ip TEXT NOT NULL, gas_limit INTEGER NOT NULL,
                         max_fee_wei TEXT NOT NULL, reserved_wei TEXT NOT NULL, window_start INTEGER NOT NULL,
                         status TEXT NOT NULL, relayer_nonce INTEGER, tx_hash TEXT, cost_wei TEXT, error TEXT,
                         created_at INTEGER NOT NULL, settled_at INTEGER);
                     CREATE UNIQUE INDEX relays_live_request_v2 ON relays (signer, forwarder_nonce)
                         WHERE status IN ('reserved', 'sent', 'mined', 'executed');
                     INSERT INTO relays VALUES (1, 's', '0', 'ip', 10, '5', '50', 1, 'sent', 3, '0xaa', NULL, NULL, 1, NULL);
                     INSERT INTO relays VALUES (2, 't', '0', 'ip', 10, '5', '50', 1, 'reserved', NULL, NULL, NULL, NULL, 1, NULL);",
                )
                .unwrap();
        }
        let store = Store::open(&path).unwrap();
        let records = store.records().unwrap();
        assert_eq!(records[0].status, RelayStatus::Sent);
        assert_eq!(records[0].txs.len(), 1);
        assert_eq!(store.relay_by_hash("0xaa").unwrap().unwrap().id, 1);
        assert_eq!(records[1].status, RelayStatus::Accepted);
        assert_ne!(records[0].relay_id, records[1].relay_id);
        assert_eq!(store.reserve(&relay("t", 0, 1), 1_000, 2).unwrap(), Err(Refusal::Duplicate));
        drop(store);
        assert_eq!(Store::open(&path).unwrap().records().unwrap(), records, "opening again changes nothing");
    }
}
