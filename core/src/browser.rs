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
//!
//! This module holds those conversions and the other helpers the submodules share; the bindings
//! are in a submodule per job, each re-exported here so its path stays `kya_core::browser::X`:
//! - `compliance`: compliance and its badge, the KYA decision, address checks.
//! - `decode`: decoding of registry call results.
//! - `calldata`: calldata of registry calls, registrations with consents included.
//! - `consent`: a registration's consents: which it needs, their typed data and digests.
//! - `forward`: the EIP-712 typed data and digest of a gasless `ForwardRequest`.
//! - [`erc8128`]: ERC-8128 signed requests.
//! - [`pass`]: KYA passes, checked offline and with the request that carries them.
//! - [`verifier_state`]: what an offline verifier keeps: the issuer's keys (`KeyCache`), the
//!   nonces seen (`NonceMemory`).

use alloy_primitives::{Address, U256};
use gloo_utils::format::JsValueSerdeExt;
use serde::{Deserialize, Serialize, de::DeserializeOwned};
use serde_json::Value;
use tsify::{Ts, Tsify};
use wasm_bindgen::prelude::*;

use crate::{api::query::parse_wallet, registry::forward_request};

// Private modules, their items re-exported below: one path per item, as before the split.
mod calldata;
mod compliance;
mod consent;
mod decode;
mod feed;
mod forward;

pub mod erc8128;
pub mod pass;
pub mod verifier_state;

pub use calldata::{
    RegisterAgentInput, RegisterAgentWithConsentInput, attest_compliance_calldata,
    get_agent_by_wallet_calldata, get_agent_calldata, get_children_calldata, get_revenue_history_calldata,
    invalidate_consents_calldata, invalidate_consents_through_calldata, register_agent_calldata,
    register_agent_with_consent_calldata, report_revenue_calldata,
};
pub use compliance::{
    AttestedRecord, ComplianceVerdict, checksum_address, compliance_badge, evaluate_compliance, is_address,
    kya_decision,
};
pub use consent::{
    AgentWalletConsentInput, AgentWalletConsentType, AgentWalletConsentView, ConsentInput,
    ConsentsNeededView, LiabilityConsentInput, LiabilityConsentType, LiabilityConsentView, PartiesInput,
    agent_wallet_consent_digest, consent_digest_of, consent_typed_data, consents_needed,
    latest_consent_deadline, liability_consent_digest,
};
pub use decode::{
    ChildIds, decode_agent_record, decode_children, decode_compliance_status, decode_revenue_history,
};
pub use feed::lost_compliance_at;
pub use forward::{ForwardRequestInput, forward_request_digest, forward_request_typed_data};

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

/// An address read from JavaScript, refused with the field named.
fn address_of(text: &str, what: &str) -> JsResult<Address> {
    parse_wallet(text).map_err(|reason| JsError::new(&format!("{what}: {reason}")))
}
