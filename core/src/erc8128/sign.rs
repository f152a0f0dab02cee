//! Signing a request (ERC-8128 3.4), for Rust agents and browsers: the `Signature-Input`,
//! `Signature` and `Content-Digest` header values, from a secp256k1 key. ECDSA here is RFC 6979
//! deterministic, so signing needs no randomness; the nonce and the times are passed in.

use alloy_primitives::{Address, B256, eip191_hash_message};
use k256::ecdsa::SigningKey;
use serde::Serialize;

use super::base::{Message, signature_base};
use super::digest::content_digest;
use super::fields::{DEFAULT_LABEL, MAX_NONCE_LEN, signature_header, signature_params};
use super::keyid::KeyId;
use super::target::Target;

/// The request to sign, as it will be sent.
#[derive(Debug, Clone, Copy)]
pub struct RequestToSign<'a> {
    /// The HTTP method, exactly as it will be sent (it is signed as is).
    pub method: &'a str,
    /// The absolute URL it will be sent to.
    pub url: &'a str,
    /// Its header fields. Only those named in [`SignParams::extra_components`] are signed; a
    /// `content-digest` among them is ignored (the signer computes its own from the body).
    pub headers: &'a [(&'a str, &'a str)],
    /// Its body, if any. A non-empty body gets a `content-digest`, covered by the signature.
    pub body: Option<&'a [u8]>,
}

/// What goes into the signature besides the request.
#[derive(Debug, Clone, Copy)]
pub struct SignParams<'a> {
    /// The chain of the keyid: where a verifier resolves the account.
    pub chain_id: u64,
    /// Unix seconds the signature is made at.
    pub created: u64,
    /// Unix seconds it stops being valid; after `created`.
    pub expires: u64,
    /// The nonce (random, unique per key; 128 bits in base64url is the ERC's suggestion), or
    /// `None` for a Replayable signature, which most verifiers refuse.
    pub nonce: Option<&'a str>,
    /// Header fields to cover besides the Request-Bound set (lowercase names).
    pub extra_components: &'a [&'a str],
}

/// The header values to attach to the request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SignedHeaders {
    /// `Signature-Input`: `eth=(...);created=...;expires=...;nonce="...";keyid="..."`.
    pub signature_input: String,
    /// `Signature`: `eth=:<base64 of r || s || v>:`.
    pub signature: String,
    /// `Content-Digest`, when the request has a body: `sha-256=:<base64>:`. It replaces any
    /// `Content-Digest` the request had.
    pub content_digest: Option<String>,
}

impl SignedHeaders {
    /// The headers as `(name, value)` pairs, ready to set on the request.
    pub fn pairs(&self) -> Vec<(&'static str, &str)> {
        let mut pairs =
            vec![("signature-input", self.signature_input.as_str()), ("signature", &self.signature)];
        pairs.extend(self.content_digest.as_deref().map(|digest| ("content-digest", digest)));
        pairs
    }
}

/// Why a request could not be signed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignError {
    /// The URL is not an absolute `http(s)` URL.
    #[error("{0}")]
    Url(String),
    /// The times or the nonce cannot be written as ERC-8128 requires.
    #[error("{0}")]
    Params(String),
    /// A covered component cannot be built from the request (an absent header, a non-ASCII
    /// value, a method that is not a token).
    #[error("{0}")]
    Component(String),
    /// The 32 bytes are not a secp256k1 private key (zero, or not below the curve order).
    #[error("the secret is not a valid secp256k1 private key")]
    Key,
    /// A signature an external signer gave cannot be sent (empty).
    #[error("{0}")]
    Signature(String),
}

/// Signs `request` with `key`, under label `eth`, covering `@method`, `@authority`, `@path`,
/// `@query` when the URL has a query, `content-digest` when there is a body (the ERC's order),
/// then `params.extra_components`.
pub fn sign_request(
    request: &RequestToSign<'_>,
    params: &SignParams<'_>,
    key: &SigningKey,
) -> Result<SignedHeaders, SignError> {
    sign_request_for_account(request, params, key, crate::ecdsa::address_of(key))
}

/// [`sign_request`] for a contract account (ERC-1271): the keyid names `account`, and `key` is a
/// key whose signatures the account's `isValidSignature` accepts (its owner's, say). A verifier
/// finds that the signature does not recover to `account` and asks the account.
pub fn sign_request_for_account(
    request: &RequestToSign<'_>,
    params: &SignParams<'_>,
    key: &SigningKey,
    account: Address,
) -> Result<SignedHeaders, SignError> {
    let prepared = prepare_request(request, params, account)?;
    let signature = crate::ecdsa::sign_hash(key, &prepared.message_hash()).map_err(|_| SignError::Key)?;
    prepared.finish(&signature)
}

