//! The store on PostgreSQL (`DATABASE_URL`): the URL, never shown with its password; the
//! connection, with its timeouts (so a daemon frozen in a transaction, or a lost server, makes
//! the others wait seconds, not forever); and the migrations in `migrations/postgres/`, run at
//! start.

use std::{str::FromStr, sync::Arc, time::Duration};

use rustls::ClientConfig;

use postgres::{NoTls, config::SslMode};
use tokio_postgres_rustls::MakeRustlsConnect;

use super::{
    pg_tls::{self, TlsMode},
    pg_url,
};

use super::engine_errors::{is_unavailable, postgres_detail};
use super::sql::PgConnection;
use crate::error::{Error, Result};

/// The migrations, in order: each runs once per database, recorded in `schema_migrations`.
pub(super) const MIGRATIONS: &[(i64, &str)] = &[
    (1, include_str!("migrations/postgres/0001_initial.sql")),
    (2, include_str!("migrations/postgres/0002_lanes.sql")),
    (3, include_str!("migrations/postgres/0003_lane_leases.sql")),
    (4, include_str!("migrations/postgres/0004_handoffs.sql")),
    (5, include_str!("migrations/postgres/0005_live_request_v4.sql")),
];

/// A lock key of our own (an arbitrary constant: "kya" in ASCII) under which migrations run, so
/// daemons starting together on a fresh database do not create the tables twice.
const MIGRATION_LOCK: i64 = 0x006b_7961;

/// How long connecting may take before start-up fails with the reason.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Connections a daemon's store keeps open at most (`DATABASE_POOL_SIZE`), beside the lease
/// keeper's own: enough for the operations a busy daemon has in flight at once (requests' rate
/// windows and reservations, the senders' records, the followers' and the reads'), few enough
/// that ten daemons stay well inside PostgreSQL's default `max_connections` of 100.
pub(crate) const DEFAULT_POOL_SIZE: u32 = 8;

/// How long the database may keep a daemon waiting, set on every connection at connect: the
/// server ends what takes longer with an error, which the daemon answers as
/// [`Error::StoreUnavailable`] (503, try again), its transaction rolled back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DatabaseTimeouts {
    /// Longest statement (`statement_timeout`; `DATABASE_STATEMENT_TIMEOUT_MS`).
    pub statement: Duration,
    /// Longest wait for a row or advisory lock (`lock_timeout`; `DATABASE_LOCK_TIMEOUT_MS`):
    /// what a daemon waits behind another frozen in a transaction holding the budget row.
    pub lock: Duration,
    /// Longest idle time inside a transaction before the server ends the session
    /// (`idle_in_transaction_session_timeout`; `DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_MS`): a
    /// daemon frozen mid-transaction (SIGSTOP, a VM paused) loses its locks after this. The
    /// store never waits on anything else inside a transaction, so a short one is safe.
    pub idle_in_transaction: Duration,
    /// Idle time before TCP keepalives probe the connection (`DATABASE_KEEPALIVE_SECS`), and
    /// how long unacknowledged data may wait (`TCP_USER_TIMEOUT`, three times it): a server
    /// gone without a word (a host lost, a network cut) is noticed, not waited on forever.
    pub keepalive: Duration,
    /// Longest a daemon waits for one store call (`DATABASE_CALL_TIMEOUT_MS`), kept by the daemon
    /// itself: a server whose processes hang with their connections open (stopped, swapped out)
    /// keeps none of the timeouts above, and its kernel still acknowledges the keepalives. Past
    /// it the call answers [`crate::error::Error::StoreTimedOut`] (503), and its connection
    /// leaves the pool (`super::deadline`).
    pub call: Duration,
}

impl Default for DatabaseTimeouts {
    fn default() -> Self {
        Self {
            statement: Duration::from_secs(30),
            lock: Duration::from_secs(5),
            idle_in_transaction: Duration::from_secs(10),
            keepalive: Duration::from_secs(15),
            // Above the lock timeout, which a busy budget row may cost a call, so the server's
            // own refusal (rolled back, certain) comes first; well below a client's patience.
            call: Duration::from_secs(15),
        }
    }
}

impl DatabaseTimeouts {
    /// The `SET`s run on each new connection. `standard_conforming_strings` is PostgreSQL's
    /// default, set all the same: the batches write text values as literals with only their
    /// quotes doubled (`super::prepared`), which is exact only while a backslash is an
    /// ordinary character, whatever a server's configuration says.
    fn set_statements(&self) -> String {
        format!(
            "SET standard_conforming_strings = on; SET statement_timeout = {}; SET lock_timeout = {}; \
             SET idle_in_transaction_session_timeout = {}",
            self.statement.as_millis(),
            self.lock.as_millis(),
            self.idle_in_transaction.as_millis()
        )
    }
}

