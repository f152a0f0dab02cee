//! Compliance and its badge at a given time, the KYA decision, and the address checks the API
//! applies to a wallet: `evaluateCompliance`, `complianceBadge`, `kyaDecision`, `isAddress`,
//! `checksumAddress`.

use serde::{Deserialize, Serialize};
use tsify::{Ts, Tsify};
use wasm_bindgen::prelude::*;

use super::{JsResult, error, from_js, to_js, whole};
use crate::{
    AgentStatus, Compliance, ComplianceBadge, KyaDecision, StandingClock,
    api::{checksum::checksummed, query::parse_wallet, time::parse_iso8601},
};

/// Any record with a status and an attestation time: the API's `agent`, or a KYA result's `agent`.
#[derive(Debug, Deserialize, Tsify)]
#[serde(rename_all = "camelCase")]
pub struct AttestedRecord {
    pub status: AgentStatus,
    /// ISO 8601 UTC, as the API writes it; `null` when never attested.
    pub last_attestation: Option<String>,
}

impl AttestedRecord {
    fn compliance(self, clock: StandingClock, child_count: u64) -> JsResult<Compliance> {
        let last_attestation = match self.last_attestation.as_deref() {
            None => 0,
            Some(text) => parse_iso8601(text).ok_or_else(|| {
                JsError::new(&format!("lastAttestation is not an ISO 8601 UTC time: {text}"))
            })?,
        };
        Ok(Compliance::at(self.status, last_attestation, child_count, clock))
    }
}

/// The compliance object plus its verdict.
#[derive(Debug, Serialize, Tsify)]
#[serde(rename_all = "camelCase")]
pub struct ComplianceVerdict {
    #[serde(flatten)]
    pub compliance: Compliance,
    /// Active and attested within the grace period.
    pub is_compliant: bool,
}

/// The compliance object of SPEC.md section 2 for `record` judged by `clock`: `{time,
/// gracePeriod}`, the chain's time (the API's `X-Block-Timestamp`) and the registry's
/// `attestationGracePeriod()` at that block (`X-Attestation-Grace-Period`), never the browser's
/// clock or a fixed week: the owner may change the period. Plus `isCompliant`.
#[wasm_bindgen(js_name = evaluateCompliance)]
pub fn evaluate_compliance(
    record: Ts<AttestedRecord>,
    clock: Ts<StandingClock>,
    child_count: Option<f64>,
) -> JsResult<Ts<ComplianceVerdict>> {
    let record = from_js(&record, "record")?;
    let child_count = whole(child_count.unwrap_or(0.0), "childCount")?;
    let compliance = record.compliance(from_js(&clock, "clock")?, child_count)?;
    to_js(&ComplianceVerdict { compliance, is_compliant: compliance.is_compliant() })
}

/// The badge of `record` judged by `clock` (as [`evaluate_compliance`]'s): `compliant`, `lapsed`
/// (Active, attestation older than the grace period), or the status ([`ComplianceBadge::of`]).
#[wasm_bindgen(js_name = complianceBadge)]
pub fn compliance_badge(
    record: Ts<AttestedRecord>,
    clock: Ts<StandingClock>,
) -> JsResult<Ts<ComplianceBadge>> {
    let record = from_js(&record, "record")?;
    let compliance = record.compliance(from_js(&clock, "clock")?, 0)?;
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
