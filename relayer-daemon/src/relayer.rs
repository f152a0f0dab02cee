//! The relayer: `POST /relay`'s checks in the order (cheapest first) and the queries
//! behind `/status`, `/nonce/:address`, `/domain` and `/metrics`.

use std::{net::IpAddr, sync::Arc, time::Duration};

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
    request::RelayBody,
    sender::{Outgoing, Sender},
    store::{NewRelay, RateKind, Refusal, Store},
    tasks::Tasks,
    time,
};

/// Headroom on the node's gas estimate: anvil's estimate alone has been seen to fall a few
/// thousand gas short of what the mined transaction used.
pub const GAS_MARGIN_PERCENT: u64 = 30;
/// Gas of the cheapest transaction: the budget must have at least this much left at the current
/// fee before a request is worth checking on chain.
const MIN_TX_GAS: u128 = 21_000;
/// How long a settlement polls for a receipt before leaving it to the next start.
const SETTLE_PATIENCE: Duration = Duration::from_secs(600);

/// The relayer's shared state.
#[derive(Debug)]
pub struct Relayer {
    config: Config,
    chain: RelayerChain,
    chain_id: u64,
    sender: Sender,
    store: Arc<Store>,
    metrics: Metrics,
    tasks: Arc<Tasks>,
}

impl Relayer {
    /// Connects to the chain, opens the store and resumes settling relays sent before a restart.
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
        });
        for record in relayer.store.unsettled()? {
            let Some(hash) = record.tx_hash.as_deref().and_then(|hash| hash.parse().ok()) else {
                continue;
            };
            tracing::info!(id = record.id, %hash, "resuming the settlement of a relay");
            relayer.spawn_settlement(record.id, hash);
        }
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

    /// Waits for background relays and settlements to finish (graceful shutdown).
    pub async fn drain(&self) {
        self.tasks.wait_idle().await;
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
        // 5. Per-signer limit, counted only now so nobody can spend another signer's quota.
        let signer = request.from.to_checksum(None);
        let (key, per_signer) = (signer.clone(), config.rate_limit_per_signer);
        if !self.db(move |store| store.hit(RateKind::Signer, &key, per_signer, now)).await? {
            return Err(Error::SignerRateLimited(config.rate_limit_per_signer));
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
        // 9. Simulate `execute`: a registry call that would fail is never paid for.
        match self.chain.simulate(self.address(), request, &body.signature, at).await? {
            Simulation::Succeeds => {}
            Simulation::CallFails(reason) => return Err(Error::Reverted(reason)),
            Simulation::ForwarderReverts(reason) => return Err(forwarder_refusal(reason)),
        }
        // 10. Gas limit from the estimate plus margin.
        let estimate = self.chain.estimate_execute(self.address(), request, &body.signature, at).await?;
        let gas_limit = estimate + estimate * GAS_MARGIN_PERCENT / 100;
        // 11. Reserve the worst case (limit × max fee) atomically; refuses replays too.
        let nonce = request.nonce.to_string();
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
        let sent = match self.sender.send(&outgoing).await {
            Ok(sent) => sent,
            Err(Error::Unconfirmed { tx_hash, nonce: relayer_nonce, message }) => {
                // Keep the relay on the books as sent: its settlement finds the receipt if the
                // node did take it, and until then the worst case stays reserved.
                let (id, recorded) = (reservation.id, tx_hash.clone());
                self.db(move |store| store.mark_sent(id, relayer_nonce, &recorded)).await?;
                if let Ok(hash) = tx_hash.parse() {
                    self.spawn_settlement(reservation.id, hash);
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
        let (id, relayer_nonce, recorded) = (reservation.id, sent.nonce, hash.clone());
        self.db(move |store| store.mark_sent(id, relayer_nonce, &recorded)).await?;
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

    /// Waits for the receipt of `hash` in the background and settles the budget with its cost.
    fn spawn_settlement(self: &Arc<Self>, id: i64, hash: B256) {
        let relayer = Arc::clone(self);
        self.tasks.spawn(async move {
            let deadline = tokio::time::Instant::now() + SETTLE_PATIENCE;
            let mut pause = Duration::from_millis(50);
            while tokio::time::Instant::now() < deadline {
                match relayer.chain.receipt(hash).await {
                    Ok(Some(receipt)) => {
                        let cost = u128::from(receipt.gas_used)
                            .saturating_mul(receipt.effective_gas_price);
                        let succeeded = receipt.status();
                        let settled =
                            relayer.db(move |store| store.settle(id, cost, succeeded, time::now())).await;
                        if let Err(error) = settled {
                            tracing::error!(id, %hash, %error, "settling a relay failed");
                        } else {
                            tracing::info!(id, %hash, cost_wei = %cost, succeeded = receipt.status(), "relay settled");
                        }
                        return;
                    }
                    Ok(None) => {}
                    Err(error) => tracing::warn!(id, %hash, %error, "reading a receipt failed"),
                }
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(2));
            }
            tracing::warn!(id, %hash, "no receipt yet; the next start settles it");
        });
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
