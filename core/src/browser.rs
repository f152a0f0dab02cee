//! JavaScript bindings of `kya-core` for web apps and Node (feature `browser`, built with
//! `scripts/build-core-wasm.sh` into the npm package `core/pkg/`). They wrap the same functions
//! the edge API runs, so a page and the API cannot disagree: compliance and its badge, the KYA
//! decision, decoding of registry call results, address checks, the EIP-712 typed data and
//! digest of a gasless `ForwardRequest`, a registration's consents (which it needs, their
//! typed data and digests, and the `registerAgentWithConsent` call that carries them), and
//! ERC-8128 signed requests ([`erc8128`]: `signRequest`, `verifyRequest`).
//!
//! Every value crossing to or from JavaScript is a Rust type deriving `tsify::Tsify`, passed as
//! `tsify::Ts<T>`: the package's TypeScript declarations are generated from the very structs
//! they describe, so a renamed or added field changes the types with it.
//!
//! Results go out as JSON, through gloo-utils' `JsValueSerdeExt` (`serde_json`, then
//! `JSON.parse`): a page sees each value exactly as the API's response carries it, big revenue
//! amounts as numbers and absent times as `null`. Inputs come in through serde-wasm-bindgen,
//! which reads the JavaScript value itself: the JSON way (`JSON.stringify`) would turn `NaN` into
//! `null` (a bad number reported as a missing one) and throw on a `BigInt`, a throw gloo-utils
//! unwinds through the wasm without running destructors; serde-wasm-bindgen names the type it
//! found instead.

use alloy_primitives::{Address, U256, hex};
use alloy_sol_types::SolCall;
use gloo_utils::format::JsValueSerdeExt;
use serde::{Deserialize, Serialize, de::DeserializeOwned};
use serde_json::{Map, Value};
use tsify::{Ts, Tsify};
use wasm_bindgen::prelude::*;

use crate::{
    Agent, AgentStatus, Compliance, ComplianceBadge, KyaDecision, Revenue,
    api::{
        checksum::checksummed,
        query::parse_wallet,
        time::parse_iso8601,
        view::{AgentView, RevenueView},
    },
    chain::abi::AgentRegistry,
    registry::{
        consent::{
            self, AgentWalletConsent, Consent, ConsentSignatures, ConsentTypedData, LiabilityConsent,
            MAX_OPERATIONAL_SCOPE_BYTES, Parties,
        },
        forward_request::{self, ForwardRequest, TypedData},
    },
};

pub mod erc8128;
pub mod pass;

type JsResult<T = JsValue> = Result<T, JsError>;

/// A result for JavaScript, as the API's JSON would give it (see the module docs).
fn to_js<T: Tsify + Serialize>(value: &T) -> JsResult<Ts<T>> {
    JsValue::from_serde(value).map(Ts::new_unchecked).map_err(error)
}

/// An argument from JavaScript, read by serde-wasm-bindgen (see the module docs).
fn from_js<T: Tsify + DeserializeOwned>(value: &Ts<T>, what: &str) -> JsResult<T> {
    serde_wasm_bindgen::from_value(value.js_value())
        .map_err(|error| JsError::new(&format!("invalid {what}: {error}")))
}

fn error(error: impl core::fmt::Display) -> JsError {
    JsError::new(&error.to_string())
}

/// 2^53: above it a JS number no longer holds every integer.
const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_992.0;

/// A JS number that must be a whole number of seconds, an id or a count.
fn whole(value: f64, what: &str) -> JsResult<u64> {
    if value.is_finite() && value >= 0.0 && value.fract() == 0.0 && value <= MAX_SAFE_INTEGER {
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        Ok(value as u64)
    } else {
        Err(JsError::new(&format!("{what} must be a non-negative whole number, got {value}")))
    }
}

/// A `uint256` as JavaScript holds one: a number (exact up to 2^53), or a decimal or `0x` hex
/// string for anything larger.
#[derive(Debug, Deserialize, Tsify)]
#[serde(untagged, expecting = "a non-negative integer (a number or a decimal string)")]
pub enum UintInput {
    Number(f64),
    Text(String),
}

