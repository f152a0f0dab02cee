//! The one decoder of reverted calls, for every shape in which node software and hosted providers
//! report them (`../shared/PROVIDERS.md`): ABI revert data in `data` (a hex string, or an object
//! holding one), the reason as text in `data` or in `message`, under codes 3, -32000, -32015 and
//! others. The edge API, the relayer and the local chain tool all read reverts through it.

use std::fmt;

use alloy_json_rpc::ErrorPayload;
use alloy_primitives::{Bytes, U256, hex};
use alloy_sol_types::{Panic, Revert, SolError, SolInterface};
use serde_json::Value;

/// JSON-RPC code of `execution reverted` in the execution API spec (geth, reth, anvil).
const EXECUTION_REVERTED: i64 = 3;

/// Why a call reverted, as far as the node said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RevertReason {
    /// A `require` message (`Error(string)`), or a reason the node gave only as text.
    Message(String),
    /// A `Panic(uint256)` (arithmetic overflow, assertion, ...) with its code.
    Panic(U256),
    /// A custom error: its ABI data, selector first. [`RevertReason::decode_custom`] reads it.
    Custom(Bytes),
    /// A revert without any reason (`revert()`, or an inner call out of gas).
    Empty,
}

impl RevertReason {
    /// The reason encoded in a revert's ABI data.
    pub fn from_data(data: &[u8]) -> Self {
        if data.is_empty() {
            return Self::Empty;
        }
        if let Ok(revert) = Revert::abi_decode(data) {
            return Self::Message(revert.reason);
        }
        if let Ok(panic) = Panic::abi_decode(data) {
            return Self::Panic(panic.code);
        }
        Self::Custom(Bytes::copy_from_slice(data))
    }

    /// The revert in a JSON-RPC error, or `None` when the error is not a revert (a transport,
    /// rate-limit or execution failure such as out of gas: those are not the contract's answer).
    pub fn from_error(error: &ErrorPayload) -> Option<Self> {
        let data: Option<Value> = error.data.as_ref().and_then(|raw| serde_json::from_str(raw.get()).ok());
        Self::from_parts(error.code, &error.message, data.as_ref())
    }

    /// [`RevertReason::from_error`] on the parts of an error object.
    pub fn from_parts(code: i64, message: &str, data: Option<&Value>) -> Option<Self> {
        // ABI data wins wherever it is: it is exact, where texts are each node's own wording.
        if let Some(bytes) = data.and_then(abi_data) {
            let says_revert =
                code == EXECUTION_REVERTED || mentions_revert(message) || data_text_mentions_revert(data);
            return says_revert.then(|| Self::from_data(&bytes));
        }
        let data_text = data.and_then(Value::as_str).filter(|text| mentions_revert(text));
        if let Some(reason) = data_text.and_then(reason_in_text) {
            return Some(reason);
        }
        if let Some(reason) = reason_in_text(message) {
            return Some(reason);
        }
        // Code 3 is a revert by definition, whatever the text says.
        (code == EXECUTION_REVERTED).then_some(Self::Empty)
    }

    /// The custom error `E` this revert carries, if it is one of `E`'s.
    pub fn decode_custom<E: SolInterface>(&self) -> Option<E> {
        match self {
            Self::Custom(data) => E::abi_decode(data).ok(),
            _ => None,
        }
    }

    /// True when this is the `require` message `expected`.
    pub fn is(&self, expected: &str) -> bool {
        matches!(self, Self::Message(message) if message == expected)
    }
}

impl fmt::Display for RevertReason {
    /// The message itself for `require` reasons (what SPEC.md's error tables list); a
    /// description for the others; nothing for an empty revert.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Message(message) => f.write_str(message),
            Self::Panic(code) => write!(f, "panic code {code:#x}"),
            Self::Custom(data) => {
                let selector = &data[..data.len().min(4)];
                write!(f, "custom error 0x{}", hex::encode(selector))?;
                if data.len() > 4 {
                    write!(f, " (data 0x{})", hex::encode(&data[4..]))?;
                }
                Ok(())
            }
            Self::Empty => Ok(()),
        }
    }
}

/// ABI revert data in an error's `data`: a hex string (`"0x…"`, or Nethermind's `"Reverted 0x…"`),
/// or an object holding one (Hardhat, Ganache, some proxies nest it).
fn abi_data(data: &Value) -> Option<Bytes> {
    match data {
        Value::String(text) => {
            let text = text.trim();
            let hex_text = text.strip_prefix("Reverted ").unwrap_or(text);
            hex_text.starts_with("0x").then(|| hex_text.parse().ok()).flatten()
        }
        Value::Object(fields) => fields.values().find_map(abi_data),
        _ => None,
    }
}

fn data_text_mentions_revert(data: Option<&Value>) -> bool {
    data.and_then(Value::as_str).is_some_and(mentions_revert)
}

fn mentions_revert(text: &str) -> bool {
    text.to_ascii_lowercase().contains("revert")
}

