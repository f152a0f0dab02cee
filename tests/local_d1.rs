//! The index's tables in a Worker's local state, made once and copied.
//!
//! An indexed Worker (`EdgeWorker::start_indexed`) needs the tables the project's migrations
//! create (`wrangler d1 migrations apply INDEX --local`) in its fresh state folder. Run for each
//! Worker, that command is a Node process and a workerd of its own: about 5 s of CPU, which
//! nineteen indexed Workers paid on every run of the end-to-end tests, beside a busy suite. The
//! migrations now run once for each version of their inputs (the migrations, `wrangler.toml`,
//! wrangler's version), into `target/tmp/`, and each Worker starts from a copy of the result:
//! the same SQLite files, tables and rows, with the migrations' own record of when they were
//! applied taken from that one run.

use std::{
    fs,
    path::{Path, PathBuf},
    sync::Mutex,
    time::Duration,
};

use alloy::primitives::keccak256;

use crate::repo_root;

/// Most a one-off wrangler command (a migration, a D1 statement) may take; a few seconds is usual.
pub(crate) const WRANGLER_COMMAND_LIMIT: Duration = Duration::from_secs(120);

/// Fills the state folder `state` (wrangler's `--persist-to`, not yet created) with the index's
/// tables as the project's migrations create them.
pub fn create_index_tables(state: &Path) {
    let migrated = migrated_state();
    copy_tree(&migrated, state)
        .unwrap_or_else(|error| panic!("copying {} to {}: {error}", migrated.display(), state.display()));
}

/// The state folder the migrations ran in, made if it is not there yet. Three test threads
/// that ask at once wait for one run; two test processes that race both run the migrations and
/// the first to rename its folder into place wins, so neither ever sees half a folder.
fn migrated_state() -> PathBuf {
    static MAKING: Mutex<()> = Mutex::new(());
    let _one_at_a_time = MAKING.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let folder = repo_root().join("target/tmp").join(format!("d1-index-{}", inputs_key()));
    let state = folder.join("state");
    if state.is_dir() {
        return state;
    }
    let partial = folder.with_extension(format!("partial-{}", std::process::id()));
    let _ = fs::remove_dir_all(&partial);
    fs::create_dir_all(&partial).expect("target/tmp is writable");
    let mut command = crate::edge_fixture::wrangler(&repo_root());
    command
        .args(["d1", "migrations", "apply", "INDEX", "--local", "--persist-to"])
        .arg(partial.join("state"));
    let applied = crate::output_within(&mut command, WRANGLER_COMMAND_LIMIT);
    assert!(
        applied.status.success(),
        "applying the index's migrations failed:\n{}{}",
        String::from_utf8_lossy(&applied.stdout),
        String::from_utf8_lossy(&applied.stderr)
    );
    if fs::rename(&partial, &folder).is_err() {
        // Another test process put its folder there first: the same inputs, the same tables.
        let _ = fs::remove_dir_all(&partial);
        assert!(
            state.is_dir(),
            "neither this process's migrated state nor another's is at {}",
            folder.display()
        );
    }
    state
}

/// What the migrated state depends on, hashed: every migration (name and text), wrangler.toml
/// (the database's binding and id, which name its SQLite file) and wrangler's version.
fn inputs_key() -> String {
    let root = repo_root();
    let mut inputs = Vec::new();
    let mut migrations: Vec<PathBuf> = fs::read_dir(root.join("edge-api/migrations"))
        .expect("edge-api/migrations")
        .map(|entry| entry.expect("a migration").path())
        .collect();
    migrations.sort();
    for path in migrations
        .iter()
        .chain([&root.join("wrangler.toml"), &root.join("node_modules/wrangler/package.json")])
    {
        inputs.extend_from_slice(path.strip_prefix(&root).unwrap_or(path).to_string_lossy().as_bytes());
        inputs.push(0);
        inputs.extend(fs::read(path).unwrap_or_else(|error| panic!("{}: {error}", path.display())));
        inputs.push(0);
    }
    keccak256(&inputs).to_string()[2..18].to_owned()
}

