//! ERC-8128 signed requests in Python: `sign_request` for an agent (a local key, or any signer
//! of a 32-byte hash: a wallet, a KMS), `prepare_request` for a signer that cannot be called
//! from here (an async KMS client), and `verify_request` for a provider. The rules are
//! [`kya_core::erc8128`]'s; what is read here is what kya-core leaves to its host: the clock
//! (the default `created`, `now`) and randomness (the default nonce, 16 bytes from the operating
//! system, base64url).

use alloy_primitives::{Address, hex};
use base64::Engine;
use kya_core::{
    api::checksum::checksummed,
    erc8128::{
        self, KeyId, PreparedRequest, ReplayGuard, RequestToSign, SignParams, SignedHeaders, SignedRequest,
        Verification, Verified, VerifyPolicy,
    },
};
use pyo3::{
    prelude::*,
    types::{PyBytes, PyDict, PyString},
};

use crate::{
    convert::{body_of, headers_of, now_or, pairs, parse_address},
    error::{invalid, sign_error},
    keys::with_private_key,
};

/// How long a signature made here is valid when `expires` is not given (the Rust signer's and
/// the npm package's default).
pub(crate) const DEFAULT_WINDOW_SECS: u64 = 60;

/// 16 random bytes (the ERC's 128 bits) from the operating system, base64url.
fn random_nonce() -> PyResult<String> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|error| sign_error(format!("no randomness for a nonce: {error}")))?;
    Ok(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes))
}

/// The request and parameters of a signature, owned: what `sign_request` and `prepare_request`
/// read from their arguments.
struct ToSign {
    method: String,
    url: String,
    fields: Vec<(String, String)>,
    body: Option<Vec<u8>>,
    chain_id: u64,
    created: u64,
    expires: u64,
    nonce: String,
    components: Vec<String>,
}

impl ToSign {
    #[allow(clippy::too_many_arguments)]
    fn read(
        method: &str,
        url: &str,
        chain_id: u64,
        headers: Option<&Bound<'_, PyAny>>,
        body: Option<&Bound<'_, PyAny>>,
        created: Option<u64>,
        expires: Option<u64>,
        nonce: Option<String>,
        components: Option<Vec<String>>,
    ) -> PyResult<Self> {
        let created = now_or(created);
        Ok(Self {
            method: method.to_owned(),
            url: url.to_owned(),
            fields: headers_of(headers)?,
            body: body_of(body)?,
            chain_id,
            created,
            expires: expires.unwrap_or(created.saturating_add(DEFAULT_WINDOW_SECS)),
            nonce: match nonce {
                Some(nonce) => nonce,
                None => random_nonce()?,
            },
            components: components
                .unwrap_or_default()
                .iter()
                .map(|name| name.trim().to_ascii_lowercase())
                .collect(),
        })
    }

    /// `sign` given the request and parameters as kya-core takes them.
    fn with_core<R>(&self, sign: impl FnOnce(&RequestToSign<'_>, &SignParams<'_>) -> R) -> R {
        let headers = pairs(&self.fields);
        let extra: Vec<&str> = self.components.iter().map(String::as_str).collect();
        let request = RequestToSign {
            method: &self.method,
            url: &self.url,
            headers: &headers,
            body: self.body.as_deref(),
        };
        let params = SignParams {
            chain_id: self.chain_id,
            created: self.created,
            expires: self.expires,
            nonce: Some(&self.nonce),
            extra_components: &extra,
        };
        sign(&request, &params)
    }

    /// What a signature for `account` says besides its headers.
    fn about(&self, account: Address) -> About {
        About {
            keyid: KeyId { chain_id: self.chain_id, address: account }.to_string(),
            created: self.created,
            expires: self.expires,
            nonce: self.nonce.clone(),
        }
    }

    fn prepare(&self, account: Address) -> PyResult<Prepared> {
        let prepared = self
            .with_core(|request, params| erc8128::prepare_request(request, params, account))
            .map_err(sign_error)?;
        Ok(Prepared { prepared, about: self.about(account) })
    }
}

/// What a signature says besides its headers: its keyid, times and nonce.
struct About {
    keyid: String,
    created: u64,
    expires: u64,
    nonce: String,
}

