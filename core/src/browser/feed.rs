//! The change feed's rule a provider's follower applies to each event: `lostComplianceAt`, the
//! same statement of it as the Rust `PassVerifier`'s and the Python package's
//! ([`crate::feed::Event::lost_compliance_at`]).

use serde::Serialize;
use wasm_bindgen::prelude::*;

use super::JsResult;
use crate::{api::checksum::checksummed, feed::Event};

/// A loss of compliance: whose, and at which block.
#[derive(Serialize)]
struct Loss {
    /// EIP-55.
    wallet: String,
    block: u64,
}

/// Where a change-feed `event` (as the API and `followChanges` give it) says its wallet lost
/// compliance: `{wallet, block}`, or `null` when it says the agent is compliant. Any event
/// stating "not compliant" is a loss at its block, whatever its type or finality: a pass from
/// that block or before no longer admits.
#[wasm_bindgen(js_name = lostComplianceAt, unchecked_return_type = "{ wallet: string; block: number } | null")]
pub fn lost_compliance_at(
    #[wasm_bindgen(unchecked_param_type = "object")] event: JsValue,
) -> JsResult<JsValue> {
    let event: Event = serde_wasm_bindgen::from_value(event)
        .map_err(|error| JsError::new(&format!("invalid change event: {error}")))?;
    match event.lost_compliance_at() {
        None => Ok(JsValue::NULL),
        Some((wallet, block)) => serde_wasm_bindgen::to_value(&Loss { wallet: checksummed(&wallet), block })
            .map_err(|error| JsError::new(&error.to_string())),
    }
}
