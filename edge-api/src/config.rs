//! Configuration from the Worker's environment (`wrangler.toml` vars, or `--var` under `wrangler dev`).

use std::rc::Rc;

use alloy_primitives::{Address, keccak256};
use kya_core::{
    chain::multicall::MULTICALL3_ADDRESS, erc8128::VerifyPolicy, pass,
    registry::forward_request::BASE_SEPOLIA_CHAIN_ID,
};
use worker::Env;

use crate::{Error, Result};

/// The public test-network RPC endpoint used when `RPC_URL` is not set (INTERFACE.md section 1).
pub const DEFAULT_RPC_URL: &str = "https://sepolia.base.org";
/// `eth_call`s per JSON-RPC batch when `RPC_BATCH_SIZE` is not set. Public endpoints cap batch
/// sizes (often at 100 to 1,000); a node of our own takes far more.
pub const DEFAULT_BATCH_SIZE: usize = 500;
/// Bytes of answers an isolate keeps in memory when `MEMORY_CACHE_BYTES` is not set: a few
/// registry snapshots of 10,000 agents, well within an isolate's 128 MB.
pub const DEFAULT_MEMORY_CACHE_BYTES: usize = 32 << 20;

/// Agents the index's scheduled run reads at most when `INDEX_AGENTS_PER_RUN` is not set: one
/// `aggregate3` of records and histories.
pub const DEFAULT_INDEX_AGENTS_PER_RUN: u64 = 200;
/// Agents of the safety-net sweep a run reads (within `INDEX_AGENTS_PER_RUN`) when
/// `INDEX_SWEEP_PER_RUN` is not set: 100,000 agents are all read again in about 3.5 days of
/// runs once a minute. With `INDEX_EVENTS = "off"` the sweep takes all the room a run has.
pub const DEFAULT_INDEX_SWEEP_PER_RUN: u64 = 20;
/// Blocks before the index's block each run reads the logs of again when
/// `INDEX_REORG_WINDOW` is not set: a reorganisation within them is undone by the next run
/// (on Base, 64 blocks are two minutes).
pub const DEFAULT_INDEX_REORG_WINDOW: u64 = 64;
/// Blocks of logs a run follows at most when `INDEX_BLOCKS_PER_RUN` is not set: a provider's
/// narrower cap is found by splitting.
pub const DEFAULT_INDEX_BLOCKS_PER_RUN: u64 = 10_000;
/// Seconds an answer from the index is cached when `INDEX_ANSWER_TTL_SECS` is not set: runs
/// come once a minute, so a write shows in answers within two.
pub const DEFAULT_INDEX_ANSWER_TTL_SECS: u64 = 30;
/// Seconds between the starts of two index runs when `INDEX_INTERVAL_SECS` is not set: Base's
/// block time, so a write shows within a block or two (0 turns the pacer off: the Cron Trigger
/// runs the index once a minute).
pub const DEFAULT_INDEX_INTERVAL_SECS: u64 = 2;
/// Seconds after its last run the index stops answering when `INDEX_MAX_AGE_SECS` is not set:
/// the endpoints read the chain directly instead, and say so.
pub const DEFAULT_INDEX_MAX_AGE_SECS: u64 = 600;
/// Blocks behind the chain's head (at its last run) the index may be and still give the point
/// answers, when `INDEX_POINT_MAX_LAG_BLOCKS` is not set.
pub(crate) const DEFAULT_INDEX_POINT_MAX_LAG_BLOCKS: u64 = 2;
/// Seconds since its state was last written that the index still gives the point answers, when
/// `INDEX_POINT_MAX_AGE_SECS` is not set: a run writes its state at least once a minute (the
/// first run of each minute, paced or not), so a minute and a half means runs have stopped.
pub(crate) const DEFAULT_INDEX_POINT_MAX_AGE_SECS: u64 = 90;

