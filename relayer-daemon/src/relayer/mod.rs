//! The relayer, composed of its parts, and its lifecycle: start-up (retrying an unreachable
//! node) and shutdown. Each part keeps its own state:
//! - [`checks`]: the stage every `POST /relay` passes through, from the body to the send;
//! - [`followers`]: what runs after the send and in the background (receipts, replacements, the
//!   reconciler, the hand-offs' sender, the keys' leases, the webhooks' sender);
//! - [`queries`]: the read endpoints;
//! - [`stores`]: the store's connections, called in the blocking pool under a deadline;
//! - [`in_flight`]: the requests being worked on right now, which the checks and the followers
//!   both mark and the reconciler leaves alone;
//! - [`metrics`]: the counters every part adds to;
//! - [`relayed`]: the answer to an accepted relay, which the checks and the hand-offs give.
//!
//! The keys ([`crate::keys`]), the chain ([`crate::chain`]) and the configuration are shared by
//! all of them and stay on [`Relayer`].

pub(crate) mod checks;
pub(crate) mod followers;
pub(crate) mod in_flight;
pub(crate) mod metrics;
pub(crate) mod queries;
pub(crate) mod relayed;
pub(crate) mod stores;

use std::{sync::Arc, time::Duration};

use alloy::primitives::Address;

use crate::{
    chain::RelayerChain,
    concurrency::shutdown::Shutdown,
    config::Config,
    error::Result,
    keys::lanes::Pool,
    relayer::{
        checks::Checks, followers::Followers, in_flight::InFlight, metrics::Metrics, queries::Answers,
        stores::Stores,
    },
    store::Store,
};

/// How long shutdown lets running settlements finish (anvil and fast chains mine in well under
/// this); whatever is left is settled at the next start.
const SHUTDOWN_SETTLE_GRACE: Duration = Duration::from_secs(3);
/// First pause between two start-up attempts to reach the node; it doubles up to the next.
const STARTUP_FIRST_PAUSE: Duration = Duration::from_millis(250);
/// Longest pause between two start-up attempts.
const STARTUP_MAX_PAUSE: Duration = Duration::from_secs(10);

/// The relayer: the chain, its keys and its configuration, shared by the parts that do the work.
#[derive(Debug)]
pub struct Relayer {
    config: Config,
    chain: RelayerChain,
    chain_id: u64,
    /// The relayer's keys, one nonce lane each.
    pool: Pool,
    stores: Stores,
    metrics: Metrics,
    /// The relayer's tasks and the phases of its shutdown.
    shutdown: Shutdown,
    in_flight: InFlight,
    checks: Checks,
    followers: Followers,
    answers: Answers,
}

impl Relayer {
    /// Connects to the chain (retrying with backoff for `STARTUP_RETRY_SECS` while the node is
    /// unreachable), learns whether it is an OP Stack chain (which charges an L1 data fee), opens
    /// the store, resumes following the relays a previous run left with the node, and starts the
    /// reconciler, whose first pass ends the relays left unfinished.
    pub async fn start(config: Config) -> Result<Arc<Self>> {
        let chain = RelayerChain::connect(config.chain.rpc_url.as_str(), config.chain.forwarder)?;
        let chain_id = reach(&chain, config.chain.startup_retry).await?;
        let stores = Stores::open(&config).await?;
        tracing::info!(store = %stores.requests().location(), "store open");
        let pool = Pool::new(&chain, &config.keys.signers, chain_id);
        let followers = Followers::new(config.followers.stuck_policy());
        let relayer = Arc::new(Self {
            config,
            chain,
            chain_id,
            pool,
            stores,
            metrics: Metrics::default(),
            shutdown: Shutdown::new(),
            in_flight: InFlight::default(),
            checks: Checks::default(),
            followers,
            answers: Answers::default(),
        });
        // Learnt now for the log; a node that cannot tell yet is asked again by the first relay.
        if let Err(error) = relayer.op_stack().await {
            tracing::warn!(error = %error.detail(), "could not tell whether the chain is OP Stack; asking again at the first relay");
        }
        let first = relayer.address();
        let adopted = relayer.stores.db(move |store| store.adopt_unlaned(first)).await?;
        if adopted > 0 {
            tracing::info!(relays = adopted, lane = %first, "relays recorded before lanes given to the first key");
        }
        // The keys first: only a key this daemon holds is sent on, and its relays followed.
        relayer.take_lanes_at_start().await?;
        for record in relayer.stores.db(|store| store.in_the_pool()).await? {
            if relayer.looks_after(&record) {
                relayer.follow(record.id);
            }
        }
        relayer.spawn_lease_keeper();
        relayer.spawn_reconciler();
        relayer.spawn_webhooks();
        relayer.spawn_handoff_sender();
        tracing::info!(
            relayers = ?relayer.pool.addresses(),
            held = ?relayer.pool.held_lanes(),
            relayer_id = %relayer.config.keys.relayer_id,
            chain_id,
            registry = %relayer.config.chain.registry,
            forwarder = %relayer.config.chain.forwarder,
            "relayer ready"
        );
        Ok(relayer)
    }

    /// Per-IP limit of the read endpoints, per minute.
    pub fn read_rate_limit_per_minute(&self) -> std::num::NonZeroU32 {
        self.config.server.read_rate_limit_per_minute
    }

    /// The reverse proxies whose `X-Forwarded-For` names the client.
    pub fn trusted_proxies(&self) -> &kya_core::api::client_ip::TrustedProxies {
        &self.config.server.trusted_proxies
    }

    /// Where the operator's metrics listener should bind.
    pub fn metrics_address(&self) -> std::net::SocketAddr {
        self.config.server.metrics_address
    }

    /// The first key's address: with one key, the relayer wallet's.
    pub fn address(&self) -> Address {
        self.pool.first().address()
    }

    /// Every key's address (one nonce lane each), in the configured order.
    pub fn addresses(&self) -> Vec<Address> {
        self.pool.addresses()
    }

    /// The store (tests read its records).
    pub fn store(&self) -> &Store {
        self.stores.requests()
    }

    /// Graceful shutdown: waits for relay handlers (a relay that reserved budget finishes and
    /// is recorded), stops the reconciler and the lease keeper, gives followers a short grace to
    /// see their receipts, then stops them and gives the keys' leases back, so another daemon
    /// takes them at once. Nothing is lost: whoever holds a key next follows and reconciles what
    /// is left on it.
    pub async fn drain(&self) {
        self.shutdown.drain(SHUTDOWN_SETTLE_GRACE).await;
        self.release_lanes().await;
    }
}

/// The chain id, asked until the node answers or `patience` is over: a daemon started with its
/// node (a container and its sidecar, a node restarting) must not exit at once.
async fn reach(chain: &RelayerChain, patience: Duration) -> Result<u64> {
    let deadline = tokio::time::Instant::now() + patience;
    let mut pause = STARTUP_FIRST_PAUSE;
    loop {
        match chain.chain_id().await {
            Ok(chain_id) => return Ok(chain_id),
            Err(error) if tokio::time::Instant::now() + pause < deadline => {
                tracing::warn!(error = %error.detail(), retry_in = ?pause, "the RPC endpoint is unreachable; retrying");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(STARTUP_MAX_PAUSE);
            }
            Err(error) => return Err(error),
        }
    }
}