/// A `postgres://` or `postgresql://` URL (`DATABASE_URL`). Its `Debug` and [`DatabaseUrl::shown`]
/// keep only scheme, host and port: the user info holds the password.
#[derive(Clone)]
pub struct DatabaseUrl {
    // Boxed: the driver's settings are large, and configurations are moved about.
    config: Box<postgres::Config>,
    shown: String,
    timeouts: DatabaseTimeouts,
    /// Connections of the store's pool at most ([`DEFAULT_POOL_SIZE`]).
    pool_size: u32,
    /// The TLS the URL asks for (`sslmode`), with its verifier and roots: `None`, none.
    tls: Option<Arc<rustls::ClientConfig>>,
    /// `sslmode` as read, for the errors of a refused handshake.
    tls_mode: TlsMode,
    /// TLS is required because the URL names no `sslmode` and the server is not on loopback:
    /// a server without TLS is told how to allow plain text.
    tls_by_default: bool,
}

impl DatabaseUrl {
    /// Reads a URL; errors name what is wrong and show the URL redacted.
    pub fn parse(text: &str) -> Result<Self> {
        // The user info up to the last `@` before the host: a password may hold `/`, `?` or `@`
        // unencoded, and nothing of it is shown (`pg_url`).
        let parts = pg_url::split(text.trim());
        let shown = parts.as_ref().map_or_else(|_| "<unparseable URL>".to_owned(), pg_url::Parts::shown);
        let parts = match parts {
            Ok(parts) if matches!(parts.scheme, "postgres" | "postgresql") => parts,
            _ => {
                return Err(Error::Config(format!(
                    "DATABASE_URL must be a postgres:// or postgresql:// URL (unset: the SQLite file RELAYER_DB): {shown}"
                )));
            }
        };
        // sslmode's TLS values and sslrootcert are libpq's, which the driver does not read.
        let (text, tls) = pg_tls::split(&parts.without_user_info())?;
        // The driver's parse error quotes no part of the URL we could not show, but it may name
        // a value: only its kind is passed on. The user and the password are given as values.
        let mut config = postgres::Config::from_str(&text)
            .map_err(|_| Error::Config(format!("DATABASE_URL is not a valid PostgreSQL URL: {shown}")))?;
        if let Some(user) = &parts.user {
            config.user(user);
        }
        if let Some(password) = &parts.password {
            config.password(password);
        }
        // No `sslmode`: TLS to a server that is not on loopback (`pg_tls`).
        let mut tls = tls;
        let unset = tls.mode == TlsMode::Unset;
        tls.mode = tls.mode.for_server(&config);
        let tls_mode = tls.mode;
        let client_config = pg_tls::client_config(&tls)?;
        config.ssl_mode(match tls_mode {
            TlsMode::Off | TlsMode::Unset => SslMode::Disable,
            TlsMode::Prefer => SslMode::Prefer,
            TlsMode::Encrypt | TlsMode::VerifyCa | TlsMode::VerifyFull => SslMode::Require,
        });
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        config.application_name("kya-relayer");
        let mut url = Self {
            config: Box::new(config),
            shown,
            timeouts: DatabaseTimeouts::default(),
            pool_size: DEFAULT_POOL_SIZE,
            tls: client_config.map(Arc::new),
            tls_mode,
            tls_by_default: unset && tls_mode == TlsMode::Encrypt,
        };
        url.set_timeouts(DatabaseTimeouts::default());
        Ok(url)
    }

    /// The same URL with these timeouts on its connections.
    pub fn with_timeouts(mut self, timeouts: DatabaseTimeouts) -> Self {
        self.set_timeouts(timeouts);
        self
    }

    fn set_timeouts(&mut self, timeouts: DatabaseTimeouts) {
        self.timeouts = timeouts;
        let keepalive = timeouts.keepalive.max(Duration::from_secs(1));
        self.config
            .keepalives(true)
            .keepalives_idle(keepalive)
            .keepalives_interval((keepalive / 3).max(Duration::from_secs(1)))
            .keepalives_retries(3)
            .tcp_user_timeout(keepalive * 3);
    }

    /// The timeouts its connections get.
    pub fn timeouts(&self) -> DatabaseTimeouts {
        self.timeouts
    }

    /// The same URL with a store pool of at most `size` connections (at least 1).
    pub fn with_pool_size(mut self, size: u32) -> Self {
        self.pool_size = size.max(1);
        self
    }

    /// Connections of the store's pool at most.
    pub fn pool_size(&self) -> u32 {
        self.pool_size
    }

