//! The store: SQLite or PostgreSQL, and how long finished relays are kept.

use std::path::PathBuf;

use super::reader::Settings;
use crate::{
    error::{Error, Result},
    store::{DEFAULT_POOL_SIZE, DatabaseTimeouts, DatabaseUrl, Location},
};

/// Default path of the store, under the git-ignored `.relayer/`.
pub(crate) const DEFAULT_DB_PATH: &str = ".relayer/relayer.db";
/// Default hours a finished relay keeps its call data (what a stuck relay is sent again with;
/// a finished one is never sent again).
pub(crate) const DEFAULT_CALLDATA_RETENTION_HOURS: u64 = 24;
/// Default days a finished relay is kept at all (its lookups, a retry answered with it).
pub(crate) const DEFAULT_RELAY_RETENTION_DAYS: u64 = 30;

/// Where the store is and what it keeps.
#[derive(Debug, Clone)]
pub struct StoreConfig {
    /// Path of the embedded store (`RELAYER_DB`, default `.relayer/relayer.db`), used when
    /// `database_url` is not set.
    pub db_path: PathBuf,
    /// The shared store on PostgreSQL (`DATABASE_URL`, `postgres://…` or `postgresql://…`);
    /// `None`: the SQLite file at `db_path`. Its `Debug` shows no password.
    pub database_url: Option<DatabaseUrl>,
    /// Hours a finished relay keeps its call data (`CALLDATA_RETENTION_HOURS`, default 24).
    pub calldata_retention_secs: u64,
    /// Days a finished relay is kept (`RELAY_RETENTION_DAYS`, default 30, at least 2).
    pub relay_retention_secs: u64,
}

impl StoreConfig {
    pub(crate) fn read(settings: &Settings<impl Fn(&str) -> Option<String>>) -> Result<Self> {
        Ok(Self {
            db_path: settings.text("RELAYER_DB").map_or_else(|| DEFAULT_DB_PATH.into(), PathBuf::from),
            database_url: settings
                .text("DATABASE_URL")
                .map(|url| {
                    Ok::<_, Error>(
                        DatabaseUrl::parse(&url)?
                            .with_timeouts(database_timeouts(settings)?)
                            .with_pool_size(database_pool_size(settings)?),
                    )
                })
                .transpose()?,
            calldata_retention_secs: settings
                .number("CALLDATA_RETENTION_HOURS", DEFAULT_CALLDATA_RETENTION_HOURS)?
                .saturating_mul(60 * 60),
            relay_retention_secs: match settings
                .number("RELAY_RETENTION_DAYS", DEFAULT_RELAY_RETENTION_DAYS)?
            {
                // The budget shares are summed over the relays of the current window (a day).
                days if days < 2 => {
                    return Err(Error::Config(
                        "RELAY_RETENTION_DAYS must be at least 2: the budget window needs a day of relays"
                            .into(),
                    ));
                }
                days => days.saturating_mul(24 * 60 * 60),
            },
        })
    }

    /// Where the store is: PostgreSQL when `DATABASE_URL` is set, else the SQLite file.
    pub fn location(&self) -> Location {
        match &self.database_url {
            Some(url) => Location::Postgres(url.clone()),
            None => Location::Sqlite(self.db_path.clone()),
        }
    }
}

/// The PostgreSQL connections' timeouts (`DATABASE_*_MS`, `DATABASE_KEEPALIVE_SECS`) and the
/// daemon's own deadline on each store call (`DATABASE_CALL_TIMEOUT_MS`): each at least 1 ms (0
/// would turn the timeout off: a hang again).
fn database_timeouts(settings: &Settings<impl Fn(&str) -> Option<String>>) -> Result<DatabaseTimeouts> {
    let defaults = DatabaseTimeouts::default();
    let millis = |name: &str, default: std::time::Duration| -> Result<std::time::Duration> {
        match settings.number(name, u64::try_from(default.as_millis()).unwrap_or(u64::MAX))? {
            0 => Err(Error::Config(format!("{name} must be at least 1 (0 would wait forever)"))),
            ms => Ok(std::time::Duration::from_millis(ms)),
        }
    };
    Ok(DatabaseTimeouts {
        statement: millis("DATABASE_STATEMENT_TIMEOUT_MS", defaults.statement)?,
        lock: millis("DATABASE_LOCK_TIMEOUT_MS", defaults.lock)?,
        idle_in_transaction: millis("DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_MS", defaults.idle_in_transaction)?,
        keepalive: std::time::Duration::from_secs(
            settings.number("DATABASE_KEEPALIVE_SECS", defaults.keepalive.as_secs())?.max(1),
        ),
        call: millis("DATABASE_CALL_TIMEOUT_MS", defaults.call)?,
    })
}

/// The store's PostgreSQL connections at most (`DATABASE_POOL_SIZE`), beside the lease keeper's.
fn database_pool_size(settings: &Settings<impl Fn(&str) -> Option<String>>) -> Result<u32> {
    match settings.number("DATABASE_POOL_SIZE", u64::from(DEFAULT_POOL_SIZE))? {
        size @ 1..=1000 => Ok(u32::try_from(size).unwrap_or(1)),
        _ => Err(Error::Config("DATABASE_POOL_SIZE must be between 1 and 1000".into())),
    }
}
