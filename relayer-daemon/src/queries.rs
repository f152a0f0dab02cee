//! The read endpoints: `/status`, `/nonce/:address`, `/domain`, `/metrics`, and the relay
//! lookups `/relay/:id`, `/relay/tx/:hash` and `/relay/signer/:address/:nonce`.

use alloy::primitives::{Address, B256, U256, utils::format_ether};
use kya_core::{forward_request, time::iso8601};
use serde_json::{Value, json};

use crate::{
    error::{Error, Result},
    metrics::Gauges,
    relayer::Relayer,
    settlement::waiting_too_long,
    store::RelayRecord,
    time,
};

/// Longest relay id accepted in a path: ids are 32 hex digits.
const RELAY_ID_LENGTH: usize = 32;

impl Relayer {
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
        let in_the_pool = self.db(|store| store.in_the_pool()).await?;
        Ok(self.metrics.render(&Gauges {
            budget_limit_wei: self.config.daily_gas_budget_wei,
            budget_used_wei: budget.used_wei,
            budget_pending_wei: budget.pending_wei,
            balance_wei: balance,
            waiting_too_long: waiting_too_long(&in_the_pool, self.config.stuck_after_secs, time::now()),
        }))
    }

    /// `GET /relay/:id`.
    pub async fn relay_by_id(&self, id: &str) -> Result<Value> {
        let id = id.trim().to_ascii_lowercase();
        if id.len() != RELAY_ID_LENGTH || !id.bytes().all(|byte| byte.is_ascii_hexdigit()) {
            return Err(Error::BadRequest(format!("Invalid relay id: {id:?} (32 hex digits)")));
        }
        let record = self.db(move |store| store.relay_by_id(&id)).await?;
        record.map(|record| relay_view(&record)).ok_or(Error::RelayNotFound)
    }

    /// `GET /relay/tx/:hash`: the relay that sent this transaction (any of its hashes).
    pub async fn relay_by_hash(&self, hash: &str) -> Result<Value> {
        let hash: B256 = hash
            .trim()
            .parse()
            .map_err(|_| Error::BadRequest(format!("Invalid transaction hash: {hash:?}")))?;
        let hash = hash.to_string();
        let record = self.db(move |store| store.relay_by_hash(&hash)).await?;
        record.map(|record| relay_view(&record)).ok_or(Error::RelayNotFound)
    }

    /// `GET /relay/signer/:address/:nonce`: the latest relay of that signed request.
    pub async fn relay_by_request(&self, address: &str, nonce: &str) -> Result<Value> {
        let signer: Address =
            address.trim().parse().map_err(|_| Error::BadRequest(format!("Invalid address: {address:?}")))?;
        let nonce: U256 = nonce
            .trim()
            .parse()
            .map_err(|_| Error::BadRequest(format!("Invalid nonce: {nonce:?} (a decimal number)")))?;
        let (signer, nonce) = (signer.to_checksum(None), nonce.to_string());
        let record = self.db(move |store| store.relay_by_request(&signer, &nonce)).await?;
        record.map(|record| relay_view(&record)).ok_or(Error::RelayNotFound)
    }
}

/// A relay as the lookups show it: ids, status, hashes, outcome and times.
pub(crate) fn relay_view(record: &RelayRecord) -> Value {
    let at = |seconds: Option<u64>| seconds.map(iso8601);
    let transactions: Vec<Value> = record
        .txs
        .iter()
        .map(|tx| {
            json!({
                "txHash": tx.hash,
                "kind": tx.kind.as_str(),
                "maxFeePerGas": tx.max_fee_wei.to_string(),
                "maxPriorityFeePerGas": tx.priority_fee_wei.to_string(),
                "sentAt": iso8601(tx.sent_at),
            })
        })
        .collect();
    let previous: Vec<&str> = record
        .txs
        .iter()
        .map(|tx| tx.hash.as_str())
        .filter(|hash| Some(*hash) != record.tx_hash.as_deref())
        .collect();
    json!({
        "relayId": record.relay_id,
        "status": record.status.public(),
        "from": record.signer,
        "nonce": record.forwarder_nonce,
        "txHash": record.tx_hash,
        "previousTxHashes": previous,
        "transactions": transactions,
        "relayerNonce": record.relayer_nonce,
        "blockNumber": record.block_number,
        "gasUsed": record.gas_used.map(|gas| gas.to_string()),
        "costWei": record.cost_wei.filter(|_| record.settled_at.is_some()).map(|cost| cost.to_string()),
        "reservedWei": record.reserved_wei.to_string(),
        "revertReason": record.revert_reason,
        "error": record.error,
        "deadline": (record.deadline != 0).then_some(record.deadline),
        "createdAt": iso8601(record.created_at),
        "sentAt": at(record.sent_at),
        "updatedAt": at(record.updated_at),
        "settledAt": at(record.settled_at),
    })
}