/// A request made ready for a signer that holds its key elsewhere (a wallet, a KMS, a hardware
/// key): what to sign, and how the signature it gives becomes the headers. [`sign_request`] is
/// this with a local key; the hosts' packages offer it for keys they cannot hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreparedRequest {
    params_line: String,
    base: String,
    content_digest: Option<String>,
}

impl PreparedRequest {
    /// The RFC 9421 signature base: the message a wallet signs with `personal_sign` (EIP-191).
    pub fn signature_base(&self) -> &str {
        &self.base
    }

    /// The EIP-191 hash of [`PreparedRequest::signature_base`]: what a signer of raw 32-byte
    /// hashes (a KMS) signs, and what an ERC-1271 account is asked about.
    pub fn message_hash(&self) -> B256 {
        eip191_hash_message(self.base.as_bytes())
    }

    /// The headers carrying `signature`: an EOA's 65 bytes `r || s || v` (`v` 27 or 28, or 0 or
    /// 1, written as 27 or 28, `personal_sign`'s encoding), or a contract account's bytes as its
    /// `isValidSignature` reads them.
    pub fn finish(self, signature: &[u8]) -> Result<SignedHeaders, SignError> {
        if signature.is_empty() {
            return Err(SignError::Signature("the signature is empty".into()));
        }
        let bytes = crate::ecdsa::with_v_27_28(signature);
        Ok(SignedHeaders {
            signature_input: format!("{DEFAULT_LABEL}={}", self.params_line),
            signature: signature_header(DEFAULT_LABEL, &bytes),
            content_digest: self.content_digest,
        })
    }
}

/// The signature base and parameters of `request` for `account` (an EOA's address, or a
/// contract account's), with the components [`sign_request`] covers: sign
/// [`PreparedRequest::message_hash`] (or `personal_sign` the base), then
/// [`PreparedRequest::finish`].
pub fn prepare_request(
    request: &RequestToSign<'_>,
    params: &SignParams<'_>,
    account: Address,
) -> Result<PreparedRequest, SignError> {
    let target = Target::parse(request.url).map_err(SignError::Url)?;
    check_params(params)?;
    let keyid = KeyId { chain_id: params.chain_id, address: account }.to_string();

    let digest = request.body.filter(|body| !body.is_empty()).map(content_digest);
    let mut components: Vec<String> = ["@method", "@authority", "@path"].map(String::from).into();
    if target.has_query() {
        components.push("@query".into());
    }
    if digest.is_some() {
        components.push("content-digest".into());
    }
    for extra in params.extra_components {
        if !components.iter().any(|c| c == extra) {
            components.push((*extra).to_owned());
        }
    }

    let headers: Vec<(&str, &str)> = request
        .headers
        .iter()
        .filter(|(name, _)| !name.eq_ignore_ascii_case("content-digest"))
        .copied()
        .chain(digest.as_deref().map(|digest| ("content-digest", digest)))
        .collect();
    let params_line = signature_params(&components, params.created, params.expires, params.nonce, &keyid)
        .map_err(SignError::Params)?;
    let message = Message { method: request.method, target: &target, headers: &headers };
    let base = signature_base(&message, &components, &params_line)
        .map_err(|refusal| SignError::Component(refusal.message))?;
    Ok(PreparedRequest { params_line, base, content_digest: digest })
}

/// [`sign_request`] with the key given as its 32 secret bytes.
pub fn sign_request_with_secret(
    request: &RequestToSign<'_>,
    params: &SignParams<'_>,
    secret: &[u8; 32],
) -> Result<SignedHeaders, SignError> {
    let key = SigningKey::from_bytes(secret.into()).map_err(|_| SignError::Key)?;
    sign_request(request, params, &key)
}

fn check_params(params: &SignParams<'_>) -> Result<(), SignError> {
    if params.expires <= params.created {
        return Err(SignError::Params(format!(
            "expires ({}) must be after created ({})",
            params.expires, params.created
        )));
    }
    match params.nonce {
        Some("") => Err(SignError::Params("the nonce is empty".into())),
        Some(nonce) if nonce.len() > MAX_NONCE_LEN => {
            Err(SignError::Params(format!("the nonce is longer than {MAX_NONCE_LEN} bytes")))
        }
        _ => Ok(()),
    }
}
