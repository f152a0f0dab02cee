//! The error type of `kya-core`.

/// Errors of the pure domain logic: bad input, missing agents, and chain answers that do not decode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A status byte from the chain that is not one of the four agent states.
    #[error("unknown agent status {0}")]
    UnknownStatus(u8),
    /// A status name that is not one of `Active`, `Suspended`, `Revoked`, `Terminated`.
    #[error("invalid status '{0}': must be one of Active, Suspended, Revoked, Terminated")]
    InvalidStatusName(String),
    /// A path segment that should be an agent id but is not a positive integer.
    #[error("invalid agent id '{0}': must be a positive integer")]
    InvalidAgentId(String),
    /// A path segment that should be a wallet but is not a 20-byte hex address.
    #[error("invalid wallet '{input}': {reason}")]
    InvalidWallet {
        /// What the caller sent.
        input: String,
        /// Why it was refused.
        reason: &'static str,
    },
    /// A query parameter with a value outside what it accepts.
    #[error("invalid query parameter '{name}': {reason}")]
    InvalidQuery {
        /// The parameter's name.
        name: &'static str,
        /// What it accepts.
        reason: &'static str,
    },
    /// A field of a forward request given as JSON is missing or malformed; the message names it.
    #[error("{0}")]
    InvalidRequestField(String),
    /// The registry has no agent with this id.
    #[error("Agent not found: {0}")]
    AgentNotFound(u64),
    /// A well-formed id too large for any agent: the registry counts agents one by one from 1,
    /// so an id past 64 bits names none (404, like any id that does not exist).
    #[error("Agent not found: {0}")]
    AgentIdBeyondRegistry(String),
    /// The node answered a call with a revert this code does not expect.
    #[error("contract call reverted: {0}")]
    Reverted(String),
    /// The node answered with a JSON-RPC error (or not at all in JSON-RPC terms).
    #[error("RPC error: {0}")]
    Rpc(String),
    /// A call ran out of gas even when read alone: it needs more gas than the RPC provider's
    /// `eth_call` gas cap allows (a revenue history grown past it, say).
    #[error("call exceeds the RPC provider's eth_call gas cap: {0}")]
    OutOfGas(String),
    /// The node refused a JSON-RPC batch for its size: a smaller batch may pass.
    #[error("RPC batch refused: {0}")]
    BatchRefused(String),
    /// The node refused a request for the caller's request rate: later it may pass.
    #[error("RPC provider rate limit: {0}")]
    RateLimitedByProvider(String),
    /// The node has not seen the block a read names (a load balancer's backend behind the head
    /// that another backend pinned: `header not found` and the like, [`crate::chain::rpc::is_unseen_block`]):
    /// the same read a moment later may pass ([`crate::chain::retry`]). Worded as any RPC error.
    #[error("RPC error: {0}")]
    UnseenBlock(String),
    /// The node's answer does not decode as what was asked for.
    #[error("cannot decode the RPC answer: {0}")]
    Decode(String),
}

impl Error {
    /// True for errors caused by the caller's input (the edge API answers them with 400).
    pub const fn is_bad_request(&self) -> bool {
        matches!(
            self,
            Self::InvalidStatusName(_)
                | Self::InvalidAgentId(_)
                | Self::InvalidWallet { .. }
                | Self::InvalidQuery { .. }
                | Self::InvalidRequestField(_)
        )
    }
}

/// `Result` with [`Error`] as the default error.
pub type Result<T, E = Error> = core::result::Result<T, E>;
