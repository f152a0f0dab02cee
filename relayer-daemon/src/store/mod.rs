//! The store: the daily gas budget and its reset time, the per-IP and per-signer request
//! windows, and a record of every accepted relay with every transaction sent for it. On one
//! machine an embedded SQLite file (`RELAYER_DB`); shared by several daemons, a PostgreSQL
//! database (`DATABASE_URL`). The same SQL runs on both.
//!
//! Every operation is one transaction, so checks and updates are atomic against concurrent
//! requests and survive a restart. SQLite has one connection behind a mutex (the file has one
//! writer anyway); PostgreSQL a pool of connections (`pool`), each write taking the row or
//! advisory lock that makes it atomic against the daemon's other connections and other daemons
//! ([`sql::Lock`]). Times are Unix seconds passed in by the caller (no clock in here), which
//! keeps the windows testable.
//!
//! - `sql`: the one query layer over SQLite and PostgreSQL, and the locks of writes.
//! - `schema`: SQLite's tables, and bringing a store of an earlier version up to date.
//! - `postgres`: `DATABASE_URL`, connecting (with its timeouts), and PostgreSQL's migrations.
//! - `pool`: PostgreSQL's connections, pooled.
//! - `engine_errors`: SQLite's and PostgreSQL's errors as the relayer's, "not now" apart from failures.
//! - `deadline`: a store call the daemon stopped waiting for sends nothing more, and its
//!   connection leaves the pool.
//! - `pg_tls`: TLS to PostgreSQL, as `sslmode` and `sslrootcert` in the URL ask.
//! - `codec`: how addresses, nonces, hashes and wei are kept as text and read back.
//! - `limits`: rate windows and the budget.
//! - `admission`: a relay's first call: held already, its client's count, its signer's count.
//! - `records`: what a relay record holds, and the reads of records.
//! - `relays`: a relay's life in the store, from reservation to settlement.
//! - `retention`: what the store forgets, and when.
//! - `leases`: which daemon may send on which key (lane leases with fences), and which daemons
//!   are alive.
//! - `handoffs`: relays a standby accepted, for the holder of their lane to send.
//! - `outbox`: the webhook events written with each change of a relay, and their delivery state.

mod admission;
mod codec;
mod deadline;
mod engine_errors;
mod handoffs;
mod leases;
mod limits;
mod outbox;
mod pg_tls;
mod pg_url;
mod pool;
mod postgres;
mod prepared;
mod records;
mod relays;
mod retention;
mod schema;
pub(crate) mod sql;
mod statement;

use std::{
    path::Path,
    sync::{Arc, Mutex},
};

use alloy::primitives::{Address, U256};
use codec::Text;
use rusqlite::TransactionBehavior;
use sql::{Connection, Sql, args};

pub(crate) use admission::{Admission, SignedRequest};
pub(crate) use deadline::Call;
pub(crate) use deadline::current_abandoned;
pub use leases::{LaneHolder, Lease, Taking};
pub use limits::{BUDGET_WINDOW_SECS, BudgetLimits, BudgetState, RATE_WINDOW_SECS, RateKind, SignerCount};
pub use outbox::{DueEvent, OutboxEvent};
pub(crate) use postgres::DEFAULT_POOL_SIZE;
pub use postgres::{DatabaseTimeouts, DatabaseUrl};
pub use records::{
    NewRelay, Outcome, Refusal, RelayRecord, RelayStatus, ReplaceRefusal, Replacement, Reservation, Sending,
    SentTx, Settlement, TxKind,
};
pub(crate) use relays::TRANSFER_GAS;
pub use retention::Pruned;

use crate::error::{Error, Result};

