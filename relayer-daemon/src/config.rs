//! Configuration from the environment (INTERFACE.md section 3), with SPEC.md's limits as
//! defaults. The relayer key is loaded here and only the signer leaves: it is never formatted.

use std::{net::IpAddr, path::PathBuf};

use alloy::{
    primitives::{Address, utils::parse_ether},
    signers::local::PrivateKeySigner,
};

use crate::{
    error::{Error, Result},
    store::{DatabaseTimeouts, DatabaseUrl, Location},
    stuck::MIN_BUMP_PERCENT,
};

/// Default RPC endpoint: the public Base Sepolia node.
pub(crate) const DEFAULT_RPC_URL: &str = "https://sepolia.base.org";
/// Default daily gas budget in ETH (INTERFACE.md section 3).
pub(crate) const DEFAULT_DAILY_GAS_BUDGET: &str = "0.05";
/// Default minimum relayer balance in ETH (SPEC.md section 8).
pub(crate) const DEFAULT_MIN_BALANCE: &str = "0.001";
/// Default cap on `request.gas`: far above what any registry write needs, low enough that one
/// request cannot take a large bite of the budget.
pub(crate) const DEFAULT_MAX_REQUEST_GAS: u64 = 1_000_000;
/// Default per-IP limit of the read endpoints: generous for a client polling its nonce, small
/// enough that one caller cannot flood the node through the relayer.
pub(crate) const DEFAULT_READ_RATE_LIMIT_PER_MINUTE: u32 = 120;
/// Default length of a daemon's lease on a key: renewed every third of it, taken over by
/// another daemon this long after its holder stopped renewing (died, or lost the database).
pub(crate) const DEFAULT_LEASE_SECS: u64 = 30;
/// Default time a standby waits for a key's holder to send a relay it handed off before
/// answering 202 (accepted, not sent yet: the client reads the relay by its id).
pub(crate) const DEFAULT_HANDOFF_WAIT_SECS: u64 = 10;
/// Shortest lease: renewals every second.
const MIN_LEASE_SECS: u64 = 3;
/// Default pause between two passes of the reconciler over unfinished relays.
pub(crate) const DEFAULT_RECONCILE_INTERVAL_SECS: u64 = 30;
/// Default age below which the reconciler leaves an unfinished relay alone: long enough for a
/// sent transaction to reach every node behind a load-balanced RPC endpoint and be mined.
pub(crate) const DEFAULT_RECONCILE_GRACE_SECS: u64 = 120;
/// Default number of blocks a sent relay may wait before it is replaced (Base: 2 s blocks).
pub(crate) const DEFAULT_STUCK_AFTER_BLOCKS: u64 = 15;
/// Default seconds a sent relay may wait before it is replaced, should blocks stall.
pub(crate) const DEFAULT_STUCK_AFTER_SECS: u64 = 60;
/// Default fee rise per replacement, in percent (nodes require at least 10).
pub(crate) const DEFAULT_FEE_BUMP_PERCENT: u64 = 20;
/// Default cap on a replacement's max fee per gas: 50 gwei, far above Base's usual fees.
pub(crate) const DEFAULT_MAX_FEE_PER_GAS_WEI: u64 = 50_000_000_000;
/// Default time the daemon keeps trying to reach the RPC endpoint at start.
pub(crate) const DEFAULT_STARTUP_RETRY_SECS: u64 = 300;
/// Default room a request's deadline must leave after the head block's time, in seconds: 60
/// blocks of Base's 2 s, time to be mined and, if stuck, replaced. Less, and a request can pass
/// every check at the head and revert on inclusion, at the relayer's cost.
pub(crate) const DEFAULT_DEADLINE_MARGIN_SECS: u64 = 120;
/// Default share of the daily budget one signer may use, in percent.
pub(crate) const DEFAULT_SIGNER_BUDGET_SHARE_PERCENT: u64 = 5;
/// Default share of the daily budget one client (IPv4 address, IPv6 /48) may use, in percent:
/// at least ten clients are needed to close the relayer for the day.
pub(crate) const DEFAULT_CLIENT_BUDGET_SHARE_PERCENT: u64 = 10;
/// Default number of slices a budget window opens in: one an hour of the day, so that a crowd
/// of clients spending their shares at once closes the relayer for the rest of an hour at most.
pub(crate) const DEFAULT_BUDGET_SLICES: u64 = 24;
/// Default cap on a cancellation's max fee per gas: twice the relay cap, so a cancellation can
/// still outbid (by the nodes' 10%) a relay stuck at the cap.
pub(crate) const DEFAULT_MAX_CANCEL_FEE_PER_GAS_WEI: u64 = 2 * DEFAULT_MAX_FEE_PER_GAS_WEI;
/// Default port of the metrics listener (the Prometheus exporters' range).
pub(crate) const DEFAULT_METRICS_PORT: u16 = 9464;
/// Default hours a finished relay keeps its call data (what a stuck relay is sent again with;
/// a finished one is never sent again).
pub(crate) const DEFAULT_CALLDATA_RETENTION_HOURS: u64 = 24;
/// Default days a finished relay is kept at all (its lookups, a retry answered with it).
pub(crate) const DEFAULT_RELAY_RETENTION_DAYS: u64 = 30;
/// Default time one webhook delivery attempt may take, in seconds.
pub(crate) const DEFAULT_WEBHOOK_TIMEOUT_SECS: u64 = 10;
/// Default number of webhook deliveries in flight at once (each to a different relay).
pub(crate) const DEFAULT_WEBHOOK_CONCURRENCY: u64 = 8;
/// Default pause before the second attempt at a webhook delivery, in milliseconds; it doubles
/// with every failed attempt, up to the next.
pub(crate) const DEFAULT_WEBHOOK_RETRY_FIRST_MS: u64 = 1_000;
/// Default longest pause between two attempts at a webhook delivery: ten minutes.
pub(crate) const DEFAULT_WEBHOOK_RETRY_MAX_MS: u64 = 600_000;

/// Default path of the store, under the git-ignored `.relayer/`.
pub(crate) const DEFAULT_DB_PATH: &str = ".relayer/relayer.db";

