//! Agent records and revenue reports as the registry stores them, in plain Rust types, and their
//! JSON views (SPEC.md section 2 with INTERFACE.md section 2's encodings).

use alloy_primitives::{Address, B256, U256, hex};
use serde::{Deserialize, Serialize};

use crate::{AgentStatus, Cents, Error, Result, abi::AgentRegistry, time::timestamp};

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

/// One revenue report; `amount` is in cents, any `uint256` (see [`Cents`]).
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

/// EIP-55 checksummed text of an address.
pub fn checksummed(address: &Address) -> String {
    address.to_checksum(None)
}

/// `0x` and 64 lowercase hex digits.
pub fn hash_hex(hash: &B256) -> String {
    hex::encode_prefixed(hash)
}

/// The full agent record of `/agent/:id`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "browser", derive(tsify::Tsify))]
#[serde(rename_all = "camelCase")]
pub struct AgentView {
    pub agent_id: u64,
    pub creator: String,
    pub haftungsperson: String,
    pub agent_wallet: String,
    pub constitution_hash: String,
    pub capability_hash: String,
    pub operational_scope: String,
    pub parent_agent_id: u64,
    pub generation: u64,
    pub self_modifying: bool,
    pub registered_at: Option<String>,
    pub last_attestation: Option<String>,
    pub last_revenue_report: Option<String>,
    pub status: AgentStatus,
}

impl From<&Agent> for AgentView {
    fn from(agent: &Agent) -> Self {
        Self {
            agent_id: agent.agent_id,
            creator: checksummed(&agent.creator),
            haftungsperson: checksummed(&agent.haftungsperson),
            agent_wallet: checksummed(&agent.agent_wallet),
            constitution_hash: hash_hex(&agent.constitution_hash),
            capability_hash: hash_hex(&agent.capability_hash),
            operational_scope: agent.operational_scope.clone(),
            parent_agent_id: agent.parent_agent_id,
            generation: agent.generation,
            self_modifying: agent.self_modifying,
            registered_at: timestamp(agent.registered_at),
            last_attestation: timestamp(agent.last_attestation),
            last_revenue_report: timestamp(agent.last_revenue_report),
            status: agent.status,
        }
    }
}

/// An item of `/agents`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentListItem {
    pub agent_id: u64,
    pub creator: String,
    pub status: AgentStatus,
    pub registered_at: Option<String>,
}

impl From<&Agent> for AgentListItem {
    fn from(agent: &Agent) -> Self {
        Self {
            agent_id: agent.agent_id,
            creator: checksummed(&agent.creator),
            status: agent.status,
            registered_at: timestamp(agent.registered_at),
        }
    }
}

/// An item of `recentRegistrations` in `/stats/detailed`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RecentRegistration {
    pub agent_id: u64,
    pub creator: String,
    pub haftungsperson: String,
    pub agent_wallet: String,
    pub registered_at: Option<String>,
    pub status: AgentStatus,
}

impl From<&Agent> for RecentRegistration {
    fn from(agent: &Agent) -> Self {
        Self {
            agent_id: agent.agent_id,
            creator: checksummed(&agent.creator),
            haftungsperson: checksummed(&agent.haftungsperson),
            agent_wallet: checksummed(&agent.agent_wallet),
            registered_at: timestamp(agent.registered_at),
            status: agent.status,
        }
    }
}

/// The reduced record of a KYA result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KyaAgent {
    pub agent_id: u64,
    pub creator: String,
    pub haftungsperson: String,
    pub agent_wallet: String,
    pub operational_scope: String,
    pub status: AgentStatus,
    pub registered_at: Option<String>,
    pub last_attestation: Option<String>,
}

impl From<&Agent> for KyaAgent {
    fn from(agent: &Agent) -> Self {
        Self {
            agent_id: agent.agent_id,
            creator: checksummed(&agent.creator),
            haftungsperson: checksummed(&agent.haftungsperson),
            agent_wallet: checksummed(&agent.agent_wallet),
            operational_scope: agent.operational_scope.clone(),
            status: agent.status,
            registered_at: timestamp(agent.registered_at),
            last_attestation: timestamp(agent.last_attestation),
        }
    }
}

/// A revenue record in `/agent/:id/revenue`; `amount` in cents.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "browser", derive(tsify::Tsify))]
#[serde(rename_all = "camelCase")]
pub struct RevenueView {
    pub amount: Cents,
    pub currency: String,
    pub category: String,
    pub period_start: Option<String>,
    pub period_end: Option<String>,
    pub reported_at: Option<String>,
}

impl From<&Revenue> for RevenueView {
    fn from(report: &Revenue) -> Self {
        Self {
            amount: Cents(report.amount),
            currency: report.currency.clone(),
            category: report.category.clone(),
            period_start: timestamp(report.period_start),
            period_end: timestamp(report.period_end),
            reported_at: timestamp(report.reported_at),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloy_primitives::{address, b256};

    fn record() -> AgentRegistry::AgentRecord {
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
    fn view_encodes_as_the_interface_says() {
        let agent = Agent::try_from(record()).unwrap();
        let json = serde_json::to_value(AgentView::from(&agent)).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "agentId": 7,
                "creator": "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266",
                "haftungsperson": "0x70997970C51812dc3A010C7d01b50e0d17dc79C8",
                "agentWallet": "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC",
                "constitutionHash": "0xabcdef0000000000000000000000000000000000000000000000000000000001",
                "capabilityHash": "0x0000000000000000000000000000000000000000000000000000000000000000",
                "operationalScope": "scope",
                "parentAgentId": 3,
                "generation": 2,
                "selfModifying": true,
                "registeredAt": "2023-11-14T22:13:20.000Z",
                "lastAttestation": "2023-11-14T22:13:21.000Z",
                "lastRevenueReport": null,
                "status": "Suspended"
            })
        );
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