/// Blocks that must follow a change's block before the change feed sends it again as `final`,
/// when `FEED_FINALITY_DEPTH` is not set: the index's reorganisation window (64 blocks, two
/// minutes on Base), so a change is final only once no reorganisation the index undoes can
/// remove it.
pub(crate) const DEFAULT_FEED_FINALITY_DEPTH: u64 = DEFAULT_INDEX_REORG_WINDOW;
/// The shortest time the change feed keeps its batches, and the default of
/// `FEED_RETENTION_SECS`: 7 days. A smaller value is raised to it.
pub(crate) const MIN_FEED_RETENTION_SECS: u64 = 7 * 86_400;
/// Agents whose attestation lapsed that one run walks at most, when `FEED_LAPSES_PER_RUN` is not
/// set: the rest are the next runs', each expiry still at the first block a run saw past it.
pub(crate) const DEFAULT_FEED_LAPSES_PER_RUN: u64 = 1_000;
/// Seconds between two heartbeat comments of `GET /api/v1/changes/stream` when
/// `FEED_STREAM_HEARTBEAT_SECS` is not set: below the idle timeouts of common proxies (30 to 100 s).
pub const DEFAULT_FEED_STREAM_HEARTBEAT_SECS: u64 = 15;
/// Durable Objects holding the stream's listeners when `FEED_STREAM_SHARDS` is not set.
pub const DEFAULT_FEED_STREAM_SHARDS: u64 = 4;
/// Listeners one shard holds at most when `FEED_STREAM_MAX_LISTENERS` is not set: past it a new
/// stream is 429.
pub const DEFAULT_FEED_STREAM_MAX_LISTENERS: u64 = 2_000;
/// Open streams one client (an IPv4 address, an IPv6 /64) holds at most when
/// `FEED_STREAM_MAX_PER_CLIENT` is not set.
pub const DEFAULT_FEED_STREAM_MAX_PER_CLIENT: u64 = 8;
/// Bytes of events a listener may leave unread when `FEED_STREAM_BACKLOG_BYTES` is not set: past
/// it the listener is dropped, and resumes with `Last-Event-ID`.
pub const DEFAULT_FEED_STREAM_BACKLOG_BYTES: u64 = 1 << 20;
/// Bytes one stream connection is sent at most when `FEED_STREAM_CONNECTION_BYTES` is not set:
/// past it the shard ends the connection, and the client resumes with `Last-Event-ID`. What a
/// listener that never reads can cost the runtime, whether or not it applies backpressure; a
/// block of 2,000 registrations is about 2.4 MB of events.
pub const DEFAULT_FEED_STREAM_CONNECTION_BYTES: u64 = 2 << 20;
/// Seconds one stream connection lasts at most when `FEED_STREAM_CONNECTION_SECS` is not set
/// (checked at each heartbeat and hand-over): then the shard ends it and the client resumes.
pub const DEFAULT_FEED_STREAM_CONNECTION_SECS: u64 = 600;

/// What the Worker reads from its environment on every request (vars are free to read).
#[derive(Debug, Clone)]
pub(crate) struct Config {
    /// The JSON-RPC endpoint.
    pub(crate) rpc_url: String,
    /// `REGISTRY_ADDRESS` as given; checked by [`Config::registry`] so `/health` works without it.
    registry: String,
    /// Largest number of calls in one JSON-RPC batch.
    pub(crate) batch_size: usize,
    /// `MULTICALL_ADDRESS` (default: Multicall3's canonical address); `None` when set empty,
    /// which turns Multicall3 off.
    multicall: Option<String>,
    /// Bytes the isolate's memory tier may hold (`MEMORY_CACHE_BYTES`; 0 turns it off).
    pub(crate) memory_cache_bytes: usize,
    /// The registry index's settings.
    pub(crate) index: IndexConfig,
    /// The change feed's settings (`FEED_*`).
    pub(crate) feed: FeedConfig,
    /// What `POST /api/v1/kya/verify` accepts (`CHAIN_ID`, `VERIFY_*`).
    pub(crate) verify: VerifyPolicy,
    /// The change feed's stream (`FEED_STREAM_*`).
    pub(crate) stream: StreamConfig,
    /// KYA passes (`PASS_ISSUER`, `PASS_TTL_SECS`; the keys are a secret, read apart: never in
    /// this `Debug`).
    pub(crate) passes: PassConfig,
    /// A short hash of the registry and the RPC endpoint, part of every cache key, so a changed
    /// configuration never serves what the old one answered.
    pub(crate) cache_tag: String,
    /// Whether each write of a rate-limit counter to KV logs a line (`RATE_LIMIT_LOG_WRITES`,
    /// `on`): one a second for each client that sends requests, so off unless asked for.
    pub(crate) rate_limit_log_writes: bool,
}