impl About {
    /// The result of `sign_request`: the header values (also as the `headers` to set), and
    /// what the signature says.
    fn signed<'py>(&self, py: Python<'py>, headers: SignedHeaders) -> PyResult<Bound<'py, PyDict>> {
        let sent = PyDict::new(py);
        for (name, value) in [
            ("Signature-Input", Some(&headers.signature_input)),
            ("Signature", Some(&headers.signature)),
            ("Content-Digest", headers.content_digest.as_ref()),
        ] {
            if let Some(value) = value {
                sent.set_item(name, value)?;
            }
        }
        let dict = PyDict::new(py);
        dict.set_item("signature_input", headers.signature_input)?;
        dict.set_item("signature", headers.signature)?;
        dict.set_item("content_digest", headers.content_digest)?;
        dict.set_item("headers", sent)?;
        dict.set_item("keyid", &self.keyid)?;
        dict.set_item("created", self.created)?;
        dict.set_item("expires", self.expires)?;
        dict.set_item("nonce", &self.nonce)?;
        Ok(dict)
    }
}

/// A request ready for a signer that holds its key elsewhere: sign `message_hash` (raw, as a KMS
/// signs a digest) or `personal_sign` `signature_base` (as a wallet signs a message), then pass
/// the 65-byte signature to `finish` for the headers.
#[pyclass(module = "kya._core", name = "PreparedRequest", frozen)]
pub(crate) struct Prepared {
    prepared: PreparedRequest,
    about: About,
}

#[pymethods]
impl Prepared {
    /// The RFC 9421 signature base: the message of an EIP-191 `personal_sign`.
    #[getter]
    fn signature_base(&self) -> &str {
        self.prepared.signature_base()
    }

    /// The EIP-191 hash of `signature_base` (32 bytes): what a signer of raw hashes signs.
    #[getter]
    fn message_hash<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, self.prepared.message_hash().as_slice())
    }

    #[getter]
    fn keyid(&self) -> &str {
        &self.about.keyid
    }

    #[getter]
    fn created(&self) -> u64 {
        self.about.created
    }

    #[getter]
    fn expires(&self) -> u64 {
        self.about.expires
    }

    #[getter]
    fn nonce(&self) -> &str {
        &self.about.nonce
    }

    /// The headers carrying `signature`: 65 bytes `r || s || v` (`v` 27/28 or 0/1) of an EOA,
    /// or a contract account's signature bytes; `bytes` or `0x` hex.
    fn finish<'py>(&self, py: Python<'py>, signature: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyDict>> {
        let bytes = match signature.cast::<PyString>() {
            Ok(text) => hex::decode(text.to_cow()?.trim())
                .map_err(|_| sign_error("the signature must be bytes or 0x hex"))?,
            Err(_) => signature
                .extract::<Vec<u8>>()
                .map_err(|_| sign_error("the signature must be bytes or 0x hex"))?,
        };
        let headers = self.prepared.clone().finish(&bytes).map_err(sign_error)?;
        self.about.signed(py, headers)
    }
}

/// The address (EIP-55) of a private key (a `PrivateKey`, `0x` and 64 hex digits, or 32 bytes):
/// the agent's wallet, whose pass it carries.
#[pyfunction]
pub(crate) fn address_of(private_key: &Bound<'_, PyAny>) -> PyResult<String> {
    with_private_key(private_key, |key| Ok(checksummed(&key.address())))
}

/// Signs a request with ERC-8128 (label `eth`; `@method`, `@authority`, `@path`, `@query` when
/// the URL has one, `content-digest` when there is a body, then `components`), with
/// `private_key` (a `PrivateKey`, held by a signer that signs often, or a key's text or bytes,
/// read for this call), or with `signer`, a callable given the 32-byte EIP-191 hash of the signature
/// base that returns the 65-byte signature (then `address` names the account). `address` with
/// `private_key` names a contract account (ERC-1271) the key signs for.
#[pyfunction]
#[pyo3(signature = (
    method, url, *, chain_id, private_key=None, signer=None, address=None, headers=None, body=None,
    created=None, expires=None, nonce=None, components=None,
))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn sign_request<'py>(
    py: Python<'py>,
    method: &str,
    url: &str,
    chain_id: u64,
    private_key: Option<&Bound<'py, PyAny>>,
    signer: Option<&Bound<'py, PyAny>>,
    address: Option<&str>,
    headers: Option<&Bound<'py, PyAny>>,
    body: Option<&Bound<'py, PyAny>>,
    created: Option<u64>,
    expires: Option<u64>,
    nonce: Option<String>,
    components: Option<Vec<String>>,
) -> PyResult<Bound<'py, PyDict>> {
    let request = ToSign::read(method, url, chain_id, headers, body, created, expires, nonce, components)?;
    match (private_key.filter(|key| !key.is_none()), signer.filter(|signer| !signer.is_none())) {
        (Some(key), None) => with_private_key(key, |key| {
            let account = match address {
                Some(address) => parse_address(address, "address")?,
                None => key.address(),
            };
            let headers = request
                .with_core(|request, params| {
                    erc8128::sign_request_for_account(request, params, key.key(), account)
                })
                .map_err(sign_error)?;
            request.about(account).signed(py, headers)
        }),
        (None, Some(signer)) => {
            let address =
                address.ok_or_else(|| invalid("a signer needs the address it signs for: address=..."))?;
            let prepared = request.prepare(parse_address(address, "address")?)?;
            let signature = signer.call1((prepared.message_hash(py),))?;
            prepared.finish(py, &signature)
        }
        _ => Err(invalid("give exactly one of private_key and signer")),
    }
}

