//! The store's connections, and calling them off the async threads under the store's deadline.

use std::sync::Arc;

use crate::{
    config::Config,
    error::{Error, Result},
    store::{self, Store},
};

/// Connections of the keys' records' own pool on PostgreSQL ([`Stores::send_db`]): a record is
/// one round trip under its key's send lock, so two serve several keys; beside the requests'
/// pool (`DATABASE_POOL_SIZE`, 8) and the lease keeper's one, a daemon holds at most 11
/// connections.
const SEND_CONNECTIONS: u32 = 2;

/// The store, as the relayer's parts reach it. On SQLite all three are the same store.
#[derive(Debug)]
pub(crate) struct Stores {
    /// The requests' checks and reads, the followers and the reconciler.
    requests: Arc<Store>,
    /// The lease keeper's: on PostgreSQL a connection of its own, so renewals go on while a
    /// request waits on a lock.
    leases: Arc<Store>,
    /// The keys' records under their send locks: on PostgreSQL a pool of its own
    /// ([`SEND_CONNECTIONS`]), so a key's next send never waits for a connection behind the
    /// requests' checks and reads.
    sends: Arc<Store>,
}

impl Stores {
    /// Opens the configured store (and, on PostgreSQL, the lease keeper's connection and the
    /// sends' pool; the requests' connections opened now), its blocking work (connecting,
    /// migrating) off the async threads.
    pub(crate) async fn open(config: &Config) -> Result<Self> {
        let (location, budget_window) = (config.store.location(), config.budget.window_secs);
        let webhook_events = config.webhook.is_some();
        let (requests, leases, sends) = tokio::task::spawn_blocking(move || {
            let store = Store::open_at(&location)?.with_budget_window(budget_window);
            let leases = store.second_connection()?;
            // With webhooks on, every change of a relay is written to the outbox with the change.
            let store = if webhook_events { store.with_webhook_events() } else { store };
            let sends = store.pool_of_its_own(SEND_CONNECTIONS);
            // Every slot's connection open before the first request: a burst then opens none
            // beside them (`store::pool::Pool::open_all`). The keys' records' pool opens its two
            // as records need them: one key's records come one at a time, and a record is the
            // one call a connection of that pool hung since start-up would fail (the send waits
            // its deadline under the key's lock).
            store.open_connections();
            Ok::<_, Error>((store, leases, sends))
        })
        .await
        .map_err(|error| Error::Internal(format!("opening the store failed: {error}")))??;
        let requests = Arc::new(requests);
        let leases = leases.map_or_else(|| Arc::clone(&requests), Arc::new);
        let sends = sends.map_or_else(|| Arc::clone(&requests), Arc::new);
        Ok(Self { requests, leases, sends })
    }

    /// The requests' store.
    pub(crate) fn requests(&self) -> &Store {
        &self.requests
    }

    /// Runs `job` on the requests' store in the blocking pool: SQLite commits wait for the disk
    /// (fsync), which must not stall the async workers serving other requests. Waits at most
    /// the store's deadline ([`on_store`]).
    pub(crate) async fn db<T: Send + 'static>(
        &self,
        job: impl FnOnce(&Store) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        on_store(&self.requests, job).await
    }

    /// Runs `job` on the keys' records' store, as [`Stores::db`]: for what runs under a key's
    /// send lock.
    pub(crate) async fn send_db<T: Send + 'static>(
        &self,
        job: impl FnOnce(&Store) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        on_store(&self.sends, job).await
    }

    /// Runs `job` on the lease keeper's store, as [`Stores::db`].
    pub(crate) async fn lease_db<T: Send + 'static>(
        &self,
        job: impl FnOnce(&Store) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        on_store(&self.leases, job).await
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
