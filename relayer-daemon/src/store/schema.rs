//! The store's tables, and how a store written by an earlier version is brought up to date.

use rusqlite::Transaction;

use crate::error::Result;

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
CREATE TABLE IF NOT EXISTS webhook_events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    event_id TEXT NOT NULL UNIQUE,
    relay INTEGER NOT NULL,
    relay_id TEXT NOT NULL,
    sequence INTEGER NOT NULL,
    type TEXT NOT NULL,
    body TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER NOT NULL,
    lease_owner TEXT,
    lease_until INTEGER,
    delivered_at INTEGER,
    last_error TEXT,
    UNIQUE (relay, sequence)
);
CREATE INDEX IF NOT EXISTS webhook_events_pending ON webhook_events (relay, sequence)
    WHERE delivered_at IS NULL;
CREATE TABLE IF NOT EXISTS lanes (
    address TEXT PRIMARY KEY,
    holder TEXT,
    fence INTEGER NOT NULL DEFAULT 0,
    lease_until INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS relayer_daemons (
    id TEXT PRIMARY KEY,
    seen_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS handoffs (
    relay INTEGER PRIMARY KEY,
    lane TEXT NOT NULL,
    at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS handoffs_by_lane ON handoffs (lane);
";

/// Columns added to `relays` by the relay lifecycle (id, retries, replacement, outcome) and the
/// L1 data fee and the lane: added to a store written by an earlier version when it is opened.
const ADDED_COLUMNS: [(&str, &str); 13] = [
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
    ("l1_fee_wei", "TEXT NOT NULL DEFAULT '0'"),
    // The key (nonce lane) that sends the relay; earlier records are the single key's
    // (`Store::adopt_unlaned`, at start).
    ("lane", "TEXT"),
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
CREATE INDEX IF NOT EXISTS relays_by_signer_window ON relays (signer, window_start);
CREATE INDEX IF NOT EXISTS relays_by_client_window ON relays (client_ip, window_start);
CREATE INDEX IF NOT EXISTS relays_settled ON relays (settled_at);
CREATE INDEX IF NOT EXISTS relays_by_lane ON relays (lane, status);
";

/// Statuses of a relay that hold its (signer, forwarder nonce): the request is in flight or ran.
pub(super) const LIVE: &str = "('accepted', 'sent', 'replaced', 'cancelling', 'mined', 'executed')";
/// Statuses of a relay still waiting for the chain.
pub(super) const OPEN: &str = "('accepted', 'sent', 'replaced', 'cancelling')";

/// Creates what is missing and migrates a store of an earlier version, in `tx`.
pub(super) fn migrate(tx: &Transaction<'_>) -> Result<()> {
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
    Ok(())
}
