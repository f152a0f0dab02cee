//! JavaScript bindings of `kya-core` for web apps and Node (feature `browser`, built with
//! `scripts/build-core-wasm.sh` into the npm-style package `core/pkg/`). They wrap the same
//! functions the edge API runs, so a page and the API cannot disagree: compliance, the KYA
//! decision, decoding of registry call results, address checks, and the EIP-712 typed data and
//! digest of a gasless `ForwardRequest`.

use alloy_primitives::{Address, U256, hex};
use alloy_sol_types::SolCall;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use wasm_bindgen::prelude::*;

use crate::{
    Agent, AgentStatus, Compliance, KyaDecision, Revenue,
    abi::AgentRegistry,
    forward_request::{self, ForwardRequest},
    query::parse_wallet,
    record::{AgentView, RevenueView, checksummed},
    time::parse_iso8601,
};

#[wasm_bindgen(typescript_custom_section)]
const TYPES: &'static str = r#"
export type AgentStatus = "Active" | "Suspended" | "Revoked" | "Terminated";
/** Any record with a status and an attestation time: the API's `agent`, or a KYA result's `agent`. */
export interface AttestedRecord { status: AgentStatus; lastAttestation: string | null; }
export interface Compliance {
  isActive: boolean; attestationCurrent: boolean; secondsSinceAttestation: number;
  childCount: number; status: AgentStatus; isCompliant: boolean;
}
export type ComplianceBadge = "compliant" | "lapsed" | "suspended" | "revoked" | "terminated";
export type KyaDecision = "provision" | "renew attestation" | "deny or register";
export interface AgentRecord {
  agentId: number; creator: string; haftungsperson: string; agentWallet: string;
  constitutionHash: string; capabilityHash: string; operationalScope: string;
  parentAgentId: number; generation: number; selfModifying: boolean;
  registeredAt: string | null; lastAttestation: string | null; lastRevenueReport: string | null;
  status: AgentStatus;
}
export interface RevenueRecord {
  amount: number; currency: string; category: string;
  periodStart: string | null; periodEnd: string | null; reportedAt: string | null;
}
export interface ComplianceStatus {
  isActive: boolean; attestationCurrent: boolean; secondsSinceAttestation: number;
  childCount: number; status: AgentStatus;
}
/** Numbers may be JS numbers, decimal strings or 0x-hex strings; `deadline` 0 or absent: no expiry. */
export interface ForwardRequestInput {
  from: string; to: string; value: number | string; gas: number | string;
  nonce: number | string; deadline?: number | string; data: string;
}
export interface TypedDataField { name: string; type: string; }
export interface ForwardRequestTypedData {
  types: { EIP712Domain: TypedDataField[]; ForwardRequest: TypedDataField[] };
  primaryType: "ForwardRequest";
  domain: { name: string; version: string; chainId: number; verifyingContract: string };
  message: { from: string; to: string; value: string; gas: string; nonce: string; deadline: string; data: string };
}
export interface RegisterAgentInput {
  haftungsperson: string; agentWallet: string; constitutionHash: string; capabilityHash: string;
  operationalScope: string; parentAgentId: number | string; selfModifying: boolean;
}
"#;

type JsResult<T = JsValue> = Result<T, JsError>;

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_namespace = JSON, js_name = parse, catch)]
    fn json_parse(text: &str) -> Result<JsValue, JsValue>;
}

/// Results go through the API's own JSON text and `JSON.parse`, so a page sees every value, big
/// revenue amounts included, exactly as it would from the API's response.
fn to_js<T: Serialize>(value: &T) -> JsResult {
    let text = serde_json::to_string(value).map_err(error)?;
    json_parse(&text).map_err(|_| JsError::new("JSON.parse refused the result"))
}

fn from_js<T: for<'de> Deserialize<'de>>(value: JsValue, what: &str) -> JsResult<T> {
    serde_wasm_bindgen::from_value(value).map_err(|error| JsError::new(&format!("invalid {what}: {error}")))
}

fn error(error: impl core::fmt::Display) -> JsError {
    JsError::new(&error.to_string())
}