/// Copies the folder `from` to `to` (which must not exist), files and subfolders.
fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    fs::create_dir_all(to)?;
    for entry in fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else {
            fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

/// The rows `sql` selects from the index in the state folder `state`, as JSON objects (column
/// name to value), as `wrangler d1 execute --json` gives them: integers and reals as numbers,
/// text as strings, a blob as an array of its bytes.
///
/// Read from the index's SQLite file itself, read-only, rather than through `wrangler d1
/// execute`, which starts Node and a workerd of its own for each statement (about 4 s of CPU).
/// The Worker's runtime keeps the file in WAL mode with the usual file locks, so a reader here
/// sees the last committed run and never holds up the Worker's next commit.
pub fn select(state: &Path, sql: &str) -> Vec<serde_json::Value> {
    use rusqlite::{OpenFlags, types::ValueRef};
    use serde_json::{Map, Value};

    let file = index_file(state);
    let index = rusqlite::Connection::open_with_flags(&file, OpenFlags::SQLITE_OPEN_READ_ONLY)
        .unwrap_or_else(|error| panic!("opening {}: {error}", file.display()));
    index.busy_timeout(Duration::from_secs(10)).expect("a busy timeout");
    let mut statement = index.prepare(sql).unwrap_or_else(|error| panic!("{sql}: {error}"));
    let columns: Vec<String> = statement.column_names().into_iter().map(str::to_owned).collect();
    let rows = statement.query_map([], |row| {
        let mut object = Map::new();
        for (at, column) in columns.iter().enumerate() {
            let value = match row.get_ref(at)? {
                ValueRef::Null => Value::Null,
                ValueRef::Integer(integer) => Value::from(integer),
                ValueRef::Real(real) => Value::from(real),
                ValueRef::Text(text) => Value::from(String::from_utf8_lossy(text).into_owned()),
                ValueRef::Blob(bytes) => Value::from(bytes.to_vec()),
            };
            object.insert(column.clone(), value);
        }
        Ok(Value::Object(object))
    });
    rows.and_then(Iterator::collect).unwrap_or_else(|error| panic!("{sql}: {error}"))
}

/// Runs the statements `sql` (one or several, `;`-separated) on the index in the state folder
/// `state`, in one transaction: all of them or none.
///
/// Written to the index's SQLite file itself, as [`select`] reads it, rather than through
/// `wrangler d1 execute --local`, which starts Node and a workerd of its own for each call
/// (about 2.5 s of CPU; the feed's tests made 22 such calls a run). Both are a second process
/// on the file the Worker's runtime writes, and both go through SQLite's own locks: the
/// runtime's SQLite is the native one, its file in WAL mode, so the Worker's next query sees
/// this commit. A statement that meets the runtime's write lock waits for it (the busy
/// timeout) where wrangler's answered `SQLITE_BUSY` at once.
pub fn execute(state: &Path, sql: &str) {
    use rusqlite::TransactionBehavior;

    let file = index_file(state);
    let mut index = rusqlite::Connection::open(&file)
        .unwrap_or_else(|error| panic!("opening {}: {error}", file.display()));
    index.busy_timeout(Duration::from_secs(30)).expect("a busy timeout");
    let transaction = index
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .unwrap_or_else(|error| panic!("{sql}: beginning: {error}"));
    transaction.execute_batch(sql).unwrap_or_else(|error| panic!("{sql}: {error}"));
    transaction.commit().unwrap_or_else(|error| panic!("{sql}: committing: {error}"));
}

/// The SQLite file of the index in the state folder `state`: the one database of wrangler's
/// local D1 beside its `metadata.sqlite`.
fn index_file(state: &Path) -> PathBuf {
    let folder = state.join("v3/d1/miniflare-D1DatabaseObject");
    let mut files: Vec<PathBuf> = fs::read_dir(&folder)
        .unwrap_or_else(|error| panic!("{}: {error}", folder.display()))
        .map(|entry| entry.expect("a file of the local D1").path())
        .filter(|path| path.extension().is_some_and(|extension| extension == "sqlite"))
        .filter(|path| path.file_name().is_some_and(|name| name != "metadata.sqlite"))
        .collect();
    assert_eq!(files.len(), 1, "one index database in {}: {files:?}", folder.display());
    files.remove(0)
}
