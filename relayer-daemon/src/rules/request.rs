//! Parsing and off-chain checking of a `POST /relay` body: `{"request": {…}, "signature": "0x…"}`
//! into core's `ForwardRequest` (numbers as JSON numbers or decimal strings), and recovery of
//! the signer from core's EIP-712 digest.

use alloy::primitives::{Address, Bytes, Signature};
use kya_core::registry::forward_request::{self, ForwardRequest};
use serde_json::Value;

use crate::error::{Error, Result};

/// A parsed relay body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelayBody {
    /// The forward request as the signer signed it.
    pub request: ForwardRequest,
    /// The 65-byte signature, exactly as given (passed to the forwarder unchanged).
    pub signature: Bytes,
}

impl RelayBody {
    /// Parses the raw body. Missing `request`/`signature` → SPEC.md's 400; anything else that is
    /// malformed → a 400 naming the field.
    pub fn parse(body: &[u8]) -> Result<Self> {
        let value: Value = serde_json::from_slice(body)
            .map_err(|error| Error::BadRequest(format!("Body is not valid JSON: {error}")))?;
        let Value::Object(object) = value else {
            return Err(Error::BadRequest("Body must be a JSON object".into()));
        };
        let (Some(request), Some(signature)) = (
            object.get("request").filter(|v| !v.is_null()),
            object.get("signature").filter(|v| !v.is_null()),
        ) else {
            return Err(Error::MissingRequestOrSignature);
        };
        let Value::Object(request) = request else {
            return Err(Error::BadRequest("request must be a JSON object".into()));
        };
        let malformed = |error: kya_core::Error| Error::BadRequest(error.to_string());
        let request = forward_request::from_json(request, "request").map_err(malformed)?;
        let signature = forward_request::hex_bytes(signature, "signature").map_err(malformed)?;
        if signature.len() != 65 {
            return Err(Error::BadRequest(format!(
                "signature must be 65 bytes of hex (r, s, v), got {} bytes",
                signature.len()
            )));
        }
        Ok(Self { request, signature })
    }

    /// The address whose key produced the signature over core's EIP-712 digest of the request
    /// on this chain and forwarder; `None` when the signature does not recover at all.
    pub fn recover_signer(&self, chain_id: u64, forwarder: Address) -> Option<Address> {
        let digest =
            forward_request::signing_digest(&self.request, &forward_request::domain(chain_id, forwarder));
        let signature = Signature::from_raw(&self.signature).ok()?;
        signature.recover_address_from_prehash(&digest).ok()
    }
}

#[cfg(test)]
mod tests {
    use alloy::{
        primitives::{U256, aliases::U48},
        signers::{SignerSync, local::PrivateKeySigner},
    };
    use serde_json::json;

    use super::*;

    const FORWARDER: Address = alloy::primitives::address!("0x70c2fdD0CDada6b43195981928D76f5D32AE29e5");

    fn signed(signer: &PrivateKeySigner) -> Value {
        let request = ForwardRequest {
            from: signer.address(),
            to: alloy::primitives::address!("0x2EFaB5B3BEf49E56a6Ce1dcB1A39EF63C312EA23"),
            value: U256::ZERO,
            gas: U256::from(300_000),
            nonce: U256::from(3),
            deadline: U48::from(1_900_000_000u64),
            data: Bytes::from(vec![0xde, 0xad]),
        };
        let digest = forward_request::signing_digest(&request, &forward_request::domain(84532, FORWARDER));
        let signature = signer.sign_hash_sync(&digest).unwrap();
        json!({
            "request": {
                "from": signer.address().to_string().to_lowercase(),
                "to": request.to,
                "value": 0,
                "gas": "300000",
                "nonce": 3,
                "deadline": "1900000000",
                "data": "0xdead",
            },
            "signature": Bytes::from(signature.as_bytes().to_vec()),
        })
    }

    fn parse(value: &Value) -> Result<RelayBody> {
        RelayBody::parse(value.to_string().as_bytes())
    }