/// Everything the relayer needs to run.
#[derive(Clone)]
pub struct Config {
    /// JSON-RPC endpoint of the chain (`RPC_URL`).
    pub rpc_url: String,
    /// The registry: the only contract requests may target (`REGISTRY_ADDRESS`).
    pub registry: Address,
    /// The forwarder the relayer calls (`FORWARDER_ADDRESS`).
    pub forwarder: Address,
    /// The relayer's hot wallets, one nonce lane each, in the order given (`RELAYER_KEYS`, or
    /// `RELAYER_KEY`, or `RELAYER_KEYSTORE` + `RELAYER_KEYSTORE_PASSWORD`): never empty, no key
    /// twice.
    pub signers: Vec<PrivateKeySigner>,
    /// This daemon's name in the lane leases and in `/status` (`RELAYER_ID`, default the host's
    /// name): unique per daemon of a cluster, and kept across restarts, so a restarted daemon
    /// takes back at once the keys its killed run still held.
    pub relayer_id: String,
    /// How long a lease on a key lasts without renewal (`RELAYER_LEASE_SECS`, default 30, at
    /// least 3).
    pub lease_secs: u64,
    /// How long a standby waits for the key's holder to send a relay it handed off before
    /// answering 202 (`RELAYER_HANDOFF_WAIT_SECS`, default 10).
    pub handoff_wait: std::time::Duration,
    /// Listening address (`RELAYER_HOST`, default 127.0.0.1).
    pub host: IpAddr,
    /// Listening port (`RELAYER_PORT`, default 3001).
    pub port: u16,
    /// Daily gas budget in wei (`DAILY_GAS_BUDGET` in ETH, default 0.05).
    pub daily_gas_budget_wei: u128,
    /// Requests per IP per hour (`RATE_LIMIT_PER_IP`, default 20).
    pub rate_limit_per_ip: u32,
    /// Requests per signer per hour (`RATE_LIMIT_PER_SIGNER`, default 10).
    pub rate_limit_per_signer: u32,
    /// Read requests (`/status`, `/nonce`, `/domain`) per IP per minute, in memory
    /// (`READ_RATE_LIMIT_PER_MINUTE`, default 120).
    pub read_rate_limit_per_minute: std::num::NonZeroU32,
    /// Minimum wallet balance in wei to relay (`MIN_BALANCE` in ETH, default 0.001).
    pub min_balance_wei: u128,
    /// Largest `request.gas` accepted (`MAX_REQUEST_GAS`, default 1,000,000).
    pub max_request_gas: u64,
    /// Path of the embedded store (`RELAYER_DB`, default `.relayer/relayer.db`), used when
    /// `database_url` is not set.
    pub db_path: PathBuf,
    /// The shared store on PostgreSQL (`DATABASE_URL`, `postgres://…` or `postgresql://…`);
    /// `None`: the SQLite file at `db_path`. Its `Debug` shows no password.
    pub database_url: Option<DatabaseUrl>,
    /// Pause between reconciler passes (`RECONCILE_INTERVAL_SECS`, default 30, at least 1).
    pub reconcile_interval: std::time::Duration,
    /// Age before the reconciler looks at an unfinished relay (`RECONCILE_GRACE_SECS`,
    /// default 120).
    pub reconcile_grace_secs: u64,
    /// Blocks a sent relay may wait before it is replaced (`STUCK_AFTER_BLOCKS`, default 15).
    pub stuck_after_blocks: u64,
    /// Seconds a sent relay may wait before it is replaced (`STUCK_AFTER_SECS`, default 60).
    pub stuck_after_secs: u64,
    /// Fee rise per replacement in percent (`FEE_BUMP_PERCENT`, default 20, at least 10).
    pub fee_bump_percent: u64,
    /// Highest max fee per gas of a replacement, in wei (`MAX_FEE_PER_GAS_WEI`, default 50 gwei);
    /// a relay stuck at it is cancelled.
    pub max_fee_per_gas_wei: u128,
    /// How long start-up keeps retrying an unreachable RPC endpoint (`STARTUP_RETRY_SECS`,
    /// default 300).
    pub startup_retry: std::time::Duration,
    /// Seconds a request's deadline must leave after the head block's time
    /// (`DEADLINE_MARGIN_SECS`, default 120).
    pub deadline_margin_secs: u64,
    /// Percent of the daily budget one signer may use (`SIGNER_BUDGET_SHARE_PERCENT`, default 5).
    pub signer_budget_share_percent: u64,
    /// Percent of the daily budget one client may use (`CLIENT_BUDGET_SHARE_PERCENT`, default 10).
    pub client_budget_share_percent: u64,
    /// Equal slices the day's budget opens in, unspent ones carried over (`BUDGET_SLICES`,
    /// default 24, at least 1; 1 turns pacing off).
    pub budget_slices: std::num::NonZeroU64,
    /// Seconds a budget window lasts after its first use (`BUDGET_WINDOW_SECS`, default 86,400:
    /// SPEC.md's day). Shorter for trials and tests that watch a window or its slices go by.
    pub budget_window_secs: u64,
    /// Highest max fee per gas of a cancellation, in wei (`MAX_CANCEL_FEE_PER_GAS_WEI`, default
    /// 100 gwei).
    pub max_cancel_fee_per_gas_wei: u128,
    /// Reverse proxies whose `X-Forwarded-For` names the client (`TRUSTED_PROXIES`, CIDR list;
    /// default none: the TCP peer is the client).
    pub trusted_proxies: kya_core::client_ip::TrustedProxies,
    /// Where `/metrics` is served (`METRICS_HOST`, `METRICS_PORT`; default 127.0.0.1:9464), apart
    /// from the public listener.
    pub metrics_address: std::net::SocketAddr,
    /// Hours a finished relay keeps its call data (`CALLDATA_RETENTION_HOURS`, default 24).
    pub calldata_retention_secs: u64,
    /// Days a finished relay is kept (`RELAY_RETENTION_DAYS`, default 30, at least 2).
    pub relay_retention_secs: u64,
    /// Where and how relay events are delivered (`WEBHOOK_URL` and `WEBHOOK_SECRET`); `None`:
    /// no webhooks.
    pub webhook: Option<WebhookConfig>,
}