    /// How long connecting may take (`connect_timeout` in the URL, else 10 s); also the longest
    /// wait for a connection of the pool.
    pub(super) fn connect_timeout(&self) -> Duration {
        self.config.get_connect_timeout().copied().unwrap_or(CONNECT_TIMEOUT)
    }

    /// The URL as it may be logged: `postgres://host:port/…`.
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// Opens a connection, with the timeouts set on it.
    pub(super) fn connect(&self) -> Result<Box<PgConnection>> {
        let failed = |error: postgres::Error| {
            let mut detail = format!("connecting to {}: {}", self.shown, postgres_detail(&error));
            if matches!(self.tls_mode, TlsMode::VerifyCa | TlsMode::VerifyFull)
                && detail.contains("certificate")
            {
                detail.push_str(
                    " (the server's certificate must chain to sslrootcert's CA, or the system's roots without it)",
                );
            }
            if self.tls_by_default && detail.contains("TLS") {
                detail.push_str(
                    " (DATABASE_URL names no sslmode: a server that is not on loopback, by its \
                     hostaddr when given, else its host, must take TLS; write sslmode=disable to \
                     connect in plain text)",
                );
            }
            if is_unavailable(&error) { Error::StoreUnavailable(detail) } else { Error::Store(detail) }
        };
        let mut client = match &self.tls {
            Some(tls) => self.config.connect(MakeRustlsConnect::new(ClientConfig::clone(tls))),
            None => self.config.connect(NoTls),
        }
        .map_err(failed)?;
        client.batch_execute(&self.timeouts.set_statements()).map_err(failed)?;
        Ok(Box::new(PgConnection::new(client)))
    }
}

impl std::fmt::Debug for DatabaseUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DatabaseUrl({})", self.shown)
    }
}