    #[test]
    fn numbers_as_json_numbers_or_strings_recover_the_signer() {
        let signer = PrivateKeySigner::random();
        let body = parse(&signed(&signer)).unwrap();
        assert_eq!(body.request.gas, U256::from(300_000));
        assert_eq!(body.request.deadline, U48::from(1_900_000_000u64));
        assert_eq!(body.recover_signer(84532, FORWARDER), Some(signer.address()));
        assert_ne!(body.recover_signer(1, FORWARDER), Some(signer.address()));
    }

    #[test]
    fn missing_parts_get_the_specs_message() {
        let signer = PrivateKeySigner::random();
        for key in ["request", "signature"] {
            let mut body = signed(&signer);
            body.as_object_mut().unwrap().remove(key);
            assert!(matches!(parse(&body), Err(Error::MissingRequestOrSignature)));
            body[key] = Value::Null;
            assert!(matches!(parse(&body), Err(Error::MissingRequestOrSignature)));
        }
        assert!(matches!(parse(&json!({})), Err(Error::MissingRequestOrSignature)));
    }

    #[test]
    fn malformed_fields_are_named() {
        let signer = PrivateKeySigner::random();
        let cases = [
            ("/request/from", json!("0x1234"), "request.from"),
            ("/request/value", json!(-1), "request.value"),
            ("/request/gas", json!("12abc"), "request.gas"),
            ("/request/nonce", json!(1.5), "request.nonce"),
            ("/request/data", json!("zz"), "request.data"),
            ("/signature", json!("0x1234"), "got 2 bytes"),
            ("/request/deadline", json!("281474976710656"), "uint48"),
        ];
        for (pointer, bad, expected) in cases {
            let mut body = signed(&signer);
            *body.pointer_mut(pointer).unwrap() = bad;
            match parse(&body) {
                Err(Error::BadRequest(message)) => {
                    assert!(message.contains(expected), "{pointer}: {message}")
                }
                other => panic!("{pointer}: {other:?}"),
            }
        }
        assert!(matches!(RelayBody::parse(b"{not json"), Err(Error::BadRequest(_))));
        assert!(matches!(RelayBody::parse(b"[]"), Err(Error::BadRequest(_))));
        let mut body = signed(&signer);
        body["request"].as_object_mut().unwrap().remove("gas");
        assert!(matches!(parse(&body), Err(Error::BadRequest(m)) if m == "request.gas is missing"));
    }

    proptest::proptest! {
        /// Any request, with its numbers written as JSON numbers, decimal strings or hex
        /// strings, parses back to itself and recovers its signer.
        #[test]
        fn any_request_round_trips_and_recovers(
            key in proptest::array::uniform32(1u8..),
            value in proptest::array::uniform32(proptest::num::u8::ANY),
            gas in proptest::num::u64::ANY,
            nonce in proptest::num::u64::ANY,
            deadline in 0u64..(1 << 48),
            data in proptest::collection::vec(proptest::num::u8::ANY, 0..200),
            style in 0u8..3,
        ) {
            let signer = PrivateKeySigner::from_bytes(&key.into()).unwrap();
            let request = ForwardRequest {
                from: signer.address(),
                to: FORWARDER,
                value: U256::from_be_bytes(value),
                gas: U256::from(gas),
                nonce: U256::from(nonce),
                deadline: U48::from(deadline),
                data: Bytes::from(data),
            };
            let digest = forward_request::signing_digest(&request, &forward_request::domain(84532, FORWARDER));
            let signature = Bytes::from(signer.sign_hash_sync(&digest).unwrap().as_bytes().to_vec());
            let write = |n: U256| match style {
                0 if n <= U256::from(u64::MAX) => json!(n.to::<u64>()),
                1 => json!(format!("{n:#x}")),
                _ => json!(n.to_string()),
            };
            let body = json!({
                "request": {
                    "from": request.from, "to": request.to, "value": write(request.value),
                    "gas": write(request.gas), "nonce": write(request.nonce),
                    "deadline": write(U256::from(deadline)), "data": request.data,
                },
                "signature": signature,
            });
            let parsed = parse(&body).unwrap();
            proptest::prop_assert_eq!(&parsed.request, &request);
            proptest::prop_assert_eq!(&parsed.signature, &signature);
            proptest::prop_assert_eq!(parsed.recover_signer(84532, FORWARDER), Some(signer.address()));
        }
    }
}
