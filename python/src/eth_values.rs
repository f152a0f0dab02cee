//! Ethereum values as Python holds them, read and written once here: a `uint256` as an `int`
//! (or a decimal or `0x` string), bytes as `bytes` or `0x` hex, a 32-byte hash, an address.

use alloy_primitives::{B256, U256, hex};
use kya_core::api::checksum::checksummed;
use pyo3::{
    prelude::*,
    types::{PyBool, PyInt, PyString},
};

use crate::{convert::parse_address, error::invalid};

/// A non-negative integer below 2**256: an `int`, or a decimal or `0x` string.
pub(crate) fn uint_of(value: &Bound<'_, PyAny>, what: &str) -> PyResult<U256> {
    let refused = || invalid(format!("{what} must be a non-negative integer below 2**256"));
    if value.is_instance_of::<PyBool>() {
        return Err(refused());
    }
    let text = if value.is_instance_of::<PyInt>() {
        value.str()?.to_cow()?.into_owned()
    } else if let Ok(text) = value.cast::<PyString>() {
        text.to_cow()?.trim().to_owned()
    } else {
        return Err(refused());
    };
    text.parse::<U256>().map_err(|_| refused())
}

/// [`uint_of`] that must fit 64 bits (an agent id, a Unix time).
pub(crate) fn u64_of(value: &Bound<'_, PyAny>, what: &str) -> PyResult<u64> {
    u64::try_from(uint_of(value, what)?).map_err(|_| invalid(format!("{what} must be below 2**64")))
}

/// A `uint256` as a Python `int`.
pub(crate) fn int<'py>(py: Python<'py>, value: U256) -> PyResult<Bound<'py, PyAny>> {
    py.get_type::<PyInt>().call1((value.to_string(),))
}

/// Bytes given as `bytes` (or any bytes-like object) or as a `0x` hex string.
pub(crate) fn bytes_of(value: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<u8>> {
    let refused = || invalid(format!("{what} must be bytes or a 0x hex string"));
    match value.cast::<PyString>() {
        Ok(text) => {
            let text = text.to_cow()?;
            let digits = text.trim().strip_prefix("0x").ok_or_else(refused)?;
            hex::decode(digits).map_err(|_| refused())
        }
        Err(_) => value.extract::<Vec<u8>>().map_err(|_| refused()),
    }
}

/// 32 bytes, as `bytes` or `0x` and 64 hex digits.
pub(crate) fn hash_of(value: &Bound<'_, PyAny>, what: &str) -> PyResult<B256> {
    let bytes = bytes_of(value, what)?;
    B256::try_from(bytes.as_slice())
        .map_err(|_| invalid(format!("{what} must be 32 bytes, not {}", bytes.len())))
}

/// An address (`0x` and 40 hex digits, any case) written EIP-55, as the package writes addresses.
#[pyfunction]
pub(crate) fn checksum_address(address: &str) -> PyResult<String> {
    Ok(checksummed(&parse_address(address, "address")?))
}
