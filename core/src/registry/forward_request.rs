//! EIP-712 typed data of the forwarder's `ForwardRequest` (INTERFACE.md section 1): the domain,
//! the struct hash and the digest a wallet signs, the typed-data JSON a wallet is asked to sign
//! (`eth_signTypedData_v4`), and the parsing of a request given as JSON (relayer bodies, browsers).

use core::str::FromStr;

use alloy_primitives::{Address, B256, Bytes, U256, aliases::U48};
use alloy_sol_types::{Eip712Domain, SolStruct, eip712_domain};
use serde::Serialize;
use serde_json::{Map, Value};

use crate::{Error, Result};

pub use crate::chain::abi::Forwarder::ForwardRequest;

/// EIP-712 domain name of the forwarder (kept from the deployed `MinimalForwarder`).
pub const DOMAIN_NAME: &str = "MinimalForwarder";
/// EIP-712 domain version of the forwarder.
pub const DOMAIN_VERSION: &str = "1";
/// Chain id of Base Sepolia, where the public registry runs; local chains use it too.
pub const BASE_SEPOLIA_CHAIN_ID: u64 = 84532;

/// The forwarder's EIP-712 domain on `chain_id` at `forwarder`.
pub fn domain(chain_id: u64, forwarder: Address) -> Eip712Domain {
    eip712_domain! {
        name: DOMAIN_NAME,
        version: DOMAIN_VERSION,
        chain_id: chain_id,
        verifying_contract: forwarder,
    }
}

/// The 32-byte digest that `request.from` signs: `keccak256(0x1901 ‖ domainSeparator ‖ structHash)`.
pub fn signing_digest(request: &ForwardRequest, domain: &Eip712Domain) -> B256 {
    request.eip712_signing_hash(domain)
}

/// The typed data of a forward request for `eth_signTypedData_v4` (see [`typed_data`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "browser", derive(tsify::Tsify))]
#[serde(rename_all = "camelCase")]
pub struct TypedData {
    pub types: TypedDataTypes,
    pub primary_type: PrimaryType,
    pub domain: TypedDataDomain,
    pub message: TypedDataMessage,
}

/// The two type lists of [`TypedData`], named as EIP-712 names them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "browser", derive(tsify::Tsify))]
pub struct TypedDataTypes {
    #[serde(rename = "EIP712Domain")]
    pub eip712_domain: Vec<TypedDataField>,
    #[serde(rename = "ForwardRequest")]
    pub forward_request: Vec<TypedDataField>,
}

/// One member of an EIP-712 struct type: its name and Solidity type.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "browser", derive(tsify::Tsify))]
pub struct TypedDataField {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: String,
}

/// The struct a forward request's typed data signs: only ever `ForwardRequest`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "browser", derive(tsify::Tsify))]
pub enum PrimaryType {
    ForwardRequest,
}

/// The forwarder's EIP-712 domain as JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "browser", derive(tsify::Tsify))]
#[serde(rename_all = "camelCase")]
pub struct TypedDataDomain {
    pub name: String,
    pub version: String,
    pub chain_id: u64,
    /// EIP-55 checksummed.
    pub verifying_contract: String,
}

/// A forward request as JSON: addresses checksummed, numbers as decimal strings (a `uint256`
/// does not fit a JavaScript number), `data` as 0x hex.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "browser", derive(tsify::Tsify))]
pub struct TypedDataMessage {
    pub from: String,
    pub to: String,
    pub value: String,
    pub gas: String,
    pub nonce: String,
    pub deadline: String,
    pub data: String,
}

fn field(name: &str, kind: &str) -> TypedDataField {
    TypedDataField { name: name.to_owned(), kind: kind.to_owned() }
}

/// The typed data of `request` for `eth_signTypedData_v4`: the domain, both type lists (read off
/// the `sol!` struct, so they cannot drift from the contract), and the message.
pub fn typed_data(request: &ForwardRequest, chain_id: u64, forwarder: Address) -> TypedData {
    let root = ForwardRequest::eip712_root_type();
    let members = root.strip_prefix("ForwardRequest(").and_then(|rest| rest.strip_suffix(')'));
    let fields = members
        .expect("the root type is `ForwardRequest(<type> <name>,…)`")
        .split(',')
        .map(|member| {
            let (kind, name) = member.split_once(' ').expect("an EIP-712 member is `type name`");
            field(name, kind)
        })
        .collect();
    TypedData {
        types: TypedDataTypes {
            eip712_domain: vec![
                field("name", "string"),
                field("version", "string"),
                field("chainId", "uint256"),
                field("verifyingContract", "address"),
            ],
            forward_request: fields,
        },
        primary_type: PrimaryType::ForwardRequest,
        domain: TypedDataDomain {
            name: DOMAIN_NAME.to_owned(),
            version: DOMAIN_VERSION.to_owned(),
            chain_id,
            verifying_contract: forwarder.to_checksum(None),
        },
        message: TypedDataMessage {
            from: request.from.to_checksum(None),
            to: request.to.to_checksum(None),
            value: request.value.to_string(),
            gas: request.gas.to_string(),
            nonce: request.nonce.to_string(),
            deadline: request.deadline.to_string(),
            data: request.data.to_string(),
        },
    }
}

