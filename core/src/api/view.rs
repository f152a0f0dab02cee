//! The API's JSON views of records (SPEC.md section 2 with INTERFACE.md section 2's encodings):
//! the edge API serialises them, the browser package gets their TypeScript types, and clients
//! read them back.
//!
//! Addresses and hashes are typed; they serialise as the API writes them (addresses EIP-55
//! checksummed, hashes `0x` and 64 lowercase hex digits) and deserialise from any case.
//! TypeScript sees them as `string`. Timestamps are text already: ISO 8601, `null` for 0.

use alloy_primitives::{Address, B256};
use serde::{Deserialize, Serialize};

use crate::{Agent, AgentStatus, Cents, Compliance, Revenue, api::time::timestamp};

/// The full agent record of `/agent/:id`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "browser", derive(tsify::Tsify))]
#[serde(rename_all = "camelCase")]
pub struct AgentView {
    pub agent_id: u64,
    #[serde(serialize_with = "crate::api::checksum::serialize")]
    #[cfg_attr(feature = "browser", tsify(type = "string"))]
    pub creator: Address,
    #[serde(serialize_with = "crate::api::checksum::serialize")]
    #[cfg_attr(feature = "browser", tsify(type = "string"))]
    pub haftungsperson: Address,
    #[serde(serialize_with = "crate::api::checksum::serialize")]
    #[cfg_attr(feature = "browser", tsify(type = "string"))]
    pub agent_wallet: Address,
    /// `0x` and 64 lowercase hex digits (alloy's own encoding of a `B256`), as is
    /// `capabilityHash`.
    #[cfg_attr(feature = "browser", tsify(type = "string"))]
    pub constitution_hash: B256,
    #[cfg_attr(feature = "browser", tsify(type = "string"))]
    pub capability_hash: B256,
    pub operational_scope: String,
    /// 0 for a root agent.
    pub parent_agent_id: u64,
    pub generation: u64,
    pub self_modifying: bool,
    pub registered_at: Option<String>,
    pub last_attestation: Option<String>,
    /// `null` when the agent never reported revenue.
    pub last_revenue_report: Option<String>,
    pub status: AgentStatus,
}

impl From<&Agent> for AgentView {
    fn from(agent: &Agent) -> Self {
        Self {
            agent_id: agent.agent_id,
            creator: agent.creator,
            haftungsperson: agent.haftungsperson,
            agent_wallet: agent.agent_wallet,
            constitution_hash: agent.constitution_hash,
            capability_hash: agent.capability_hash,
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

/// `/agent/:id`: the record, its children's ids and its compliance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentDetails {
    pub agent: AgentView,
    pub children: Vec<u64>,
    pub compliance: Compliance,
}

impl AgentDetails {
    /// The answer for `agent` with its direct `children`, its compliance judged by `clock` (the
    /// block's time and the registry's grace period there).
    pub fn of(agent: &Agent, children: Vec<u64>, clock: crate::StandingClock) -> Self {
        let compliance = Compliance::of(agent, u64::try_from(children.len()).unwrap_or(u64::MAX), clock);
        Self { agent: AgentView::from(agent), children, compliance }
    }

    /// Compliant: Active with a current attestation (SPEC.md section 2).
    pub const fn is_compliant(&self) -> bool {
        self.compliance.is_compliant()
    }
}

/// An item of `/agents`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentListItem {
    pub agent_id: u64,
    #[serde(serialize_with = "crate::api::checksum::serialize")]
    pub creator: Address,
    pub status: AgentStatus,
    pub registered_at: Option<String>,
}

impl From<&Agent> for AgentListItem {
    fn from(agent: &Agent) -> Self {
        Self {
            agent_id: agent.agent_id,
            creator: agent.creator,
            status: agent.status,
            registered_at: timestamp(agent.registered_at),
        }
    }
}

/// An item of `recentRegistrations` in `/stats/detailed`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RecentRegistration {
    pub agent_id: u64,
    #[serde(serialize_with = "crate::api::checksum::serialize")]
    pub creator: Address,
    #[serde(serialize_with = "crate::api::checksum::serialize")]
    pub haftungsperson: Address,
    #[serde(serialize_with = "crate::api::checksum::serialize")]
    pub agent_wallet: Address,
    pub registered_at: Option<String>,
    pub status: AgentStatus,
}