/// The signature base and hash of a request for `address`, to be signed elsewhere and finished
/// with `PreparedRequest.finish`.
#[pyfunction]
#[pyo3(signature = (
    method, url, *, chain_id, address, headers=None, body=None, created=None, expires=None, nonce=None,
    components=None,
))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn prepare_request(
    method: &str,
    url: &str,
    chain_id: u64,
    address: &str,
    headers: Option<&Bound<'_, PyAny>>,
    body: Option<&Bound<'_, PyAny>>,
    created: Option<u64>,
    expires: Option<u64>,
    nonce: Option<String>,
    components: Option<Vec<String>>,
) -> PyResult<Prepared> {
    let request = ToSign::read(method, url, chain_id, headers, body, created, expires, nonce, components)?;
    request.prepare(parse_address(address, "address")?)
}

/// A received request, as `verify_request` and `verify_agent_request` read it.
pub(crate) struct Received {
    pub(crate) method: String,
    pub(crate) url: String,
    pub(crate) fields: Vec<(String, String)>,
    pub(crate) body: Option<Vec<u8>>,
    pub(crate) label: Option<String>,
    pub(crate) authority: String,
    pub(crate) now: u64,
}

impl Received {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn read(
        method: &str,
        url: &str,
        headers: &Bound<'_, PyAny>,
        authority: &str,
        body: Option<&Bound<'_, PyAny>>,
        label: Option<String>,
        now: Option<u64>,
    ) -> PyResult<Self> {
        let authority = authority.trim();
        if authority.is_empty() {
            return Err(invalid(erc8128::AUTHORITY_REQUIRED));
        }
        Ok(Self {
            method: method.to_owned(),
            url: url.to_owned(),
            fields: headers_of(Some(headers))?,
            body: body_of(body)?,
            label,
            authority: authority.to_owned(),
            now: now_or(now),
        })
    }

    /// The request as kya-core checks it, with its header fields `headers` (from `pairs`).
    pub(crate) fn signed<'a>(&'a self, headers: &'a [(&'a str, &'a str)]) -> SignedRequest<'a> {
        SignedRequest {
            method: &self.method,
            url: &self.url,
            headers,
            body: self.body.as_deref(),
            label: self.label.as_deref(),
            authority: &self.authority,
            now: self.now,
        }
    }
}

/// A verifier's policy: the API's defaults for `chain_id`, each setting given replacing its own.
pub(crate) fn policy(
    chain_id: u64,
    clock_skew_secs: Option<u64>,
    max_window_secs: Option<u64>,
    require_nonce: bool,
    allow_erc1271: bool,
) -> VerifyPolicy {
    let defaults = VerifyPolicy::new(chain_id);
    VerifyPolicy {
        clock_skew_secs: clock_skew_secs.unwrap_or(defaults.clock_skew_secs),
        max_window_secs: max_window_secs.unwrap_or(defaults.max_window_secs),
        require_nonce,
        allow_erc1271,
        ..defaults
    }
}