/// The store: SQLite's one connection behind a mutex, or a pool of PostgreSQL connections.
#[derive(Debug)]
pub struct Store {
    connections: Connections,
    /// Where it is, for reconnecting (PostgreSQL) and for the log.
    location: Location,
    /// Whether changes of relays are written to the webhook outbox ([`Store::with_webhook_events`]).
    events: bool,
    /// Told after a commit that wrote a webhook event: the delivery task wakes at once. Shared
    /// with a store on a pool of its own ([`Store::pool_of_its_own`]), whose writes wake it too.
    event_written: Arc<tokio::sync::Notify>,
    /// How long a budget window lasts ([`Store::with_budget_window`]).
    budget_window_secs: u64,
}

/// A store's connections.
#[derive(Debug)]
enum Connections {
    /// SQLite's one: the file has one writer at a time anyway.
    Sqlite(Mutex<Connection>),
    /// PostgreSQL's pool: operations run side by side, made atomic by their locks.
    Postgres(pool::Pool),
}

/// Where a store is kept.
#[derive(Debug, Clone)]
pub enum Location {
    /// An SQLite file (`RELAYER_DB`).
    Sqlite(std::path::PathBuf),
    /// A PostgreSQL database (`DATABASE_URL`).
    Postgres(DatabaseUrl),
}

impl std::fmt::Display for Location {
    /// As it may be logged: the file's path, or the URL without user info or path.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Sqlite(path) => write!(f, "SQLite {}", path.display()),
            Self::Postgres(url) => write!(f, "PostgreSQL {}", url.shown()),
        }
    }
}

impl Store {
    /// Opens the store at `location` (see [`Store::open`] and [`Store::connect`]).
    pub fn open_at(location: &Location) -> Result<Self> {
        match location {
            Location::Sqlite(path) => Self::open(path),
            Location::Postgres(url) => Self::connect(url),
        }
    }