impl From<&Agent> for RecentRegistration {
    fn from(agent: &Agent) -> Self {
        Self {
            agent_id: agent.agent_id,
            creator: agent.creator,
            haftungsperson: agent.haftungsperson,
            agent_wallet: agent.agent_wallet,
            registered_at: timestamp(agent.registered_at),
            status: agent.status,
        }
    }
}

/// A revenue record in `/agent/:id/revenue`; `amount` in cents.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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
    use alloy_primitives::U256;
    use serde::de::DeserializeOwned;

    fn agent() -> Agent {
        Agent::try_from(crate::registry::record::tests::record()).unwrap()
    }

    /// The exact text, fields in SPEC.md's order; and it reads back to the same value.
    fn exact<T: Serialize + DeserializeOwned + PartialEq + core::fmt::Debug>(value: &T, text: &str) {
        assert_eq!(serde_json::to_string(value).unwrap(), text);
        assert_eq!(&serde_json::from_str::<T>(text).unwrap(), value);
    }

    #[test]
    fn record_encodes_as_the_interface_says() {
        exact(
            &AgentView::from(&agent()),
            concat!(
                r#"{"agentId":7,"creator":"0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266","#,
                r#""haftungsperson":"0x70997970C51812dc3A010C7d01b50e0d17dc79C8","#,
                r#""agentWallet":"0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC","#,
                r#""constitutionHash":"0xabcdef0000000000000000000000000000000000000000000000000000000001","#,
                r#""capabilityHash":"0x0000000000000000000000000000000000000000000000000000000000000000","#,
                r#""operationalScope":"scope","parentAgentId":3,"generation":2,"selfModifying":true,"#,
                r#""registeredAt":"2023-11-14T22:13:20.000Z","lastAttestation":"2023-11-14T22:13:21.000Z","#,
                r#""lastRevenueReport":null,"status":"Suspended"}"#,
            ),
        );
    }

    #[test]
    fn details_carry_the_compliance_at_the_blocks_time() {
        let details = AgentDetails::of(
            &agent(),
            vec![8, 9],
            crate::StandingClock::new(1_700_000_011, crate::DEFAULT_GRACE_PERIOD_SECS),
        );
        assert_eq!((details.compliance.child_count, details.compliance.seconds_since_attestation), (2, 10));
        assert!(!details.is_compliant(), "suspended");
        let text = serde_json::to_string(&details).unwrap();
        assert!(
            text.starts_with(r#"{"agent":{"agentId":7,"#)
                && text.contains(r#"},"children":[8,9],"compliance":{"#)
        );
        assert_eq!(serde_json::from_str::<AgentDetails>(&text).unwrap(), details);
    }

    #[test]
    fn list_items_encode_as_the_interface_says() {
        exact(
            &AgentListItem::from(&agent()),
            r#"{"agentId":7,"creator":"0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266","status":"Suspended","registeredAt":"2023-11-14T22:13:20.000Z"}"#,
        );
        exact(
            &RecentRegistration::from(&agent()),
            concat!(
                r#"{"agentId":7,"creator":"0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266","#,
                r#""haftungsperson":"0x70997970C51812dc3A010C7d01b50e0d17dc79C8","#,
                r#""agentWallet":"0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC","#,
                r#""registeredAt":"2023-11-14T22:13:20.000Z","status":"Suspended"}"#,
            ),
        );
    }

    #[test]
    fn revenue_encodes_as_the_interface_says() {
        let report = Revenue {
            agent_id: 7,
            amount: U256::from(1_250),
            currency: "EUR".into(),
            category: "inference".into(),
            period_start: 0,
            period_end: 1_700_000_000,
            reported_at: 1_700_000_001,
        };
        exact(
            &RevenueView::from(&report),
            concat!(
                r#"{"amount":1250,"currency":"EUR","category":"inference","periodStart":null,"#,
                r#""periodEnd":"2023-11-14T22:13:20.000Z","reportedAt":"2023-11-14T22:13:21.000Z"}"#,
            ),
        );
    }
}