/// The webhook receiver and the delivery's settings.
#[derive(Clone)]
pub struct WebhookConfig {
    /// The receiver (`WEBHOOK_URL`, http).
    pub url: String,
    /// The signing key (`WEBHOOK_SECRET`).
    pub secret: WebhookSecret,
    /// Longest time of one attempt (`WEBHOOK_TIMEOUT_SECS`, default 10).
    pub timeout: std::time::Duration,
    /// Deliveries in flight at once (`WEBHOOK_CONCURRENCY`, default 8, at least 1).
    pub concurrency: usize,
    /// Pause before the second attempt (`WEBHOOK_RETRY_FIRST_MS`, default 1000).
    pub retry_first: std::time::Duration,
    /// Longest pause between attempts (`WEBHOOK_RETRY_MAX_MS`, default 600000).
    pub retry_max: std::time::Duration,
}

impl std::fmt::Debug for WebhookConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The URL without path or query (receivers put tokens there), the secret not at all.
        f.debug_struct("WebhookConfig")
            .field("url", &kya_core::redact::url(&self.url))
            .field("secret", &self.secret)
            .field("timeout", &self.timeout)
            .field("concurrency", &self.concurrency)
            .field("retry_first", &self.retry_first)
            .field("retry_max", &self.retry_max)
            .finish()
    }
}

/// The webhook signing key's bytes. Never formatted: `Debug` shows only its length.
#[derive(Clone, PartialEq, Eq)]
pub struct WebhookSecret(Vec<u8>);

impl WebhookSecret {
    /// Reads `WEBHOOK_SECRET`: `whsec_` and base64 (as Standard Webhooks writes secrets), or the
    /// raw text's bytes; at least `kya_core::standard_webhooks::MIN_SECRET_BYTES`. Errors never
    /// quote it.
    pub fn parse(text: &str) -> Result<Self> {
        kya_core::standard_webhooks::decode_secret(text)
            .map(Self)
            .map_err(|error| Error::Config(error.describe("WEBHOOK_SECRET")))
    }

    /// The key's bytes, for the HMAC.
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.0
    }
}

impl std::fmt::Debug for WebhookSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "WebhookSecret({} bytes, redacted)", self.0.len())
    }
}

impl Config {
    /// Where the store is: PostgreSQL when `DATABASE_URL` is set, else the SQLite file.
    pub fn store_location(&self) -> Location {
        match &self.database_url {
            Some(url) => Location::Postgres(url.clone()),
            None => Location::Sqlite(self.db_path.clone()),
        }
    }

    /// The most one signer may spend in a budget window, in wei.
    pub fn signer_share_wei(&self) -> u128 {
        share(self.daily_gas_budget_wei, self.signer_budget_share_percent)
    }

    /// The most one client may spend in a budget window, in wei.
    pub fn client_share_wei(&self) -> u128 {
        share(self.daily_gas_budget_wei, self.client_budget_share_percent)
    }

    /// The budget and its shares, in wei, and the slices it opens in.
    pub fn budget_limits(&self) -> crate::store::BudgetLimits {
        crate::store::BudgetLimits {
            total_wei: self.daily_gas_budget_wei,
            signer_wei: self.signer_share_wei(),
            client_wei: self.client_share_wei(),
            slices: self.budget_slices,
        }
    }

    /// How the budget window opens: its length and its slices.
    pub fn pacing(&self) -> crate::pacing::Pacing {
        crate::pacing::Pacing { window_secs: self.budget_window_secs, slices: self.budget_slices }
    }
}

/// `percent` of `wei`, rounded down.
fn share(wei: u128, percent: u64) -> u128 {
    wei / 100 * u128::from(percent) + wei % 100 * u128::from(percent) / 100
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Hand-written so the key can never reach a log through `{:?}`: only its address shows.
        // The RPC URL shows without path, query or user info, where hosted nodes put API keys.
        f.debug_struct("Config")
            .field("rpc_url", &kya_core::redact::url(&self.rpc_url))
            .field("registry", &self.registry)
            .field("forwarder", &self.forwarder)
            .field("relayers", &self.signers.iter().map(PrivateKeySigner::address).collect::<Vec<_>>())
            .field("relayer_id", &self.relayer_id)
            .field("lease_secs", &self.lease_secs)
            .field("handoff_wait", &self.handoff_wait)
            .field("host", &self.host)
            .field("port", &self.port)
            .field("daily_gas_budget_wei", &self.daily_gas_budget_wei)
            .field("rate_limit_per_ip", &self.rate_limit_per_ip)
            .field("rate_limit_per_signer", &self.rate_limit_per_signer)
            .field("read_rate_limit_per_minute", &self.read_rate_limit_per_minute)
            .field("min_balance_wei", &self.min_balance_wei)
            .field("max_request_gas", &self.max_request_gas)
            .field("db_path", &self.db_path)
            .field("database_url", &self.database_url)
            .field("reconcile_interval", &self.reconcile_interval)
            .field("reconcile_grace_secs", &self.reconcile_grace_secs)
            .field("stuck_after_blocks", &self.stuck_after_blocks)
            .field("stuck_after_secs", &self.stuck_after_secs)
            .field("fee_bump_percent", &self.fee_bump_percent)
            .field("max_fee_per_gas_wei", &self.max_fee_per_gas_wei)
            .field("startup_retry", &self.startup_retry)
            .field("deadline_margin_secs", &self.deadline_margin_secs)
            .field("signer_budget_share_percent", &self.signer_budget_share_percent)
            .field("client_budget_share_percent", &self.client_budget_share_percent)
            .field("budget_slices", &self.budget_slices)
            .field("budget_window_secs", &self.budget_window_secs)
            .field("max_cancel_fee_per_gas_wei", &self.max_cancel_fee_per_gas_wei)
            .field("trusted_proxies", &self.trusted_proxies)
            .field("metrics_address", &self.metrics_address)
            .field("calldata_retention_secs", &self.calldata_retention_secs)
            .field("relay_retention_secs", &self.relay_retention_secs)
            .field("webhook", &self.webhook)
            .finish()
    }
}