/// A verified signature as Python sees it: the API's fields (`signer` EIP-55) in snake case,
/// its label, and the nonce to claim (`nonce_key` once, until `remember_until`; both `None` for
/// a Replayable signature).
pub(crate) fn verified_dict<'py>(
    py: Python<'py>,
    outcome: Option<&str>,
    verified: Verified,
) -> PyResult<Bound<'py, PyDict>> {
    let facts = verified.facts;
    let claim = match verified.replay {
        ReplayGuard::Nonce(claim) => Some(claim),
        ReplayGuard::Replayable(_) => None,
    };
    let dict = PyDict::new(py);
    if let Some(outcome) = outcome {
        dict.set_item("outcome", outcome)?;
    }
    dict.set_item("signer", checksummed(&facts.signer))?;
    dict.set_item("keyid", facts.keyid)?;
    dict.set_item("chain_id", facts.chain_id)?;
    dict.set_item("created", facts.created)?;
    dict.set_item("expires", facts.expires)?;
    dict.set_item("nonce", facts.nonce)?;
    dict.set_item("components", facts.components)?;
    dict.set_item("label", verified.label)?;
    dict.set_item("nonce_key", claim.as_ref().map(|claim| claim.key.clone()))?;
    dict.set_item("remember_until", claim.map(|claim| claim.remember_until))?;
    Ok(dict)
}

/// Checks a received request's ERC-8128 signature as kya-core does (parse, keyid's chain,
/// Request-Bound, authority, time, nonce, body digest, EOA recovery), without I/O. `authority` is
/// the host the provider serves (`host[:port]`), required. Answers `{"outcome": "verified", ...}`
/// (then claim `nonce_key`), `{"outcome": "refused", "reason", "message"}` with the API's reason,
/// or `{"outcome": "erc1271", "unverified", "erc1271"}` with the contract call to make.
#[pyfunction]
#[pyo3(signature = (
    method, url, headers, *, authority, chain_id, body=None, label=None, now=None, clock_skew_secs=None,
    max_window_secs=None, require_nonce=true, allow_erc1271=true,
))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn verify_request<'py>(
    py: Python<'py>,
    method: &str,
    url: &str,
    headers: &Bound<'py, PyAny>,
    authority: &str,
    chain_id: u64,
    body: Option<&Bound<'py, PyAny>>,
    label: Option<String>,
    now: Option<u64>,
    clock_skew_secs: Option<u64>,
    max_window_secs: Option<u64>,
    require_nonce: bool,
    allow_erc1271: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let received = Received::read(method, url, headers, authority, body, label, now)?;
    let policy = policy(chain_id, clock_skew_secs, max_window_secs, require_nonce, allow_erc1271);
    let headers = pairs(&received.fields);
    let verdict = match erc8128::verify_request(&received.signed(&headers), &policy) {
        Ok(Verification::Verified(verified)) => verified_dict(py, Some("verified"), verified)?,
        Err(refusal) => {
            let dict = PyDict::new(py);
            dict.set_item("outcome", "refused")?;
            dict.set_item("reason", refusal.reason.as_str())?;
            dict.set_item("message", refusal.message)?;
            dict
        }
        Ok(Verification::Erc1271(pending)) => {
            let check = pending.check();
            let erc1271 = PyDict::new(py);
            erc1271.set_item("chain_id", check.chain_id)?;
            erc1271.set_item("address", checksummed(&check.address))?;
            erc1271.set_item("hash", check.hash.to_string())?;
            erc1271.set_item("signature", hex::encode_prefixed(&check.signature))?;
            erc1271.set_item("calldata", hex::encode_prefixed(check.calldata()))?;
            // The fields it has if the account accepts it: `complete` with the magic value.
            let mut magic = [0u8; 32];
            magic[..4].copy_from_slice(&erc8128::ERC1271_MAGIC_VALUE);
            let unverified = pending.complete(&magic).map_err(|refusal| invalid(refusal.message))?;
            let dict = PyDict::new(py);
            dict.set_item("outcome", "erc1271")?;
            dict.set_item("unverified", verified_dict(py, None, unverified)?)?;
            dict.set_item("erc1271", erc1271)?;
            dict
        }
    };
    Ok(verdict)
}

/// Whether the return data of `isValidSignature` (bytes, or `0x` hex; empty when the call
/// reverted) says "valid": the magic value `0x1626ba7e` in its first word.
#[pyfunction]
pub(crate) fn erc1271_accepts(return_data: &Bound<'_, PyAny>) -> PyResult<bool> {
    let bytes = match return_data.cast::<PyString>() {
        Ok(text) => {
            hex::decode(text.to_cow()?.trim()).map_err(|_| invalid("return data must be bytes or 0x hex"))?
        }
        Err(_) => {
            return_data.extract::<Vec<u8>>().map_err(|_| invalid("return data must be bytes or 0x hex"))?
        }
    };
    Ok(erc8128::is_valid_signature_magic(&bytes))
}
