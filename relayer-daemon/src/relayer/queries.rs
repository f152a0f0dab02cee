//! The read endpoints: `/status`, `/nonce/:address`, `/domain`, `/metrics`, and the relay
//! lookups `/relay/:id`, `/relay/tx/:hash` and `/relay/signer/:address/:nonce`. Their answers
//! are `kya_core::api::relayer_view`'s types, the ones kya-client reads.

use alloy::primitives::{Address, B256, U256, utils::format_ether};
use kya_core::{
    api::{
        relayer_view::{Contracts, Domain, GasBudget, LaneStatus, NonceView, RelayView, RelayerStatus},
        time::iso8601,
    },
    registry::forward_request,
};

use crate::{
    concurrency::fresh::{self, Fresh},
    error::{Error, Result},
    relayer::Relayer,
    relayer::metrics::{Gauges, KeyGauge},
    store::{RelayRecord, RelayStatus},
    time,
};

/// Longest relay id accepted in a path: ids are 32 hex digits.
const RELAY_ID_LENGTH: usize = 32;

/// What the read endpoints keep between requests.
#[derive(Debug)]
pub(crate) struct Answers {
    /// The keys' balances `/status` and the metrics show: a scrape reads the chain at most once
    /// per [`fresh::BALANCES_FRESH`], and again after a relay is sent or settled.
    key_balances: Fresh<Vec<(Address, U256)>>,
    /// The forwarder's EIP-712 domain once the node answered it: it never changes for a
    /// deployment, so `/domain` asks the chain once.
    domain: tokio::sync::OnceCell<crate::chain::Domain>,
}

impl Default for Answers {
    fn default() -> Self {
        Self { key_balances: Fresh::new(fresh::BALANCES_FRESH), domain: tokio::sync::OnceCell::new() }
    }
}

/// Relays waiting longer than the stuck threshold, for the metrics.
pub(crate) fn waiting_too_long(records: &[RelayRecord], after_secs: u64, now: u64) -> usize {
    records
        .iter()
        .filter(|record| {
            matches!(record.status, RelayStatus::Sent | RelayStatus::Replaced | RelayStatus::Cancelling)
                && record.sent_at.is_some_and(|sent| now >= sent.saturating_add(after_secs))
        })
        .count()
}

impl Relayer {
    /// `GET /status`. Balances are the metrics' ([`Self::cached_balances`]). Addresses are EIP-55 checksummed, as everywhere in the API. `relayer` and
    /// `balance` are the first key's (what they were with one key); `lanes` shows every key.
    pub async fn status(&self) -> Result<RelayerStatus> {
        let (addresses, now) = (self.pool.addresses(), time::now());
        let (budget, depths, holders) = self
            .stores
            .db(move |store| {
                Ok((store.budget(now)?, store.lane_depths()?, store.lane_holders(&addresses, now)?))
            })
            .await?;
        let minimum = U256::from(self.config.relay.min_balance_wei);
        let mut lanes = Vec::new();
        for (address, balance) in self.cached_balances().await? {
            lanes.push(LaneStatus {
                address,
                balance: format_ether(balance),
                balance_wei: balance,
                below_min_balance: balance < minimum,
                depth: depths.iter().find(|(lane, _)| *lane == address).map_or(0, |(_, depth)| *depth),
                holder: holders.iter().find(|held| held.lane == address).and_then(|held| held.holder.clone()),
            });
        }
        let first = &lanes[0];
        let limit = self.config.budget.daily_gas_budget_wei;
        let pacing = self.config.budget.pacing();
        let open = pacing.open_wei(limit, budget.window_start, now);
        Ok(RelayerStatus {
            relayer: first.address,
            balance: first.balance.clone(),
            balance_wei: first.balance_wei,
            chain_id: self.chain_id,
            daily_gas_budget: GasBudget {
                limit_wei: U256::from(limit),
                used_wei: U256::from(budget.used_wei),
                remaining_wei: U256::from(limit.saturating_sub(budget.used_wei)),
                pending_wei: Some(U256::from(budget.pending_wei)),
                resets_at: budget.resets_at(self.config.budget.window_secs).map(iso8601),
                open_wei: Some(U256::from(open.saturating_sub(budget.used_wei))),
                next_slice_at: pacing.next_slice_at(budget.window_start, now).map(iso8601),
            },
            contracts: Contracts {
                registry: self.config.chain.registry,
                forwarder: self.config.chain.forwarder,
            },
            lanes,
        })
    }

    /// Every key's balance, in pool order, read at once (one RPC call per key, side by side).
    pub(crate) async fn balances(&self) -> Result<Vec<(Address, U256)>> {
        self.balances_of(self.pool.addresses()).await
    }

    /// The balances of `addresses`, in their order, read at once.
    pub(crate) async fn balances_of(&self, addresses: Vec<Address>) -> Result<Vec<(Address, U256)>> {
        let balances =
            futures::future::try_join_all(addresses.iter().map(|lane| self.chain.balance(*lane))).await?;
        Ok(addresses.into_iter().zip(balances).collect())
    }

    /// `GET /nonce/:address`.
    pub async fn nonce(&self, address: &str) -> Result<NonceView> {
        let address: Address =
            address.trim().parse().map_err(|_| Error::BadRequest(format!("Invalid address: {address:?}")))?;
        let nonce = self.chain.forwarder_nonce(address).await?;
        Ok(NonceView { address, nonce })
    }

