//! What signs here: a private key (`0x` and 64 hex digits, or its 32 bytes), read once into a
//! `PrivateKey` (or on each call, given as text or bytes), or a caller's signer of 32-byte hashes (a wallet, a KMS); and a digest (a forward request's, a
//! consent's) signed by either as the contracts take it, `r || s || v` with `v` 27 or 28
//! ([`kya_core::ecdsa`]); and whom a signature recovers to.

use alloy_primitives::{Address, B256, hex};
use kya_core::{api::checksum::checksummed, erc8128::SigningKey};
use pyo3::{
    prelude::*,
    types::{PyBytes, PyString},
};

use crate::{
    error::{invalid, sign_error},
    eth_values::{bytes_of, hash_of},
};

/// A private key read once, with its account: reading a key derives its public key (a scalar
/// multiplication about as costly as a signature), which a signer holding this object pays once
/// rather than on every request (issue 64's signing target). It never shows the key: `repr`
/// names the address only, and nothing reads the secret back.
#[pyclass(module = "kya._core", name = "PrivateKey", frozen)]
pub(crate) struct PrivateKey {
    key: SigningKey,
    address: Address,
}

impl PrivateKey {
    /// `0x` and 64 hex digits, or its 32 bytes. The message never shows the key.
    fn read(key: &Bound<'_, PyAny>) -> PyResult<Self> {
        let bytes = match key.cast::<PyString>() {
            Ok(text) => hex::decode(text.to_cow()?.trim()).ok(),
            Err(_) => key.extract::<Vec<u8>>().ok(),
        };
        let key = bytes
            .filter(|bytes| bytes.len() == 32)
            .and_then(|bytes| SigningKey::from_slice(&bytes).ok())
            .ok_or_else(|| {
                invalid("private_key must be 0x and 64 hex digits (or 32 bytes) of a valid secp256k1 key")
            })?;
        let address = kya_core::ecdsa::address_of(&key);
        Ok(Self { key, address })
    }

    pub(crate) fn key(&self) -> &SigningKey {
        &self.key
    }

    pub(crate) fn address(&self) -> Address {
        self.address
    }
}

#[pymethods]
impl PrivateKey {
    #[new]
    fn new(key: &Bound<'_, PyAny>) -> PyResult<Self> {
        Self::read(key)
    }

    /// The key's account (EIP-55).
    #[getter(address)]
    fn address_text(&self) -> String {
        checksummed(&self.address)
    }

    fn __repr__(&self) -> String {
        format!("PrivateKey(address='{}')", checksummed(&self.address))
    }
}

/// `use_key` given `key`: a `PrivateKey` as it is held, or a key's text or bytes read for this
/// call only.
pub(crate) fn with_private_key<R>(
    key: &Bound<'_, PyAny>,
    use_key: impl FnOnce(&PrivateKey) -> PyResult<R>,
) -> PyResult<R> {
    match key.cast::<PrivateKey>() {
        Ok(held) => use_key(held.get()),
        Err(_) => use_key(&PrivateKey::read(key)?),
    }
}

/// `digest` signed with `private_key` (a `PrivateKey`, or a key's text or bytes), or by `signer` (a callable given the 32 bytes that returns
/// the 65-byte signature, `bytes` or `0x` hex; `v` 0/1 is written as 27/28). Exactly one of them.
pub(crate) fn sign_digest<'py>(
    py: Python<'py>,
    digest: &B256,
    private_key: Option<&Bound<'py, PyAny>>,
    signer: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyBytes>> {
    let signature =
        match (private_key.filter(|key| !key.is_none()), signer.filter(|signer| !signer.is_none())) {
            (Some(key), None) => with_private_key(key, |key| {
                kya_core::ecdsa::sign_hash(key.key(), digest)
                    .map_err(|_| sign_error("the key could not sign the digest"))
            })?
            .to_vec(),
            (None, Some(signer)) => {
                let given = signer.call1((PyBytes::new(py, digest.as_slice()),))?;
                let bytes = bytes_of(&given, "the signer's signature")?;
                if bytes.is_empty() {
                    return Err(sign_error("the signer gave an empty signature"));
                }
                kya_core::ecdsa::with_v_27_28(&bytes)
            }
            _ => return Err(invalid("give exactly one of private_key and signer")),
        };
    Ok(PyBytes::new(py, &signature))
}

/// The address (EIP-55) a 65-byte `r || s || v` signature of `digest` recovers to, or `None`
/// (not an ordinary key's signature: a contract account's, which only the chain can check).
#[pyfunction]
pub(crate) fn recover_signer(
    digest: &Bound<'_, PyAny>,
    signature: &Bound<'_, PyAny>,
) -> PyResult<Option<String>> {
    let digest = hash_of(digest, "digest")?;
    let signature = bytes_of(signature, "signature")?;
    Ok(kya_core::ecdsa::recover(&signature, &digest).map(|address| checksummed(&address)))
}
