//! The index's size in D1: bytes on disk and in its rows' text. (D1's billing counts, rows read
//! and written, are not measured here: the Worker does not report the `meta` of its statements,
//! and `wrangler d1 execute --local` reports none. docs/index-cost.md counts them from the
//! statements.)

use std::path::Path;

use kya_tests::edge_fixture::EdgeWorker;

/// The index's size after the first fill.
pub(crate) struct Storage {
    /// The local D1 database file (SQLite, with its write-ahead log).
    pub(crate) file_bytes: u64,
    /// Bytes of the rows' text columns (the `/agents` item and the indexed record).
    pub(crate) text_bytes: u64,
    pub(crate) rows: u64,
}

/// The size of `worker`'s index on disk, and of its rows' text.
pub(crate) fn storage(worker: &EdgeWorker, agents: u64) -> Storage {
    let row = &worker.query_index(
        "SELECT count(*) AS n, sum(length(item) + length(indexed) + length(creator)) AS text FROM agents",
    )[0];
    let file_bytes = sqlite_bytes(&worker.state_dir().join("v3/d1"));
    assert!(file_bytes > 0, "the local D1 file of {agents} agents");
    Storage {
        file_bytes,
        text_bytes: row["text"].as_u64().unwrap_or(0),
        rows: row["n"].as_u64().unwrap_or(0),
    }
}

/// Bytes of every SQLite file (and its `-wal`) under `folder`.
fn sqlite_bytes(folder: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(folder) else { return 0 };
    entries
        .flatten()
        .map(|entry| {
            let path = entry.path();
            if path.is_dir() {
                sqlite_bytes(&path)
            } else if path.to_string_lossy().contains(".sqlite") {
                entry.metadata().map_or(0, |metadata| metadata.len())
            } else {
                0
            }
        })
        .sum()
}