    /// `GET /domain`: read from the forwarder (ERC-5267) once, then from memory; core's constants
    /// (asking again next time) if it cannot answer.
    pub async fn domain(&self) -> Result<Domain> {
        let domain = match self.answers.domain.get_or_try_init(|| self.chain.domain()).await {
            Ok(domain) => domain.clone(),
            Err(error) => {
                tracing::warn!(%error, "eip712Domain() failed; answering with core's domain");
                crate::chain::Domain {
                    name: forward_request::DOMAIN_NAME.into(),
                    version: forward_request::DOMAIN_VERSION.into(),
                    chain_id: self.chain_id,
                    verifying_contract: self.config.chain.forwarder,
                }
            }
        };
        Ok(Domain {
            name: domain.name,
            version: domain.version,
            chain_id: domain.chain_id,
            verifying_contract: domain.verifying_contract,
        })
    }

    /// `GET /metrics`.
    pub async fn metrics(&self) -> Result<String> {
        let now = time::now();
        let budget = self.stores.db(move |store| store.budget(now)).await?;
        let balances = self.balances_for_metrics().await;
        let keys: Vec<KeyGauge> = self
            .pool
            .senders()
            .iter()
            .map(|sender| KeyGauge {
                address: sender.address(),
                balance_wei: balances.iter().find(|(key, _)| *key == sender.address()).map(|(_, wei)| *wei),
                held: sender.lease().is_some(),
            })
            .collect();
        let in_the_pool = self.stores.db(|store| store.in_the_pool()).await?;
        let webhooks_pending = match self.config.webhook {
            Some(_) => Some(self.stores.db(|store| store.events_pending()).await?),
            None => None,
        };
        Ok(self.metrics.render(&Gauges {
            budget_limit_wei: self.config.budget.daily_gas_budget_wei,
            budget_used_wei: budget.used_wei,
            budget_pending_wei: budget.pending_wei,
            budget_open_wei: self
                .config
                .budget
                .pacing()
                .open_wei(self.config.budget.daily_gas_budget_wei, budget.window_start, now)
                .saturating_sub(budget.used_wei),
            keys,
            waiting_too_long: waiting_too_long(&in_the_pool, self.config.followers.stuck_after_secs, now),
            webhooks_pending,
            sends: self.pool.senders().iter().map(|sender| sender.timings().read()).fold(
                (0, [0.0; 4]),
                |(sends, seconds), (more, spent)| {
                    (sends + more, std::array::from_fn(|i| seconds[i] + spent[i]))
                },
            ),
        }))
    }

    /// The keys' balances as the metrics show them: empty when the node did not answer.
    async fn balances_for_metrics(&self) -> Vec<(Address, u128)> {
        let Ok(balances) = self.cached_balances().await else { return Vec::new() };
        balances
            .into_iter()
            .filter_map(|(key, balance)| u128::try_from(balance).ok().map(|wei| (key, wei)))
            .collect()
    }

    /// Forgets the kept balances: a relay was sent or settled, or read its lanes fresh.
    pub(crate) fn balances_changed(&self) {
        self.answers.key_balances.forget();
    }

    /// Every key's balance, in pool order, as `/status` and the metrics show it: read from the
    /// node at most once per [`crate::concurrency::fresh::BALANCES_FRESH`], however often they are
    /// asked (callers at once wait for one read), and again after a relay is sent or settled or
    /// reads its lanes' balances (fresh).
    pub(crate) async fn cached_balances(&self) -> Result<Vec<(Address, U256)>> {
        self.answers.key_balances.get(|| self.balances()).await
    }

    /// `GET /relay/:id`.
    pub async fn relay_by_id(&self, id: &str) -> Result<RelayView> {
        let id = id.trim().to_ascii_lowercase();
        if id.len() != RELAY_ID_LENGTH || !id.bytes().all(|byte| byte.is_ascii_hexdigit()) {
            return Err(Error::BadRequest(format!("Invalid relay id: {id:?} (32 hex digits)")));
        }
        let record = self.stores.db(move |store| store.relay_by_id(&id)).await?;
        record.as_ref().map(RelayRecord::view).ok_or(Error::RelayNotFound)
    }

    /// `GET /relay/tx/:hash`: the relay that sent this transaction (any of its hashes).
    pub async fn relay_by_hash(&self, hash: &str) -> Result<RelayView> {
        let hash: B256 = hash
            .trim()
            .parse()
            .map_err(|_| Error::BadRequest(format!("Invalid transaction hash: {hash:?}")))?;
        let record = self.stores.db(move |store| store.relay_by_hash(hash)).await?;
        record.as_ref().map(RelayRecord::view).ok_or(Error::RelayNotFound)
    }

    /// `GET /relay/signer/:address/:nonce`: the latest relay of that signed request.
    pub async fn relay_by_request(&self, address: &str, nonce: &str) -> Result<RelayView> {
        let signer: Address =
            address.trim().parse().map_err(|_| Error::BadRequest(format!("Invalid address: {address:?}")))?;
        let nonce: U256 = nonce
            .trim()
            .parse()
            .map_err(|_| Error::BadRequest(format!("Invalid nonce: {nonce:?} (a decimal number)")))?;
        let record = self.stores.db(move |store| store.relay_by_request(signer, nonce)).await?;
        record.as_ref().map(RelayRecord::view).ok_or(Error::RelayNotFound)
    }
}
