//! The relayer: `POST /relay`'s checks in the order (cheapest first) and the queries
//! behind `/status`, `/nonce/:address`, `/domain` and `/metrics`.

use std::{
    collections::HashMap,
    net::IpAddr,
    sync::{Arc, Mutex, Weak},
    time::Duration,
};

use alloy::{
    primitives::{Address, B256, U256, utils::format_ether},
    sol_types::SolCall,
};
use kya_core::{abi::Forwarder, forward_request};
use serde_json::{Value, json};

use crate::{
    chain::{RelayerChain, Simulation, forwarder_refusal},
    config::Config,
    error::{Error, Result},
    metrics::{Gauges, Metrics},
    reconcile::{self, Decision, Facts},
    request::RelayBody,
    sender::{Outgoing, Sender, Sent},
    store::{NewRelay, RateKind, Refusal, RelayRecord, SignerCount, Store},
    tasks::Tasks,
    time,
};

/// Headroom on the node's gas estimate: anvil's estimate alone has been seen to fall a few
/// thousand gas short of what the mined transaction used.
pub const GAS_MARGIN_PERCENT: u64 = 30;
/// Gas of the cheapest transaction: the budget must have at least this much left at the current
/// fee before a request is worth checking on chain.
const MIN_TX_GAS: u128 = 21_000;
/// How long the fast-path settlement of a sent relay polls for its receipt before leaving it to
/// the reconciler.
const SETTLE_PATIENCE: Duration = Duration::from_secs(120);
/// How long shutdown lets running settlements finish (anvil and fast chains mine in well under
/// this); whatever is left is settled by the reconciler at the next start.
const SHUTDOWN_SETTLE_GRACE: Duration = Duration::from_secs(3);

/// `estimate` plus [`GAS_MARGIN_PERCENT`], saturating rather than overflowing.
pub(crate) fn with_margin(estimate: u64) -> u64 {
    estimate.saturating_add(estimate.saturating_mul(GAS_MARGIN_PERCENT) / 100)
}

/// Requests (signer, forwarder nonce) being relayed by this process right now, with how many
/// handlers hold each: the reconciler leaves their records alone.
type InFlight = Arc<Mutex<HashMap<(String, String), usize>>>;

/// Holds a request in [`InFlight`] until dropped.
struct InFlightGuard {
    set: InFlight,
    key: (String, String),
}

impl InFlightGuard {
    fn new(set: &InFlight, key: (String, String)) -> Self {
        *set.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).entry(key.clone()).or_default() += 1;
        Self { set: Arc::clone(set), key }
    }
}

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        let mut set = self.set.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(count) = set.get_mut(&self.key) {
            *count -= 1;
            if *count == 0 {
                set.remove(&self.key);
            }
        }
    }
}

/// The relayer's shared state.
#[derive(Debug)]
pub struct Relayer {
    config: Config,
    chain: RelayerChain,
    chain_id: u64,
    sender: Sender,
    store: Arc<Store>,
    metrics: Metrics,
    /// Relay handlers: shutdown waits for them.
    tasks: Arc<Tasks>,
    /// Settlements and the reconciler: shutdown cancels them (the reconciler picks up the rest
    /// at the next start).
    background: Mutex<tokio::task::JoinSet<()>>,
    reconciler: Mutex<Option<tokio::task::AbortHandle>>,
    in_flight: InFlight,
}

impl Relayer {
    /// Connects to the chain, opens the store and starts the reconciler, whose first pass ends
    /// the relays a previous run left unfinished.
    pub async fn start(config: Config) -> Result<Arc<Self>> {
        let chain = RelayerChain::connect(&config.rpc_url, config.forwarder)?;
        let chain_id = chain.chain_id().await?;
        let store = Store::open(&config.db_path)?;
        let sender = Sender::new(chain.clone(), config.signer.clone(), chain_id, config.forwarder);
        let relayer = Arc::new(Self {
            config,
            chain,
            chain_id,
            sender,
            store: Arc::new(store),
            metrics: Metrics::default(),
            tasks: Arc::new(Tasks::default()),
            background: Mutex::new(tokio::task::JoinSet::new()),
            reconciler: Mutex::new(None),
            in_flight: Arc::default(),
        });
        relayer.spawn_reconciler();
        tracing::info!(
            relayer = %relayer.address(),
            chain_id,
            registry = %relayer.config.registry,
            forwarder = %relayer.config.forwarder,
            "relayer ready"
        );
        Ok(relayer)
    }