impl UintInput {
    /// The JSON value [`forward_request::uint`] reads, so a number here follows the same rule
    /// (and gets the same message) as one in a JSON body sent to the relayer.
    fn into_json(self) -> Value {
        match self {
            Self::Text(text) => Value::String(text),
            Self::Number(number) if number >= 0.0 && number.fract() == 0.0 && number <= MAX_SAFE_INTEGER =>
            {
                #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
                Value::from(number as u64)
            }
            // Negative, fractional or past 2^53: a JSON float, which `uint` refuses with the reason.
            Self::Number(number) => serde_json::Number::from_f64(number)
                .map_or_else(|| Value::String(number.to_string()), Value::Number),
        }
    }

    fn into_uint(self, what: &str) -> JsResult<U256> {
        forward_request::uint(&self.into_json(), what).map_err(error)
    }
}

/// Any record with a status and an attestation time: the API's `agent`, or a KYA result's `agent`.
#[derive(Debug, Deserialize, Tsify)]
#[serde(rename_all = "camelCase")]
pub struct AttestedRecord {
    pub status: AgentStatus,
    /// ISO 8601 UTC, as the API writes it; `null` when never attested.
    pub last_attestation: Option<String>,
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

/// The compliance object plus its verdict.
#[derive(Debug, Serialize, Tsify)]
#[serde(rename_all = "camelCase")]
pub struct ComplianceVerdict {
    #[serde(flatten)]
    pub compliance: Compliance,
    /// Active and attested within the validity period.
    pub is_compliant: bool,
}

/// The ids of an agent's direct children.
#[derive(Debug, Serialize, Tsify)]
#[serde(transparent)]
pub struct ChildIds(pub Vec<u64>);

/// The compliance object of SPEC.md section 2 for `record` at `nowSeconds` (use the chain's time,
/// e.g. the API's `X-Block-Timestamp`), plus `isCompliant`.
#[wasm_bindgen(js_name = evaluateCompliance)]
pub fn evaluate_compliance(
    record: Ts<AttestedRecord>,
    now_seconds: f64,
    child_count: Option<f64>,
) -> JsResult<Ts<ComplianceVerdict>> {
    let record = from_js(&record, "record")?;
    let child_count = whole(child_count.unwrap_or(0.0), "childCount")?;
    let compliance = record.compliance(whole(now_seconds, "nowSeconds")?, child_count)?;
    to_js(&ComplianceVerdict { compliance, is_compliant: compliance.is_compliant() })
}

/// The badge of `record` at `nowSeconds`: `compliant`, `lapsed` (Active, attestation too old),
/// or the status ([`ComplianceBadge::of`]).
#[wasm_bindgen(js_name = complianceBadge)]
pub fn compliance_badge(record: Ts<AttestedRecord>, now_seconds: f64) -> JsResult<Ts<ComplianceBadge>> {
    let record = from_js(&record, "record")?;
    let compliance = record.compliance(whole(now_seconds, "nowSeconds")?, 0)?;
    to_js(&ComplianceBadge::of(&compliance))
}

/// What a provider does with a KYA result (SPEC.md section 4's intended use).
#[wasm_bindgen(js_name = kyaDecision)]
pub fn kya_decision(is_registered: bool, is_compliant: bool) -> JsResult<Ts<KyaDecision>> {
    to_js(&KyaDecision::of(is_registered, is_compliant))
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
/// back every consent it signed and nobody used yet.
#[wasm_bindgen(js_name = invalidateConsentsCalldata)]
pub fn invalidate_consents_calldata() -> String {
    calldata(&AgentRegistry::invalidateConsentsCall {})
}

/// The latest consent `deadline` the registry accepts in a block at `blockTimestamp` (Unix
/// seconds): 7 days after it (`MAX_CONSENT_LIFETIME`); a later one reverts `Consent deadline too
/// far`. Use the chain's latest block time, which the block a registration lands in only passes.
#[wasm_bindgen(js_name = latestConsentDeadline)]
pub fn latest_consent_deadline(block_timestamp: f64) -> JsResult<f64> {
    let latest = consent::latest_deadline(whole(block_timestamp, "blockTimestamp")?);
    #[allow(clippy::cast_precision_loss, reason = "a block time 7 days on stays far below 2^53")]
    Ok(latest as f64)
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

/// An address read from JavaScript, refused with the field named.
fn address_of(text: &str, what: &str) -> JsResult<Address> {
    parse_wallet(text).map_err(|reason| JsError::new(&format!("{what}: {reason}")))
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

/// An `AgentWalletConsent` as a page holds it: the agent wallet's consent to be bound to the
/// agent `creator` registers under `parentAgentId` (0: a root).
#[derive(Debug, Deserialize, Tsify)]
#[serde(rename_all = "camelCase")]
pub struct AgentWalletConsentInput {
    pub agent_wallet: String,
    /// The registering caller: the forward request's `from` when relayed.
    pub creator: String,
    pub parent_agent_id: UintInput,
    /// The agent wallet's `consentNonce` on the registry.
    pub nonce: UintInput,
    /// Unix seconds.
    pub deadline: UintInput,
}

impl AgentWalletConsentInput {
    fn parse(self) -> JsResult<AgentWalletConsent> {
        Ok(AgentWalletConsent {
            agentWallet: address_of(&self.agent_wallet, "agentWallet")?,
            creator: address_of(&self.creator, "creator")?,
            parentAgentId: self.parent_agent_id.into_uint("parentAgentId")?,
            nonce: self.nonce.into_uint("nonce")?,
            deadline: self.deadline.into_uint("deadline")?,
        })
    }
}

/// A `LiabilityConsent` as a page holds it: a root's Haftungsperson's consent to be named liable
/// for the agent `creator` registers for `agentWallet`.
#[derive(Debug, Deserialize, Tsify)]
#[serde(rename_all = "camelCase")]
pub struct LiabilityConsentInput {
    pub haftungsperson: String,
    /// The registering caller: the forward request's `from` when relayed.
    pub creator: String,
    pub agent_wallet: String,
    /// The Haftungsperson's `consentNonce` on the registry.
    pub nonce: UintInput,
    /// Unix seconds.
    pub deadline: UintInput,
}

impl LiabilityConsentInput {
    fn parse(self) -> JsResult<LiabilityConsent> {
        Ok(LiabilityConsent {
            haftungsperson: address_of(&self.haftungsperson, "haftungsperson")?,
            creator: address_of(&self.creator, "creator")?,
            agentWallet: address_of(&self.agent_wallet, "agentWallet")?,
            nonce: self.nonce.into_uint("nonce")?,
            deadline: self.deadline.into_uint("deadline")?,
        })
    }
}

/// Either consent, named by its `primaryType` (what [`consents_needed`] returns).
#[derive(Debug, Deserialize, Tsify)]
#[serde(tag = "primaryType")]
pub enum ConsentInput {
    AgentWalletConsent(AgentWalletConsentInput),
    LiabilityConsent(LiabilityConsentInput),
}

impl ConsentInput {
    fn parse(self) -> JsResult<Consent> {
        Ok(match self {
            Self::AgentWalletConsent(consent) => Consent::AgentWallet(consent.parse()?),
            Self::LiabilityConsent(consent) => Consent::Liability(consent.parse()?),
        })
    }
}

fn registry_address(text: &str) -> JsResult<Address> {
    parse_wallet(text).map_err(|reason| JsError::new(&format!("registry: {reason}")))
}

fn consent_digest(consent: &Consent, chain_id: f64, registry: &str) -> JsResult<String> {
    let domain = consent::domain(whole(chain_id, "chainId")?, registry_address(registry)?);
    Ok(consent.signing_digest(&domain).to_string())
}

/// The 32-byte EIP-712 digest (0x hex) the agent wallet signs to consent, in the domain of the
/// registry at `registry` on `chainId`.
#[wasm_bindgen(js_name = agentWalletConsentDigest)]
pub fn agent_wallet_consent_digest(
    consent: Ts<AgentWalletConsentInput>,
    chain_id: f64,
    registry: &str,
) -> JsResult<String> {
    let consent = Consent::AgentWallet(from_js(&consent, "consent")?.parse()?);
    consent_digest(&consent, chain_id, registry)
}

/// The 32-byte EIP-712 digest (0x hex) a root's Haftungsperson signs to consent.
#[wasm_bindgen(js_name = liabilityConsentDigest)]
pub fn liability_consent_digest(
    consent: Ts<LiabilityConsentInput>,
    chain_id: f64,
    registry: &str,
) -> JsResult<String> {
    let consent = Consent::Liability(from_js(&consent, "consent")?.parse()?);
    consent_digest(&consent, chain_id, registry)
}

/// The digest of either consent, named by its `primaryType`.
#[wasm_bindgen(js_name = consentDigest)]
pub fn consent_digest_of(consent: Ts<ConsentInput>, chain_id: f64, registry: &str) -> JsResult<String> {
    consent_digest(&from_js(&consent, "consent")?.parse()?, chain_id, registry)
}

/// The EIP-712 typed data of a consent for `eth_signTypedData_v4`.
#[wasm_bindgen(js_name = consentTypedData)]
pub fn consent_typed_data(
    consent: Ts<ConsentInput>,
    chain_id: f64,
    registry: &str,
) -> JsResult<Ts<ConsentTypedData>> {
    let consent = from_js(&consent, "consent")?.parse()?;
    to_js(&consent.typed_data(whole(chain_id, "chainId")?, registry_address(registry)?))
}

/// The parties of a registration: who sends it (the forward request's `from` when relayed), its
/// agent wallet, its Haftungsperson (read only for a root) and its parent (0: a root).
#[derive(Debug, Deserialize, Tsify)]
#[serde(rename_all = "camelCase")]
pub struct PartiesInput {
    pub creator: String,
    pub agent_wallet: String,
    pub haftungsperson: String,
    pub parent_agent_id: UintInput,
}

/// `"AgentWalletConsent"`: the `primaryType` of an [`AgentWalletConsentView`].
#[derive(Debug, Serialize, Tsify)]
pub enum AgentWalletConsentType {
    AgentWalletConsent,
}

/// `"LiabilityConsent"`: the `primaryType` of a [`LiabilityConsentView`].
#[derive(Debug, Serialize, Tsify)]
pub enum LiabilityConsentType {
    LiabilityConsent,
}

/// An `AgentWalletConsent` to sign: addresses checksummed, numbers as decimal strings. It is a
/// [`ConsentInput`] as it is: pass it to `consentTypedData` or `consentDigest`.
#[derive(Debug, Serialize, Tsify)]
#[serde(rename_all = "camelCase")]
pub struct AgentWalletConsentView {
    pub primary_type: AgentWalletConsentType,
    pub agent_wallet: String,
    pub creator: String,
    pub parent_agent_id: String,
    pub nonce: String,
    pub deadline: String,
}

/// A `LiabilityConsent` to sign, like [`AgentWalletConsentView`].
#[derive(Debug, Serialize, Tsify)]
#[serde(rename_all = "camelCase")]
pub struct LiabilityConsentView {
    pub primary_type: LiabilityConsentType,
    pub haftungsperson: String,
    pub creator: String,
    pub agent_wallet: String,
    pub nonce: String,
    pub deadline: String,
}

/// The consents a registration needs: each `null` when its party is the sender (or, for the
/// liability consent, for a child, which inherits its parent's Haftungsperson).
#[derive(Debug, Serialize, Tsify)]
#[serde(rename_all = "camelCase")]
pub struct ConsentsNeededView {
    pub agent_wallet: Option<AgentWalletConsentView>,
    pub liability: Option<LiabilityConsentView>,
}

/// Which consents a registration by `parties.creator` needs, at the signers' current
/// `consentNonce`s (read from the registry), valid until `deadline` (Unix seconds). When the
/// agent wallet is also the root's Haftungsperson and signs both, the liability consent takes
/// the nonce after the wallet's.
#[wasm_bindgen(js_name = consentsNeeded)]
pub fn consents_needed(
    parties: Ts<PartiesInput>,
    wallet_nonce: Ts<UintInput>,
    haftungsperson_nonce: Ts<UintInput>,
    deadline: Ts<UintInput>,
) -> JsResult<Ts<ConsentsNeededView>> {
    let parties = from_js(&parties, "parties")?;
    let parent_agent_id = parties.parent_agent_id.into_uint("parentAgentId")?;
    let parties = Parties {
        creator: address_of(&parties.creator, "creator")?,
        agent_wallet: address_of(&parties.agent_wallet, "agentWallet")?,
        haftungsperson: address_of(&parties.haftungsperson, "haftungsperson")?,
        parent_agent_id: u64::try_from(parent_agent_id)
            .map_err(|_| JsError::new("parentAgentId is larger than any agent id"))?,
    };
    let needed = parties.consents_needed(
        from_js(&wallet_nonce, "walletNonce")?.into_uint("walletNonce")?,
        from_js(&haftungsperson_nonce, "haftungspersonNonce")?.into_uint("haftungspersonNonce")?,
        from_js(&deadline, "deadline")?.into_uint("deadline")?,
    );
    let agent_wallet = match needed.agent_wallet {
        Some(Consent::AgentWallet(consent)) => Some(AgentWalletConsentView {
            primary_type: AgentWalletConsentType::AgentWalletConsent,
            agent_wallet: checksummed(&consent.agentWallet),
            creator: checksummed(&consent.creator),
            parent_agent_id: consent.parentAgentId.to_string(),
            nonce: consent.nonce.to_string(),
            deadline: consent.deadline.to_string(),
        }),
        _ => None,
    };
    let liability = match needed.liability {
        Some(Consent::Liability(consent)) => Some(LiabilityConsentView {
            primary_type: LiabilityConsentType::LiabilityConsent,
            haftungsperson: checksummed(&consent.haftungsperson),
            creator: checksummed(&consent.creator),
            agent_wallet: checksummed(&consent.agentWallet),
            nonce: consent.nonce.to_string(),
            deadline: consent.deadline.to_string(),
        }),
        _ => None,
    };
    to_js(&ConsentsNeededView { agent_wallet, liability })
}

/// A gasless forward request as a page holds it, before signing.
#[derive(Debug, Deserialize, Tsify)]
pub struct ForwardRequestInput {
    pub from: String,
    pub to: String,
    pub value: UintInput,
    pub gas: UintInput,
    pub nonce: UintInput,
    /// Unix seconds; 0 or absent: no expiry.
    #[serde(default)]
    #[tsify(optional)]
    pub deadline: Option<UintInput>,
    /// Calldata for `to`, `0x` hex.
    pub data: String,
}

impl ForwardRequestInput {
    /// Parsed by [`forward_request::from_json`], the relayer's own parser, so both refuse the
    /// same requests with the same messages.
    fn parse(self) -> JsResult<ForwardRequest> {
        let mut object = Map::new();
        object.insert("from".into(), Value::String(self.from));
        object.insert("to".into(), Value::String(self.to));
        object.insert("value".into(), self.value.into_json());
        object.insert("gas".into(), self.gas.into_json());
        object.insert("nonce".into(), self.nonce.into_json());
        if let Some(deadline) = self.deadline {
            object.insert("deadline".into(), deadline.into_json());
        }
        object.insert("data".into(), Value::String(self.data));
        forward_request::from_json(&object, "request").map_err(error)
    }
}

fn forwarder_address(text: &str) -> JsResult<Address> {
    parse_wallet(text).map_err(|reason| JsError::new(&format!("forwarder: {reason}")))
}

/// The EIP-712 typed data of a forward request for `eth_signTypedData_v4`.
#[wasm_bindgen(js_name = forwardRequestTypedData)]
pub fn forward_request_typed_data(
    request: Ts<ForwardRequestInput>,
    chain_id: f64,
    forwarder: &str,
) -> JsResult<Ts<TypedData>> {
    let request = from_js(&request, "request")?.parse()?;
    to_js(&forward_request::typed_data(&request, whole(chain_id, "chainId")?, forwarder_address(forwarder)?))
}

/// The 32-byte EIP-712 digest (0x hex) that `request.from` signs.
#[wasm_bindgen(js_name = forwardRequestDigest)]
pub fn forward_request_digest(
    request: Ts<ForwardRequestInput>,
    chain_id: f64,
    forwarder: &str,
) -> JsResult<String> {
    let request = from_js(&request, "request")?.parse()?;
    let domain = forward_request::domain(whole(chain_id, "chainId")?, forwarder_address(forwarder)?);
    Ok(forward_request::signing_digest(&request, &domain).to_string())
}