impl Config {
    /// Reads the process environment.
    pub fn from_env() -> Result<Self> {
        Self::from_lookup(|name| std::env::var(name).ok().filter(|value| !value.is_empty()))
    }

    /// Reads settings through `lookup` (the environment, or a map in tests).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let address = |name: &str| -> Result<Address> {
            let value = lookup(name).ok_or_else(|| Error::Config(format!("{name} is not set")))?;
            value.trim().parse().map_err(|_| Error::Config(format!("{name} is not an address: {value:?}")))
        };
        let number = |name: &str, default: u64| -> Result<u64> {
            lookup(name).map_or(Ok(default), |value| {
                value
                    .trim()
                    .parse()
                    .map_err(|_| Error::Config(format!("{name} is not a whole number: {value:?}")))
            })
        };
        let ether = |name: &str, default: &str| -> Result<u128> {
            let value = lookup(name).unwrap_or_else(|| default.to_owned());
            parse_ether(value.trim())
                .ok()
                .and_then(|wei| u128::try_from(wei).ok())
                .ok_or_else(|| Error::Config(format!("{name} is not an amount of ETH: {value:?}")))
        };
        let percent = |name: &str, default: u64| -> Result<u64> {
            match number(name, default)? {
                percent @ 1..=100 => Ok(percent),
                _ => Err(Error::Config(format!("{name} must be a whole percent from 1 to 100"))),
            }
        };
        let limit = |name: &str, default: u32| -> Result<u32> {
            u32::try_from(number(name, u64::from(default))?)
                .map_err(|_| Error::Config(format!("{name} is too large")))
        };
        Ok(Self {
            rpc_url: lookup("RPC_URL").unwrap_or_else(|| DEFAULT_RPC_URL.to_owned()),
            registry: address("REGISTRY_ADDRESS")?,
            forwarder: address("FORWARDER_ADDRESS")?,
            signers: signers(&lookup)?,
            relayer_id: relayer_id(&lookup)?,
            lease_secs: number("RELAYER_LEASE_SECS", DEFAULT_LEASE_SECS)?.max(MIN_LEASE_SECS),
            handoff_wait: std::time::Duration::from_secs(number(
                "RELAYER_HANDOFF_WAIT_SECS",
                DEFAULT_HANDOFF_WAIT_SECS,
            )?),
            host: lookup("RELAYER_HOST")
                .map_or(Ok(IpAddr::from([127, 0, 0, 1])), |host| host.trim().parse())
                .map_err(|_| Error::Config("RELAYER_HOST is not an IP address".into()))?,
            port: u16::try_from(number("RELAYER_PORT", 3001)?)
                .map_err(|_| Error::Config("RELAYER_PORT is not a port".into()))?,
            daily_gas_budget_wei: ether("DAILY_GAS_BUDGET", DEFAULT_DAILY_GAS_BUDGET)?,
            rate_limit_per_ip: limit("RATE_LIMIT_PER_IP", 20)?,
            rate_limit_per_signer: limit("RATE_LIMIT_PER_SIGNER", 10)?,
            read_rate_limit_per_minute: std::num::NonZeroU32::new(limit(
                "READ_RATE_LIMIT_PER_MINUTE",
                DEFAULT_READ_RATE_LIMIT_PER_MINUTE,
            )?)
            .ok_or_else(|| Error::Config("READ_RATE_LIMIT_PER_MINUTE must be at least 1".into()))?,
            min_balance_wei: ether("MIN_BALANCE", DEFAULT_MIN_BALANCE)?,
            max_request_gas: number("MAX_REQUEST_GAS", DEFAULT_MAX_REQUEST_GAS)?,
            db_path: lookup("RELAYER_DB").map_or_else(|| DEFAULT_DB_PATH.into(), PathBuf::from),
            database_url: lookup("DATABASE_URL")
                .map(|url| {
                    Ok::<_, Error>(
                        DatabaseUrl::parse(&url)?
                            .with_timeouts(database_timeouts(&number)?)
                            .with_pool_size(database_pool_size(&number)?),
                    )
                })
                .transpose()?,
            reconcile_interval: std::time::Duration::from_secs(
                number("RECONCILE_INTERVAL_SECS", DEFAULT_RECONCILE_INTERVAL_SECS)?.max(1),
            ),
            reconcile_grace_secs: number("RECONCILE_GRACE_SECS", DEFAULT_RECONCILE_GRACE_SECS)?,
            stuck_after_blocks: number("STUCK_AFTER_BLOCKS", DEFAULT_STUCK_AFTER_BLOCKS)?.max(1),
            stuck_after_secs: number("STUCK_AFTER_SECS", DEFAULT_STUCK_AFTER_SECS)?.max(1),
            fee_bump_percent: match number("FEE_BUMP_PERCENT", DEFAULT_FEE_BUMP_PERCENT)? {
                percent if percent < MIN_BUMP_PERCENT => {
                    return Err(Error::Config(format!(
                        "FEE_BUMP_PERCENT must be at least {MIN_BUMP_PERCENT}: nodes refuse smaller replacements"
                    )));
                }
                percent => percent,
            },
            max_fee_per_gas_wei: u128::from(number("MAX_FEE_PER_GAS_WEI", DEFAULT_MAX_FEE_PER_GAS_WEI)?),
            startup_retry: std::time::Duration::from_secs(number(
                "STARTUP_RETRY_SECS",
                DEFAULT_STARTUP_RETRY_SECS,
            )?),
            deadline_margin_secs: number("DEADLINE_MARGIN_SECS", DEFAULT_DEADLINE_MARGIN_SECS)?,
            signer_budget_share_percent: percent(
                "SIGNER_BUDGET_SHARE_PERCENT",
                DEFAULT_SIGNER_BUDGET_SHARE_PERCENT,
            )?,
            client_budget_share_percent: percent(
                "CLIENT_BUDGET_SHARE_PERCENT",
                DEFAULT_CLIENT_BUDGET_SHARE_PERCENT,
            )?,
            budget_slices: std::num::NonZeroU64::new(number("BUDGET_SLICES", DEFAULT_BUDGET_SLICES)?)
                .ok_or_else(|| Error::Config("BUDGET_SLICES must be at least 1 (1: no pacing)".into()))?,
            budget_window_secs: match number("BUDGET_WINDOW_SECS", crate::store::BUDGET_WINDOW_SECS)? {
                0 => return Err(Error::Config("BUDGET_WINDOW_SECS must be at least 1".into())),
                secs => secs,
            },
            max_cancel_fee_per_gas_wei: u128::from(number(
                "MAX_CANCEL_FEE_PER_GAS_WEI",
                DEFAULT_MAX_CANCEL_FEE_PER_GAS_WEI,
            )?),
            trusted_proxies: lookup("TRUSTED_PROXIES")
                .map_or(Ok(Default::default()), |list| kya_core::client_ip::TrustedProxies::parse(&list))
                .map_err(|error| Error::Config(format!("TRUSTED_PROXIES: {error}")))?,
            metrics_address: std::net::SocketAddr::new(
                lookup("METRICS_HOST")
                    .map_or(Ok(IpAddr::from([127, 0, 0, 1])), |host| host.trim().parse())
                    .map_err(|_| Error::Config("METRICS_HOST is not an IP address".into()))?,
                u16::try_from(number("METRICS_PORT", u64::from(DEFAULT_METRICS_PORT))?)
                    .map_err(|_| Error::Config("METRICS_PORT is not a port".into()))?,
            ),
            calldata_retention_secs: number("CALLDATA_RETENTION_HOURS", DEFAULT_CALLDATA_RETENTION_HOURS)?
                .saturating_mul(60 * 60),
            relay_retention_secs: match number("RELAY_RETENTION_DAYS", DEFAULT_RELAY_RETENTION_DAYS)? {
                // The budget shares are summed over the relays of the current window (a day).
                days if days < 2 => {
                    return Err(Error::Config(
                        "RELAY_RETENTION_DAYS must be at least 2: the budget window needs a day of relays"
                            .into(),
                    ));
                }
                days => days.saturating_mul(24 * 60 * 60),
            },
            webhook: webhook(&lookup, &number)?,
        })
    }
}

