//! The schema: a store of the earlier version brought up to date.

use super::*;
use rusqlite::Connection as SqliteConnection;

#[test]
fn a_store_of_the_earlier_version_is_brought_up_to_date() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("relayer.db");
    {
        let connection = SqliteConnection::open(&path).unwrap();
        // The earlier version's text: checksummed signers, decimal nonces, 0x hashes.
        let (s, t, hash) = (who("s").to_checksum(None), who("t").to_checksum(None), h(0xaa));
        connection
            .execute_batch(&format!(
                "CREATE TABLE relays (id INTEGER PRIMARY KEY, signer TEXT NOT NULL,
                     forwarder_nonce TEXT NOT NULL, client_ip TEXT NOT NULL, gas_limit INTEGER NOT NULL,
                     max_fee_wei TEXT NOT NULL, reserved_wei TEXT NOT NULL, window_start INTEGER NOT NULL,
                     status TEXT NOT NULL, relayer_nonce INTEGER, tx_hash TEXT, cost_wei TEXT, error TEXT,
                     created_at INTEGER NOT NULL, settled_at INTEGER);
                 CREATE UNIQUE INDEX relays_live_request_v2 ON relays (signer, forwarder_nonce)
                     WHERE status IN ('reserved', 'sent', 'mined', 'executed');
                 INSERT INTO relays VALUES (1, '{s}', '0', 'ip', 10, '5', '50', 1, 'sent', 3, '{hash}', NULL, NULL, 1, NULL);
                 INSERT INTO relays VALUES (2, '{t}', '0', 'ip', 10, '5', '50', 1, 'reserved', NULL, NULL, NULL, NULL, 1, NULL);",
            ))
            .unwrap();
    }
    let store = Store::open(&path).unwrap();
    let records = store.records().unwrap();
    assert_eq!(records[0].status, RelayStatus::Sent);
    assert_eq!(records[0].txs.len(), 1);
    assert_eq!(store.relay_by_hash(h(0xaa)).unwrap().unwrap().id, 1);
    assert_eq!(records[1].status, RelayStatus::Accepted);
    assert_ne!(records[0].relay_id, records[1].relay_id);
    assert_eq!(
        store.reserve(&relay("t", 0, 1), &BudgetLimits::total(1_000), 2).unwrap(),
        Err(Refusal::Duplicate)
    );
    // The one key of that version takes its relays: both still open, so its lane is two deep.
    assert_eq!(records.iter().map(|record| record.lane).collect::<Vec<_>>(), [None, None]);
    assert_eq!(store.adopt_unlaned(LANE).unwrap(), 2);
    assert_eq!(store.adopt_unlaned(who("other key")).unwrap(), 0, "once");
    assert_eq!(store.lane_depths().unwrap(), [(LANE, 2)]);
    let records: Vec<RelayRecord> = store.records().unwrap();
    assert!(records.iter().all(|record| record.lane == Some(LANE)));
    drop(store);
    assert_eq!(Store::open(&path).unwrap().records().unwrap(), records, "opening again changes nothing");
}
