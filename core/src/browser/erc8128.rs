//! ERC-8128 signed requests in JavaScript: `signRequest` for an agent's script or page, and
//! `verifyRequest`, the verdict of [`crate::erc8128::verify_request`] for a provider written in
//! JavaScript (the API's `POST /api/v1/kya/verify` does the same and more: the nonce store and
//! the signer's standing).
//!
//! The rules stay in `crate::erc8128`. What a page lacks is passed in or read from JavaScript
//! here, at the edge: `signRequest` defaults `created` to `Date.now()` and the nonce to 16 bytes
//! of `crypto.getRandomValues` (the Web Crypto API of browsers, Node and Workers), and
//! `verifyRequest` takes `now` from its caller, as everything in the crate does.

use std::collections::BTreeMap;

use alloy_primitives::{Address, hex};
use base64::Engine;
use serde::{Deserialize, Deserializer, Serialize, de};
use tsify::{Ts, Tsify};
use wasm_bindgen::prelude::*;

use super::{JsResult, error, from_js, to_js, whole};
use crate::{
    api::checksum::checksummed,
    erc8128::{
        self, Reason, RequestToSign, SignParams, SignedRequest, SigningKey, Verification, Verified,
        VerifyPolicy,
    },
};

#[wasm_bindgen]
extern "C" {
    /// `Date.now()`: milliseconds since the epoch, the page's clock.
    #[wasm_bindgen(js_namespace = Date, js_name = now)]
    pub(super) fn date_now() -> f64;

    /// `crypto.getRandomValues(bytes)`: the Web Crypto API's cryptographically secure source.
    #[wasm_bindgen(js_namespace = crypto, js_name = getRandomValues, catch)]
    fn get_random_values(bytes: &mut [u8]) -> Result<JsValue, JsValue>;
}

/// How long a signature made by `signRequest` is valid when `expires` is not given.
const DEFAULT_WINDOW_SECS: u64 = 60;

/// A body: text (sent as its UTF-8 bytes) or bytes.
#[derive(Debug, Tsify)]
#[tsify(type = "string | Uint8Array")]
pub struct BodyInput(pub(super) Vec<u8>);