/// The registry index's settings (`INDEX_*`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct IndexConfig {
    /// Agents a run reads at most (`INDEX_AGENTS_PER_RUN`, at least 1).
    pub(crate) agents_per_run: u64,
    /// Agents of the safety-net sweep a run reads (`INDEX_SWEEP_PER_RUN`).
    pub(crate) sweep_per_run: u64,
    /// Whether runs follow the registry's events (`INDEX_EVENTS`, "off" for a registry whose
    /// events are unknown: the sweep is then the only source).
    pub(crate) events: bool,
    /// Blocks re-scanned for reorganisations (`INDEX_REORG_WINDOW`).
    pub(crate) reorg_window: u64,
    /// Blocks of logs a run follows at most (`INDEX_BLOCKS_PER_RUN`, at least 1).
    pub(crate) blocks_per_run: u64,
    /// Seconds after its last run the index stops answering (`INDEX_MAX_AGE_SECS`).
    pub(crate) max_age_secs: u64,
    /// Blocks behind the head (at its last run) the index may be and still give the point
    /// answers (`INDEX_POINT_MAX_LAG_BLOCKS`; "off": they always read the chain).
    pub(crate) point_max_lag_blocks: Option<u64>,
    /// Seconds since its state was written that the index still gives the point answers
    /// (`INDEX_POINT_MAX_AGE_SECS`).
    pub(crate) point_max_age_secs: u64,
    /// Seconds an answer from the index is cached (`INDEX_ANSWER_TTL_SECS`; 0 turns caching
    /// of them off).
    pub(crate) answer_ttl_secs: u64,
    /// Seconds between the starts of two runs of the pacer (`INDEX_INTERVAL_SECS`; 0 turns the
    /// pacer off).
    pub(crate) interval_secs: u64,
    /// Whether a run that found nothing new and wrote nothing logs a line (`INDEX_LOG_QUIET_RUNS`,
    /// "on"; default off: the run that writes the state row, once a minute, is the heartbeat).
    pub(crate) log_quiet_runs: bool,
}

/// The change feed's settings (`FEED_*`), for the index's runs that write it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FeedConfig {
    /// Blocks after a change's block before it is `final` (`FEED_FINALITY_DEPTH`; 0: final as
    /// soon as a later run finds its block still on the chain).
    pub(crate) finality_depth: u64,
    /// Seconds a batch is kept (`FEED_RETENTION_SECS`, at least [`MIN_FEED_RETENTION_SECS`]).
    pub(crate) retention_secs: u64,
    /// Agents whose attestation lapsed that a run walks at most (`FEED_LAPSES_PER_RUN`, at
    /// least 1).
    pub(crate) lapses_per_run: u64,
}

/// The settings of `GET /api/v1/changes/stream` (`FEED_STREAM_*`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct StreamConfig {
    /// Seconds between two heartbeat comments (`FEED_STREAM_HEARTBEAT_SECS`, at least 1).
    pub(crate) heartbeat_secs: u64,
    /// Durable Objects the listeners are spread over (`FEED_STREAM_SHARDS`, at least 1).
    pub(crate) shards: u64,
    /// Listeners one shard holds at most (`FEED_STREAM_MAX_LISTENERS`, at least 1).
    pub(crate) max_listeners: u64,
    /// Open streams one client holds at most (`FEED_STREAM_MAX_PER_CLIENT`, at least 1).
    pub(crate) max_per_client: u64,
    /// Bytes of events a listener may leave unread (`FEED_STREAM_BACKLOG_BYTES`, at least 1).
    pub(crate) backlog_bytes: u64,
    /// Bytes of events one connection is sent at most, its opening's resume included
    /// (`FEED_STREAM_CONNECTION_BYTES`, at least 1; its first event goes out whatever its size).
    pub(crate) connection_bytes: u64,
    /// Seconds one connection lasts at most (`FEED_STREAM_CONNECTION_SECS`, at least 1).
    pub(crate) connection_secs: u64,
}