/// The PostgreSQL connections' timeouts (`DATABASE_*_MS`, `DATABASE_KEEPALIVE_SECS`): each at
/// least 1 ms (0 would turn the server's timeout off: a hang again).
fn database_timeouts(number: &impl Fn(&str, u64) -> Result<u64>) -> Result<DatabaseTimeouts> {
    let defaults = DatabaseTimeouts::default();
    let millis = |name: &str, default: std::time::Duration| -> Result<std::time::Duration> {
        match number(name, u64::try_from(default.as_millis()).unwrap_or(u64::MAX))? {
            0 => Err(Error::Config(format!("{name} must be at least 1 (0 would wait forever)"))),
            ms => Ok(std::time::Duration::from_millis(ms)),
        }
    };
    Ok(DatabaseTimeouts {
        statement: millis("DATABASE_STATEMENT_TIMEOUT_MS", defaults.statement)?,
        lock: millis("DATABASE_LOCK_TIMEOUT_MS", defaults.lock)?,
        idle_in_transaction: millis("DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_MS", defaults.idle_in_transaction)?,
        keepalive: std::time::Duration::from_secs(
            number("DATABASE_KEEPALIVE_SECS", defaults.keepalive.as_secs())?.max(1),
        ),
    })
}

/// The store's PostgreSQL connections at most (`DATABASE_POOL_SIZE`), beside the lease keeper's.
fn database_pool_size(number: &impl Fn(&str, u64) -> Result<u64>) -> Result<u32> {
    match number("DATABASE_POOL_SIZE", u64::from(crate::store::DEFAULT_POOL_SIZE))? {
        size @ 1..=1000 => Ok(u32::try_from(size).unwrap_or(1)),
        _ => Err(Error::Config("DATABASE_POOL_SIZE must be between 1 and 1000".into())),
    }
}

/// `WEBHOOK_URL` and `WEBHOOK_SECRET` (both or neither) and the delivery's settings.
fn webhook(
    lookup: &impl Fn(&str) -> Option<String>,
    number: &impl Fn(&str, u64) -> Result<u64>,
) -> Result<Option<WebhookConfig>> {
    let (url, secret) = match (lookup("WEBHOOK_URL"), lookup("WEBHOOK_SECRET")) {
        (None, None) => return Ok(None),
        (Some(url), Some(secret)) => (url.trim().to_owned(), WebhookSecret::parse(&secret)?),
        (Some(_), None) => return Err(Error::Config("WEBHOOK_URL is set without WEBHOOK_SECRET".into())),
        (None, Some(_)) => return Err(Error::Config("WEBHOOK_SECRET is set without WEBHOOK_URL".into())),
    };
    // Any other scheme would fail every attempt: refused here, where the operator sees it.
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(Error::Config(format!(
            "WEBHOOK_URL must be an http:// or https:// URL: {}",
            kya_core::redact::url(&url)
        )));
    }
    let millis = |name: &str, default: u64| number(name, default).map(std::time::Duration::from_millis);
    Ok(Some(WebhookConfig {
        url,
        secret,
        timeout: std::time::Duration::from_secs(
            number("WEBHOOK_TIMEOUT_SECS", DEFAULT_WEBHOOK_TIMEOUT_SECS)?.max(1),
        ),
        concurrency: usize::try_from(
            number("WEBHOOK_CONCURRENCY", DEFAULT_WEBHOOK_CONCURRENCY)?.clamp(1, 1_000),
        )
        .unwrap_or(1),
        retry_first: millis("WEBHOOK_RETRY_FIRST_MS", DEFAULT_WEBHOOK_RETRY_FIRST_MS)?
            .max(std::time::Duration::from_millis(1)),
        retry_max: millis("WEBHOOK_RETRY_MAX_MS", DEFAULT_WEBHOOK_RETRY_MAX_MS)?
            .max(std::time::Duration::from_millis(1)),
    }))
}

