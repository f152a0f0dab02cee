//! The store's tables, and how a store written by an earlier version is brought up to date.

use std::sync::OnceLock;

use rusqlite::Transaction;

use crate::error::Result;
use crate::rules::status::RelayStatus;

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
DROP INDEX IF EXISTS relays_live_request_v3;
CREATE UNIQUE INDEX IF NOT EXISTS relays_live_request_v4 ON relays (signer, forwarder_nonce)
    WHERE status IN ('accepted', 'sent', 'replaced', 'cancelling', 'mined', 'call_failed', 'executed');
CREATE INDEX IF NOT EXISTS relays_open ON relays (status, created_at);
CREATE INDEX IF NOT EXISTS relays_by_request ON relays (signer, forwarder_nonce);
CREATE INDEX IF NOT EXISTS relays_by_signer_window ON relays (signer, window_start);
CREATE INDEX IF NOT EXISTS relays_by_client_window ON relays (client_ip, window_start);
CREATE INDEX IF NOT EXISTS relays_settled ON relays (settled_at);
CREATE INDEX IF NOT EXISTS relays_by_lane ON relays (lane, status);
CREATE INDEX IF NOT EXISTS relays_by_tx_hash ON relays (tx_hash);
";

/// Statuses of a relay that hold its (signer, forwarder nonce) against any other relay of it
/// ([`RelayStatus::is_live`]). The unique index `relays_live_request_v4` of both engines is
/// written over the same set, which the tests below check.
pub(super) static LIVE: StatusSet = StatusSet::new(RelayStatus::is_live);
/// Statuses of a relay still waiting for the chain ([`RelayStatus::is_open`]).
pub(super) static OPEN: StatusSet = StatusSet::new(RelayStatus::is_open);
/// Statuses of a relay whose transaction is with the node ([`RelayStatus::is_with_the_node`]).
pub(super) static WITH_THE_NODE: StatusSet = StatusSet::new(RelayStatus::is_with_the_node);

/// A set of relay statuses as SQL (`('accepted', 'sent')`), written from [`RelayStatus::ALL`] so
/// that the enum is the one list of statuses; the text is made once, at its first use.
pub(super) struct StatusSet {
    keep: fn(RelayStatus) -> bool,
    text: OnceLock<String>,
}

impl StatusSet {
    const fn new(keep: fn(RelayStatus) -> bool) -> Self {
        Self { keep, text: OnceLock::new() }
    }

    /// The statuses in the set, in [`RelayStatus::ALL`]'s order.
    pub(super) fn statuses(&self) -> impl Iterator<Item = RelayStatus> + '_ {
        RelayStatus::ALL.into_iter().filter(|status| (self.keep)(*status))
    }
}

impl std::fmt::Display for StatusSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.text.get_or_init(|| {
            let quoted: Vec<String> =
                self.statuses().map(|status| format!("'{}'", status.as_str())).collect();
            format!("({})", quoted.join(", "))
        }))
    }
}

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