impl<'de> Deserialize<'de> for BodyInput {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> de::Visitor<'de> for Visitor {
            type Value = BodyInput;
            fn expecting(&self, formatter: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                formatter.write_str("a string or a Uint8Array")
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<BodyInput, E> {
                Ok(BodyInput(text.as_bytes().to_vec()))
            }
            fn visit_bytes<E: de::Error>(self, bytes: &[u8]) -> Result<BodyInput, E> {
                Ok(BodyInput(bytes.to_vec()))
            }
            fn visit_byte_buf<E: de::Error>(self, bytes: Vec<u8>) -> Result<BodyInput, E> {
                Ok(BodyInput(bytes))
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

/// A header field's value; a field sent several times as a list (joined by `", "`, RFC 9421 2.1).
#[derive(Debug, Deserialize, Tsify)]
#[serde(untagged, expecting = "a string or a list of strings")]
pub enum HeaderValueInput {
    One(String),
    Many(Vec<String>),
}

/// Header fields by name (any case), as `Object.fromEntries(request.headers)` gives them.
#[derive(Debug, Default, Deserialize, Tsify)]
#[serde(transparent)]
pub struct HeadersInput(BTreeMap<String, HeaderValueInput>);

impl HeadersInput {
    pub(super) fn fields(&self) -> Vec<(String, String)> {
        self.0
            .iter()
            .map(|(name, value)| {
                let value = match value {
                    HeaderValueInput::One(value) => value.clone(),
                    HeaderValueInput::Many(values) => {
                        values.iter().map(|value| value.trim()).collect::<Vec<_>>().join(", ")
                    }
                };
                (name.clone(), value)
            })
            .collect()
    }
}

pub(super) fn pairs(fields: &[(String, String)]) -> Vec<(&str, &str)> {
    fields.iter().map(|(name, value)| (name.as_str(), value.as_str())).collect()
}

/// A request to sign, and how.
#[derive(Debug, Deserialize, Tsify)]
#[serde(rename_all = "camelCase")]
pub struct SignRequestInput {
    pub method: String,
    /// The absolute URL it will be sent to.
    pub url: String,
    /// Its header fields: needed only for those named in `components`.
    #[serde(default)]
    #[tsify(optional)]
    pub headers: Option<HeadersInput>,
    /// Its body; a non-empty one gets a `Content-Digest`, covered by the signature.
    #[serde(default)]
    #[tsify(optional)]
    pub body: Option<BodyInput>,
    /// The signing account's private key: `0x` and 64 hex digits.
    pub private_key: String,
    /// The chain the keyid names: where the agent is registered.
    pub chain_id: f64,
    /// Unix seconds; default: now (`Date.now()`).
    #[serde(default)]
    #[tsify(optional)]
    pub created: Option<f64>,
    /// Unix seconds; default: `created` + 60. Verifiers refuse windows over 300 s by default.
    #[serde(default)]
    #[tsify(optional)]
    pub expires: Option<f64>,
    /// Unique per key; default: 16 bytes of `crypto.getRandomValues`, base64url.
    #[serde(default)]
    #[tsify(optional)]
    pub nonce: Option<String>,
    /// Header fields to cover besides the Request-Bound set (lowercase names): `content-type`.
    #[serde(default)]
    #[tsify(optional)]
    pub components: Option<Vec<String>>,
}

/// The header values to send, and what the signature says.
#[derive(Debug, Serialize, Tsify)]
#[serde(rename_all = "camelCase")]
pub struct SignedRequestHeaders {
    /// `Signature-Input`.
    pub signature_input: String,
    /// `Signature`.
    pub signature: String,
    /// `Content-Digest`, when the request has a body.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[tsify(optional)]
    pub content_digest: Option<String>,
    /// `erc8128:<chainId>:<address in lowercase>`.
    pub keyid: String,
    pub created: u64,
    pub expires: u64,
    pub nonce: String,
}

fn signing_key(text: &str) -> JsResult<SigningKey> {
    let bytes = hex::decode(text.trim()).ok().filter(|bytes| bytes.len() == 32);
    bytes
        .and_then(|bytes| SigningKey::from_slice(&bytes).ok())
        .ok_or_else(|| JsError::new("privateKey must be 0x and 64 hex digits of a valid secp256k1 key"))
}

/// 16 random bytes (the ERC's 128 bits) from `crypto.getRandomValues`, base64url.
fn random_nonce() -> JsResult<String> {
    let mut bytes = [0u8; 16];
    get_random_values(&mut bytes).map_err(|_| JsError::new("crypto.getRandomValues is not available"))?;
    Ok(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes))
}

/// Signs a request with ERC-8128 (label `eth`; `@method`, `@authority`, `@path`, `@query` when
/// the URL has one, `content-digest` when there is a body, then `components`). Set the three
/// headers it returns on the request as it is sent.
#[wasm_bindgen(js_name = signRequest)]
pub fn sign_request(input: Ts<SignRequestInput>) -> JsResult<Ts<SignedRequestHeaders>> {
    let input = from_js(&input, "request")?;
    let key = signing_key(&input.private_key)?;
    let chain_id = whole(input.chain_id, "chainId")?;
    let created = match input.created {
        Some(created) => whole(created, "created")?,
        None => whole((date_now() / 1000.0).floor(), "Date.now()")?,
    };
    let expires = match input.expires {
        Some(expires) => whole(expires, "expires")?,
        None => created + DEFAULT_WINDOW_SECS,
    };
    let nonce = match input.nonce {
        Some(nonce) => nonce,
        None => random_nonce()?,
    };
    let fields = input.headers.unwrap_or_default().fields();
    let headers = pairs(&fields);
    let extra: Vec<&str> = input.components.iter().flatten().map(String::as_str).collect();
    let request = RequestToSign {
        method: &input.method,
        url: &input.url,
        headers: &headers,
        body: input.body.as_ref().map(|body| body.0.as_slice()),
    };
    let params = SignParams { chain_id, created, expires, nonce: Some(&nonce), extra_components: &extra };
    let signed = erc8128::sign_request(&request, &params, &key).map_err(error)?;
    let public = key.verifying_key().to_encoded_point(false);
    let address = Address::from_raw_public_key(&public.as_bytes()[1..]);
    to_js(&SignedRequestHeaders {
        signature_input: signed.signature_input,
        signature: signed.signature,
        content_digest: signed.content_digest,
        keyid: format!("erc8128:{chain_id}:{}", hex::encode_prefixed(address)),
        created,
        expires,
        nonce,
    })
}

/// A request a provider received, and the policy to check it against.
#[derive(Debug, Deserialize, Tsify)]
#[serde(rename_all = "camelCase")]
pub struct VerifyRequestInput {
    pub method: String,
    /// The absolute URL it was sent to.
    pub url: String,
    /// Its header fields: at least `signature-input` and `signature`.
    pub headers: HeadersInput,
    /// Its body; without it, a covered `content-digest` is trusted to be the body's.
    #[serde(default)]
    #[tsify(optional)]
    pub body: Option<BodyInput>,
    /// Which signature; default `eth`, else the only one.
    #[serde(default)]
    #[tsify(optional)]
    pub label: Option<String>,
    /// The host the provider serves (`host[:port]`, such as `api.provider.example`), which the
    /// signature's `@authority` must be. Required: a URL rebuilt from the request's own `Host`
    /// header would otherwise admit a request signed for another host.
    pub authority: String,
    /// Now, in Unix seconds.
    pub now: f64,
    /// The chain keyids must name.
    pub chain_id: f64,
    /// Default 60.
    #[serde(default)]
    #[tsify(optional)]
    pub clock_skew_secs: Option<f64>,
    /// The longest `expires - created`; default 300.
    #[serde(default)]
    #[tsify(optional)]
    pub max_window_secs: Option<f64>,
    /// Refuse signatures without a nonce; default true.
    #[serde(default)]
    #[tsify(optional)]
    pub require_nonce: Option<bool>,
    /// Return the ERC-1271 call for a signature that does not recover to its keyid; default
    /// true (false: refuse it as `bad_signature`).
    #[serde(default)]
    #[tsify(optional)]
    pub allow_erc1271: Option<bool>,
}

impl VerifyRequestInput {
    /// Reads a request to verify; without `authority`, the API's words for it (serde's
    /// "missing field" would not say why it is needed).
    pub(super) fn read(input: &Ts<VerifyRequestInput>) -> JsResult<Self> {
        serde_wasm_bindgen::from_value(input.js_value()).map_err(|error| {
            let message = error.to_string();
            match message.contains("missing field `authority`") {
                true => JsError::new(erc8128::AUTHORITY_REQUIRED),
                false => JsError::new(&format!("invalid request: {message}")),
            }
        })
    }

    /// The request as `crate::erc8128` checks it, with its header fields `headers` (from
    /// [`HeadersInput::fields`]) at `now`.
    /// An error when `authority` is missing or blank, as the API's 400 says it.
    pub(super) fn signed_request<'a>(
        &'a self,
        headers: &'a [(&'a str, &'a str)],
        now: u64,
    ) -> JsResult<SignedRequest<'a>> {
        let authority = self.authority.trim();
        if authority.is_empty() {
            return Err(JsError::new(erc8128::AUTHORITY_REQUIRED));
        }
        Ok(SignedRequest {
            method: &self.method,
            url: &self.url,
            headers,
            body: self.body.as_ref().map(|body| body.0.as_slice()),
            label: self.label.as_deref(),
            authority,
            now,
        })
    }