/// The relayer's keys: `RELAYER_KEYS` (hex, comma-separated), `RELAYER_KEY` (one), or encrypted
/// JSON keystores (`RELAYER_KEYSTORE`, comma-separated paths, one `RELAYER_KEYSTORE_PASSWORD`).
/// Errors name the variable and the entry's position, never a key. A key given twice would be
/// two lanes handing out one account's nonces: refused.
fn signers(lookup: &impl Fn(&str) -> Option<String>) -> Result<Vec<PrivateKeySigner>> {
    let signers = match (lookup("RELAYER_KEYS"), lookup("RELAYER_KEY")) {
        (Some(_), Some(_)) => {
            return Err(Error::Config("set RELAYER_KEYS or RELAYER_KEY, not both".into()));
        }
        (Some(keys), None) => keys
            .split(',')
            .enumerate()
            .map(|(index, key)| {
                key.trim().parse().map_err(|_| {
                    Error::Config(format!("RELAYER_KEYS entry {} is not a valid private key", index + 1))
                })
            })
            .collect::<Result<Vec<PrivateKeySigner>>>()?,
        (None, Some(key)) => vec![
            key.trim().parse().map_err(|_| Error::Config("RELAYER_KEY is not a valid private key".into()))?,
        ],
        (None, None) => keystores(lookup)?,
    };
    for (index, signer) in signers.iter().enumerate() {
        if signers[..index].iter().any(|earlier| earlier.address() == signer.address()) {
            return Err(Error::Config(format!(
                "relayer key {} ({}) is given twice: each key is one nonce lane",
                index + 1,
                signer.address()
            )));
        }
    }
    Ok(signers)
}

/// The keys of `RELAYER_KEYSTORE` (comma-separated paths), all under `RELAYER_KEYSTORE_PASSWORD`.
fn keystores(lookup: &impl Fn(&str) -> Option<String>) -> Result<Vec<PrivateKeySigner>> {
    let Some(paths) = lookup("RELAYER_KEYSTORE") else {
        return Err(Error::Config(
            "set RELAYER_KEYS, RELAYER_KEY, or RELAYER_KEYSTORE and RELAYER_KEYSTORE_PASSWORD".into(),
        ));
    };
    let password = lookup("RELAYER_KEYSTORE_PASSWORD")
        .ok_or_else(|| Error::Config("RELAYER_KEYSTORE_PASSWORD is not set".into()))?;
    paths
        .split(',')
        .map(str::trim)
        .map(|path| {
            PrivateKeySigner::decrypt_keystore(path, &password).map_err(|_| {
                Error::Config(format!(
                    "RELAYER_KEYSTORE {path}: cannot decrypt (wrong password or not a keystore)"
                ))
            })
        })
        .collect()
}