/// A JS number that must be a whole number of seconds, an id or a count.
fn whole(value: f64, what: &str) -> JsResult<u64> {
    // 2^53: above it a JS number no longer holds every integer.
    if value.is_finite() && value >= 0.0 && value.fract() == 0.0 && value <= 9_007_199_254_740_992.0 {
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        Ok(value as u64)
    } else {
        Err(JsError::new(&format!("{what} must be a non-negative whole number, got {value}")))
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct AttestedRecord {
    status: AgentStatus,
    last_attestation: Option<String>,
}

impl AttestedRecord {
    fn compliance(self, now: u64, child_count: u64) -> JsResult<Compliance> {
        let last_attestation = match self.last_attestation.as_deref() {
            None => 0,
            Some(text) => parse_iso8601(text).ok_or_else(|| {
                JsError::new(&format!("lastAttestation is not an ISO 8601 UTC time: {text}"))
            })?,
        };
        Ok(Compliance::at(self.status, last_attestation, child_count, now))
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ComplianceWithVerdict {
    #[serde(flatten)]
    compliance: Compliance,
    is_compliant: bool,
}

/// The compliance object of SPEC.md section 2 for `record` at `nowSeconds` (use the chain's time,
/// e.g. the API's `X-Block-Timestamp`), plus `isCompliant`.
#[wasm_bindgen(js_name = evaluateCompliance, unchecked_return_type = "Compliance")]
pub fn evaluate_compliance(
    #[wasm_bindgen(unchecked_param_type = "AttestedRecord")] record: JsValue,
    now_seconds: f64,
    child_count: Option<f64>,
) -> JsResult {
    let record: AttestedRecord = from_js(record, "record")?;
    let child_count = whole(child_count.unwrap_or(0.0), "childCount")?;
    let compliance = record.compliance(whole(now_seconds, "nowSeconds")?, child_count)?;
    to_js(&ComplianceWithVerdict { compliance, is_compliant: compliance.is_compliant() })
}

/// One word for a badge: `compliant`, `lapsed` (Active, attestation too old), or the status.
#[wasm_bindgen(js_name = complianceBadge, unchecked_return_type = "ComplianceBadge")]
pub fn compliance_badge(
    #[wasm_bindgen(unchecked_param_type = "AttestedRecord")] record: JsValue,
    now_seconds: f64,
) -> JsResult<String> {
    let record: AttestedRecord = from_js(record, "record")?;
    let compliance = record.compliance(whole(now_seconds, "nowSeconds")?, 0)?;
    Ok(match (compliance.status, compliance.attestation_current) {
        (AgentStatus::Active, true) => "compliant".to_owned(),
        (AgentStatus::Active, false) => "lapsed".to_owned(),
        (status, _) => status.as_str().to_ascii_lowercase(),
    })
}

/// What a provider does with a KYA result (SPEC.md section 4's intended use).
#[wasm_bindgen(js_name = kyaDecision, unchecked_return_type = "KyaDecision")]
pub fn kya_decision(is_registered: bool, is_compliant: bool) -> String {
    KyaDecision::of(is_registered, is_compliant).as_str().to_owned()
}

/// True for `0x` and 40 hex digits, all one case or with a valid EIP-55 checksum (what the API
/// accepts as a wallet).
#[wasm_bindgen(js_name = isAddress)]
pub fn is_address(text: &str) -> bool {
    parse_wallet(text).is_ok()
}

/// The EIP-55 checksummed form of an address; throws with the reason when it is not one.
#[wasm_bindgen(js_name = checksumAddress)]
pub fn checksum_address(text: &str) -> JsResult<String> {
    parse_wallet(text).map(|address| checksummed(&address)).map_err(error)
}

fn return_data(text: &str) -> JsResult<Vec<u8>> {
    hex::decode(text.trim()).map_err(|_| JsError::new("return data must be a 0x hex string"))
}

/// The API's agent record from the return data of `getAgent` or `getAgentByWallet`.
#[wasm_bindgen(js_name = decodeAgentRecord, unchecked_return_type = "AgentRecord")]
pub fn decode_agent_record(return_data_hex: &str) -> JsResult {
    let record =
        AgentRegistry::getAgentCall::abi_decode_returns(&return_data(return_data_hex)?).map_err(error)?;
    to_js(&AgentView::from(&Agent::try_from(record).map_err(error)?))
}

/// The child ids from the return data of `getChildren`.
#[wasm_bindgen(js_name = decodeChildren, unchecked_return_type = "number[]")]
pub fn decode_children(return_data_hex: &str) -> JsResult {
    let children =
        AgentRegistry::getChildrenCall::abi_decode_returns(&return_data(return_data_hex)?).map_err(error)?;
    let ids = children
        .into_iter()
        .map(|id| u64::try_from(id).map_err(|_| JsError::new("child id out of range")))
        .collect::<JsResult<Vec<u64>>>()?;
    to_js(&ids)
}

/// The API's revenue records from the return data of `getRevenueHistory`.
#[wasm_bindgen(js_name = decodeRevenueHistory, unchecked_return_type = "RevenueRecord[]")]
pub fn decode_revenue_history(return_data_hex: &str) -> JsResult {
    let reports = AgentRegistry::getRevenueHistoryCall::abi_decode_returns(&return_data(return_data_hex)?)
        .map_err(error)?;
    let views = reports
        .into_iter()
        .map(|report| Revenue::try_from(report).map(|report| RevenueView::from(&report)).map_err(error))
        .collect::<JsResult<Vec<_>>>()?;
    to_js(&views)
}

/// The contract's own compliance view from the return data of `complianceStatus`.
#[wasm_bindgen(js_name = decodeComplianceStatus, unchecked_return_type = "ComplianceStatus")]
pub fn decode_compliance_status(return_data_hex: &str) -> JsResult {
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

/// Calldata of `reportRevenue(...)`; `amount` in cents (number or decimal string), periods in
/// Unix seconds.
#[wasm_bindgen(js_name = reportRevenueCalldata)]
pub fn report_revenue_calldata(
    agent_id: f64,
    #[wasm_bindgen(unchecked_param_type = "number | string")] amount: JsValue,
    currency: String,
    category: String,
    period_start: f64,
    period_end: f64,
) -> JsResult<String> {
    let amount: Value = from_js(amount, "amount")?;
    Ok(calldata(&AgentRegistry::reportRevenueCall {
        agentId: U256::from(whole(agent_id, "agentId")?),
        amount: forward_request::uint(&amount, "amount").map_err(error)?,
        currency,
        category,
        periodStart: whole(period_start, "periodStart")?,
        periodEnd: whole(period_end, "periodEnd")?,
    }))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RegisterAgentInput {
    haftungsperson: String,
    agent_wallet: String,
    constitution_hash: String,
    capability_hash: String,
    operational_scope: String,
    parent_agent_id: Value,
    self_modifying: bool,
}

/// Calldata of `registerAgent(...)`: the `data` of a gasless registration request.
#[wasm_bindgen(js_name = registerAgentCalldata)]
pub fn register_agent_calldata(
    #[wasm_bindgen(unchecked_param_type = "RegisterAgentInput")] input: JsValue,
) -> JsResult<String> {
    let input: RegisterAgentInput = from_js(input, "registration")?;
    let address = |text: &str, what: &str| {
        parse_wallet(text).map_err(|reason| JsError::new(&format!("{what}: {reason}")))
    };
    let hash = |text: &str, what: &str| {
        text.trim().parse().map_err(|_| JsError::new(&format!("{what} must be 0x and 64 hex digits")))
    };
    Ok(calldata(&AgentRegistry::registerAgentCall {
        haftungsperson: address(&input.haftungsperson, "haftungsperson")?,
        agentWallet: address(&input.agent_wallet, "agentWallet")?,
        constitutionHash: hash(&input.constitution_hash, "constitutionHash")?,
        capabilityHash: hash(&input.capability_hash, "capabilityHash")?,
        operationalScope: input.operational_scope,
        parentAgentId: forward_request::uint(&input.parent_agent_id, "parentAgentId").map_err(error)?,
        selfModifying: input.self_modifying,
    }))
}

fn forward_request_of(request: JsValue) -> JsResult<ForwardRequest> {
    let request: Value = from_js(request, "request")?;
    let Value::Object(object) = request else {
        return Err(JsError::new("request must be an object"));
    };
    forward_request::from_json(&object, "request").map_err(error)
}

fn forwarder_address(text: &str) -> JsResult<Address> {
    parse_wallet(text).map_err(|reason| JsError::new(&format!("forwarder: {reason}")))
}

/// The EIP-712 typed data of a forward request for `eth_signTypedData_v4`.
#[wasm_bindgen(js_name = forwardRequestTypedData, unchecked_return_type = "ForwardRequestTypedData")]
pub fn forward_request_typed_data(
    #[wasm_bindgen(unchecked_param_type = "ForwardRequestInput")] request: JsValue,
    chain_id: f64,
    forwarder: &str,
) -> JsResult {
    let request = forward_request_of(request)?;
    to_js(&forward_request::typed_data(&request, whole(chain_id, "chainId")?, forwarder_address(forwarder)?))
}

/// The 32-byte EIP-712 digest (0x hex) that `request.from` signs.
#[wasm_bindgen(js_name = forwardRequestDigest)]
pub fn forward_request_digest(
    #[wasm_bindgen(unchecked_param_type = "ForwardRequestInput")] request: JsValue,
    chain_id: f64,
    forwarder: &str,
) -> JsResult<String> {
    let request = forward_request_of(request)?;
    let domain = forward_request::domain(whole(chain_id, "chainId")?, forwarder_address(forwarder)?);
    Ok(forward_request::signing_digest(&request, &domain).to_string())
}