    /// Opens (creating when needed) the SQLite store at `path`, creating its folder too, and
    /// brings a store of an earlier version up to date.
    pub fn open(path: &Path) -> Result<Self> {
        if let Some(parent) = path.parent().filter(|parent| !parent.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)
                .map_err(|error| Error::Config(format!("creating {}: {error}", parent.display())))?;
        }
        let mut connection = rusqlite::Connection::open(path)?;
        // WAL keeps readers off the writer's lock; FULL sync so an accepted relay is on disk
        // before its answer leaves.
        connection.pragma_update(None, "journal_mode", "WAL")?;
        connection.pragma_update(None, "synchronous", "FULL")?;
        connection.busy_timeout(std::time::Duration::from_secs(5))?;
        // Every statement of the store stays prepared (a few dozen).
        connection.set_prepared_statement_cache_capacity(64);
        let tx = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
        schema::migrate(&tx)?;
        tx.commit()?;
        Ok(Self::with_connections(
            Connections::Sqlite(Mutex::new(Connection::Sqlite(connection))),
            Location::Sqlite(path.to_owned()),
        ))
    }

    /// Another store on the same database, on a connection of its own, opened now (PostgreSQL:
    /// a pool of one, no migration; SQLite: `None`, the one file's connection is shared, its writes
    /// serialised by the file's lock anyway). The lease keeper's: requests that take every
    /// connection of the pool, or wait behind a lock, cannot hold back the renewals of the
    /// daemon's leases.
    pub fn second_connection(&self) -> Result<Option<Self>> {
        let Location::Postgres(url) = &self.location else { return Ok(None) };
        let connection = off_runtime(|| url.connect())?;
        let second = Self::with_connections(
            Connections::Postgres(pool::build(url, 1, Some(Connection::Postgres(connection)))),
            self.location.clone(),
        );
        Ok(Some(second.with_budget_window(self.budget_window_secs)))
    }

    /// On PostgreSQL, the same store on a pool of its own of at most `size` connections, opened
    /// as its operations need them (none before the first), writing webhook events as this one
    /// does and waking the same delivery task: for work that must never wait for a connection
    /// behind the requests' (the keys' records under their send locks). `None` on SQLite, whose
    /// one connection every operation shares anyway.
    pub fn pool_of_its_own(&self, size: u32) -> Option<Self> {
        let Location::Postgres(url) = &self.location else { return None };
        let mut own = Self::with_connections(
            Connections::Postgres(pool::build(url, size, None)),
            self.location.clone(),
        );
        own.events = self.events;
        own.event_written = Arc::clone(&self.event_written);
        Some(own.with_budget_window(self.budget_window_secs))
    }

    /// Connects to the PostgreSQL database at `url` and runs its migrations (the tables are
    /// created by the first daemon that starts; the others find them), then opens the pool of
    /// `url`'s size, whose connections open as operations need them, the migrations' the first
    /// of them: a first connection refused (a wrong password, a CA that does not match) fails
    /// start-up with its reason.
    pub fn connect(url: &DatabaseUrl) -> Result<Self> {
        let connection = off_runtime(|| {
            let mut connection = url.connect()?;
            postgres::migrate(&mut connection)?;
            Ok::<_, Error>(connection)
        })?;
        Ok(Self::with_connections(
            Connections::Postgres(pool::build(url, url.pool_size(), Some(Connection::Postgres(connection)))),
            Location::Postgres(url.clone()),
        ))
    }

    /// On PostgreSQL, opens a connection for every slot of the pool now
    /// ([`pool::Pool::open_all`]): the daemon's requests' pool at start-up, so that no burst
    /// opens more than the pool's size. Before any call runs: it takes connections without
    /// slots, so beside calls holding theirs it would open as many again. Nothing on SQLite,
    /// whose one connection is open.
    pub fn open_connections(&self) {
        if let Connections::Postgres(pool) = &self.connections {
            off_runtime(|| pool.open_all());
        }
    }

    fn with_connections(connections: Connections, location: Location) -> Self {
        Self {
            connections,
            location,
            events: false,
            event_written: Default::default(),
            budget_window_secs: BUDGET_WINDOW_SECS,
        }
    }

    /// Where the store is.
    pub fn location(&self) -> &Location {
        &self.location
    }

    /// The same store, writing a webhook event with every change of a relay that clients see.
    pub fn with_webhook_events(mut self) -> Self {
        self.events = true;
        self
    }

    /// Completes once a webhook event was written since the last call (or at once, if one was
    /// written before anyone waited).
    pub async fn event_written(&self) {
        self.event_written.notified().await;
    }

    /// What clients see of relay `id`, before a change (nothing when events are off).
    fn seen(&self, sql: &mut impl Sql, id: i64) -> Result<outbox::Seen> {
        if self.events { outbox::seen(sql, id) } else { Ok(outbox::Seen::default()) }
    }

    /// Writes the event of relay `id`'s change since `before`, when events are on and clients
    /// see a change; in the caller's transaction. Returns whether it wrote one.
    fn record_change(&self, sql: &mut impl Sql, id: i64, before: &outbox::Seen, now: u64) -> Result<bool> {
        if !self.events {
            return Ok(false);
        }
        outbox::record_change(sql, id, before, now)
    }

    /// After a commit: wakes the delivery task if the transaction wrote an event.
    fn written(&self, wrote: bool) {
        if wrote {
            self.event_written.notify_one();
        }
    }

    /// Runs `f` on a connection of its own: SQLite's one (alone), or one of PostgreSQL's pool.
    /// PostgreSQL's blocking client runs a runtime of its own, which may not block a thread of
    /// another runtime: its work goes to a thread of its own when called from one (a test's
    /// async body).
    fn with<T: Send>(&self, f: impl FnOnce(&mut Connection) -> Result<T> + Send) -> Result<T> {
        match &self.connections {
            Connections::Sqlite(connection) => {
                // A panic while holding the lock cannot leave the store half-written
                // (transactions roll back on drop), so a poisoned mutex is safe to reuse.
                let mut connection = connection.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                f(&mut connection)
            }
            Connections::Postgres(pool) => {
                let call = deadline::current();
                off_runtime(|| {
                    let mut connection = pool::get(pool, &call)?;
                    self.reconnect_if_closed(&mut connection)?;
                    if let Connection::Postgres(pg) = &mut *connection {
                        pg.serve(call);
                    }
                    f(&mut connection)
                })
            }
        }
    }

    /// How long the daemon waits for one call of this store (`DATABASE_CALL_TIMEOUT_MS`):
    /// PostgreSQL's; `None` on SQLite, which waits on no server (`deadline`).
    pub fn call_deadline(&self) -> Option<std::time::Duration> {
        match &self.location {
            Location::Postgres(url) => Some(url.timeouts().call),
            Location::Sqlite(_) => None,
        }
    }

    /// A PostgreSQL connection the server closed (a restart, a failover) is opened again, so one
    /// outage fails the operations during it, not every one after it.
    fn reconnect_if_closed(&self, connection: &mut Connection) -> Result<()> {
        if let (Connection::Postgres(current), Location::Postgres(url)) = (&*connection, &self.location)
            && current.is_closed()
        {
            tracing::warn!(store = %self.location, "the database connection was closed; connecting again");
            // A refusal now is an outage for this operation, not a broken store: 503, retried.
            let reopened = url.connect().map_err(|error| match error {
                Error::Store(detail) => Error::StoreUnavailable(detail),
                other => other,
            })?;
            *connection = Connection::Postgres(reopened);
        }
        Ok(())
    }
}

