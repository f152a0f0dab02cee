//! `kya._core`: the PyO3 extension under the Python package `kya` (`python/kya/`), thin
//! wrappers of kya-core, so that a Python agent or provider signs and checks exactly as the
//! Worker, the Rust client and the npm package do. The cryptography, encodings and checks are
//! kya-core's; a binding reads Python arguments, calls the core, and writes the result as
//! Python values (verdicts as `dict`s, typed in `kya/_core.pyi`). The Pythonic parts (the
//! `httpx` and `requests` auths, the provider's gate) are pure Python beside it.
//!
//! - [`keys`]: `PrivateKey` (a key read once), what signs a digest, `recover_signer`.
//! - [`erc8128`]: `sign_request`, `prepare_request` (a key held elsewhere), `verify_request`,
//!   `erc1271_accepts`.
//! - [`pass`]: `Jwks`, `verify_pass`, `verify_agent_request`.
//! - [`verifier_state`]: `KeyCache`, `NonceMemory`.
//! - [`feed`]: `compliance_lost_at` (what a change feed event revokes), `cursor_key`.
//! - [`forward`], [`consent`], [`calldata`], [`events`]: an agent's relayer flows
//!   (issue 64): forward requests and consents (typed data, digests, signatures by a key or a
//!   caller's signer of hashes), the registry calls' data and gas, the events a write emits.
//! - [`eth_values`]: `uint256`s, bytes, hashes and addresses read from Python once
//!   (`checksum_address`); [`convert`]: headers, bodies, JSON.
//! - [`error`]: the exceptions (`KyaError`, `InvalidInput`, `SignError`).

mod calldata;
mod consent;
mod convert;
mod erc8128;
mod error;
mod eth_values;
mod events;
mod feed;
mod forward;
mod keys;
mod pass;
mod verifier_state;

use pyo3::prelude::*;

#[pymodule]
fn _core(module: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = module.py();
    module.add("KyaError", py.get_type::<error::KyaError>())?;
    module.add("InvalidInput", py.get_type::<error::InvalidInput>())?;
    module.add("SignError", py.get_type::<error::SignError>())?;

    module.add_class::<keys::PrivateKey>()?;
    module.add_function(wrap_pyfunction!(erc8128::address_of, module)?)?;
    module.add_function(wrap_pyfunction!(erc8128::sign_request, module)?)?;
    module.add_function(wrap_pyfunction!(erc8128::prepare_request, module)?)?;
    module.add_function(wrap_pyfunction!(erc8128::verify_request, module)?)?;
    module.add_function(wrap_pyfunction!(erc8128::erc1271_accepts, module)?)?;
    module.add_class::<erc8128::Prepared>()?;

    module.add_class::<pass::Jwks>()?;
    module.add_function(wrap_pyfunction!(pass::verify_pass, module)?)?;
    module.add_function(wrap_pyfunction!(pass::verify_agent_request, module)?)?;

    module.add_class::<verifier_state::KeyCache>()?;
    module.add_class::<verifier_state::NonceMemory>()?;

    module.add_function(wrap_pyfunction!(feed::compliance_lost_at, module)?)?;
    module.add_function(wrap_pyfunction!(feed::cursor_key, module)?)?;
    module.add("FEED_RECONNECT_MS", feed::RECONNECT_MS)?;

    module.add_function(wrap_pyfunction!(forward::forward_request_typed_data, module)?)?;
    module.add_function(wrap_pyfunction!(forward::forward_request_digest, module)?)?;
    module.add_function(wrap_pyfunction!(forward::sign_forward_request, module)?)?;
    module.add_function(wrap_pyfunction!(consent::latest_consent_deadline, module)?)?;
    module.add_function(wrap_pyfunction!(consent::consents_needed, module)?)?;
    module.add_function(wrap_pyfunction!(consent::consent_typed_data, module)?)?;
    module.add_function(wrap_pyfunction!(consent::consent_digest, module)?)?;
    module.add_function(wrap_pyfunction!(consent::sign_consent, module)?)?;
    module.add_function(wrap_pyfunction!(keys::recover_signer, module)?)?;
    module.add_function(wrap_pyfunction!(eth_values::checksum_address, module)?)?;
    module.add_function(wrap_pyfunction!(calldata::register_agent_calldata, module)?)?;
    module.add_function(wrap_pyfunction!(calldata::register_agent_with_consent_calldata, module)?)?;
    module.add_function(wrap_pyfunction!(calldata::attest_compliance_calldata, module)?)?;
    module.add_function(wrap_pyfunction!(calldata::report_revenue_calldata, module)?)?;
    module.add_function(wrap_pyfunction!(calldata::terminate_self_calldata, module)?)?;
    module.add_function(wrap_pyfunction!(calldata::invalidate_consents_calldata, module)?)?;
    module.add_function(wrap_pyfunction!(calldata::invalidate_consents_through_calldata, module)?)?;
    module.add_function(wrap_pyfunction!(calldata::consent_nonce_calldata, module)?)?;
    module.add_function(wrap_pyfunction!(calldata::decode_consent_nonce, module)?)?;
    module.add_function(wrap_pyfunction!(calldata::forward_gas, module)?)?;
    module.add_function(wrap_pyfunction!(calldata::constitution_hash, module)?)?;
    module.add_function(wrap_pyfunction!(calldata::capability_hash, module)?)?;
    module.add_function(wrap_pyfunction!(events::registry_event, module)?)?;
    module.add("FORWARDER_DOMAIN_NAME", kya_core::registry::forward_request::DOMAIN_NAME)?;
    module.add("FORWARDER_DOMAIN_VERSION", kya_core::registry::forward_request::DOMAIN_VERSION)?;
    module.add("MAX_CONSENT_LIFETIME_SECS", kya_core::registry::consent::MAX_CONSENT_LIFETIME_SECS)?;

    module.add("PASS_HEADER", kya_core::pass::HEADER)?;
    module.add("JWKS_PATH", kya_core::pass::JWKS_PATH)?;
    module.add("PASS_SKEW_SECS", kya_core::pass::SKEW_SECS)?;
    module.add("DEFAULT_WINDOW_SECS", erc8128::DEFAULT_WINDOW_SECS)?;
    let reasons: Vec<&str> = kya_core::erc8128::Reason::ALL.iter().map(|reason| reason.as_str()).collect();
    module.add("SIGNATURE_REASONS", reasons)?;
    module.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
