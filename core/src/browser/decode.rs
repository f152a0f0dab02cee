//! Decoding of registry call results (the return data of an `eth_call`) into the API's records:
//! `decodeAgentRecord`, `decodeChildren`, `decodeRevenueHistory`, `decodeComplianceStatus`.

use alloy_primitives::hex;
use alloy_sol_types::SolCall;
use serde::Serialize;
use tsify::{Ts, Tsify};
use wasm_bindgen::prelude::*;

use super::{JsResult, error, to_js};
use crate::{
    Agent, AgentStatus, Compliance, Revenue,
    api::view::{AgentView, RevenueView},
    chain::abi::AgentRegistry,
};

/// The ids of an agent's direct children.
#[derive(Debug, Serialize, Tsify)]
#[serde(transparent)]
pub struct ChildIds(pub Vec<u64>);

fn return_data(text: &str) -> JsResult<Vec<u8>> {
    hex::decode(text.trim()).map_err(|_| JsError::new("return data must be a 0x hex string"))
}

/// The API's agent record from the return data of `getAgent` or `getAgentByWallet`.
#[wasm_bindgen(js_name = decodeAgentRecord)]
pub fn decode_agent_record(return_data_hex: &str) -> JsResult<Ts<AgentView>> {
    let record =
        AgentRegistry::getAgentCall::abi_decode_returns(&return_data(return_data_hex)?).map_err(error)?;
    to_js(&AgentView::from(&Agent::try_from(record).map_err(error)?))
}

/// The child ids from the return data of `getChildren`.
#[wasm_bindgen(js_name = decodeChildren)]
pub fn decode_children(return_data_hex: &str) -> JsResult<Ts<ChildIds>> {
    let children =
        AgentRegistry::getChildrenCall::abi_decode_returns(&return_data(return_data_hex)?).map_err(error)?;
    let ids = children
        .into_iter()
        .map(|id| u64::try_from(id).map_err(|_| JsError::new("child id out of range")))
        .collect::<JsResult<Vec<u64>>>()?;
    to_js(&ChildIds(ids))
}

/// The API's revenue records from the return data of `getRevenueHistory`.
#[wasm_bindgen(js_name = decodeRevenueHistory)]
pub fn decode_revenue_history(return_data_hex: &str) -> JsResult<Vec<Ts<RevenueView>>> {
    let reports = AgentRegistry::getRevenueHistoryCall::abi_decode_returns(&return_data(return_data_hex)?)
        .map_err(error)?;
    reports
        .into_iter()
        .map(|report| to_js(&RevenueView::from(&Revenue::try_from(report).map_err(error)?)))
        .collect()
}

/// The contract's own compliance view from the return data of `complianceStatus`.
#[wasm_bindgen(js_name = decodeComplianceStatus)]
pub fn decode_compliance_status(return_data_hex: &str) -> JsResult<Ts<Compliance>> {
    let status = AgentRegistry::complianceStatusCall::abi_decode_returns(&return_data(return_data_hex)?)
        .map_err(error)?;
    to_js(&Compliance {
        is_active: status.isActive,
        attestation_current: status.attestationCurrent,
        seconds_since_attestation: status.secondsSinceAttestation,
        child_count: u64::try_from(status.childCount)
            .map_err(|_| JsError::new("child count out of range"))?,
        status: AgentStatus::try_from(status.status).map_err(error)?,
    })
}
