//! KYA passes in Python (INTERFACE.md section 7): `Jwks`, the issuer's keys read once;
//! `verify_pass`, the offline check of a pass; `verify_agent_request`, a provider's whole
//! admission of a request (its ERC-8128 signature, then the `KYA-Pass` it carries, the pass's
//! wallet being the signer), with the verdicts and reasons of the npm package's
//! `verifyAgentRequest`. The checks are [`kya_core::pass`]'s and [`kya_core::erc8128`]'s.

use std::sync::Arc;

use kya_core::{
    api::checksum::checksummed,
    erc8128::{self, Verification},
    pass::{self, PassRefusal, PassTrust, VerifiedPass},
};
use pyo3::{prelude::*, types::PyDict};

use crate::{
    convert::{json_text, now_or, pairs, parse_address, to_py},
    erc8128::{Received, policy, verified_dict},
    error::invalid,
};

/// The issuer's public keys (`GET /.well-known/jwks.json`), each read once: build one per
/// document fetched and verify every pass with it.
#[pyclass(module = "kya._core", name = "Jwks", frozen)]
#[derive(Clone)]
pub(crate) struct Jwks {
    pub(crate) keys: Arc<pass::Jwks>,
}

#[pymethods]
impl Jwks {
    /// A JWKS document: a `dict` (parsed JSON), `str` or `bytes`. Keys a pass cannot be signed
    /// with (other types or curves) are skipped; a document without a `keys` array is refused.
    #[new]
    pub(crate) fn read(document: &Bound<'_, PyAny>) -> PyResult<Self> {
        let text = json_text(document, "the JWKS")?;
        let keys = pass::Jwks::from_json(&text).map_err(invalid)?;
        Ok(Self { keys: Arc::new(keys) })
    }

    /// The `kid`s of the keys held, in the document's order.
    #[getter]
    fn kids(&self) -> Vec<String> {
        self.keys.keys().iter().map(|key| key.kid.clone()).collect()
    }

    fn __contains__(&self, kid: &str) -> bool {
        self.keys.find(kid).is_some()
    }

    fn __len__(&self) -> usize {
        self.keys.keys().len()
    }

    fn __repr__(&self) -> String {
        format!("Jwks(kids={:?})", self.kids())
    }
}

/// The keys to verify with: a [`Jwks`], or a document to read now.
fn keys_of(jwks: &Bound<'_, PyAny>) -> PyResult<Arc<pass::Jwks>> {
    match jwks.cast::<Jwks>() {
        Ok(held) => Ok(Arc::clone(&held.get().keys)),
        Err(_) => Ok(Jwks::read(jwks)?.keys),
    }
}

fn trust_of(issuer: &str, chain_id: u64, registry: &str) -> PyResult<PassTrust> {
    Ok(PassTrust { issuer: issuer.to_owned(), chain_id, registry: parse_address(registry, "registry")? })
}

/// A pass that verified: `wallet` (EIP-55, the wallet `sub` names), `kid`, and its `claims` as
/// signed (the JWT's own names: `chainId`, `kya.isCompliant`, ...).
fn pass_dict<'py>(
    py: Python<'py>,
    outcome: Option<&str>,
    pass: VerifiedPass,
) -> PyResult<Bound<'py, PyDict>> {
    let claims = serde_json::to_value(&pass.claims).map_err(invalid)?;
    let dict = PyDict::new(py);
    if let Some(outcome) = outcome {
        dict.set_item("outcome", outcome)?;
    }
    dict.set_item("wallet", checksummed(&pass.wallet))?;
    dict.set_item("kid", pass.kid)?;
    dict.set_item("claims", to_py(py, &claims)?)?;
    Ok(dict)
}

fn refused<'py>(
    py: Python<'py>,
    stage: Option<&str>,
    reason: &str,
    message: String,
) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    dict.set_item("outcome", "refused")?;
    if let Some(stage) = stage {
        dict.set_item("stage", stage)?;
    }
    dict.set_item("reason", reason)?;
    dict.set_item("message", message)?;
    Ok(dict)
}

fn pass_refused<'py>(
    py: Python<'py>,
    stage: Option<&str>,
    refusal: &PassRefusal,
) -> PyResult<Bound<'py, PyDict>> {
    refused(py, stage, refusal.reason(), refusal.to_string())
}