    pub(super) fn policy(&self) -> JsResult<VerifyPolicy> {
        let defaults = VerifyPolicy::new(whole(self.chain_id, "chainId")?);
        Ok(VerifyPolicy {
            clock_skew_secs: match self.clock_skew_secs {
                Some(skew) => whole(skew, "clockSkewSecs")?,
                None => defaults.clock_skew_secs,
            },
            max_window_secs: match self.max_window_secs {
                Some(window) => whole(window, "maxWindowSecs")?,
                None => defaults.max_window_secs,
            },
            require_nonce: self.require_nonce.unwrap_or(defaults.require_nonce),
            allow_erc1271: self.allow_erc1271.unwrap_or(defaults.allow_erc1271),
            ..defaults
        })
    }
}

/// A signature that holds, as the API's `"verified": true` answer names its fields, and the
/// nonce to claim: the caller's store must accept `nonceKey` once, atomically, and keep it until
/// `rememberUntil` (else anyone who saw the request can replay it).
#[derive(Debug, Serialize, Tsify)]
#[serde(rename_all = "camelCase")]
pub struct VerifiedSignature {
    /// `signer` (EIP-55), `keyid`, `chainId`, `created`, `expires`, `nonce`, `components`.
    #[serde(flatten)]
    pub facts: erc8128::SignatureFacts,
    pub label: String,
    /// `<keyid in lowercase>:<nonce>`; `null` for a Replayable signature (a policy without
    /// `requireNonce`).
    pub nonce_key: Option<String>,
    /// Unix seconds: `expires` plus the clock skew.
    pub remember_until: Option<u64>,
}

