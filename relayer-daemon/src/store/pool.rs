//! PostgreSQL's connections, pooled (r2d2): each request's store operation takes a connection of
//! its own, so a reservation waiting on the budget row no longer queues the daemon's other
//! operations (rate windows, lookups, the follower's records) behind it. Every connection is
//! opened by [`DatabaseUrl::connect`]: the URL's TLS, and the timeouts `SET` on it.
//!
//! r2d2 is synchronous, like the `postgres` client the store is written against: the store's
//! operations stay as they are, called from tokio's blocking pool (see docs/relayer.md,
//! "Connections", for the crates weighed).

use super::{DatabaseUrl, sql::Connection};
use crate::error::{Error, Result};

/// The pool: `size` connections at most, opened when first needed and kept while in use.
pub(super) type Pool = r2d2::Pool<Manager>;

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
    /// seen by [`Manager::has_broken`] or opened again before use (`Store::with`).
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

/// A pool of at most `size` connections to `url`, opened as needed, one kept, `first` (if any)
/// the first (start-up has connected once already, for the migrations, so a wrong URL or CA is
/// refused there with its reason). Waiting
/// for a connection (all in use, or the server down) is bounded by the URL's connect timeout,
/// after which the operation fails as [`Error::StoreUnavailable`].
pub(super) fn build(url: &DatabaseUrl, size: u32, first: Option<Connection>) -> Pool {
    // One kept open (and opened now, in the background): the lease keeper's first renewal and a
    // quiet daemon's next request find it ready.
    build_keeping(url, size, first, 1)
}

/// [`build`], keeping `kept_open` connections open (0: none before the first operation).
pub(super) fn build_keeping(url: &DatabaseUrl, size: u32, first: Option<Connection>, kept_open: u32) -> Pool {
    r2d2::Pool::builder()
        .max_size(size.max(1))
        .min_idle(Some(kept_open.min(size.max(1))))
        .test_on_check_out(false)
        .connection_timeout(url.connect_timeout())
        .error_handler(Box::new(LogFailures))
        .build_unchecked(Manager { url: url.clone(), first: std::sync::Mutex::new(first) })
}

/// A connection from `pool`; none within its timeout is an outage for this operation (503, retry).
pub(super) fn get(pool: &Pool) -> Result<r2d2::PooledConnection<Manager>> {
    pool.get().map_err(|error| {
        Error::StoreUnavailable(format!(
            "no database connection free or opened within {:?}: {error}",
            pool.connection_timeout()
        ))
    })
}
