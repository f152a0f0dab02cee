//! Calldata of registry calls, for an `eth_call` or as the `data` of a gasless request: the reads
//! (`getAgentCalldata` and the like), attestations, revenue reports, `invalidateConsentsCalldata`
//! and `invalidateConsentsThroughCalldata`, and registrations, with consents
//! (`registerAgentWithConsentCalldata`) or without.

use alloy_primitives::{U256, hex};
use alloy_sol_types::SolCall;
use serde::Deserialize;
use tsify::{Ts, Tsify};
use wasm_bindgen::prelude::*;

use super::{JsResult, UintInput, address_of, error, from_js, whole};
use crate::{
    api::query::parse_wallet,
    chain::abi::AgentRegistry,
    registry::consent::{self, ConsentSignatures, MAX_OPERATIONAL_SCOPE_BYTES},
};

fn calldata(call: &impl SolCall) -> String {
    hex::encode_prefixed(call.abi_encode())
}

/// Calldata of `getAgent(agentId)`, for an `eth_call`.
#[wasm_bindgen(js_name = getAgentCalldata)]
pub fn get_agent_calldata(agent_id: f64) -> JsResult<String> {
    Ok(calldata(&AgentRegistry::getAgentCall { agentId: U256::from(whole(agent_id, "agentId")?) }))
}

/// Calldata of `getAgentByWallet(wallet)`, for an `eth_call`.
#[wasm_bindgen(js_name = getAgentByWalletCalldata)]
pub fn get_agent_by_wallet_calldata(wallet: &str) -> JsResult<String> {
    Ok(calldata(&AgentRegistry::getAgentByWalletCall { wallet: parse_wallet(wallet).map_err(error)? }))
}

/// Calldata of `getChildren(agentId)`, for an `eth_call`.
#[wasm_bindgen(js_name = getChildrenCalldata)]
pub fn get_children_calldata(agent_id: f64) -> JsResult<String> {
    Ok(calldata(&AgentRegistry::getChildrenCall { agentId: U256::from(whole(agent_id, "agentId")?) }))
}

/// Calldata of `getRevenueHistory(agentId)`, for an `eth_call`.
#[wasm_bindgen(js_name = getRevenueHistoryCalldata)]
pub fn get_revenue_history_calldata(agent_id: f64) -> JsResult<String> {
    Ok(calldata(&AgentRegistry::getRevenueHistoryCall { agentId: U256::from(whole(agent_id, "agentId")?) }))
}

/// Calldata of `attestCompliance(agentId)`: the `data` of a gasless attestation request.
#[wasm_bindgen(js_name = attestComplianceCalldata)]
pub fn attest_compliance_calldata(agent_id: f64) -> JsResult<String> {
    Ok(calldata(&AgentRegistry::attestComplianceCall { agentId: U256::from(whole(agent_id, "agentId")?) }))
}

/// Calldata of `reportRevenue(...)`; `amount` in cents, periods in Unix seconds.
#[wasm_bindgen(js_name = reportRevenueCalldata)]
pub fn report_revenue_calldata(
    agent_id: f64,
    amount: Ts<UintInput>,
    currency: String,
    category: String,
    period_start: f64,
    period_end: f64,
) -> JsResult<String> {
    Ok(calldata(&AgentRegistry::reportRevenueCall {
        agentId: U256::from(whole(agent_id, "agentId")?),
        amount: from_js(&amount, "amount")?.into_uint("amount")?,
        currency,
        category,
        periodStart: whole(period_start, "periodStart")?,
        periodEnd: whole(period_end, "periodEnd")?,
    }))
}

/// Calldata of `invalidateConsents()`: the `data` of a gasless request by which its signer takes
/// back the consents it signed for its current consent nonce (the nonce moves by one; a consent
/// signed ahead for the next nonce stays valid: see `invalidateConsentsThroughCalldata`).
#[wasm_bindgen(js_name = invalidateConsentsCalldata)]
pub fn invalidate_consents_calldata() -> String {
    calldata(&AgentRegistry::invalidateConsentsCall {})
}

/// Calldata of `invalidateConsentsThrough(nonce)`: the `data` of a gasless request by which its
/// signer takes back every consent it signed for any nonce up to and including `nonce`, signed
/// ahead or not (its consent nonce becomes `nonce + 1`; a `nonce` below the current one reverts
/// `Consent nonce already past`). `nonce` is a number or a decimal or `0x` hex string.
#[wasm_bindgen(js_name = invalidateConsentsThroughCalldata)]
pub fn invalidate_consents_through_calldata(nonce: Ts<UintInput>) -> JsResult<String> {
    Ok(calldata(&AgentRegistry::invalidateConsentsThroughCall {
        nonce: from_js(&nonce, "nonce")?.into_uint("nonce")?,
    }))
}

