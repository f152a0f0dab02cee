//! The registry's events an agent's writes emit, decoded from a receipt's log by kya-core's
//! `sol!` bindings: what a write came to (the new agent's id, the attestation's time, the
//! consent nonce a signer moved to). A `dict` named by its `event`, fields in snake case.

use alloy_primitives::{B256, LogData, U256};
use alloy_sol_types::SolEvent;
use kya_core::{api::checksum::checksummed, chain::abi::AgentRegistry};
use pyo3::{prelude::*, types::PyDict};

use crate::{
    error::invalid,
    eth_values::{bytes_of, hash_of, int},
};

/// A registry event from one log's `topics` and `data` (`bytes` or `0x` hex, as an
/// `eth_getTransactionReceipt` answer has them), or `None` for any other log.
#[pyfunction]
pub(crate) fn registry_event<'py>(
    py: Python<'py>,
    topics: Vec<Bound<'py, PyAny>>,
    data: &Bound<'py, PyAny>,
) -> PyResult<Option<Bound<'py, PyDict>>> {
    let topics: Vec<B256> = topics.iter().map(|topic| hash_of(topic, "a topic")).collect::<PyResult<_>>()?;
    let Some(log) = LogData::new(topics, bytes_of(data, "data")?.into()) else {
        return Err(invalid("a log has at most 4 topics"));
    };
    let Some(&topic) = log.topics().first() else { return Ok(None) };
    let dict = PyDict::new(py);
    let number = |value: U256| int(py, value);
    macro_rules! decoded {
        ($event:ident) => {
            match AgentRegistry::$event::decode_log_data(&log) {
                Ok(event) => event,
                Err(_) => return Ok(None),
            }
        };
    }
    match topic {
        AgentRegistry::AgentRegistered::SIGNATURE_HASH => {
            let event = decoded!(AgentRegistered);
            dict.set_item("event", "AgentRegistered")?;
            dict.set_item("agent_id", number(event.agentId)?)?;
            dict.set_item("creator", checksummed(&event.creator))?;
            dict.set_item("agent_wallet", checksummed(&event.agentWallet))?;
            dict.set_item("haftungsperson", checksummed(&event.haftungsperson))?;
            dict.set_item("parent_agent_id", number(event.parentAgentId)?)?;
            dict.set_item("generation", number(event.generation)?)?;
        }
        AgentRegistry::ComplianceAttested::SIGNATURE_HASH => {
            let event = decoded!(ComplianceAttested);
            dict.set_item("event", "ComplianceAttested")?;
            dict.set_item("agent_id", number(event.agentId)?)?;
            dict.set_item("attester", checksummed(&event.attester))?;
            dict.set_item("attested_at", event.attestedAt)?;
        }
        AgentRegistry::RevenueReported::SIGNATURE_HASH => {
            let event = decoded!(RevenueReported);
            dict.set_item("event", "RevenueReported")?;
            dict.set_item("agent_id", number(event.agentId)?)?;
            dict.set_item("amount_cents", number(event.amount)?)?;
            dict.set_item("currency", event.currency)?;
            dict.set_item("category", event.category)?;
            dict.set_item("period_start", event.periodStart)?;
            dict.set_item("period_end", event.periodEnd)?;
        }
        AgentRegistry::AgentTerminated::SIGNATURE_HASH => {
            let event = decoded!(AgentTerminated);
            dict.set_item("event", "AgentTerminated")?;
            dict.set_item("agent_id", number(event.agentId)?)?;
            dict.set_item("caller", checksummed(&event.caller))?;
        }
        AgentRegistry::ConsentUsed::SIGNATURE_HASH => {
            let event = decoded!(ConsentUsed);
            dict.set_item("event", "ConsentUsed")?;
            dict.set_item("signer", checksummed(&event.signer))?;
            dict.set_item("nonce", number(event.nonce)?)?;
        }
        AgentRegistry::ConsentsInvalidated::SIGNATURE_HASH => {
            let event = decoded!(ConsentsInvalidated);
            dict.set_item("event", "ConsentsInvalidated")?;
            dict.set_item("signer", checksummed(&event.signer))?;
            dict.set_item("next_nonce", number(event.nextNonce)?)?;
        }
        _ => return Ok(None),
    }
    Ok(Some(dict))
}
