//! The relayer's shared state and lifecycle: start-up (retrying an unreachable node), the store
//! in the blocking pool, the work in flight, and shutdown. The stages live beside it:
//! [`crate::relayer::relay`] (the `POST /relay` checks), [`crate::relayer::settlement`] (receipts, replacements,
//! the reconciler) and [`crate::relayer::queries`] (the read endpoints).

pub(crate) mod handoff;
pub(crate) mod l1_fee;
pub(crate) mod leasing;
pub(crate) mod metrics;
pub(crate) mod prefilter;
pub(crate) mod queries;
pub(crate) mod relay;
pub(crate) mod settlement;
pub(crate) mod webhooks;

use std::{
    collections::{HashMap, HashSet},
    sync::{Arc, Mutex},
    time::Duration,
};

use alloy::primitives::{Address, U256};

use crate::concurrency::{
    fresh::{self, Fresh},
    lock, shared_read,
    shutdown::Shutdown,
    turns,
};
use crate::{
    chain::RelayerChain,
    config::Config,
    error::{Error, Result},
    keys::lanes::Pool,
    relayer::metrics::Metrics,
    relayer::prefilter::PreFilter,
    rules::stuck::Policy,
    store::{self, Store},
};

/// How long shutdown lets running settlements finish (anvil and fast chains mine in well under
/// this); whatever is left is settled at the next start.
const SHUTDOWN_SETTLE_GRACE: Duration = Duration::from_secs(3);
/// First pause between two start-up attempts to reach the node; it doubles up to the next.
const STARTUP_FIRST_PAUSE: Duration = Duration::from_millis(250);
/// Longest pause between two start-up attempts.
const STARTUP_MAX_PAUSE: Duration = Duration::from_secs(10);

/// Requests (signer, forwarder nonce) that a handler or a replacement of this process is
/// working on right now, with how many hold each: the reconciler leaves their records alone.
pub(crate) type InFlight = Arc<Mutex<HashMap<(Address, U256), usize>>>;

/// Holds a request in [`InFlight`] until dropped.
pub(crate) struct InFlightGuard {
    set: InFlight,
    key: (Address, U256),
}

impl InFlightGuard {
    pub(crate) fn new(set: &InFlight, key: (Address, U256)) -> Self {
        *lock(set).entry(key).or_default() += 1;
        Self { set: Arc::clone(set), key }
    }
}

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        let mut set = lock(&self.set);
        if let Some(count) = set.get_mut(&self.key) {
            *count -= 1;
            if *count == 0 {
                set.remove(&self.key);
            }
        }
    }
}

/// Connections of the keys' records' own pool on PostgreSQL ([`Relayer::send_store`]): a
/// record is one round trip under its key's send lock, so two serve several keys; beside the
/// requests' pool (`DATABASE_POOL_SIZE`, 8) and the lease keeper's one, a daemon holds at most
/// 11 connections.
const SEND_CONNECTIONS: u32 = 2;

/// The relayer's shared state.
#[derive(Debug)]
pub struct Relayer {
    config: Config,
    chain: RelayerChain,
    chain_id: u64,
    /// The relayer's keys, one nonce lane each.
    pool: Pool,
    store: Arc<Store>,
    /// The lease keeper's store: on PostgreSQL a connection of its own, so renewals go on while
    /// a request waits on a lock (on SQLite, the same store).
    lease_store: Arc<Store>,
    /// The keys' records under their send locks ([`Relayer::send_db`]): on PostgreSQL a pool of
    /// its own ([`SEND_CONNECTIONS`]), so a key's next send never waits for a connection behind
    /// the requests' checks and reads (on SQLite, the same store).
    send_store: Arc<Store>,
    metrics: Metrics,
    /// The per-IP limit's certain refusals, answered from memory before any store access.
    prefilter: PreFilter,
    stuck: Policy,
    /// The relayer's tasks and the phases of its shutdown.
    shutdown: Shutdown,
    in_flight: InFlight,
    /// Relays (row ids) a follower of this process watches.
    followed: Mutex<HashSet<i64>>,
    /// The chain's head, read once for every follower ([`fresh::HEAD_FRESH`]).
    head: Fresh<u64>,
    /// The keys' balances `/status` and the metrics show: a scrape reads the chain at most once
    /// per [`fresh::BALANCES_FRESH`], and again after a relay is sent or settled.
    key_balances: Fresh<Vec<(Address, U256)>>,
    /// The forwarder's EIP-712 domain once the node answered it: it never changes for a
    /// deployment, so `/domain` asks the chain once.
    domain: tokio::sync::OnceCell<crate::chain::Domain>,
    /// Whether the chain charges an OP Stack L1 data fee, once known ([`Relayer::op_stack`]).
    op_stack: tokio::sync::OnceCell<bool>,
    /// Turns at the checks on chain, as many as the keys held can take, in arrival order.
    checks: turns::Turns,
    /// The checks' reads that relays checked at once share: one call to the node each.
    checks_reads: shared_read::ChecksReads,
}