/// Parses a forward request from a JSON object: addresses and `data` as hex strings, numbers as
/// JSON numbers or decimal (or `0x` hex) strings, `deadline` optional (0: no expiry). Messages
/// name the field under `name` (`"request"` gives `request.from must be …`).
pub fn from_json(object: &Map<String, Value>, name: &str) -> Result<ForwardRequest> {
    let field = |field: &str| {
        object
            .get(field)
            .filter(|value| !value.is_null())
            .ok_or_else(|| invalid(format!("{name}.{field} is missing")))
    };
    let deadline = match object.get("deadline").filter(|value| !value.is_null()) {
        None => U48::ZERO,
        Some(deadline) => {
            let deadline = uint(deadline, &format!("{name}.deadline"))?;
            U48::checked_from_limbs_slice(deadline.as_limbs())
                .ok_or_else(|| invalid(format!("{name}.deadline does not fit in uint48")))?
        }
    };
    Ok(ForwardRequest {
        from: address(field("from")?, &format!("{name}.from"))?,
        to: address(field("to")?, &format!("{name}.to"))?,
        value: uint(field("value")?, &format!("{name}.value"))?,
        gas: uint(field("gas")?, &format!("{name}.gas"))?,
        nonce: uint(field("nonce")?, &format!("{name}.nonce"))?,
        deadline,
        data: hex_bytes(field("data")?, &format!("{name}.data"))?,
    })
}

/// Bytes given as a `0x` hex string; the message names the field.
pub fn hex_bytes(value: &Value, name: &str) -> Result<Bytes> {
    value
        .as_str()
        .and_then(|text| Bytes::from_str(text.trim()).ok())
        .ok_or_else(|| invalid(format!("{name} must be a hex string")))
}

fn address(value: &Value, name: &str) -> Result<Address> {
    value
        .as_str()
        .and_then(|text| Address::from_str(text.trim()).ok())
        .ok_or_else(|| invalid(format!("{name} must be a 20-byte hex address")))
}

/// A uint256 given as a JSON number (non-negative integer) or a decimal (or 0x-hex) string.
pub fn uint(value: &Value, name: &str) -> Result<U256> {
    let refused =
        || invalid(format!("{name} must be a non-negative integer (JSON number or decimal string)"));
    match value {
        Value::Number(number) => number.as_u64().map(U256::from).ok_or_else(|| {
            // A whole number past 64 bits arrives as a double: its exact value is already lost.
            if number.as_f64().is_some_and(|float| float >= 0.0 && float.fract() == 0.0) {
                invalid(format!("{name} is too large for a JSON number; send it as a decimal string"))
            } else {
                refused()
            }
        }),
        Value::String(text) => {
            let text = text.trim();
            if let Some(hex) = text.strip_prefix("0x") {
                if hex.is_empty() {
                    return Err(refused());
                }
                U256::from_str_radix(hex, 16).map_err(|_| refused())
            } else if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
                U256::from_str_radix(text, 10).map_err(|_| refused())
            } else {
                Err(refused())
            }
        }
        _ => Err(refused()),
    }
}

fn invalid(message: String) -> Error {
    Error::InvalidRequestField(message)
}

#[cfg(test)]
mod tests {
    use alloy_primitives::{address, b256, keccak256};
    use serde_json::json;

    use super::*;

    #[test]
    fn type_string_matches_the_forwarder() {
        let expected = "ForwardRequest(address from,address to,uint256 value,uint256 gas,uint256 nonce,uint48 deadline,bytes data)";
        assert_eq!(ForwardRequest::eip712_encode_type(), expected);
        assert_eq!(ForwardRequest::eip712_type_hash(&sample()), keccak256(expected));
    }

    #[test]
    fn digest_is_1901_domain_separator_struct_hash() {
        let domain = domain(BASE_SEPOLIA_CHAIN_ID, address!("0x70c2fdD0CDada6b43195981928D76f5D32AE29e5"));
        let request = sample();
        let mut preimage = vec![0x19, 0x01];
        preimage.extend_from_slice(domain.separator().as_slice());
        preimage.extend_from_slice(request.eip712_hash_struct().as_slice());
        assert_eq!(signing_digest(&request, &domain), keccak256(&preimage));
    }

