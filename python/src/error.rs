//! The package's exceptions, in one place: `KyaError`, the base of every error the package
//! raises; `InvalidInput`, an argument kya-core refuses (a key, an address, a JWKS, a header);
//! `SignError`, a request that cannot be signed as ERC-8128 requires. A refused signature or
//! pass is not an exception: it is a verdict (`outcome: "refused"`), as in the Rust and npm
//! packages.

use pyo3::{PyErr, create_exception, exceptions::PyException};

create_exception!(kya, KyaError, PyException, "The base of every error the kya package raises.");
create_exception!(
    kya,
    InvalidInput,
    KyaError,
    "An argument kya-core refuses: a key, an address, a JWKS, a header, a time."
);
create_exception!(
    kya,
    SignError,
    InvalidInput,
    "A request that cannot be signed as ERC-8128 requires (its URL, times, nonce, a covered header, the key)."
);

/// An [`InvalidInput`] saying `message`.
pub(crate) fn invalid(message: impl core::fmt::Display) -> PyErr {
    InvalidInput::new_err(message.to_string())
}

/// A [`SignError`] saying `message`.
pub(crate) fn sign_error(message: impl core::fmt::Display) -> PyErr {
    SignError::new_err(message.to_string())
}

/// A [`KyaError`] saying `message`: a call out of order (a fetch reported that was not begun).
pub(crate) fn kya_error(message: impl core::fmt::Display) -> PyErr {
    KyaError::new_err(message.to_string())
}