/// Checks a pass (a compact JWS) offline: its signature under a key of `jwks`, its lifetime (60 s
/// of skew), its issuer, chain and registry. `{"outcome": "verified", "wallet", "kid", "claims"}`
/// states a standing, compliant or not (`claims["kya"]["isCompliant"]`); admitting a request is
/// `verify_agent_request`'s. `{"outcome": "refused", "reason", "message"}` otherwise.
#[pyfunction]
#[pyo3(signature = (jws, *, jwks, issuer, chain_id, registry, now=None))]
pub(crate) fn verify_pass<'py>(
    py: Python<'py>,
    jws: &str,
    jwks: &Bound<'py, PyAny>,
    issuer: &str,
    chain_id: u64,
    registry: &str,
    now: Option<u64>,
) -> PyResult<Bound<'py, PyDict>> {
    let keys = keys_of(jwks)?;
    let trust = trust_of(issuer, chain_id, registry)?;
    match pass::verify_pass(jws.trim(), &keys, &trust, now_or(now)) {
        Ok(pass) => pass_dict(py, Some("verified"), pass),
        Err(refusal) => pass_refused(py, None, &refusal),
    }
}

/// Admits a request offline: its ERC-8128 signature (an EOA's: a contract account needs the
/// chain, and is refused here), then its `KYA-Pass` header, which must verify, be the signer's,
/// and state a compliant agent; with `lost_compliance_at` (the latest block the change feed
/// reported the signer losing compliance at), a pass from that block or before is `revoked`.
/// `{"outcome": "admitted", "signature", "pass"}`: claim `signature["nonce_key"]` (once, until
/// `signature["remember_until"]`) and serve. `{"outcome": "refused", "stage", "reason",
/// "message"}`: at `stage` `"signature"` (answer 401) or `"pass"` (answer 403, or 401 for
/// `no_pass`).
#[pyfunction]
#[pyo3(signature = (
    method, url, headers, *, authority, jwks, issuer, chain_id, registry, body=None, label=None, now=None,
    clock_skew_secs=None, max_window_secs=None, lost_compliance_at=None,
))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn verify_agent_request<'py>(
    py: Python<'py>,
    method: &str,
    url: &str,
    headers: &Bound<'py, PyAny>,
    authority: &str,
    jwks: &Bound<'py, PyAny>,
    issuer: &str,
    chain_id: u64,
    registry: &str,
    body: Option<&Bound<'py, PyAny>>,
    label: Option<String>,
    now: Option<u64>,
    clock_skew_secs: Option<u64>,
    max_window_secs: Option<u64>,
    lost_compliance_at: Option<u64>,
) -> PyResult<Bound<'py, PyDict>> {
    let received = Received::read(method, url, headers, authority, body, label, now)?;
    let keys = keys_of(jwks)?;
    let trust = trust_of(issuer, chain_id, registry)?;
    let policy = policy(chain_id, clock_skew_secs, max_window_secs, true, false);
    let headers = pairs(&received.fields);
    let verified = match erc8128::verify_request(&received.signed(&headers), &policy) {
        Ok(Verification::Verified(verified)) => verified,
        Ok(Verification::Erc1271(_)) => {
            let message =
                "a contract account's signature needs the chain: use verify_request and erc1271_accepts";
            return refused(py, Some("signature"), "bad_signature", message.to_owned());
        }
        Err(refusal) => return refused(py, Some("signature"), refusal.reason.as_str(), refusal.message),
    };
    let Some((_, jws)) = headers.iter().find(|(name, _)| name.eq_ignore_ascii_case(pass::HEADER)) else {
        let message = "no KYA-Pass header: the agent fetches its pass from GET /api/v1/kya/:wallet/pass";
        return refused(py, Some("pass"), "no_pass", message.to_owned());
    };
    let admitted = pass::verify::admit_pass(jws.trim(), &keys, &trust, verified.facts.signer, received.now)
        .and_then(|pass| pass.check_not_revoked(lost_compliance_at).map(|()| pass));
    match admitted {
        Ok(pass) => {
            let dict = PyDict::new(py);
            dict.set_item("outcome", "admitted")?;
            dict.set_item("signature", verified_dict(py, None, verified)?)?;
            dict.set_item("pass", pass_dict(py, None, pass)?)?;
            Ok(dict)
        }
        Err(refusal) => pass_refused(py, Some("pass"), &refusal),
    }
}