/// The settings of KYA passes (INTERFACE.md section 7) but their keys.
#[derive(Debug, Clone)]
pub(crate) struct PassConfig {
    /// `iss` of every pass (`PASS_ISSUER`); unset, the origin the request reached.
    pub(crate) issuer: Option<String>,
    /// A pass's lifetime (`PASS_TTL_SECS`, at least 1, at most `MAX_TTL_SECS`).
    pub(crate) ttl_secs: u64,
}

impl IndexConfig {
    /// Sweep agents a run reads: all its room without events.
    pub(crate) fn sweep_quota(&self) -> u64 {
        if self.events { self.sweep_per_run } else { self.agents_per_run }
    }
}

thread_local! {
    /// The configuration, read once per isolate: an isolate's environment does not change.
    static CONFIG: std::cell::OnceCell<Rc<Config>> = const { std::cell::OnceCell::new() };
}

impl Config {
    /// Reads `RPC_URL`, `REGISTRY_ADDRESS`, `RPC_BATCH_SIZE`, `MEMORY_CACHE_BYTES`, the `INDEX_*`
    /// and `FEED_*` settings, `CHAIN_ID` and the `VERIFY_*` settings, and `MULTICALL_ADDRESS`; empty values count as unset, except `MULTICALL_ADDRESS`,
    /// which empty turns Multicall3 off.
    pub(crate) fn from_env(env: &Env) -> Rc<Self> {
        CONFIG.with(|config| Rc::clone(config.get_or_init(|| Rc::new(Self::read(env)))))
    }

    fn read(env: &Env) -> Self {
        Self::from_vars(|name| env.var(name).ok().map(|value| value.to_string()))
    }

