//! Fixtures the unit tests of several modules share.

use std::collections::BTreeSet;

use alloy_primitives::{Address, B256};

use crate::{Agent, AgentStatus, index::logs::Touch};

/// A well-formed agent `id`: its creator and wallet derived from the id, a parent a third of
/// it, every third agent and later a child, hashes and scope fixed. Tests override the fields
/// they vary.
pub(crate) fn sample_agent(id: u64, status: AgentStatus, attested: u64, registered: u64) -> Agent {
    Agent {
        agent_id: id,
        creator: Address::with_last_byte(id as u8),
        haftungsperson: Address::with_last_byte(7),
        agent_wallet: Address::with_last_byte(id as u8 ^ 0xff),
        constitution_hash: B256::repeat_byte(1),
        capability_hash: B256::repeat_byte(2),
        operational_scope: format!("scope {id}"),
        parent_agent_id: id / 3,
        generation: u64::from(id >= 3),
        self_modifying: id.is_multiple_of(2),
        registered_at: registered,
        last_attestation: attested,
        last_revenue_report: 0,
        status,
    }
}

/// A `registerAgent` call with fixed parties and hashes and the operational scope `scope`.
pub(crate) fn registration_call(scope: &str) -> crate::chain::abi::AgentRegistry::registerAgentCall {
    crate::chain::abi::AgentRegistry::registerAgentCall {
        haftungsperson: Address::repeat_byte(1),
        agentWallet: Address::repeat_byte(2),
        constitutionHash: B256::repeat_byte(3),
        capabilityHash: B256::repeat_byte(4),
        operationalScope: scope.into(),
        parentAgentId: alloy_primitives::U256::ZERO,
        selfModifying: false,
    }
}

/// Log touches from (block, agent id) pairs.
pub(crate) fn touches(pairs: &[(u64, u64)]) -> Vec<Touch> {
    pairs.iter().map(|&(block, agent_id)| Touch { block, agent_id }).collect()
}

/// A set of agent ids.
pub(crate) fn set(ids: &[u64]) -> BTreeSet<u64> {
    ids.iter().copied().collect()
}