/// `RELAYER_ID`, or the host's name: how the lane leases and `/status` name the daemon holding
/// each lane. Shown to anyone, so a configured one is checked to be short and printable. Not
/// the process id: a restarted daemon is the same daemon, and takes back its keys at once.
fn relayer_id(lookup: &impl Fn(&str) -> Option<String>) -> Result<String> {
    if let Some(id) = lookup("RELAYER_ID") {
        let id = id.trim();
        if id.is_empty() || id.len() > 64 || !id.chars().all(|c| c.is_ascii_graphic()) {
            return Err(Error::Config("RELAYER_ID must be 1 to 64 printable ASCII characters".into()));
        }
        return Ok(id.to_owned());
    }
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|host| host.trim().to_owned())
        .filter(|host| !host.is_empty())
        .unwrap_or_else(|| "relayer".to_owned());
    Ok(host)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    const KEY: &str = "0x2a871d0798f97d79848a013d4936a73bf4cc922c825d33c1cf7073dff6d409c6";

    fn lookup(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> =
            pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        move |name| map.get(name).cloned()
    }

    fn base() -> Vec<(&'static str, &'static str)> {
        vec![
            ("REGISTRY_ADDRESS", "0x2EFaB5B3BEf49E56a6Ce1dcB1A39EF63C312EA23"),
            ("FORWARDER_ADDRESS", "0x70c2fdD0CDada6b43195981928D76f5D32AE29e5"),
            ("RELAYER_KEY", KEY),
        ]
    }

    #[test]
    fn defaults_are_the_specs_limits() {
        let config = Config::from_lookup(lookup(&base())).unwrap();
        assert_eq!(config.port, 3001);
        assert_eq!(config.rate_limit_per_ip, 20);
        assert_eq!(config.rate_limit_per_signer, 10);
        assert_eq!(config.daily_gas_budget_wei, 50_000_000_000_000_000);
        assert_eq!(config.min_balance_wei, 1_000_000_000_000_000);
        assert_eq!(config.rpc_url, DEFAULT_RPC_URL);
        assert_eq!(config.signers[0].address().to_string(), "0xa0Ee7A142d267C1f36714E4a8F75612F20a79720");
        assert_eq!(config.signer_share_wei(), 2_500_000_000_000_000, "5% of 0.05 ETH");
        assert_eq!(config.client_share_wei(), 5_000_000_000_000_000, "10% of 0.05 ETH");
        assert_eq!(config.deadline_margin_secs, 120);
        assert_eq!((config.budget_slices.get(), config.budget_window_secs), (24, 86_400), "an hour a slice");
        assert_eq!(config.handoff_wait, std::time::Duration::from_secs(10));
        assert!(config.trusted_proxies.is_empty());
        assert_eq!(config.metrics_address.to_string(), "127.0.0.1:9464");
    }

    #[test]
    fn shares_round_down_without_overflow() {
        assert_eq!(share(199, 50), 99);
        assert_eq!(share(u128::MAX, 100), u128::MAX);
        assert_eq!(share(u128::MAX, 1), u128::MAX / 100);
        let mut settings = base();
        settings.push(("CLIENT_BUDGET_SHARE_PERCENT", "0"));
        let error = Config::from_lookup(lookup(&settings)).unwrap_err().to_string();
        assert!(error.contains("CLIENT_BUDGET_SHARE_PERCENT must be a whole percent"), "{error}");
        let mut settings = base();
        settings.push(("TRUSTED_PROXIES", "10.0.0.0/8, nginx"));
        let error = Config::from_lookup(lookup(&settings)).unwrap_err().to_string();
        assert!(error.contains("TRUSTED_PROXIES") && error.contains("nginx"), "{error}");
        let mut settings = base();
        settings.push(("RELAY_RETENTION_DAYS", "1"));
        assert!(Config::from_lookup(lookup(&settings)).is_err());
    }

    #[test]
    fn the_key_never_shows_in_debug_or_errors() {
        let config = Config::from_lookup(lookup(&base())).unwrap();
        let printed = format!("{config:?}");
        assert!(!printed.contains(&KEY[2..]), "{printed}");
        assert!(printed.to_lowercase().contains("0xa0ee7a142d267c1f36714e4a8f75612f20a79720"));

        let mut hosted = base();
        hosted.push(("RPC_URL", "https://user:PASSWORD@node.example/v2/PATHKEY?apikey=QUERYKEY"));
        let printed = format!("{:?}", Config::from_lookup(lookup(&hosted)).unwrap());
        for secret in ["PASSWORD", "PATHKEY", "QUERYKEY", "user"] {
            assert!(!printed.contains(secret), "{printed}");
        }
        assert!(printed.contains("https://node.example/…"), "{printed}");

        let mut broken = base();
        broken[2] = ("RELAYER_KEY", "0x2a871d0798f97d79848a013d4936a73bf4cc922c825d33c1cf7073dff6d4");
        let error = Config::from_lookup(lookup(&broken)).unwrap_err().to_string();
        assert!(!error.contains("2a871d07"), "{error}");
        assert!(error.contains("RELAYER_KEY"));
    }

    #[test]
    fn webhook_settings_come_in_pairs_and_the_secret_never_shows() {
        assert!(Config::from_lookup(lookup(&base())).unwrap().webhook.is_none());
        // 32 bytes as Standard Webhooks writes them, and 40 raw bytes.
        let encoded = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSwg7duQoLFbaY=";
        let raw = "a-raw-webhook-secret-of-forty-bytes-long";
        for (secret, bytes) in [(encoded, 32), (raw, 40)] {
            let mut settings = base();
            settings.push(("WEBHOOK_URL", "http://hooks.example/relays?token=URLTOKEN"));
            settings.push(("WEBHOOK_SECRET", secret));
            let config = Config::from_lookup(lookup(&settings)).unwrap();
            let webhook = config.webhook.as_ref().unwrap();
            assert_eq!(webhook.secret.bytes().len(), bytes);
            assert_eq!((webhook.concurrency, webhook.timeout.as_secs()), (8, 10));
            let printed = format!("{config:?}");
            for hidden in [&secret[6..], "URLTOKEN", "MfKQ9r8G", "forty-bytes"] {
                assert!(!printed.contains(hidden), "{printed}");
            }
            assert!(printed.contains(&format!("WebhookSecret({bytes} bytes, redacted)")), "{printed}");
        }
        for (pairs, named) in [
            (vec![("WEBHOOK_URL", "http://hooks.example/")], "WEBHOOK_URL is set without WEBHOOK_SECRET"),
            (vec![("WEBHOOK_SECRET", raw)], "WEBHOOK_SECRET is set without WEBHOOK_URL"),
            (
                vec![("WEBHOOK_URL", "http://hooks.example/"), ("WEBHOOK_SECRET", "whsec_c2hvcnQtU0VDUkVU")],
                "WEBHOOK_SECRET must be at least 32 bytes",
            ),
            (
                vec![
                    ("WEBHOOK_URL", "http://hooks.example/"),
                    ("WEBHOOK_SECRET", "whsec_!!not-base64-SECRET!!"),
                ],
                "whsec_ must be followed by base64",
            ),
            (
                vec![("WEBHOOK_URL", "ftp://hooks.example/"), ("WEBHOOK_SECRET", raw)],
                "must be an http:// or https:// URL",
            ),
        ] {
            let mut settings = base();
            settings.extend(pairs);
            let error = Config::from_lookup(lookup(&settings)).unwrap_err().to_string();
            assert!(error.contains(named), "{error}");
            for hidden in ["c2hvcnQ", "short-", "forty-bytes", "not-base64"] {
                assert!(!error.contains(hidden), "{error}");
            }
        }
    }

    #[test]
    fn database_url_picks_postgres_and_never_shows_its_password() {
        let config = Config::from_lookup(lookup(&base())).unwrap();
        assert!(
            matches!(config.store_location(), Location::Sqlite(path) if path == std::path::Path::new(DEFAULT_DB_PATH))
        );
        for scheme in ["postgres", "postgresql"] {
            let mut settings = base();
            let url = format!("{scheme}://kya:PG-SECRET@db.internal:5432/relayer");
            settings.push(("DATABASE_URL", &url));
            let config = Config::from_lookup(lookup(&settings)).unwrap();
            let location = config.store_location();
            assert!(matches!(&location, Location::Postgres(_)), "{location:?}");
            assert_eq!(location.to_string(), format!("PostgreSQL {scheme}://db.internal:5432/…"));
            let printed = format!("{config:?}");
            assert!(!printed.contains("PG-SECRET") && !printed.contains("kya:"), "{printed}");
            assert!(printed.contains(&format!("DatabaseUrl({scheme}://db.internal:5432/…)")), "{printed}");
            assert_eq!(config.database_url.as_ref().map(DatabaseUrl::pool_size), Some(8), "the default pool");
        }
        let mut settings = base();
        settings.extend([("DATABASE_URL", "postgres://db.internal/relayer"), ("DATABASE_POOL_SIZE", "3")]);
        let config = Config::from_lookup(lookup(&settings)).unwrap();
        assert_eq!(config.database_url.as_ref().map(DatabaseUrl::pool_size), Some(3));
        settings.push(("DATABASE_POOL_SIZE", "0"));
        let error = Config::from_lookup(lookup(&settings)).unwrap_err().to_string();
        assert!(error.contains("DATABASE_POOL_SIZE must be between 1 and 1000"), "{error}");
        let mut settings = base();
        settings.push(("DATABASE_URL", "sqlite://kya:PG-SECRET@relayer.db"));
        let error = Config::from_lookup(lookup(&settings)).unwrap_err().to_string();
        assert!(error.contains("DATABASE_URL must be a postgres:// or postgresql:// URL"), "{error}");
        assert!(!error.contains("PG-SECRET"), "{error}");
    }

    #[test]
    fn bad_values_name_their_variable() {
        let mut settings = base();
        settings.push(("DAILY_GAS_BUDGET", "lots"));
        let error = Config::from_lookup(lookup(&settings)).unwrap_err().to_string();
        assert!(error.contains("DAILY_GAS_BUDGET"), "{error}");
        let mut settings = base();
        settings.push(("FEE_BUMP_PERCENT", "5"));
        let error = Config::from_lookup(lookup(&settings)).unwrap_err().to_string();
        assert!(error.contains("FEE_BUMP_PERCENT must be at least 10"), "{error}");
        for (name, value, told) in [
            ("BUDGET_SLICES", "0", "BUDGET_SLICES must be at least 1 (1: no pacing)"),
            ("BUDGET_WINDOW_SECS", "0", "BUDGET_WINDOW_SECS must be at least 1"),
            ("BUDGET_SLICES", "hourly", "BUDGET_SLICES is not a whole number"),
        ] {
            let mut settings = base();
            settings.push((name, value));
            let error = Config::from_lookup(lookup(&settings)).unwrap_err().to_string();
            assert!(error.contains(told), "{error}");
        }
        let mut settings = base();
        settings.extend([("BUDGET_SLICES", "1"), ("BUDGET_WINDOW_SECS", "60")]);
        let config = Config::from_lookup(lookup(&settings)).unwrap();
        assert_eq!(config.pacing(), crate::pacing::Pacing::off(60));
        assert_eq!(config.budget_limits().slices.get(), 1);
        let error = Config::from_lookup(lookup(&base()[1..])).unwrap_err().to_string();
        assert!(error.contains("REGISTRY_ADDRESS"), "{error}");
    }

    #[test]
    fn relayer_keys_give_a_pool_in_order_and_errors_name_the_entry_never_the_key() {
        const SECOND: &str = "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d";
        let mut settings = base();
        settings.retain(|(name, _)| *name != "RELAYER_KEY");
        let both = format!("{KEY}, {SECOND}");
        settings.push(("RELAYER_KEYS", &both));
        let config = Config::from_lookup(lookup(&settings)).unwrap();
        let addresses: Vec<String> = config.signers.iter().map(|s| s.address().to_string()).collect();
        assert_eq!(
            addresses,
            ["0xa0Ee7A142d267C1f36714E4a8F75612F20a79720", "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"]
        );
        let printed = format!("{config:?}");
        assert!(!printed.contains(&KEY[2..]) && !printed.contains(&SECOND[2..]), "{printed}");
        assert!(printed.contains("0x70997970c51812dc3a010c7d01b50e0d17dc79c8"), "{printed}");

        let broken = format!("{KEY},{}", &SECOND[..60]);
        settings.retain(|(name, _)| *name != "RELAYER_KEYS");
        settings.push(("RELAYER_KEYS", &broken));
        let error = Config::from_lookup(lookup(&settings)).unwrap_err().to_string();
        assert_eq!(error, "configuration: RELAYER_KEYS entry 2 is not a valid private key");

        let twice = format!("{KEY},{SECOND},{}", KEY.to_uppercase().replace("0X", "0x"));
        settings.retain(|(name, _)| *name != "RELAYER_KEYS");
        settings.push(("RELAYER_KEYS", &twice));
        let error = Config::from_lookup(lookup(&settings)).unwrap_err().to_string();
        assert!(
            error.contains("relayer key 3 (0xa0Ee7A142d267C1f36714E4a8F75612F20a79720) is given twice"),
            "{error}"
        );
        assert!(!error.contains("2a871d07"), "{error}");

        settings.push(("RELAYER_KEY", KEY));
        let error = Config::from_lookup(lookup(&settings)).unwrap_err().to_string();
        assert!(error.contains("RELAYER_KEYS or RELAYER_KEY, not both"), "{error}");
    }

    #[test]
    fn relayer_id_is_configured_or_the_host_name() {
        let config = Config::from_lookup(lookup(&base())).unwrap();
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
        assert_eq!(config.relayer_id, host.trim());
        assert_eq!(config.lease_secs, DEFAULT_LEASE_SECS);
        let mut settings = base();
        settings.push(("RELAYER_ID", " relayer-eu-1 "));
        assert_eq!(Config::from_lookup(lookup(&settings)).unwrap().relayer_id, "relayer-eu-1");
        settings.pop();
        settings.push(("RELAYER_ID", "two words"));
        assert!(Config::from_lookup(lookup(&settings)).is_err());
    }

    #[test]
    fn a_keystore_file_works_instead_of_a_key() {
        // Anvil's account 9 encrypted by eth-account (pbkdf2, few iterations: a test fixture).
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/relayer-keystore.json");
        let mut settings = base();
        settings.pop();
        settings.push(("RELAYER_KEYSTORE", path));
        settings.push(("RELAYER_KEYSTORE_PASSWORD", "relayer-test-password"));
        let config = Config::from_lookup(lookup(&settings)).unwrap();
        assert_eq!(config.signers[0].address().to_string(), "0xa0Ee7A142d267C1f36714E4a8F75612F20a79720");
        settings.pop();
        settings.push(("RELAYER_KEYSTORE_PASSWORD", "wrong"));
        let error = Config::from_lookup(lookup(&settings)).unwrap_err().to_string();
        assert!(error.contains("cannot decrypt"), "{error}");
    }
}