/// What `registerAgent` takes, as a page holds it.
#[derive(Debug, Deserialize, Tsify)]
#[serde(rename_all = "camelCase")]
pub struct RegisterAgentInput {
    pub haftungsperson: String,
    pub agent_wallet: String,
    /// `0x` and 64 hex digits.
    pub constitution_hash: String,
    /// `0x` and 64 hex digits.
    pub capability_hash: String,
    pub operational_scope: String,
    /// 0 for a root agent.
    pub parent_agent_id: UintInput,
    pub self_modifying: bool,
}

impl RegisterAgentInput {
    fn into_call(self) -> JsResult<AgentRegistry::registerAgentCall> {
        let hash = |text: &str, what: &str| {
            text.trim().parse().map_err(|_| JsError::new(&format!("{what} must be 0x and 64 hex digits")))
        };
        Ok(AgentRegistry::registerAgentCall {
            haftungsperson: address_of(&self.haftungsperson, "haftungsperson")?,
            agentWallet: address_of(&self.agent_wallet, "agentWallet")?,
            constitutionHash: hash(&self.constitution_hash, "constitutionHash")?,
            capabilityHash: hash(&self.capability_hash, "capabilityHash")?,
            operationalScope: self.operational_scope,
            parentAgentId: self.parent_agent_id.into_uint("parentAgentId")?,
            selfModifying: self.self_modifying,
        })
    }
}

/// Calldata of `registerAgent(...)`: the `data` of a gasless registration request.
#[wasm_bindgen(js_name = registerAgentCalldata)]
pub fn register_agent_calldata(input: Ts<RegisterAgentInput>) -> JsResult<String> {
    Ok(calldata(&from_js(&input, "registration")?.into_call()?))
}

/// What `registerAgentWithConsent` takes: `registerAgent`'s fields, the consents' deadline and
/// the two signatures (each absent, `""` or `"0x"` when its party is the caller).
#[derive(Debug, Deserialize, Tsify)]
#[serde(rename_all = "camelCase")]
pub struct RegisterAgentWithConsentInput {
    #[serde(flatten)]
    pub registration: RegisterAgentInput,
    /// Unix seconds, the deadline both consents were signed for.
    pub deadline: UintInput,
    /// The agent wallet's signature of its `AgentWalletConsent`, `0x` hex.
    #[serde(default)]
    #[tsify(optional)]
    pub wallet_consent: Option<String>,
    /// A root's Haftungsperson's signature of their `LiabilityConsent`, `0x` hex.
    #[serde(default)]
    #[tsify(optional)]
    pub liability_consent: Option<String>,
}

fn signature_bytes(text: Option<&str>, what: &str) -> JsResult<alloy_primitives::Bytes> {
    let text = text.unwrap_or_default().trim();
    if text.is_empty() || text == "0x" {
        return Ok(alloy_primitives::Bytes::new());
    }
    hex::decode(text)
        .map(Into::into)
        .map_err(|_| JsError::new(&format!("{what} must be a 0x hex string (a 65-byte signature)")))
}

/// Calldata of `registerAgentWithConsent(...)`: the `data` of a gasless registration whose
/// sender is not its agent wallet (or, for a root, not its Haftungsperson). Refuses an
/// `operationalScope` longer than the registry stores (1,024 UTF-8 bytes).
#[wasm_bindgen(js_name = registerAgentWithConsentCalldata)]
pub fn register_agent_with_consent_calldata(input: Ts<RegisterAgentWithConsentInput>) -> JsResult<String> {
    let input = from_js(&input, "registration")?;
    let scope = input.registration.operational_scope.len();
    if scope > MAX_OPERATIONAL_SCOPE_BYTES {
        return Err(JsError::new(&format!(
            "operationalScope is {scope} bytes; the registry stores at most {MAX_OPERATIONAL_SCOPE_BYTES}"
        )));
    }
    let signatures = ConsentSignatures {
        deadline: input.deadline.into_uint("deadline")?,
        wallet_consent: signature_bytes(input.wallet_consent.as_deref(), "walletConsent")?,
        liability_consent: signature_bytes(input.liability_consent.as_deref(), "liabilityConsent")?,
    };
    Ok(calldata(&consent::register_with_consent_call(input.registration.into_call()?, signatures)))
}
