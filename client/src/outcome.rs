//! What a write came to: how it settled (relay status, hash, block, gas, cost) and the
//! registry's own result read from the receipt's events (the new agent id of a registration).

use alloy::{
    primitives::{Address, B256, U256},
    rpc::types::{Log, TransactionReceipt},
    sol_types::SolEvent,
};
use kya_core::chain::abi::{AgentRegistry, Forwarder};
use serde::Serialize;

/// The settled state of one write.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Outcome {
    /// `relayer` or `direct`.
    pub via: &'static str,
    /// The relayer's id of the relay (relayers with the relay lifecycle).
    pub relay_id: Option<String>,
    /// The relay status (`mined`, `call_failed`, `dropped`, ...), or for a transaction followed
    /// by its receipt: `mined`, `call_failed` (the forwarder ran, the registry call failed) or
    /// `reverted`.
    pub status: String,
    /// The registry call ran and succeeded.
    pub succeeded: bool,
    pub tx_hash: Option<B256>,
    pub block_number: Option<u64>,
    pub gas_used: Option<u64>,
    /// What the transaction cost its payer, in wei (decimal).
    pub cost_wei: Option<String>,
    pub revert_reason: Option<String>,
    /// The registry's answer, read from the receipt's events (when the receipt was available).
    pub result: Option<RegistryResult>,
}

/// The registry's result of a write, from its event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "event", rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum RegistryResult {
    /// `AgentRegistered`: the new agent.
    Registered {
        agent_id: u64,
        #[serde(serialize_with = "kya_core::api::checksum::serialize")]
        agent_wallet: Address,
        parent_agent_id: u64,
        generation: u64,
    },
    /// `ComplianceAttested`.
    Attested { agent_id: u64, attested_at: u64 },
    /// `RevenueReported`; `amount` in cents, as a decimal string (a `uint256`).
    RevenueReported {
        agent_id: u64,
        #[serde(serialize_with = "decimal")]
        amount: U256,
        currency: String,
        category: String,
    },
    /// `AgentTerminated`.
    Terminated { agent_id: u64 },
    /// `ConsentsInvalidated`: every consent `signer` signed below `next_nonce` is void.
    ConsentsInvalidated {
        #[serde(serialize_with = "kya_core::api::checksum::serialize")]
        signer: Address,
        next_nonce: u64,
    },
}

fn decimal<S: serde::Serializer>(value: &U256, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&value.to_string())
}

fn id(value: U256) -> u64 {
    u64::try_from(value).unwrap_or(u64::MAX)
}

/// The first registry event of `receipt` emitted by `registry`.
pub(crate) fn registry_result(receipt: &TransactionReceipt, registry: Address) -> Option<RegistryResult> {
    receipt.inner.logs().iter().filter(|log| log.address() == registry).find_map(decode_registry_event)
}

fn decode_registry_event(log: &Log) -> Option<RegistryResult> {
    let data = log.data();
    let topic = *data.topics().first()?;
    Some(match topic {
        AgentRegistry::AgentRegistered::SIGNATURE_HASH => {
            let event = AgentRegistry::AgentRegistered::decode_log_data(data).ok()?;
            RegistryResult::Registered {
                agent_id: id(event.agentId),
                agent_wallet: event.agentWallet,
                parent_agent_id: id(event.parentAgentId),
                generation: id(event.generation),
            }
        }
        AgentRegistry::ComplianceAttested::SIGNATURE_HASH => {
            let event = AgentRegistry::ComplianceAttested::decode_log_data(data).ok()?;
            RegistryResult::Attested { agent_id: id(event.agentId), attested_at: event.attestedAt }
        }
        AgentRegistry::RevenueReported::SIGNATURE_HASH => {
            let event = AgentRegistry::RevenueReported::decode_log_data(data).ok()?;
            RegistryResult::RevenueReported {
                agent_id: id(event.agentId),
                amount: event.amount,
                currency: event.currency,
                category: event.category,
            }
        }
        AgentRegistry::AgentTerminated::SIGNATURE_HASH => {
            let event = AgentRegistry::AgentTerminated::decode_log_data(data).ok()?;
            RegistryResult::Terminated { agent_id: id(event.agentId) }
        }
        AgentRegistry::ConsentsInvalidated::SIGNATURE_HASH => {
            let event = AgentRegistry::ConsentsInvalidated::decode_log_data(data).ok()?;
            RegistryResult::ConsentsInvalidated { signer: event.signer, next_nonce: id(event.nextNonce) }
        }
        _ => return None,
    })
}

/// The `success` of the forwarder's `Executed` event in `receipt`: whether the registry call
/// inside `execute` succeeded (`execute` itself does not revert when it fails).
pub(crate) fn forwarded_call_succeeded(receipt: &TransactionReceipt, forwarder: Address) -> Option<bool> {
    receipt.inner.logs().iter().filter(|log| log.address() == forwarder).find_map(|log| {
        (log.topic0() == Some(&Forwarder::Executed::SIGNATURE_HASH))
            .then(|| Forwarder::Executed::decode_log_data(log.data()).ok().map(|event| event.success))
            .flatten()
    })
}

/// Gas used and cost of a receipt.
pub(crate) fn receipt_cost(receipt: &TransactionReceipt) -> (u64, String) {
    let cost = U256::from(receipt.gas_used) * U256::from(receipt.effective_gas_price);
    (receipt.gas_used, cost.to_string())
}