    /// The configuration from `var`, each var's value by name (none: unset).
    pub(crate) fn from_vars(var_of: impl Fn(&str) -> Option<String>) -> Self {
        let raw = |name: &str| var_of(name).map(|value| value.trim().to_owned());
        let var = |name: &str| raw(name).filter(|value| !value.is_empty());
        // A count that must be at least 1.
        let count = |name: &str, default: u64| {
            var(name).and_then(|value| value.parse().ok()).filter(|value| *value > 0).unwrap_or(default)
        };
        let rpc_url = var("RPC_URL").unwrap_or_else(|| DEFAULT_RPC_URL.to_owned());
        let registry = var("REGISTRY_ADDRESS").unwrap_or_default();
        let tag = keccak256(format!("{} {rpc_url}", registry.to_lowercase()));
        Self {
            cache_tag: alloy_primitives::hex::encode(&tag[..12]),
            rate_limit_log_writes: var("RATE_LIMIT_LOG_WRITES").is_some_and(|value| value == "on"),
            rpc_url,
            registry,
            batch_size: var("RPC_BATCH_SIZE")
                .and_then(|size| size.parse().ok())
                .filter(|size| *size > 0)
                .unwrap_or(DEFAULT_BATCH_SIZE),
            memory_cache_bytes: var("MEMORY_CACHE_BYTES")
                .and_then(|bytes| bytes.parse().ok())
                .unwrap_or(DEFAULT_MEMORY_CACHE_BYTES),
            index: IndexConfig {
                agents_per_run: count("INDEX_AGENTS_PER_RUN", DEFAULT_INDEX_AGENTS_PER_RUN),
                sweep_per_run: var("INDEX_SWEEP_PER_RUN")
                    .and_then(|agents| agents.parse().ok())
                    .unwrap_or(DEFAULT_INDEX_SWEEP_PER_RUN),
                events: var("INDEX_EVENTS").is_none_or(|value| value != "off"),
                reorg_window: var("INDEX_REORG_WINDOW")
                    .and_then(|blocks| blocks.parse().ok())
                    .unwrap_or(DEFAULT_INDEX_REORG_WINDOW),
                blocks_per_run: count("INDEX_BLOCKS_PER_RUN", DEFAULT_INDEX_BLOCKS_PER_RUN),
                max_age_secs: count("INDEX_MAX_AGE_SECS", DEFAULT_INDEX_MAX_AGE_SECS),
                point_max_lag_blocks: match var("INDEX_POINT_MAX_LAG_BLOCKS") {
                    Some(value) if value == "off" => None,
                    value => Some(
                        value
                            .and_then(|blocks| blocks.parse().ok())
                            .unwrap_or(DEFAULT_INDEX_POINT_MAX_LAG_BLOCKS),
                    ),
                },
                point_max_age_secs: count("INDEX_POINT_MAX_AGE_SECS", DEFAULT_INDEX_POINT_MAX_AGE_SECS),
                answer_ttl_secs: var("INDEX_ANSWER_TTL_SECS")
                    .and_then(|secs| secs.parse().ok())
                    .unwrap_or(DEFAULT_INDEX_ANSWER_TTL_SECS),
                interval_secs: var("INDEX_INTERVAL_SECS")
                    .and_then(|secs| secs.parse().ok())
                    .unwrap_or(DEFAULT_INDEX_INTERVAL_SECS),
                log_quiet_runs: var("INDEX_LOG_QUIET_RUNS").is_some_and(|value| value == "on"),
            },
            feed: FeedConfig {
                finality_depth: var("FEED_FINALITY_DEPTH")
                    .and_then(|blocks| blocks.parse().ok())
                    .unwrap_or(DEFAULT_FEED_FINALITY_DEPTH),
                // Less than the documented minimum is raised to it: clients are promised a week.
                retention_secs: var("FEED_RETENTION_SECS")
                    .and_then(|secs| secs.parse().ok())
                    .unwrap_or(MIN_FEED_RETENTION_SECS)
                    .max(MIN_FEED_RETENTION_SECS),
                lapses_per_run: count("FEED_LAPSES_PER_RUN", DEFAULT_FEED_LAPSES_PER_RUN),
            },
            verify: VerifyPolicy {
                clock_skew_secs: var("VERIFY_CLOCK_SKEW_SECS")
                    .and_then(|secs| secs.parse().ok())
                    .unwrap_or(VerifyPolicy::DEFAULT_CLOCK_SKEW_SECS),
                max_window_secs: count("VERIFY_MAX_WINDOW_SECS", VerifyPolicy::DEFAULT_MAX_WINDOW_SECS),
                // Replayable signatures need the early invalidation of ERC-8128 section 5.2,
                // which this Worker does not offer yet: a nonce is always required.
                require_nonce: true,
                ..VerifyPolicy::new(count("CHAIN_ID", BASE_SEPOLIA_CHAIN_ID))
            },
            stream: StreamConfig {
                heartbeat_secs: count("FEED_STREAM_HEARTBEAT_SECS", DEFAULT_FEED_STREAM_HEARTBEAT_SECS),
                shards: count("FEED_STREAM_SHARDS", DEFAULT_FEED_STREAM_SHARDS),
                max_listeners: count("FEED_STREAM_MAX_LISTENERS", DEFAULT_FEED_STREAM_MAX_LISTENERS),
                max_per_client: count("FEED_STREAM_MAX_PER_CLIENT", DEFAULT_FEED_STREAM_MAX_PER_CLIENT),
                backlog_bytes: count("FEED_STREAM_BACKLOG_BYTES", DEFAULT_FEED_STREAM_BACKLOG_BYTES),
                connection_bytes: count("FEED_STREAM_CONNECTION_BYTES", DEFAULT_FEED_STREAM_CONNECTION_BYTES),
                connection_secs: count("FEED_STREAM_CONNECTION_SECS", DEFAULT_FEED_STREAM_CONNECTION_SECS),
            },
            passes: PassConfig {
                issuer: var("PASS_ISSUER").map(|issuer| issuer.trim_end_matches('/').to_owned()),
                ttl_secs: count("PASS_TTL_SECS", pass::DEFAULT_TTL_SECS).min(pass::MAX_TTL_SECS),
            },
            multicall: match raw("MULTICALL_ADDRESS") {
                None => Some(MULTICALL3_ADDRESS.to_string()),
                Some(text) if text.is_empty() => None,
                Some(text) => Some(text),
            },
        }
    }

    /// Multicall3's address, `None` when turned off; a malformed address is a configuration error.
    pub(crate) fn multicall(&self) -> Result<Option<Address>> {
        let Some(text) = &self.multicall else { return Ok(None) };
        text.parse()
            .map(Some)
            .map_err(|_| Error::BadConfig(format!("MULTICALL_ADDRESS is not a valid address: {text}")))
    }

