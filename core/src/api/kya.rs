//! The KYA result of `/kya/:wallet` (SPEC.md section 4) and the decision a consumer takes
//! from it.

use alloy_primitives::Address;
use serde::{Deserialize, Serialize};

use crate::{
    Agent, AgentStatus, Compliance, StandingClock,
    api::time::{iso8601, timestamp},
};

/// `/kya/:wallet`: is this wallet an agent's, and may it be served?
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KyaResult {
    /// Echoed checksummed (INTERFACE.md section 2).
    #[serde(serialize_with = "crate::api::checksum::serialize")]
    pub wallet: Address,
    pub is_registered: bool,
    pub is_compliant: bool,
    pub agent: Option<KyaAgent>,
    /// The time of the block the check read.
    pub checked_at: String,
}

impl KyaResult {
    /// The result for `wallet`, whose agent (if any) the registry gave at a block judged by
    /// `clock` (its time, and the registry's grace period there).
    pub fn of(wallet: Address, agent: Option<&Agent>, clock: StandingClock) -> Self {
        // Child count plays no part in compliance, so it is not asked for.
        let is_compliant = agent.is_some_and(|agent| Compliance::of(agent, 0, clock).is_compliant());
        Self {
            wallet,
            is_registered: agent.is_some(),
            is_compliant,
            agent: agent.map(KyaAgent::from),
            checked_at: iso8601(clock.time),
        }
    }

    /// What a provider does with this result.
    pub const fn decision(&self) -> KyaDecision {
        KyaDecision::of(self.is_registered, self.is_compliant)
    }
}

/// `POST /api/v1/kya/batch`'s answer: each wallet's result, in the order asked, all read at
/// `block`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KyaBatch {
    pub block: crate::BlockRef,
    pub results: Vec<KyaResult>,
}

/// The reduced record of a KYA result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KyaAgent {
    pub agent_id: u64,
    #[serde(serialize_with = "crate::api::checksum::serialize")]
    pub creator: Address,
    #[serde(serialize_with = "crate::api::checksum::serialize")]
    pub haftungsperson: Address,
    #[serde(serialize_with = "crate::api::checksum::serialize")]
    pub agent_wallet: Address,
    pub operational_scope: String,
    pub status: AgentStatus,
    pub registered_at: Option<String>,
    pub last_attestation: Option<String>,
}

impl From<&Agent> for KyaAgent {
    fn from(agent: &Agent) -> Self {
        Self {
            agent_id: agent.agent_id,
            creator: agent.creator,
            haftungsperson: agent.haftungsperson,
            agent_wallet: agent.agent_wallet,
            operational_scope: agent.operational_scope.clone(),
            status: agent.status,
            registered_at: timestamp(agent.registered_at),
            last_attestation: timestamp(agent.last_attestation),
        }
    }
}

/// What an infrastructure provider does with an agent's wallet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "browser", derive(tsify::Tsify))]
pub enum KyaDecision {
    /// Registered and compliant: serve the agent.
    #[serde(rename = "provision")]
    Provision,
    /// Registered but not compliant (lapsed attestation, or not Active): ask for a renewal.
    #[serde(rename = "renew attestation")]
    RenewAttestation,
    /// Not registered: refuse, or ask the agent to register.
    #[serde(rename = "deny or register")]
    DenyOrRegister,
}

impl KyaDecision {
    /// The decision for a KYA result's `isRegistered` and `isCompliant`.
    pub const fn of(is_registered: bool, is_compliant: bool) -> Self {
        match (is_registered, is_compliant) {
            (true, true) => Self::Provision,
            (true, false) => Self::RenewAttestation,
            // Compliance without registration cannot happen; refusing is the safe reading.
            (false, _) => Self::DenyOrRegister,
        }
    }

    /// The spec's wording of the decision.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Provision => "provision",
            Self::RenewAttestation => "renew attestation",
            Self::DenyOrRegister => "deny or register",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const fn week(time: u64) -> StandingClock {
        StandingClock::new(time, crate::DEFAULT_GRACE_PERIOD_SECS)
    }

    #[test]
    fn follows_the_specs_intended_use() {
        assert_eq!(KyaDecision::of(true, true), KyaDecision::Provision);
        assert_eq!(KyaDecision::of(true, false), KyaDecision::RenewAttestation);
        assert_eq!(KyaDecision::of(false, false), KyaDecision::DenyOrRegister);
        assert_eq!(KyaDecision::of(false, true), KyaDecision::DenyOrRegister);
        assert_eq!(serde_json::to_value(KyaDecision::RenewAttestation).unwrap(), "renew attestation");
        assert_eq!(KyaDecision::DenyOrRegister.as_str(), "deny or register");
    }

    #[test]
    fn result_encodes_as_the_interface_says() {
        let mut agent = Agent::try_from(crate::registry::record::tests::record()).unwrap();
        agent.status = AgentStatus::Active;
        let wallet = agent.agent_wallet;
        let result = KyaResult::of(wallet, Some(&agent), week(agent.last_attestation + 60));
        assert_eq!(result.decision(), KyaDecision::Provision);
        let text = concat!(
            r#"{"wallet":"0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC","isRegistered":true,"isCompliant":true,"#,
            r#""agent":{"agentId":7,"creator":"0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266","#,
            r#""haftungsperson":"0x70997970C51812dc3A010C7d01b50e0d17dc79C8","#,
            r#""agentWallet":"0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC","operationalScope":"scope","#,
            r#""status":"Active","registeredAt":"2023-11-14T22:13:20.000Z","#,
            r#""lastAttestation":"2023-11-14T22:13:21.000Z"},"checkedAt":"2023-11-14T22:14:21.000Z"}"#,
        );
        assert_eq!(serde_json::to_string(&result).unwrap(), text);
        assert_eq!(serde_json::from_str::<KyaResult>(text).unwrap(), result);

        let unknown = KyaResult::of(wallet, None, week(1_700_000_000));
        assert_eq!((unknown.is_registered, unknown.is_compliant), (false, false));
        assert_eq!(unknown.decision(), KyaDecision::DenyOrRegister);
        assert!(serde_json::to_string(&unknown).unwrap().contains(r#""agent":null,"#));
    }
}
