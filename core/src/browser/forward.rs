//! Gasless forward requests: the EIP-712 typed data a wallet signs (`forwardRequestTypedData`) and
//! its digest (`forwardRequestDigest`), read by the relayer's own parser.

use alloy_primitives::Address;
use serde::Deserialize;
use serde_json::{Map, Value};
use tsify::{Ts, Tsify};
use wasm_bindgen::prelude::*;

use super::{JsResult, UintInput, error, from_js, to_js, whole};
use crate::{
    api::query::parse_wallet,
    registry::forward_request::{self, ForwardRequest, TypedData},
};

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