/// Brings the database up to date: every migration not yet recorded, in one transaction under
/// [`MIGRATION_LOCK`].
pub(super) fn migrate(connection: &mut PgConnection) -> Result<()> {
    let mut tx = connection.client().transaction()?;
    // Another daemon's migration may hold the lock a while (a large table altered): wait
    // longer than a request would, but not forever.
    tx.batch_execute("SET LOCAL lock_timeout = '60s'; SET LOCAL statement_timeout = '300s'")?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations (version BIGINT PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())",
    )?;
    for (version, sql) in MIGRATIONS {
        let applied = tx.query_opt("SELECT version FROM schema_migrations WHERE version = $1", &[version])?;
        if applied.is_none() {
            tx.batch_execute(sql)?;
            tx.execute("INSERT INTO schema_migrations (version) VALUES ($1)", &[version])?;
        }
    }
    tx.commit()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_password_never_shows_and_bad_urls_are_named() {
        let url = DatabaseUrl::parse("postgres://kya:SECRET-PW@db.internal:5433/relayer?connect_timeout=3")
            .unwrap();
        assert_eq!(url.shown(), "postgres://db.internal:5433/…");
        assert!(!format!("{url:?}").contains("SECRET"), "{url:?}");
        assert_eq!(url.config.get_connect_timeout(), Some(&Duration::from_secs(3)));
        for (bad, named) in [
            ("mysql://kya:SECRET-PW@db/relayer", "must be a postgres:// or postgresql:// URL"),
            ("postgresql://kya:SECRET-PW@db/relayer?sslmode=verify", "sslmode=verify is not one of"),
            ("postgres://kya:SECRET-PW@db:notaport/relayer", "not a valid PostgreSQL URL"),
        ] {
            let error = DatabaseUrl::parse(bad).unwrap_err().to_string();
            assert!(error.contains(named), "{error}");
            assert!(!error.contains("SECRET"), "{error}");
        }
    }

    #[test]
    fn passwords_with_slash_question_mark_at_and_percent_reach_the_driver_whole_and_never_show() {
        for (url, password, tls) in [
            ("postgres://kya:ab/SECRET@db.internal/relayer", "ab/SECRET", TlsMode::Encrypt),
            ("postgres://kya:ab?SECRET@db.internal/relayer?sslmode=require", "ab?SECRET", TlsMode::Encrypt),
            ("postgres://kya:a@SECRET@db.internal/relayer?sslmode=disable", "a@SECRET", TlsMode::Off),
            ("postgres://kya:p%SECRET%40@db.internal/relayer?sslmode=prefer", "p%SECRET@", TlsMode::Prefer),
        ] {
            let parsed = DatabaseUrl::parse(url).unwrap();
            assert_eq!(parsed.config.get_password(), Some(password.as_bytes()), "{url}");
            assert_eq!(parsed.config.get_user(), Some("kya"), "{url}");
            assert_eq!(parsed.config.get_dbname(), Some("relayer"), "{url}");
            assert_eq!(parsed.tls_mode, tls, "{url}: sslmode read from the query, not the password");
            assert_eq!(parsed.shown(), "postgres://db.internal/…", "{url}");
            assert!(!format!("{parsed:?}").contains("SECRET"), "{url}");
        }
    }

    #[test]
    fn without_sslmode_a_server_off_loopback_must_take_tls_and_prefer_tries_tls_first() {
        let read = |url: &str| {
            let parsed = DatabaseUrl::parse(url).unwrap();
            (parsed.tls_mode, parsed.config.get_ssl_mode(), parsed.tls.is_some(), parsed.tls_by_default)
        };
        // (URL, what it reads as: the mode, the driver's mode, TLS configured, TLS by default)
        let cases = [
            ("postgres://kya:pw@db.internal/relayer", (TlsMode::Encrypt, SslMode::Require, true, true)),
            ("postgres://kya:pw@10.0.0.5:5432/relayer", (TlsMode::Encrypt, SslMode::Require, true, true)),
            ("postgres://kya:pw@127.0.0.1/relayer", (TlsMode::Prefer, SslMode::Prefer, true, false)),
            ("postgres://kya:pw@localhost/relayer", (TlsMode::Prefer, SslMode::Prefer, true, false)),
            ("postgres://kya:pw@[::1]/relayer", (TlsMode::Prefer, SslMode::Prefer, true, false)),
            (
                "postgres://kya:pw@db.internal/relayer?sslmode=disable",
                (TlsMode::Off, SslMode::Disable, false, false),
            ),
            (
                "postgres://kya:pw@db.internal/relayer?sslmode=prefer",
                (TlsMode::Prefer, SslMode::Prefer, true, false),
            ),
            (
                "postgres://kya:pw@127.0.0.1/relayer?sslmode=require",
                (TlsMode::Encrypt, SslMode::Require, true, false),
            ),
        ];
        for (url, reads_as) in cases {
            assert_eq!(read(url), reads_as, "{url}");
        }
    }

    /// The loopback test reads the addresses the driver connects to: each `hostaddr` when given,
    /// else each host. `localhost` with a remote `hostaddr` is a server elsewhere, which must take
    /// TLS (it read as loopback, and spoke plain text across the network); a loopback `hostaddr`
    /// is loopback whatever the host's name.
    #[test]
    fn without_sslmode_a_hostaddr_off_loopback_must_take_tls_whatever_the_host_name() {
        let read = |url: &str| {
            let parsed = DatabaseUrl::parse(url).unwrap();
            (parsed.tls_mode, parsed.config.get_ssl_mode(), parsed.tls_by_default)
        };
        let must_take_tls = (TlsMode::Encrypt, SslMode::Require, true);
        let loopback = (TlsMode::Prefer, SslMode::Prefer, false);
        let cases = [
            ("postgres://kya:pw@localhost/relayer?hostaddr=10.0.0.5", must_take_tls),
            ("postgres://kya:pw@127.0.0.1:5432/relayer?hostaddr=10.0.0.5", must_take_tls),
            ("postgres://kya:pw@localhost/relayer?connect_timeout=3&hostaddr=2001:db8::5", must_take_tls),
            // Several servers: each one's address counts.
            ("postgres://kya:pw@localhost,localhost/relayer?hostaddr=127.0.0.1,10.0.0.5", must_take_tls),
            ("postgres://kya:pw@localhost,db.internal/relayer?hostaddr=127.0.0.1,::1", loopback),
            ("postgres://kya:pw@localhost/relayer?hostaddr=127.0.0.1", loopback),
            ("postgres://kya:pw@db.internal/relayer?hostaddr=127.0.0.1", loopback),
            (
                "postgres://kya:pw@localhost/relayer?hostaddr=10.0.0.5&sslmode=disable",
                (TlsMode::Off, SslMode::Disable, false),
            ),
        ];
        for (url, reads_as) in cases {
            assert_eq!(read(url), reads_as, "{url}");
        }
    }

    #[test]
    fn a_server_that_is_not_there_is_a_clear_error_without_the_password() {
        // A loopback port nobody listens on: refused at once.
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let url = DatabaseUrl::parse(&format!("postgres://kya:SECRET-PW@127.0.0.1:{port}/relayer")).unwrap();
        let error = url.connect().err().expect("nobody listens");
        assert!(matches!(error, Error::StoreUnavailable(_)), "{error:?}");
        let error = error.detail();
        assert!(error.contains(&format!("connecting to postgres://127.0.0.1:{port}/…")), "{error}");
        assert!(!error.contains("SECRET"), "{error}");
    }
}
