//! The one error type of `kya-client`: what went wrong, with the services' own messages.

/// Everything a client call can fail with. Messages never contain a private key: keys are only
/// ever handed to alloy's signers, and no variant carries one.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A service answered with an error status; `message` is its `{"error": …}` text.
    #[error("{service} answered HTTP {status}: {message}")]
    Api {
        /// `API` (the read API) or `relayer`.
        service: &'static str,
        /// The HTTP status.
        status: u16,
        /// The service's own message, or the body when it carried none.
        message: String,
        /// The stable code the relayer names beside its message (`kya_relayer::Error::code`,
        /// docs/relayer.md): what a caller branches on. `None` from the read API, whose errors
        /// are SPEC.md's message alone.
        code: Option<String>,
    },
    /// A service could not be reached, or its answer could not be read.
    #[error("{service} at {url} could not be reached: {reason}")]
    Unreachable {
        /// `API`, `relayer` or `RPC`.
        service: &'static str,
        /// The URL asked (never one with credentials: see [`kya_core::chain::redact`]).
        url: String,
        /// What failed.
        reason: String,
    },
    /// A service answered 2xx with a body that is not what its interface promises.
    #[error("{service} answered something unexpected: {reason}")]
    Unexpected {
        /// Which service.
        service: &'static str,
        /// What did not fit.
        reason: String,
    },
    /// Input refused before anything was sent (a bad address, amount or setting).
    #[error("{0}")]
    Invalid(String),
    /// A registration lacks a consent its party must give (INTERFACE.md section 5): the
    /// signers and consents still missing. Nothing was sent.
    #[error("consent missing: {0}")]
    ConsentMissing(String),
    /// The registry (or the forwarder) refused the call: its revert reason, as the relayer's
    /// 500 carries it or as a direct call's simulation reported it.
    #[error("the registry refused the call: {0}")]
    Reverted(String),
    /// A KYA pass was refused: why, by a stable reason (`PassRefusal::reason`).
    #[error("pass refused: {0}")]
    PassRefused(#[from] kya_core::pass::PassRefusal),
    /// No pass can be checked now: the issuer's keys were never fetched, or could not be
    /// refreshed within their trust bound (`kya_core::pass::KeyCache`).
    #[error("{0}")]
    IssuerKeysUnavailable(String),
    /// The signer could not sign.
    #[error("signing failed: {0}")]
    Sign(String),
    /// A JSON-RPC call to the chain failed.
    #[error("RPC: {0}")]
    Rpc(String),
    /// A write was sent but did not settle in time; it may still be mined.
    #[error("gave up waiting after {seconds} s for {what}; it may still settle")]
    Timeout {
        /// What was being waited for (a relay id or a transaction hash).
        what: String,
        /// How long was waited.
        seconds: u64,
    },
}

/// `Result` with [`Error`] as its default error.
pub type Result<T, E = Error> = std::result::Result<T, E>;