/// The reason in a node's text: `execution reverted: <r>` (geth family), `revert: <r>` (older
/// Nethermind), `VM Exception while processing transaction: revert <r>` or `reverted with reason
/// string '<r>'` (Hardhat, Ganache). `None` when the text does not speak of a revert.
fn reason_in_text(text: &str) -> Option<RevertReason> {
    const QUOTED: &str = "reverted with reason string '";
    if let Some(start) = text.find(QUOTED) {
        let rest = &text[start + QUOTED.len()..];
        return Some(RevertReason::Message(rest.strip_suffix('\'').unwrap_or(rest).to_owned()));
    }
    let lower = text.to_ascii_lowercase();
    let at = lower.find("revert")?;
    let mut rest = &text[at + "revert".len()..];
    rest = rest.strip_prefix("ed").unwrap_or(rest);
    let rest = rest.trim_start_matches(':').trim();
    Some(match rest {
        // Nethermind writes a revert without a reason as `execution reverted: revert`.
        "" | "revert" => RevertReason::Empty,
        hex_text if hex_text.starts_with("0x") => match hex_text.parse::<Bytes>() {
            Ok(data) => RevertReason::from_data(&data),
            Err(_) => RevertReason::Message(hex_text.to_owned()),
        },
        reason => RevertReason::Message(reason.to_owned()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const REASON: &str = crate::registry::reverts::NO_AGENT_FOR_WALLET;

    fn revert_hex() -> String {
        hex::encode_prefixed(Revert::from(REASON).abi_encode())
    }

    fn decode(error: Value) -> Option<RevertReason> {
        let payload: ErrorPayload = serde_json::from_value(error).expect("an error object");
        RevertReason::from_error(&payload)
    }

    fn message() -> Option<RevertReason> {
        Some(RevertReason::Message(REASON.into()))
    }

    #[test]
    fn geth_reth_and_anvil_send_abi_data_with_code_3() {
        let error =
            json!({"code": 3, "message": format!("execution reverted: {REASON}"), "data": revert_hex()});
        assert_eq!(decode(error), message());
    }

    #[test]
    fn recent_nethermind_sends_abi_data_under_32000() {
        let error = json!({"code": -32000, "message": "execution reverted", "data": revert_hex()});
        assert_eq!(decode(error), message());
        let bare = json!({"code": -32000, "message": "execution reverted: revert"});
        assert_eq!(decode(bare), Some(RevertReason::Empty));
    }

    #[test]
    fn older_nethermind_sends_text_or_hex_after_a_word_under_32015() {
        let text =
            json!({"code": -32015, "message": "VM execution error.", "data": format!("revert: {REASON}")});
        assert_eq!(decode(text), message());
        let hex_after_word = json!({"code": -32015, "message": "VM execution error.", "data": format!("Reverted {}", revert_hex())});
        assert_eq!(decode(hex_after_word), message());
    }

    #[test]
    fn hardhat_and_ganache_put_the_reason_in_the_message() {
        let ganache = json!({"code": -32000,
            "message": format!("VM Exception while processing transaction: revert {REASON}")});
        assert_eq!(decode(ganache), message());
        let hardhat = json!({"code": -32603,
            "message": format!("Error: VM Exception while processing transaction: reverted with reason string '{REASON}'"),
            "data": {"message": "internal", "txHash": null}});
        assert_eq!(decode(hardhat), message());
        let nested = json!({"code": -32603, "message": "execution reverted", "data": {"data": revert_hex()}});
        assert_eq!(decode(nested), message());
    }

    #[test]
    fn providers_that_send_only_the_message() {
        let error = json!({"code": -32000, "message": format!("execution reverted: {REASON}")});
        assert_eq!(decode(error), message());
        let no_reason = json!({"code": 3, "message": "execution reverted"});
        assert_eq!(decode(no_reason), Some(RevertReason::Empty));
        let code_only = json!({"code": 3, "message": "something odd"});
        assert_eq!(decode(code_only), Some(RevertReason::Empty));
    }

    #[test]
    fn panics_and_custom_errors() {
        let panic = Panic { code: U256::from(0x11) }.abi_encode();
        let error = json!({"code": 3, "message": "execution reverted", "data": hex::encode_prefixed(&panic)});
        let decoded = decode(error).expect("a revert");
        assert_eq!(decoded, RevertReason::Panic(U256::from(0x11)));
        assert_eq!(decoded.to_string(), "panic code 0x11");

        alloy_sol_types::sol! {
            #[derive(Debug, PartialEq, Eq)]
            interface Errors { error Unauthorized(address who); }
        }
        let custom = Errors::Unauthorized { who: alloy_primitives::Address::with_last_byte(7) }.abi_encode();
        let error =
            json!({"code": 3, "message": "execution reverted", "data": hex::encode_prefixed(&custom)});
        let decoded = decode(error).expect("a revert");
        assert!(matches!(
            decoded.decode_custom::<Errors::ErrorsErrors>(),
            Some(Errors::ErrorsErrors::Unauthorized(error)) if error.who == alloy_primitives::Address::with_last_byte(7)
        ));
        assert!(decoded.to_string().starts_with("custom error 0x"), "{decoded}");
        assert_eq!(RevertReason::from_data(&[]).to_string(), "");
    }

    #[test]
    fn failures_that_are_not_reverts() {
        for error in [
            json!({"code": -32000, "message": "header not found"}),
            json!({"code": -32003, "message": "out of gas"}),
            json!({"code": -32005, "message": "limit exceeded"}),
            json!({"code": -32600, "message": "batch too large"}),
            json!({"code": -32603, "message": "internal error", "data": "0x"}),
        ] {
            assert_eq!(decode(error.clone()), None, "{error}");
        }
    }
}
