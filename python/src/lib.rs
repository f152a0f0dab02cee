//! `kya._core`: the PyO3 extension under the Python package `kya` (`python/kya/`), thin
//! wrappers of kya-core, so that a Python agent or provider signs and checks exactly as the
//! Worker, the Rust client and the npm package do. The cryptography, encodings and checks are
//! kya-core's; a binding reads Python arguments, calls the core, and writes the result as
//! Python values (verdicts as `dict`s, typed in `kya/_core.pyi`). The Pythonic parts (the
//! `httpx` and `requests` auths, the provider's gate) are pure Python beside it.
//!
//! - [`erc8128`]: `sign_request`, `prepare_request` (a key held elsewhere), `verify_request`,
//!   `erc1271_accepts`.
//! - [`pass`]: `Jwks`, `verify_pass`, `verify_agent_request`.
//! - [`verifier_state`]: `KeyCache`, `NonceMemory`.
//! - [`error`]: the exceptions (`KyaError`, `InvalidInput`, `SignError`).

mod convert;
mod erc8128;
mod error;
mod pass;
mod verifier_state;

use pyo3::prelude::*;

#[pymodule]
fn _core(module: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = module.py();
    module.add("KyaError", py.get_type::<error::KyaError>())?;
    module.add("InvalidInput", py.get_type::<error::InvalidInput>())?;
    module.add("SignError", py.get_type::<error::SignError>())?;

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

    module.add("PASS_HEADER", kya_core::pass::HEADER)?;
    module.add("JWKS_PATH", kya_core::pass::JWKS_PATH)?;
    module.add("PASS_SKEW_SECS", kya_core::pass::SKEW_SECS)?;
    module.add("DEFAULT_WINDOW_SECS", erc8128::DEFAULT_WINDOW_SECS)?;
    let reasons: Vec<&str> = kya_core::erc8128::Reason::ALL.iter().map(|reason| reason.as_str()).collect();
    module.add("SIGNATURE_REASONS", reasons)?;
    module.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
