//! Why a signed request is refused: the eleven reasons the API answers with, and a message each.

use core::fmt;

use serde::{Deserialize, Serialize};

/// One reason a signature is refused, as the API names it (`"reason"` of a `"verified": false`
/// answer). Written once here; [`Reason::ALL`] lists them for whatever needs every one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "browser", derive(tsify::Tsify))]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// The URL, the signature headers or their parameters do not parse as RFC 9421, RFC 8941
    /// and ERC-8128 require, or a covered field is missing from the request.
    Malformed,
    /// Well formed, but asks for something this verifier does not accept: an `alg` parameter,
    /// a component (or a component parameter) it does not rebuild, a `keyid` outside the
    /// `erc8128` namespace, a Replayable signature while nonces are required, or a
    /// `content-digest` in no algorithm it knows.
    Unsupported,
    /// The covered `@authority` is not the host the provider serves.
    WrongAuthority,
    /// The signature leaves out a component that Request-Bound requires (ERC-8128 3.1.1).
    NotRequestBound,
    /// The signature's `expires` (plus the allowed clock skew) has passed, or its signer
    /// invalidated it early (a Replayable signature, ERC-8128 5.2).
    Expired,
    /// The signature's `created` is still ahead of now (plus the allowed clock skew).
    NotYetValid,
    /// `expires - created` is longer than the verifier accepts (and remembers nonces for).
    WindowTooLong,
    /// The body does not match the covered `content-digest`.
    DigestMismatch,
    /// The signature is not the keyid's account's: neither recovered to it (EOA) nor accepted by
    /// its ERC-1271 `isValidSignature` (contract account).
    BadSignature,
    /// The `(keyid, nonce)` pair was already accepted once: decided by the caller's nonce store.
    Replayed,
    /// The keyid names another chain than the verifier's.
    WrongChain,
}

impl Reason {
    /// Every reason, in the order the API documents them.
    pub const ALL: [Self; 11] = [
        Self::Malformed,
        Self::Unsupported,
        Self::WrongAuthority,
        Self::NotRequestBound,
        Self::Expired,
        Self::NotYetValid,
        Self::WindowTooLong,
        Self::DigestMismatch,
        Self::BadSignature,
        Self::Replayed,
        Self::WrongChain,
    ];

    /// The reason's name in the API (the same as its JSON form).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Malformed => "malformed",
            Self::Unsupported => "unsupported",
            Self::WrongAuthority => "wrong_authority",
            Self::NotRequestBound => "not_request_bound",
            Self::Expired => "expired",
            Self::NotYetValid => "not_yet_valid",
            Self::WindowTooLong => "window_too_long",
            Self::DigestMismatch => "digest_mismatch",
            Self::BadSignature => "bad_signature",
            Self::Replayed => "replayed",
            Self::WrongChain => "wrong_chain",
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A refused signature: the reason, and a message for the person reading the answer. Serialises
/// as `{"reason": ..., "message": ...}`, the body of a `"verified": false` answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{reason}: {message}")]
pub struct Refusal {
    /// Why, as the API names it.
    pub reason: Reason,
    /// What exactly was wrong, in a sentence.
    pub message: String,
}

impl Refusal {
    /// A refusal for `reason`, explained by `message`.
    pub fn new(reason: Reason, message: impl Into<String>) -> Self {
        Self { reason, message: message.into() }
    }

    /// The refusal a nonce store gives when `(keyid, nonce)` was already accepted.
    pub fn replayed(keyid: &str, nonce: &str) -> Self {
        Self::new(
            Reason::Replayed,
            format!("nonce {nonce:?} of {keyid} was already used: a signature is accepted once"),
        )
    }
}

/// Shorthands for the refusals the parsers and checks build.
pub(crate) fn malformed(message: impl Into<String>) -> Refusal {
    Refusal::new(Reason::Malformed, message)
}

pub(crate) fn unsupported(message: impl Into<String>) -> Refusal {
    Refusal::new(Reason::Unsupported, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_names_are_the_api_names() {
        for reason in Reason::ALL {
            let json = serde_json::to_value(reason).unwrap();
            assert_eq!(json, serde_json::Value::from(reason.as_str()));
        }
    }

    #[test]
    fn refusal_serialises_as_reason_and_message() {
        let refusal = Refusal::replayed("erc8128:1:0x00", "n1");
        let json = serde_json::to_value(&refusal).unwrap();
        assert_eq!(serde_json::from_value::<Refusal>(json.clone()).unwrap(), refusal, "reads back");
        assert_eq!(json["reason"], "replayed");
        assert!(json["message"].as_str().unwrap().contains("n1"));
        assert_eq!(json.as_object().unwrap().len(), 2);
    }
}
