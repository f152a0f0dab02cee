//! The error type of `kya-core`.

/// Errors of the pure domain logic.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A status byte from the chain that is not one of the four agent states.
    #[error("unknown agent status {0}")]
    UnknownStatus(u8),
    /// A status name that is not one of `Active`, `Suspended`, `Revoked`, `Terminated`.
    #[error("invalid status '{0}': must be one of Active, Suspended, Revoked, Terminated")]
    InvalidStatusName(String),
}

/// `Result` with [`Error`] as the default error.
pub type Result<T, E = Error> = core::result::Result<T, E>;