impl From<Verified> for VerifiedSignature {
    fn from(verified: Verified) -> Self {
        let claim = match verified.replay {
            erc8128::ReplayGuard::Nonce(claim) => Some(claim),
            erc8128::ReplayGuard::Replayable(_) => None,
        };
        Self {
            facts: verified.facts,
            label: verified.label,
            nonce_key: claim.as_ref().map(|claim| claim.key.clone()),
            remember_until: claim.map(|claim| claim.remember_until),
        }
    }
}

/// A refused signature.
#[derive(Debug, Serialize, Tsify)]
pub struct RefusedSignature {
    pub reason: Reason,
    pub message: String,
}

/// The `isValidSignature(hash, signature)` call to make on the contract account at `address` on
/// `chainId` (an `eth_call` with `data: calldata`); pass what it returns to `erc1271Accepts`.
#[derive(Debug, Serialize, Tsify)]
#[serde(rename_all = "camelCase")]
pub struct Erc1271CheckView {
    pub chain_id: u64,
    /// EIP-55.
    pub address: String,
    /// The EIP-191 hash of the signature base, `0x` hex.
    pub hash: String,
    /// The signature's bytes, `0x` hex.
    pub signature: String,
    /// `isValidSignature(hash, signature)`, ABI-encoded.
    pub calldata: String,
}

/// A signature that passed every check but recovers to another address than its keyid's: valid
/// only if the contract account says so. No `signer` or `nonceKey` at the top level: code that
/// reads `verdict.signer` without looking at `outcome` must not take anyone's 65 bytes under a
/// victim's keyid for the victim's signature.
#[derive(Debug, Serialize, Tsify)]
pub struct PendingSignature {
    /// The signature's fields, unverified: they are its signer's only once `erc1271Accepts`
    /// says so of the account's answer to `erc1271.calldata`.
    pub unverified: VerifiedSignature,
    pub erc1271: Erc1271CheckView,
}

/// The local verdict on a signed request, by `outcome`.
#[derive(Debug, Serialize, Tsify)]
#[serde(tag = "outcome", rename_all = "lowercase")]
pub enum RequestVerdict {
    Verified(VerifiedSignature),
    Refused(RefusedSignature),
    Erc1271(PendingSignature),
}

/// Checks a received request's ERC-8128 signature as `kya_core` does (parse, keyid's chain,
/// Request-Bound, authority, time, nonce, body digest, EOA recovery), without I/O: `verified`
/// (then claim `nonceKey` in your store), `refused` with the API's reason, or `erc1271` with the
/// call to make. The signer's KYA standing is a separate read (`GET /api/v1/kya/:signer`).
#[wasm_bindgen(js_name = verifyRequest)]
pub fn verify_request(input: Ts<VerifyRequestInput>) -> JsResult<Ts<RequestVerdict>> {
    let input = VerifyRequestInput::read(&input)?;
    let policy = input.policy()?;
    let fields = input.headers.fields();
    let headers = pairs(&fields);
    let request = input.signed_request(&headers, whole(input.now, "now")?)?;
    let verdict = match erc8128::verify_request(&request, &policy) {
        Ok(Verification::Verified(verified)) => RequestVerdict::Verified(verified.into()),
        Err(refusal) => {
            RequestVerdict::Refused(RefusedSignature { reason: refusal.reason, message: refusal.message })
        }
        Ok(Verification::Erc1271(pending)) => {
            let check = pending.check();
            let erc1271 = Erc1271CheckView {
                chain_id: check.chain_id,
                address: checksummed(&check.address),
                hash: check.hash.to_string(),
                signature: hex::encode_prefixed(&check.signature),
                calldata: hex::encode_prefixed(check.calldata()),
            };
            // The fields it has if the account accepts it: `complete` with the magic value.
            let mut magic = [0u8; 32];
            magic[..4].copy_from_slice(&erc8128::ERC1271_MAGIC_VALUE);
            let verified = pending.complete(&magic).map_err(error)?;
            RequestVerdict::Erc1271(PendingSignature { unverified: verified.into(), erc1271 })
        }
    };
    to_js(&verdict)
}

/// Whether the return data of `isValidSignature` (`0x` hex; `0x` when the call reverted) says
/// "valid": the magic value `0x1626ba7e` in its first word.
#[wasm_bindgen(js_name = erc1271Accepts)]
pub fn erc1271_accepts(return_data: &str) -> JsResult<bool> {
    let bytes =
        hex::decode(return_data.trim()).map_err(|_| JsError::new("return data must be a 0x hex string"))?;
    Ok(erc8128::is_valid_signature_magic(&bytes))
}