    #[test]
    fn domain_separator_is_stable() {
        // Pinned so that a change of domain fields (name, version, order) cannot go unnoticed;
        // the end-to-end tests check the same value against the forwarder on chain.
        let domain = domain(BASE_SEPOLIA_CHAIN_ID, address!("0x70c2fdD0CDada6b43195981928D76f5D32AE29e5"));
        let type_hash =
            keccak256("EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)");
        let mut encoded = type_hash.to_vec();
        encoded.extend_from_slice(keccak256(DOMAIN_NAME).as_slice());
        encoded.extend_from_slice(keccak256(DOMAIN_VERSION).as_slice());
        encoded.extend_from_slice(&U256::from(BASE_SEPOLIA_CHAIN_ID).to_be_bytes::<32>());
        let mut verifying = [0u8; 32];
        verifying[12..].copy_from_slice(domain.verifying_contract.unwrap().as_slice());
        encoded.extend_from_slice(&verifying);
        assert_eq!(domain.separator(), keccak256(&encoded));
        // The literal, as viem's `domainSeparator` computes it for ("MinimalForwarder", "1",
        // 84532, this address): a change of the constants cannot slip through.
        assert_eq!(
            domain.separator(),
            b256!("0x32a5df7ca8f1723580d81f71b98a9779ce68e87c041ee30839b11eff7d574aaf")
        );
    }

    #[test]
    fn parses_json_numbers_decimal_and_hex_strings() {
        let object = json!({
            "from": "0x1111111111111111111111111111111111111111",
            "to": "0x2efab5b3bef49e56a6ce1dcb1a39ef63c312ea23",
            "value": 0,
            "gas": "300000",
            "nonce": "0x7",
            "deadline": 1_900_000_000u64,
            "data": "0xdeadbeef",
        });
        assert_eq!(from_json(object.as_object().unwrap(), "request"), Ok(sample()));
        let mut no_deadline = object.clone();
        no_deadline.as_object_mut().unwrap().remove("deadline");
        assert_eq!(from_json(no_deadline.as_object().unwrap(), "request").unwrap().deadline, U48::ZERO);
    }

    #[test]
    fn names_the_bad_field() {
        let base = json!({
            "from": "0x1111111111111111111111111111111111111111",
            "to": "0x2EFaB5B3BEf49E56a6Ce1dcB1A39EF63C312EA23",
            "value": 0, "gas": 1, "nonce": 0, "data": "0x",
        });
        let cases = [
            ("from", json!("0x12"), "request.from must be a 20-byte hex address"),
            ("gas", json!(-1), "request.gas must be a non-negative integer (JSON number or decimal string)"),
            (
                "nonce",
                json!("1.5"),
                "request.nonce must be a non-negative integer (JSON number or decimal string)",
            ),
            (
                "nonce",
                json!("0x"),
                "request.nonce must be a non-negative integer (JSON number or decimal string)",
            ),
            ("gas", json!(1.5), "request.gas must be a non-negative integer (JSON number or decimal string)"),
            (
                "gas",
                serde_json::from_str::<Value>("100000000000000000000").unwrap(),
                "request.gas is too large for a JSON number; send it as a decimal string",
            ),
            ("data", json!("zz"), "request.data must be a hex string"),
            ("deadline", json!("281474976710656"), "request.deadline does not fit in uint48"),
            ("to", Value::Null, "request.to is missing"),
        ];
        for (field, value, message) in cases {
            let mut object = base.as_object().unwrap().clone();
            object.insert(field.into(), value);
            assert_eq!(from_json(&object, "request"), Err(Error::InvalidRequestField(message.into())));
        }
    }

    #[test]
    fn typed_data_lists_the_contracts_fields_and_decimal_numbers() {
        let forwarder = address!("0x70c2fdD0CDada6b43195981928D76f5D32AE29e5");
        let typed = serde_json::to_value(typed_data(&sample(), BASE_SEPOLIA_CHAIN_ID, forwarder)).unwrap();
        assert_eq!(typed["primaryType"], json!("ForwardRequest"));
        assert_eq!(typed["types"]["EIP712Domain"][2], json!({ "name": "chainId", "type": "uint256" }));
        let names: Vec<&str> = typed["types"]["ForwardRequest"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["from", "to", "value", "gas", "nonce", "deadline", "data"]);
        assert_eq!(typed["types"]["ForwardRequest"][5], json!({ "name": "deadline", "type": "uint48" }));
        assert_eq!(typed["domain"]["chainId"], json!(84532));
        assert_eq!(typed["domain"]["verifyingContract"], json!("0x70c2fdD0CDada6b43195981928D76f5D32AE29e5"));
        assert_eq!(typed["message"]["nonce"], json!("7"));
        assert_eq!(typed["message"]["deadline"], json!("1900000000"));
        assert_eq!(typed["message"]["data"], json!("0xdeadbeef"));
    }

    fn sample() -> ForwardRequest {
        ForwardRequest {
            from: address!("0x1111111111111111111111111111111111111111"),
            to: address!("0x2EFaB5B3BEf49E56a6Ce1dcB1A39EF63C312EA23"),
            value: U256::ZERO,
            gas: U256::from(300_000),
            nonce: U256::from(7),
            deadline: alloy_primitives::aliases::U48::from(1_900_000_000u64),
            data: vec![0xde, 0xad, 0xbe, 0xef].into(),
        }
    }
}