impl Relayer {
    /// Connects to the chain (retrying with backoff for `STARTUP_RETRY_SECS` while the node is
    /// unreachable), learns whether it is an OP Stack chain (which charges an L1 data fee), opens
    /// the store, resumes following the relays a previous run left with the node, and starts the
    /// reconciler, whose first pass ends the relays left unfinished.
    pub async fn start(config: Config) -> Result<Arc<Self>> {
        let chain = RelayerChain::connect(config.chain.rpc_url.as_str(), config.chain.forwarder)?;
        let chain_id = reach(&chain, config.chain.startup_retry).await?;
        let (location, budget_window) = (config.store.location(), config.budget.window_secs);
        // The store's own blocking work (PostgreSQL connects and migrates) off the async threads.
        let webhook_events = config.webhook.is_some();
        let (store, lease_store, send_store) = tokio::task::spawn_blocking(move || {
            let store = Store::open_at(&location)?.with_budget_window(budget_window);
            let lease_store = store.second_connection()?;
            // With webhooks on, every change of a relay is written to the outbox with the change.
            let store = if webhook_events { store.with_webhook_events() } else { store };
            let send_store = store.pool_of_its_own(SEND_CONNECTIONS);
            Ok::<_, Error>((store, lease_store, send_store))
        })
        .await
        .map_err(|error| Error::Internal(format!("opening the store failed: {error}")))??;
        tracing::info!(store = %store.location(), "store open");
        let store = Arc::new(store);
        let lease_store = lease_store.map_or_else(|| Arc::clone(&store), Arc::new);
        let send_store = send_store.map_or_else(|| Arc::clone(&store), Arc::new);
        let pool = Pool::new(&chain, &config.keys.signers, chain_id);
        // Matched to the keys held at each request; none are held yet.
        let checks = turns::Turns::new(0);
        let stuck = config.followers.stuck_policy();
        let relayer = Arc::new(Self {
            config,
            chain,
            chain_id,
            pool,
            store,
            lease_store,
            send_store,
            metrics: Metrics::default(),
            prefilter: PreFilter::default(),
            stuck,
            shutdown: Shutdown::new(),
            in_flight: Arc::default(),
            followed: Mutex::default(),
            head: Fresh::new(fresh::HEAD_FRESH),
            key_balances: Fresh::new(fresh::BALANCES_FRESH),
            domain: tokio::sync::OnceCell::new(),
            op_stack: tokio::sync::OnceCell::new(),
            checks,
            checks_reads: shared_read::ChecksReads::default(),
        });
        // Learnt now for the log; a node that cannot tell yet is asked again by the first relay.
        if let Err(error) = relayer.op_stack().await {
            tracing::warn!(error = %error.detail(), "could not tell whether the chain is OP Stack; asking again at the first relay");
        }
        let first = relayer.address();
        let adopted = relayer.db(move |store| store.adopt_unlaned(first)).await?;
        if adopted > 0 {
            tracing::info!(relays = adopted, lane = %first, "relays recorded before lanes given to the first key");
        }
        // The keys first: only a key this daemon holds is sent on, and its relays followed.
        relayer.take_lanes_at_start().await?;
        for record in relayer.db(|store| store.in_the_pool()).await? {
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
        &self.store
    }

    /// Runs `job` on the store in the blocking pool: SQLite commits wait for the disk (fsync),
    /// which must not stall the async workers serving other requests. Waits at most the store's
    /// deadline ([`on_store`]).
    pub(crate) async fn db<T: Send + 'static>(
        &self,
        job: impl FnOnce(&Store) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        on_store(&self.store, job).await
    }

    /// Runs `job` on the keys' records' store ([`Relayer::send_store`]), as [`Relayer::db`]: for
    /// what runs under a key's send lock.
    pub(crate) async fn send_db<T: Send + 'static>(
        &self,
        job: impl FnOnce(&Store) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        on_store(&self.send_store, job).await
    }

    /// Runs `job` on the lease keeper's store ([`Relayer::lease_store`]), as [`Relayer::db`].
    pub(crate) async fn lease_db<T: Send + 'static>(
        &self,
        job: impl FnOnce(&Store) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        on_store(&self.lease_store, job).await
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

/// Runs `job` on `store` in the blocking pool, waiting for it at most the store's deadline
/// (`DATABASE_CALL_TIMEOUT_MS` on PostgreSQL; SQLite waits on no server). Past it the call is
/// abandoned, logged and answered [`Error::StoreTimedOut`] (503): its thread, blocked on a server
/// that stopped answering with its connections open, sends nothing more once the server resumes
/// and gives its connection back to be dropped, not handed out again (`store::deadline`).
async fn on_store<T: Send + 'static, Job>(store: &Arc<Store>, job: Job) -> Result<T>
where
    Job: FnOnce(&Store) -> Result<T> + Send + 'static,
{
    let (store, call) = (Arc::clone(store), store::Call::default());
    let deadline = store.call_deadline();
    let running = tokio::task::spawn_blocking({
        let (store, call) = (Arc::clone(&store), call.clone());
        move || store::on_blocking_thread(&call, || job(&store))
    });
    let joined = match deadline {
        None => running.await,
        Some(deadline) => match tokio::time::timeout(deadline, running).await {
            Ok(joined) => joined,
            Err(_) => {
                call.abandon();
                // The job's type names the operation (the function that called the store), and
                // nothing of the database's address or password.
                let detail = format!("{} had no answer within {deadline:?}", std::any::type_name::<Job>());
                tracing::warn!(store = %store.location(), call = %detail, "a store call passed its deadline; its connection leaves the pool");
                return Err(Error::StoreTimedOut(detail));
            }
        },
    };
    joined.map_err(|error| Error::Internal(format!("store task failed: {error}")))?
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
