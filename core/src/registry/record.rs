//! Agent records and revenue reports as the registry stores them, in plain Rust types (their
//! JSON views for the API are in [`crate::api::view`]).

use alloy_primitives::{Address, B256, U256};
use serde::{Deserialize, Serialize};

use crate::{AgentStatus, Error, Result, chain::abi::AgentRegistry};

/// One agent as the registry holds it; ids are `u64` (the registry counts from 1, one by one).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Agent {
    pub agent_id: u64,
    pub creator: Address,
    pub haftungsperson: Address,
    pub agent_wallet: Address,
    pub constitution_hash: B256,
    pub capability_hash: B256,
    pub operational_scope: String,
    /// 0 for a root agent.
    pub parent_agent_id: u64,
    pub generation: u64,
    pub self_modifying: bool,
    pub registered_at: u64,
    pub last_attestation: u64,
    /// 0 when the agent never reported revenue.
    pub last_revenue_report: u64,
    pub status: AgentStatus,
}

/// One revenue report; `amount` is in cents, any `uint256` (see [`crate::Cents`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Revenue {
    pub agent_id: u64,
    pub amount: U256,
    pub currency: String,
    pub category: String,
    pub period_start: u64,
    pub period_end: u64,
    pub reported_at: u64,
}

/// A `uint256` the API shows as a number: ids and generations fit easily (the registry counts them
/// one by one), and one that does not is reported rather than silently cut.
pub fn small<T: TryFrom<U256>>(value: U256, what: &str) -> Result<T> {
    T::try_from(value).map_err(|_| Error::Decode(format!("{what} {value} is out of range")))
}

impl TryFrom<AgentRegistry::AgentRecord> for Agent {
    type Error = Error;

    fn try_from(record: AgentRegistry::AgentRecord) -> Result<Self> {
        Ok(Self {
            agent_id: small(record.agentId, "agent id")?,
            creator: record.creator,
            haftungsperson: record.haftungsperson,
            agent_wallet: record.agentWallet,
            constitution_hash: record.constitutionHash,
            capability_hash: record.capabilityHash,
            operational_scope: record.operationalScope,
            parent_agent_id: small(record.parentAgentId, "parent agent id")?,
            generation: small(record.generation, "generation")?,
            self_modifying: record.selfModifying,
            registered_at: record.registeredAt,
            last_attestation: record.lastAttestation,
            last_revenue_report: record.lastRevenueReport,
            status: AgentStatus::try_from(record.status)?,
        })
    }
}

impl TryFrom<AgentRegistry::RevenueReport> for Revenue {
    type Error = Error;

    fn try_from(report: AgentRegistry::RevenueReport) -> Result<Self> {
        Ok(Self {
            agent_id: small(report.agentId, "agent id")?,
            amount: report.amount,
            currency: report.currency,
            category: report.category,
            period_start: report.periodStart,
            period_end: report.periodEnd,
            reported_at: report.reportedAt,
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use alloy_primitives::{address, b256};

    /// A record with every field set, for the views' tests too.
    pub(crate) fn record() -> AgentRegistry::AgentRecord {
        AgentRegistry::AgentRecord {
            agentId: U256::from(7),
            creator: address!("0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266"),
            haftungsperson: address!("0x70997970c51812dc3a010c7d01b50e0d17dc79c8"),
            agentWallet: address!("0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc"),
            constitutionHash: b256!("0xABCDEF0000000000000000000000000000000000000000000000000000000001"),
            capabilityHash: B256::ZERO,
            operationalScope: "scope".into(),
            parentAgentId: U256::from(3),
            generation: U256::from(2),
            selfModifying: true,
            registeredAt: 1_700_000_000,
            lastAttestation: 1_700_000_001,
            lastRevenueReport: 0,
            status: 1,
        }
    }

    #[test]
    fn out_of_range_values_are_decode_errors() {
        let mut bad = record();
        bad.status = 9;
        assert_eq!(Agent::try_from(bad), Err(Error::UnknownStatus(9)));
        let mut huge = record();
        huge.agentId = U256::MAX;
        assert!(matches!(Agent::try_from(huge), Err(Error::Decode(_))));
    }

    #[test]
    fn snapshot_form_round_trips() {
        let agent = Agent::try_from(record()).unwrap();
        let text = serde_json::to_string(&agent).unwrap();
        assert_eq!(serde_json::from_str::<Agent>(&text).unwrap(), agent);
    }
}