    /// The registry's address, or the configuration error every `/api/v1` endpoint reports.
    pub(crate) fn registry(&self) -> Result<Address> {
        if self.registry.is_empty() {
            return Err(Error::RegistryNotConfigured);
        }
        self.registry.parse().map_err(|_| {
            Error::BadConfig(format!("REGISTRY_ADDRESS is not a valid address: {}", self.registry))
        })
    }

    /// `REGISTRY_ADDRESS` as configured (for `/health`, which also answers without it).
    pub(crate) fn registry_text(&self) -> &str {
        &self.registry
    }
}

/// `wrangler.toml`'s `[vars]` as `(name, value)` pairs (the file's own `NAME = "value"` lines).
#[cfg(test)]
pub(crate) fn wrangler_vars() -> Vec<(String, String)> {
    let toml = include_str!("../../wrangler.toml");
    let section = toml.split("\n[vars]\n").nth(1).expect("wrangler.toml has [vars]");
    section
        .lines()
        .take_while(|line| !line.starts_with('['))
        .filter(|line| !line.trim_start().starts_with('#'))
        .filter_map(|line| {
            let (name, value) = line.split_once(" = ")?;
            let value = value.trim().strip_prefix('"')?.strip_suffix('"')?;
            Some((name.trim().to_owned(), value.to_owned()))
        })
        .collect()
}

#[cfg(test)]
mod wrangler_tie {
    use super::*;

    /// One source for each default: the values `wrangler.toml` ships are the Worker's own
    /// defaults, so a Worker deployed without a var behaves as one with the file's.
    #[test]
    fn wrangler_toml_vars_are_the_workers_defaults() {
        let vars = wrangler_vars();
        let lookup = |name: &str| vars.iter().find(|(var, _)| var == name).map(|(_, value)| value.clone());
        assert!(vars.len() >= 28, "the [vars] were read: {vars:?}");
        assert_eq!(
            format!("{:?}", Config::from_vars(lookup)),
            format!("{:?}", Config::from_vars(|_| None)),
            "wrangler.toml's [vars] and the Worker's defaults"
        );
        assert_eq!(
            format!("{:?}", crate::webhooks::Settings::from_vars(lookup)),
            format!("{:?}", crate::webhooks::Settings::from_vars(|_| None)),
            "the WEBHOOK_* vars and the delivery's defaults"
        );
        // Every var the file sets is one the Worker reads: none is a leftover.
        let read = include_str!("config.rs").to_owned() + include_str!("webhooks/mod.rs");
        for (name, _) in &vars {
            assert!(read.contains(&format!("\"{name}\"")), "{name} is set in wrangler.toml but never read");
        }
    }

    /// The tie holds both ways: a value other than the default is seen.
    #[test]
    fn a_var_other_than_its_default_changes_the_configuration() {
        let changed = Config::from_vars(|name| (name == "FEED_STREAM_SHARDS").then(|| "9".to_owned()));
        assert_ne!(format!("{changed:?}"), format!("{:?}", Config::from_vars(|_| None)));
        assert_eq!(changed.stream.shards, 9);
    }

    /// A pass lives `PASS_TTL_SECS`, never more than the cap; an issuer loses a trailing slash
    /// (an origin has none).
    #[test]
    fn pass_settings_are_capped_and_normalised() {
        let with = |name: &'static str, value: &'static str| {
            Config::from_vars(move |var| (var == name).then(|| value.to_owned())).passes
        };
        assert_eq!(Config::from_vars(|_| None).passes.ttl_secs, 300);
        assert_eq!(Config::from_vars(|_| None).passes.issuer, None);
        assert_eq!(with("PASS_TTL_SECS", "120").ttl_secs, 120);
        assert_eq!(with("PASS_TTL_SECS", "86400").ttl_secs, 3_600);
        assert_eq!(with("PASS_TTL_SECS", "0").ttl_secs, 300);
        assert_eq!(
            with("PASS_ISSUER", "https://kya.example/").issuer.as_deref(),
            Some("https://kya.example")
        );
    }
}