    /// Per-IP limit of the read endpoints, per minute.
    pub fn read_rate_limit_per_minute(&self) -> std::num::NonZeroU32 {
        self.config.read_rate_limit_per_minute
    }

    /// The relayer wallet's address.
    pub fn address(&self) -> Address {
        self.sender.address()
    }

    /// The store (tests read its records).
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Runs `job` on the store in the blocking pool: SQLite commits wait for the disk (fsync),
    /// which must not stall the async workers serving other requests.
    async fn db<T: Send + 'static>(
        &self,
        job: impl FnOnce(&Store) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let store = Arc::clone(&self.store);
        tokio::task::spawn_blocking(move || job(&store))
            .await
            .map_err(|error| Error::Internal(format!("store task failed: {error}")))?
    }

    /// Graceful shutdown: waits for relay handlers (a relay that reserved budget finishes and
    /// is recorded), gives running settlements a short grace, then cancels them and the
    /// reconciler. Nothing is lost: the next start reconciles what is left.
    pub async fn drain(&self) {
        self.tasks.wait_idle().await;
        if let Some(reconciler) =
            self.reconciler.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).take()
        {
            reconciler.abort();
        }
        let mut background = std::mem::take(&mut *self.lock_background());
        let _ = tokio::time::timeout(SHUTDOWN_SETTLE_GRACE, async {
            while background.join_next().await.is_some() {}
        })
        .await;
        background.shutdown().await;
    }

    fn lock_background(&self) -> std::sync::MutexGuard<'_, tokio::task::JoinSet<()>> {
        self.background.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Runs `future` as cancellable background work.
    fn spawn_background(
        &self,
        future: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> tokio::task::AbortHandle {
        let mut background = self.lock_background();
        // Reap finished tasks so the set does not grow with every relay.
        while background.try_join_next().is_some() {}
        background.spawn(future)
    }

    /// Handles a `POST /relay` body from `client`. The work runs as a tracked task: once a
    /// reservation is made the relay finishes (and is recorded) even if the client hangs up,
    /// and shutdown waits for it.
    pub async fn relay(self: &Arc<Self>, body: Vec<u8>, client: IpAddr) -> Result<Value> {
        let relayer = Arc::clone(self);
        let outcome = self
            .tasks
            .spawn(async move { relayer.relay_checked(&body, client).await })
            .await
            .map_err(|error| Error::Internal(format!("relay task failed: {error}")))?;
        match &outcome {
            Ok(_) => self.metrics.accepted(),
            Err(error) => {
                self.metrics.rejected(error.reason());
                tracing::info!(%client, reason = error.reason(), error = %error, "relay refused");
            }
        }
        outcome
    }

    async fn relay_checked(self: &Arc<Self>, body: &[u8], client: IpAddr) -> Result<Value> {
        let config = &self.config;
        // 1. Shape.
        let body = RelayBody::parse(body)?;
        let request = &body.request;
        // 2. Policy.
        if request.to != config.registry {
            return Err(Error::WrongTarget);
        }
        if request.value > U256::ZERO {
            return Err(Error::ValueTransfer);
        }
        if request.gas > U256::from(config.max_request_gas) {
            return Err(Error::GasAboveCap {
                requested: request.gas.to_string(),
                cap: config.max_request_gas,
            });
        }
        // 3. Per-IP limit (every request that gets this far counts).
        let now = time::now();
        let (ip, per_ip) = (client.to_string(), config.rate_limit_per_ip);
        if !self.db(move |store| store.hit(RateKind::Ip, &ip, per_ip, now)).await? {
            return Err(Error::IpRateLimited(config.rate_limit_per_ip));
        }
        // 4. Off-chain signature: the recovered signer must be `from`.
        if body.recover_signer(self.chain_id, config.forwarder) != Some(request.from) {
            return Err(Error::InvalidSignature);
        }
        // 5. Per-signer limit, read only: a signer at its limit is refused before any RPC call.
        // The request is counted after the forwarder's `verify` (8): anyone can replay a
        // signer's old requests, whose signatures still recover, but their nonces are spent, so
        // they fail `verify` and never count. Nobody can spend another signer's quota.
        let signer = request.from.to_checksum(None);
        let per_signer = config.rate_limit_per_signer;
        let key = signer.clone();
        if self.db(move |store| store.hits(RateKind::Signer, &key, now)).await? >= per_signer {
            return Err(Error::SignerRateLimited(per_signer));
        }
        // 6. Balance.
        let balance = self.chain.balance(self.address()).await?;
        if balance < U256::from(config.min_balance_wei) {
            return Err(Error::BalanceTooLow);
        }
        // 7. Budget: is any transaction still affordable at today's fee?
        let fees = self.chain.fees().await?;
        let budget = self.db(move |store| store.budget(now)).await?;
        let remaining = config.daily_gas_budget_wei.saturating_sub(budget.used_wei);
        if remaining < MIN_TX_GAS.saturating_mul(fees.max_fee_per_gas) {
            return Err(Error::BudgetExhausted);
        }
        // 8. The forwarder's own check (nonce, deadline, signer). It, the simulation and the
        // estimate read one block, so they agree even while a copy of this request is mined.
        let at = self.chain.block_number().await?;
        if !self.chain.verify(request, &body.signature, at).await? {
            return Err(Error::InvalidSignature);
        }
        // The signer's count: re-checked and recorded in one store transaction, so concurrent
        // requests that all passed step 5 cannot together exceed the limit. A copy of a request
        // already accepted (not mined yet, so `verify` still passes) is a replay: not counted.
        let nonce = request.nonce.to_string();
        let (key, counted_nonce) = (signer.clone(), nonce.clone());
        match self.db(move |store| store.count_signer(&key, &counted_nonce, per_signer, now)).await? {
            SignerCount::Counted => {}
            SignerCount::Limited => return Err(Error::SignerRateLimited(per_signer)),
            SignerCount::Duplicate => return Err(Error::InvalidSignature),
        }
        // 9. Simulate `execute`: a registry call that would fail is never paid for.
        match self.chain.simulate(self.address(), request, &body.signature, at).await? {
            Simulation::Succeeds => {}
            Simulation::CallFails(reason) => return Err(Error::Reverted(reason)),
            Simulation::ForwarderReverts(reason) => return Err(forwarder_refusal(reason)),
        }
        // 10. Gas limit from the estimate plus margin.
        let estimate = self.chain.estimate_execute(self.address(), request, &body.signature, at).await?;
        let gas_limit = with_margin(estimate);
        // 11. Reserve the worst case (limit × max fee) atomically; refuses replays too. From
        // here until this handler ends, the reconciler leaves the record to it.
        let _in_flight = InFlightGuard::new(&self.in_flight, (signer.clone(), nonce.clone()));
        let new_relay = NewRelay {
            signer: signer.clone(),
            forwarder_nonce: nonce.clone(),
            client_ip: client.to_string(),
            gas_limit,
            max_fee_wei: fees.max_fee_per_gas,
        };
        let limit = config.daily_gas_budget_wei;
        let reservation = match self.db(move |store| store.reserve(&new_relay, limit, now)).await? {
            Ok(reservation) => reservation,
            Err(Refusal::Budget) => return Err(Error::BudgetExhausted),
            Err(Refusal::Duplicate) => return Err(Error::InvalidSignature),
        };
        // 12. Send.
        let input = Forwarder::executeCall { req: body.request.clone(), signature: body.signature.clone() }
            .abi_encode();
        let outgoing = Outgoing { gas_limit, fees, input: input.into() };
        // The signed transaction's hash is on disk before the node can see it: after a crash or
        // a lost answer, the reconciler finds it by that hash.
        let (id, relayer) = (reservation.id, Arc::clone(self));
        let record = move |signed: Sent| {
            let relayer = Arc::clone(&relayer);
            async move {
                let hash = signed.hash.to_string();
                relayer.db(move |store| store.mark_sent(id, signed.nonce, &hash)).await
            }
        };
        let sent = match self.sender.send(&outgoing, record).await {
            Ok(sent) => sent,
            Err(Error::Unconfirmed { tx_hash, nonce: relayer_nonce, message }) => {
                // Kept on the books as sent: its settlement finds the receipt if the node did
                // take it, and until then the worst case stays reserved; the reconciler drops it
                // if the node never had it.
                if let Ok(hash) = tx_hash.parse() {
                    self.spawn_settlement(id, hash);
                }
                return Err(Error::Unconfirmed { tx_hash, nonce: relayer_nonce, message });
            }
            Err(error) => {
                let (id, reason) = (reservation.id, error.to_string());
                self.db(move |store| store.release(id, &reason, time::now())).await?;
                return Err(error);
            }
        };
        let hash = sent.hash.to_string();
        tracing::info!(
            signer = %signer,
            forwarder_nonce = %nonce,
            tx = %hash,
            relayer_nonce = sent.nonce,
            gas_limit,
            reserved_wei = %reservation.reserved_wei,
            "relay sent"
        );
        self.spawn_settlement(reservation.id, sent.hash);
        Ok(json!({ "txHash": hash, "from": signer, "nonce": nonce }))
    }

    /// Waits for the receipt of `hash` in the background and settles the budget with its cost
    /// (the fast path; the reconciler settles what this misses).
    fn spawn_settlement(self: &Arc<Self>, id: i64, hash: B256) {
        let relayer = Arc::clone(self);
        let _ = self.spawn_background(async move {
            let deadline = tokio::time::Instant::now() + SETTLE_PATIENCE;
            let mut pause = Duration::from_millis(50);
            while tokio::time::Instant::now() < deadline {
                match relayer.chain.receipt(hash).await {
                    Ok(Some(receipt)) => {
                        let (cost, outcome) = relayer.chain.settlement(&receipt);
                        let settled =
                            relayer.db(move |store| store.settle(id, cost, outcome, time::now())).await;
                        if let Err(error) = settled {
                            tracing::error!(id, %hash, %error, "settling a relay failed");
                        } else {
                            tracing::info!(id, %hash, cost_wei = %cost, outcome = outcome.status(), "relay settled");
                        }
                        return;
                    }
                    Ok(None) => {}
                    Err(error) => tracing::warn!(id, %hash, %error, "reading a receipt failed"),
                }
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(2));
            }
            tracing::warn!(id, %hash, "no receipt yet; left to the reconciler");
        });
    }

    /// Starts the reconciler: a pass now (ending what a previous run left), then one every
    /// `RECONCILE_INTERVAL_SECS`. It holds the relayer weakly, so it ends with it.
    fn spawn_reconciler(self: &Arc<Self>) {
        let relayer = Arc::downgrade(self);
        let interval = self.config.reconcile_interval;
        let handle = self.spawn_background(async move {
            loop {
                let Some(strong) = Weak::upgrade(&relayer) else { return };
                if let Err(error) = strong.reconcile().await {
                    tracing::warn!(error = %error.detail(), "reconciling relays failed; retrying later");
                }
                drop(strong);
                tokio::time::sleep(interval).await;
            }
        });
        *self.reconciler.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(handle);
    }

    /// One reconciler pass over the relays still `reserved` or `sent` after the grace period,
    /// except those a handler of this process is working on.
    async fn reconcile(&self) -> Result<()> {
        let horizon = time::now().saturating_sub(self.config.reconcile_grace_secs);
        let open = self.db(move |store| store.open_since(horizon)).await?;
        let open: Vec<RelayRecord> = {
            let in_flight = self.in_flight.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            open.into_iter()
                .filter(|record| {
                    !in_flight.contains_key(&(record.signer.clone(), record.forwarder_nonce.clone()))
                })
                .collect()
        };
        if open.is_empty() {
            return Ok(());
        }
        // Read first: a nonce seen mined here is mined before any receipt read below.
        let mined_nonce = self.chain.mined_nonce(self.address()).await?;
        for record in open {
            let id = record.id;
            let decision = self.decide(&record, mined_nonce).await?;
            let now = time::now();
            match decision {
                Decision::Wait => continue,
                Decision::Settle { cost_wei, outcome } => {
                    self.db(move |store| store.settle(id, cost_wei, outcome, now)).await?;
                }
                Decision::Executed => self.db(move |store| store.mark_executed(id, now)).await?,
                Decision::Drop { reason, resync } => {
                    if resync {
                        self.sender.resync().await;
                    }
                    self.db(move |store| store.drop_relay(id, reason, now)).await?;
                }
            }
            tracing::info!(
                id,
                signer = %record.signer,
                forwarder_nonce = %record.forwarder_nonce,
                tx = record.tx_hash.as_deref().unwrap_or("none"),
                ?decision,
                "reconciled a relay"
            );
        }
        Ok(())
    }

    /// Gathers the facts about one unfinished relay and decides.
    async fn decide(&self, record: &RelayRecord, mined_nonce: u64) -> Result<Decision> {
        let from: Address = record
            .signer
            .parse()
            .map_err(|_| Error::Internal(format!("relay {}: bad signer {:?}", record.id, record.signer)))?;
        let requested: U256 = record.forwarder_nonce.parse().map_err(|_| {
            Error::Internal(format!("relay {}: bad nonce {:?}", record.id, record.forwarder_nonce))
        })?;
        let hash: Option<B256> = record.tx_hash.as_deref().and_then(|hash| hash.parse().ok());
        let request_ran = self.chain.forwarder_nonce(from).await? > requested;
        let receipt = match hash {
            Some(hash) => self.chain.receipt(hash).await?.map(|receipt| self.chain.settlement(&receipt)),
            None => None,
        };
        let node_knows_tx = match hash {
            Some(hash) if receipt.is_none() && !request_ran => self.chain.knows_transaction(hash).await?,
            _ => true,
        };
        Ok(reconcile::decide(&Facts {
            has_hash: hash.is_some(),
            receipt,
            request_ran,
            relayer_nonce_used: record.relayer_nonce.is_some_and(|nonce| mined_nonce > nonce),
            node_knows_tx,
        }))
    }

    /// `GET /status`. Addresses are EIP-55 checksummed, as everywhere in the API.
    pub async fn status(&self) -> Result<Value> {
        let balance = self.chain.balance(self.address()).await?;
        let budget = self.db(|store| store.budget(time::now())).await?;
        let limit = self.config.daily_gas_budget_wei;
        Ok(json!({
            "relayer": self.address().to_checksum(None),
            "balance": format_ether(balance),
            "balanceWei": balance.to_string(),
            "chainId": self.chain_id,
            "dailyGasBudget": {
                "limitWei": limit.to_string(),
                "usedWei": budget.used_wei.to_string(),
                "remainingWei": limit.saturating_sub(budget.used_wei).to_string(),
                "pendingWei": budget.pending_wei.to_string(),
                "resetsAt": budget.resets_at().map(kya_core::time::iso8601),
            },
            "contracts": {
                "registry": self.config.registry.to_checksum(None),
                "forwarder": self.config.forwarder.to_checksum(None),
            },
        }))
    }

    /// `GET /nonce/:address`.
    pub async fn nonce(&self, address: &str) -> Result<Value> {
        let address: Address =
            address.trim().parse().map_err(|_| Error::BadRequest(format!("Invalid address: {address:?}")))?;
        let nonce = self.chain.forwarder_nonce(address).await?;
        Ok(json!({ "address": address.to_checksum(None), "nonce": nonce.to_string() }))
    }

    /// `GET /domain`: read from the forwarder (ERC-5267); core's constants if it cannot answer.
    pub async fn domain(&self) -> Result<Value> {
        let domain = match self.chain.domain().await {
            Ok(domain) => domain,
            Err(error) => {
                tracing::warn!(%error, "eip712Domain() failed; answering with core's domain");
                crate::chain::Domain {
                    name: forward_request::DOMAIN_NAME.into(),
                    version: forward_request::DOMAIN_VERSION.into(),
                    chain_id: self.chain_id,
                    verifying_contract: self.config.forwarder,
                }
            }
        };
        Ok(json!({
            "name": domain.name,
            "version": domain.version,
            "chainId": domain.chain_id,
            "verifyingContract": domain.verifying_contract.to_checksum(None),
        }))
    }

    /// `GET /metrics`.
    pub async fn metrics(&self) -> Result<String> {
        let budget = self.db(|store| store.budget(time::now())).await?;
        let balance =
            self.chain.balance(self.address()).await.ok().and_then(|balance| u128::try_from(balance).ok());
        Ok(self.metrics.render(&Gauges {
            budget_limit_wei: self.config.daily_gas_budget_wei,
            budget_used_wei: budget.used_wei,
            budget_pending_wei: budget.pending_wei,
            balance_wei: balance,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gas_margin_saturates() {
        assert_eq!(with_margin(100_000), 130_000);
        assert_eq!(with_margin(u64::MAX), u64::MAX);
        assert_eq!(with_margin(184_467_440_737_095_516), 239_807_672_958_224_170);
    }
}
