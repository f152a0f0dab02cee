//! PostgreSQL's connections, pooled (r2d2): each request's store operation takes a connection of
//! its own, so a reservation waiting on the budget row no longer queues the daemon's other
//! operations (rate windows, lookups, the follower's records) behind it. Every connection is
//! opened by [`DatabaseUrl::connect`]: the URL's TLS, and the timeouts `SET` on it.
//!
//! r2d2 is synchronous, like the `postgres` client the store is written against: the store's
//! operations stay as they are, called from tokio's blocking pool (see docs/relayer.md,
//! "Connections", for the crates weighed).
//!
//! A call whose server hangs for good blocks its thread, and its connection, until the server
//! answers: no client can stop a blocked read. So the pool's size counts *slots*, not
//! connections: a call takes a slot, and gives it back when it ends or, past its deadline, when
//! it is abandoned (`super::deadline`), while its connection stays out with its thread. The
//! next call opens a new connection in that slot. r2d2 may hold up to twice the size, so hung
//! backends cost at most `size` connections more of the server's, never the pool.

use std::{
    sync::{
        Arc, Condvar, Mutex, PoisonError,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use super::{
    DatabaseUrl,
    deadline::{Call, GivenBack},
    sql::Connection,
};
use crate::error::{Error, Result};

/// The pool: `size` slots, each a connection while a call uses it; connections opened at
/// start ([`Pool::open_all`]) or when first needed, and kept.
#[derive(Debug)]
pub(super) struct Pool {
    connections: r2d2::Pool<Manager>,
    slots: Arc<Slots>,
    /// How many slots it has.
    size: u32,
}

impl Pool {
    /// Opens a connection for every slot now, one after another, and leaves them idle in the
    /// pool. Opened as calls need them, a burst opened twice as many: r2d2 starts opening a
    /// connection for every call that finds none idle, and one that arrives after its caller
    /// took a connection given back meanwhile stays, up to r2d2's limit, twice the slots (the
    /// room kept for hung calls). Those backends then cost the server their memory and their
    /// caches' warming (a pool of 8 slots under 32 threads had 16; `store::tests::postgres`).
    /// With every slot's connection open, a call always finds one idle; r2d2 opens a new one
    /// only for a connection that left the pool. Checked out and given back, not asked of r2d2
    /// as an idle minimum: that counts a connection in use against it and opens another beside
    /// it. A failure is logged and ends the opening: the calls then open theirs as they need
    /// them.
    pub(super) fn open_all(&self) {
        let mut opened = Vec::with_capacity(self.size as usize);
        while opened.len() < self.size as usize {
            match self.connections.get() {
                Ok(connection) => opened.push(connection),
                Err(error) => {
                    let opened = opened.len();
                    tracing::warn!(%error, opened, "opening the pool's connections failed; the rest open when needed");
                    break;
                }
            }
        }
    }
}

/// The slots free now, and the wake-up of a call waiting for one.
#[derive(Debug)]
struct Slots {
    free: Mutex<u32>,
    freed: Condvar,
}

impl Slots {
    /// A free slot, waiting for one at most `patience`.
    fn take(self: &Arc<Self>, patience: Duration) -> Option<Arc<Slot>> {
        let until = Instant::now() + patience;
        let mut free = self.free.lock().unwrap_or_else(PoisonError::into_inner);
        while *free == 0 {
            let left = until.checked_duration_since(Instant::now()).filter(|left| !left.is_zero())?;
            free = self.freed.wait_timeout(free, left).unwrap_or_else(PoisonError::into_inner).0;
        }
        *free -= 1;
        Some(Arc::new(Slot { slots: Arc::clone(self), given_back: AtomicBool::new(false) }))
    }
}

/// One call's slot.
#[derive(Debug)]
pub(super) struct Slot {
    slots: Arc<Slots>,
    given_back: AtomicBool,
}

impl GivenBack for Slot {
    fn give_back(&self) {
        if !self.given_back.swap(true, Ordering::SeqCst) {
            *self.slots.free.lock().unwrap_or_else(PoisonError::into_inner) += 1;
            self.slots.freed.notify_one();
        }
    }
}

/// A connection checked out for a call, in its slot: the connection goes back to r2d2, which
/// drops one whose call was abandoned ([`Manager`]'s
/// [`has_broken`](r2d2::ManageConnection::has_broken)), and then the slot is given back (or
/// earlier, when the call is abandoned).
pub(super) struct Checkout {
    /// `None` only while the checkout is dropped.
    connection: Option<r2d2::PooledConnection<Manager>>,
    slot: Arc<Slot>,
}

impl std::ops::Deref for Checkout {
    type Target = Connection;

    fn deref(&self) -> &Connection {
        self.connection.as_ref().expect("a checkout holds its connection until dropped")
    }
}

impl std::ops::DerefMut for Checkout {
    fn deref_mut(&mut self) -> &mut Connection {
        self.connection.as_mut().expect("a checkout holds its connection until dropped")
    }
}

impl Drop for Checkout {
    /// The connection first: a call waiting for the slot then finds it idle in r2d2. Freed
    /// the other way round, that call could take the slot while the connection was still out
    /// and open a second one, which r2d2 (room for twice the slots, for hung calls) kept for
    /// good (`store::tests::postgres`).
    fn drop(&mut self) {
        drop(self.connection.take());
        self.slot.give_back();
    }
}

/// How r2d2 opens and checks the store's connections.
#[derive(Debug)]
pub(super) struct Manager {
    url: DatabaseUrl,
    /// A connection already open (start-up's, which ran the migrations), handed out first:
    /// opening one costs a TLS handshake and a password exchange.
    first: std::sync::Mutex<Option<Connection>>,
}

impl r2d2::ManageConnection for Manager {
    type Connection = Connection;
    type Error = Error;

    fn connect(&self) -> Result<Connection> {
        let first = self.first.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
        match first {
            Some(connection) => Ok(connection),
            None => self.url.connect().map(Connection::Postgres),
        }
    }

    /// Not asked at check-out (a round trip per operation); a connection the server closed is
    /// seen by [`has_broken`](r2d2::ManageConnection::has_broken) or opened again before use (`Store::with`).
    fn is_valid(&self, _connection: &mut Connection) -> Result<()> {
        Ok(())
    }

    /// A connection the server closed (a restart, a timeout that ended the session) is dropped
    /// when given back, not handed out again; so is one whose call was abandoned past its
    /// deadline (`super::deadline`): its server hung, and may hang again or still be working.
    fn has_broken(&self, connection: &mut Connection) -> bool {
        match connection {
            Connection::Postgres(connection) => connection.is_closed() || connection.is_abandoned(),
            Connection::Sqlite(_) => false,
        }
    }
}

/// Connection failures r2d2 meets while opening connections: to the log, with the detail
/// (which names the server as [`DatabaseUrl::shown`], never the password).
#[derive(Debug)]
struct LogFailures;

impl r2d2::HandleError<Error> for LogFailures {
    fn handle_error(&self, error: Error) {
        tracing::warn!(error = %error.detail(), "opening a database connection failed");
    }
}

/// A pool of `size` slots on connections to `url`, opened as needed or all at once
/// ([`Pool::open_all`]), `first` (if any) the first (start-up has connected once already, for
/// the migrations, so a wrong URL or CA is refused there with its reason). A connection once
/// opened stays open (no idle timeout): the lease keeper's renewals and a quiet daemon's next
/// request find it ready. Waiting for a slot or a connection (all in use, or the server down)
/// is bounded by the URL's connect timeout, after which the operation fails as
/// [`Error::StoreUnavailable`].
pub(super) fn build(url: &DatabaseUrl, size: u32, first: Option<Connection>) -> Pool {
    let size = size.max(1);
    let connections = r2d2::Pool::builder()
        // Room for as many connections again as hung calls may hold outside the slots.
        .max_size(size * 2)
        .min_idle(Some(0))
        .idle_timeout(None)
        .test_on_check_out(false)
        .connection_timeout(url.connect_timeout())
        .error_handler(Box::new(LogFailures))
        .build_unchecked(Manager { url: url.clone(), first: std::sync::Mutex::new(first) });
    Pool { connections, slots: Arc::new(Slots { free: Mutex::new(size), freed: Condvar::new() }), size }
}

/// A connection from `pool` for `call`, in a slot that `call`'s abandonment gives back; none
/// within the pool's timeout is an outage for this operation (503, retry). A call abandoned
/// before it got one (waiting for a thread, a slot or a connection) is refused: its caller has
/// its answer.
pub(super) fn get(pool: &Pool, call: &Call) -> Result<Checkout> {
    if call.is_abandoned() {
        return Err(Call::refused());
    }
    let patience = pool.connections.connection_timeout();
    let slot = pool.slots.take(patience).ok_or_else(|| {
        Error::StoreUnavailable(format!(
            "no database connection free within {patience:?}: every slot is in use"
        ))
    })?;
    call.hold(Arc::clone(&slot) as Arc<dyn GivenBack>);
    match pool.connections.get() {
        // Abandoned while it waited: nothing has been sent on the connection for it, so the
        // connection goes back to the pool whole (the checkout dropped here), for the next
        // call. Had it served this call it would leave the pool with it, and under load a queue
        // of such waiters took each freshly opened connection and dropped it while a live call
        // waited behind them.
        Ok(_) if call.is_abandoned() => Err(Call::refused()),
        Ok(connection) => Ok(Checkout { connection: Some(connection), slot }),
        Err(error) => {
            slot.give_back();
            Err(Error::StoreUnavailable(format!(
                "no database connection opened within {patience:?}: {error}"
            )))
        }
    }
}