/// Both engines' schemas, read from their SQL as written (SQLite's above, PostgreSQL's
/// migrations), held against each other and against [`RelayStatus`].
#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use super::*;

    /// Every statement of `sql`, comments dropped and white space folded.
    fn statements(sql: &str) -> Vec<String> {
        let uncommented: String = sql
            .lines()
            .map(|line| line.split_once("--").map_or(line, |(code, _)| code))
            .collect::<Vec<_>>()
            .join("\n");
        uncommented
            .split(';')
            .map(|statement| statement.split_whitespace().collect::<Vec<_>>().join(" "))
            .filter(|statement| !statement.is_empty())
            .collect()
    }

    /// Each index the SQL leaves (created, not dropped after): its name and its definition
    /// (unique or not, table, columns, condition), `IF NOT EXISTS` left out.
    fn indexes(sql: &str) -> BTreeMap<String, String> {
        let mut indexes = BTreeMap::new();
        for statement in statements(sql) {
            let statement = statement.replace(" IF NOT EXISTS", "").replace(" IF EXISTS", "");
            if let Some(name) = statement.strip_prefix("DROP INDEX ") {
                indexes.remove(name.trim());
                continue;
            }
            let Some(rest) = statement
                .strip_prefix("CREATE INDEX ")
                .or_else(|| statement.strip_prefix("CREATE UNIQUE INDEX "))
            else {
                continue;
            };
            let (name, definition) = rest.split_once(' ').expect("an index has a name and a definition");
            let unique = if statement.starts_with("CREATE UNIQUE") { "UNIQUE " } else { "" };
            indexes.insert(name.to_owned(), format!("{unique}{definition}"));
        }
        indexes
    }

    /// Each table's column names, in the order written, with the columns added later.
    fn columns(sql: &str) -> BTreeMap<String, Vec<String>> {
        let mut tables: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for statement in statements(sql) {
            let statement = statement.replace(" IF NOT EXISTS", "");
            if let Some(rest) = statement.strip_prefix("CREATE TABLE ") {
                let (name, body) = rest.split_once(" (").expect("a table has columns");
                let body = body.strip_suffix(')').expect("a table's columns close");
                let names = top_level(body)
                    .into_iter()
                    .filter_map(|part| part.split_whitespace().next())
                    .filter(|first| !first.chars().next().is_some_and(char::is_uppercase))
                    .map(str::to_owned)
                    .collect();
                tables.insert(name.to_owned(), names);
            } else if let Some(rest) = statement.strip_prefix("ALTER TABLE ") {
                let mut words = rest.split_whitespace();
                let (table, _, _, column) = (words.next(), words.next(), words.next(), words.next());
                tables.entry(table.unwrap().to_owned()).or_default().push(column.unwrap().to_owned());
            }
        }
        tables
    }

    /// `body`'s parts between the commas outside parentheses.
    fn top_level(body: &str) -> Vec<&str> {
        let (mut parts, mut depth, mut start) = (Vec::new(), 0, 0);
        for (at, c) in body.char_indices() {
            match c {
                '(' => depth += 1,
                ')' => depth -= 1,
                ',' if depth == 0 => {
                    parts.push(body[start..at].trim());
                    start = at + 1;
                }
                _ => {}
            }
        }
        parts.push(body[start..].trim());
        parts
    }

    fn sqlite() -> String {
        let added: String = ADDED_COLUMNS
            .iter()
            .map(|(name, declaration)| format!("ALTER TABLE relays ADD COLUMN {name} {declaration};\n"))
            .collect();
        format!("{SCHEMA}\n{added}\n{MIGRATION}")
    }

    fn postgres() -> String {
        super::super::postgres::MIGRATIONS.iter().map(|(_, sql)| format!("{sql}\n;\n")).collect()
    }

    /// The statuses of `condition` (`status IN ('a', 'b')`).
    fn statuses_of(condition: &str) -> BTreeSet<String> {
        let list = condition.split_once("status IN (").expect("a status condition").1;
        let list = list.split_once(')').expect("the list closes").0;
        list.split(',').map(|status| status.trim().trim_matches('\'').to_owned()).collect()
    }

    #[test]
    fn both_engines_keep_one_live_relay_per_request_over_the_live_statuses() {
        let live: BTreeSet<String> = LIVE.statuses().map(|status| status.as_str().to_owned()).collect();
        assert_eq!(live.len(), 7, "{live:?}");
        assert!(live.contains("call_failed"), "a request whose call failed ran: {live:?}");
        for (engine, sql) in [("SQLite", sqlite()), ("PostgreSQL", postgres())] {
            let index = indexes(&sql).remove("relays_live_request_v4").unwrap_or_else(|| panic!("{engine}"));
            let (columns, condition) = index.split_once(" WHERE ").expect("a partial index");
            // The columns `is_taken` and a retry look a request up by.
            assert_eq!(columns, "UNIQUE ON relays (signer, forwarder_nonce)", "{engine}");
            assert_eq!(statuses_of(condition), live, "{engine}: the index against RelayStatus::is_live");
        }
    }

    #[test]
    fn the_sql_sets_are_written_from_the_enum() {
        assert_eq!(
            LIVE.to_string(),
            "('accepted', 'sent', 'replaced', 'cancelling', 'mined', 'call_failed', 'executed')"
        );
        assert_eq!(OPEN.to_string(), "('accepted', 'sent', 'replaced', 'cancelling')");
        assert_eq!(WITH_THE_NODE.to_string(), "('sent', 'replaced', 'cancelling')");
        for status in RelayStatus::ALL {
            assert_eq!(statuses_of(&format!("status IN {LIVE}")).contains(status.as_str()), status.is_live());
            assert_eq!(statuses_of(&format!("status IN {OPEN}")).contains(status.as_str()), status.is_open());
        }
    }

    #[test]
    fn both_engines_have_the_same_indexes_and_columns() {
        let (sqlite, postgres) = (sqlite(), postgres());
        assert_eq!(indexes(&sqlite), indexes(&postgres));
        assert!(indexes(&sqlite).contains_key("relays_by_tx_hash"), "{:?}", indexes(&sqlite));
        let (mut sqlite_columns, postgres_columns) = (columns(&sqlite), columns(&postgres));
        // PostgreSQL names the row id SQLite gives every table, which the shared queries order by.
        sqlite_columns.get_mut("relay_txs").unwrap().insert(0, "rowid".to_owned());
        for (table, columns) in &postgres_columns {
            let mut theirs =
                sqlite_columns.get(table).cloned().unwrap_or_else(|| panic!("{table} on SQLite"));
            let mut ours = columns.clone();
            theirs.sort();
            ours.sort();
            assert_eq!(ours, theirs, "{table}");
        }
        assert_eq!(sqlite_columns.keys().collect::<Vec<_>>(), postgres_columns.keys().collect::<Vec<_>>());
        assert_eq!(postgres_columns.len(), 8, "{postgres_columns:?}");
        assert_eq!(postgres_columns["relays"].len(), 28, "{postgres_columns:?}");
        assert_eq!(postgres_columns["webhook_events"].len(), 14, "{postgres_columns:?}");
    }
}