thread_local! {
    /// Set on a thread of tokio's blocking pool while it runs store jobs
    /// ([`on_blocking_thread`]): such a thread sees the runtime's handle, but runs no async
    /// task, so the PostgreSQL client may block it.
    static BLOCKING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `job` (store operations) on this thread, known to be one of tokio's blocking pool
/// (`spawn_blocking`): [`off_runtime`] then spares a thread per operation. Its connections
/// serve `call`: once that is abandoned, they send nothing more and leave the pool (`deadline`).
pub(crate) fn on_blocking_thread<T>(call: &Call, job: impl FnOnce() -> T) -> T {
    // Left set after: the thread stays one of the blocking pool.
    BLOCKING.set(true);
    deadline::serving(Some(call.clone()), job)
}

/// Runs `job` as no call's (nobody abandons it): what a call that finished after its caller
/// stopped waiting does to put its late commit right ([`Store::hand_off_late_reservation`]).
pub(crate) fn detached<T>(job: impl FnOnce() -> T) -> T {
    deadline::serving(None, job)
}

/// Runs `f` on a thread outside any async runtime when called from inside one (see
/// [`Store::with`]); directly otherwise, and on the blocking pool's threads.
fn off_runtime<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    if BLOCKING.get() || tokio::runtime::Handle::try_current().is_err() {
        return f();
    }
    std::thread::scope(|scope| match scope.spawn(f).join() {
        Ok(value) => value,
        Err(panic) => std::panic::resume_unwind(panic),
    })
}

/// True when the signed request (`signer`, forwarder `nonce`) already has a live relay: a
/// replay, which is neither counted nor reserved for again.
fn is_taken(sql: &mut impl Sql, signer: Address, nonce: U256) -> Result<bool> {
    let live = sql.query_opt(&IS_TAKEN, args![signer.text(), nonce.text()])?;
    Ok(live.is_some())
}

/// [`is_taken`]'s read: the live relays of a signed request (`?1` signer, `?2` forwarder nonce).
static IS_TAKEN: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!("SELECT id FROM relays WHERE signer = ?1 AND forwarder_nonce = ?2 AND status IN {}", schema::LIVE)
});

fn parse_wei(text: &str) -> Result<u128> {
    u128::from_text(text, "wei amount")
}

/// A fresh relay (or event) id: 32 lowercase hex digits from the system's randomness, made
/// here rather than by SQL so that both engines make them alike.
fn new_relay_id() -> Result<String> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes)
        .map_err(|error| Error::Internal(format!("no randomness for an id: {error}")))?;
    Ok(alloy::primitives::hex::encode(bytes))
}

#[cfg(test)]
mod tests;
