//! Gasless forward requests in Python: the EIP-712 typed data a wallet signs, its digest, and its
//! signature by a local key or a caller's signer of hashes; the request read by the relayer's own
//! parser ([`forward_request::from_json`]), so both refuse the same requests with the same words.

use alloy_primitives::{Address, hex};
use kya_core::registry::forward_request::{self, ForwardRequest};
use pyo3::{
    prelude::*,
    types::{PyBytes, PyDict},
};
use serde_json::{Map, Value};

use crate::{
    convert::{parse_address, to_py},
    error::invalid,
    eth_values::{bytes_of, uint_of},
    keys::sign_digest,
};

/// A forward request from a `dict` with `from`, `to`, `value`, `gas`, `nonce`, `data` and, when
/// it expires, `deadline` (Unix seconds; absent or 0: never): numbers as `int`s (or decimal
/// strings), `data` as `bytes` or `0x` hex.
fn request_of(request: &Bound<'_, PyAny>) -> PyResult<ForwardRequest> {
    let request = request.cast::<PyDict>().map_err(|_| invalid("request must be a dict"))?;
    let mut object = Map::new();
    for (name, value) in request.iter() {
        let name: String = name.extract().map_err(|_| invalid("request's keys must be str"))?;
        let what = format!("request.{name}");
        let json = match name.as_str() {
            "from" | "to" => {
                Value::String(value.extract().map_err(|_| invalid(format!("{what} must be a str")))?)
            }
            "value" | "gas" | "nonce" | "deadline" => Value::String(uint_of(&value, &what)?.to_string()),
            "data" => Value::String(hex::encode_prefixed(bytes_of(&value, &what)?)),
            _ => return Err(invalid(format!("{what}: a forward request has no such field"))),
        };
        object.insert(name, json);
    }
    forward_request::from_json(&object, "request").map_err(invalid)
}

fn forwarder_of(forwarder: &str) -> PyResult<Address> {
    parse_address(forwarder, "forwarder")
}

/// The EIP-712 typed data of a forward request for `eth_signTypedData_v4` (eth-account's
/// `encode_typed_data(full_message=...)` takes it as it is).
#[pyfunction]
#[pyo3(signature = (request, *, chain_id, forwarder))]
pub(crate) fn forward_request_typed_data<'py>(
    py: Python<'py>,
    request: &Bound<'py, PyAny>,
    chain_id: u64,
    forwarder: &str,
) -> PyResult<Bound<'py, PyAny>> {
    let typed = forward_request::typed_data(&request_of(request)?, chain_id, forwarder_of(forwarder)?);
    to_py(py, &serde_json::to_value(typed).map_err(invalid)?)
}

/// The 32-byte EIP-712 digest that `request["from"]` signs.
#[pyfunction]
#[pyo3(signature = (request, *, chain_id, forwarder))]
pub(crate) fn forward_request_digest<'py>(
    py: Python<'py>,
    request: &Bound<'py, PyAny>,
    chain_id: u64,
    forwarder: &str,
) -> PyResult<Bound<'py, PyBytes>> {
    let domain = forward_request::domain(chain_id, forwarder_of(forwarder)?);
    Ok(PyBytes::new(py, forward_request::signing_digest(&request_of(request)?, &domain).as_slice()))
}

/// The request's 65-byte signature (`v` 27/28) by `private_key` (a `PrivateKey`, or its text or
/// bytes), or by `signer`, a callable given the 32-byte digest. The forwarder accepts it when it
/// recovers to `request["from"]`.
#[pyfunction]
#[pyo3(signature = (request, *, chain_id, forwarder, private_key=None, signer=None))]
pub(crate) fn sign_forward_request<'py>(
    py: Python<'py>,
    request: &Bound<'py, PyAny>,
    chain_id: u64,
    forwarder: &str,
    private_key: Option<&Bound<'py, PyAny>>,
    signer: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyBytes>> {
    let domain = forward_request::domain(chain_id, forwarder_of(forwarder)?);
    let digest = forward_request::signing_digest(&request_of(request)?, &domain);
    sign_digest(py, &digest, private_key, signer)
}
