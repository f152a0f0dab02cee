//! The relayer's error type: what a relay or a query can fail with, in the words clients see.
//! Free of the HTTP server and the database engines, so the pure rules ([`crate::rules`]) can
//! use it: each error's status is chosen in [`crate::http::status`], and the engines' errors
//! are classified in `store::engine_errors`.

use kya_core::chain::redact;

/// Everything a relay or a query can fail with. Display strings are what clients see in
/// `{"error": …}`; the first ten are SPEC.md section 7's relayer messages, word for word.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The body lacks `request` or `signature`.
    #[error("Missing request or signature")]
    MissingRequestOrSignature,
    /// The body or a field of it is malformed (not JSON, a bad address, a bad signature length…).
    #[error("{0}")]
    BadRequest(String),
    /// `request.to` is not the registry.
    #[error("Relayer only forwards to the the service contract")]
    WrongTarget,
    /// `request.value` is above zero.
    #[error("Value transfers not supported")]
    ValueTransfer,
    /// `request.gas` is above what the relayer is willing to pay for.
    #[error("Gas limit {requested} above the relayer's cap of {cap}")]
    GasAboveCap {
        /// The gas the request asked for.
        requested: String,
        /// The configured cap.
        cap: u64,
    },
    /// Too many requests from one IP address in the last hour.
    #[error("IP rate limit exceeded ({0}/hour)")]
    IpRateLimited(u32),
    /// Too many requests from one signer in the last hour.
    #[error("Signer rate limit exceeded ({0}/hour)")]
    SignerRateLimited(u32),
    /// Too many read requests (`/status`, `/nonce`, `/domain`) from one IP address.
    #[error("Rate limit exceeded ({0}/minute). Try again in 1 minute.")]
    ReadRateLimited(u32),
    /// The signature does not recover to `request.from`, or the forwarder refuses it on chain.
    #[error("Invalid signature or nonce mismatch")]
    InvalidSignature,
    /// The relayer's wallet holds less than the minimum balance.
    #[error("Relayer balance too low. Please try again later or use direct mode.")]
    BalanceTooLow,
    /// This daemon holds no lease on any key that can pay: the keys are leased to other daemons
    /// of the cluster (more daemons run than there are keys), or its leases were just lost. Another
    /// daemon, or this one shortly, can relay.
    #[error("No relayer key is free on this relayer right now. Please try again later or use direct mode.")]
    NoFreeLane,
    /// The lease on a key was lost between choosing it and recording the transaction: nothing was
    /// sent on it. Handled inside (the relay moves to another key); a client that meets it is
    /// told [`Error::NoFreeLane`]'s words.
    #[error("No relayer key is free on this relayer right now. Please try again later or use direct mode.")]
    LaneLost(alloy::primitives::Address),
    /// A transaction was recorded but not submitted: the key's lease may have run out while it
    /// was recorded (the daemon stalled). Handled inside (the record is taken back and the
    /// relay handed to the key's holder); a client that meets it is told
    /// [`Error::NoFreeLane`]'s words.
    #[error("No relayer key is free on this relayer right now. Please try again later or use direct mode.")]
    Withheld {
        /// The hash recorded and withheld.
        tx_hash: alloy::primitives::B256,
        /// Its relayer nonce.
        nonce: u64,
    },
    /// The daily gas budget cannot cover this relay.
    #[error("Daily gas budget exhausted. Try again tomorrow.")]
    BudgetExhausted,
    /// What pacing has opened of the day's budget so far cannot cover this relay (INTERFACE.md
    /// section 3): more opens at `opens_at`.
    #[error("Gas budget for this hour spent. Try again at {}.", kya_core::api::time::iso8601(*opens_at))]
    BudgetSliceSpent {
        /// When the next slice opens (Unix seconds).
        opens_at: u64,
        /// Seconds from the refusal until then (`Retry-After`), at least 1.
        wait_secs: u64,
    },
    /// `request.data` is not exactly the encoding of a registry write (trailing bytes, a view,
    /// an unknown selector, arguments that do not decode).
    #[error("{0}")]
    NotExactCall(#[from] kya_core::registry::call::CallDataError),
    /// The request's deadline leaves the relayer too little time to get it mined.
    #[error(
        "request.deadline {deadline} leaves {left} s after the chain's head time {head}; the relayer needs at least {margin} s (or deadline 0: no expiry)"
    )]
    DeadlineTooNear {
        /// The request's deadline (Unix seconds).
        deadline: u64,
        /// The head block's timestamp.
        head: u64,
        /// Seconds between them (0 if the deadline is past).
        left: u64,
        /// The configured margin.
        margin: u64,
    },
    /// A `registerAgentWithConsent` whose consents expire before the relayer can get it mined:
    /// it would pass the simulation at the head and revert on inclusion (`Consent expired`), at
    /// the relayer's cost.
    #[error(
        "the consents' deadline {deadline} (registerAgentWithConsent's deadline) leaves {left} s after the chain's head time {head}; the relayer needs at least {margin} s"
    )]
    ConsentDeadlineTooNear {
        /// The consents' deadline (Unix seconds).
        deadline: u64,
        /// The head block's timestamp.
        head: u64,
        /// Seconds between them (0 if the deadline is past).
        left: u64,
        /// The configured margin.
        margin: u64,
    },
    /// A `registerAgentWithConsent` whose consents' deadline lies more than the registry's
    /// `MAX_CONSENT_LIFETIME` past the head: it would revert `Consent deadline too far`.
    #[error(
        "the consents' deadline {deadline} (registerAgentWithConsent's deadline) is past {latest}, {lifetime} s after the chain's head time {head}; the registry refuses a consent valid for longer (Consent deadline too far)",
        lifetime = kya_core::registry::consent::MAX_CONSENT_LIFETIME_SECS
    )]
    ConsentDeadlineTooFar {
        /// The consents' deadline (Unix seconds).
        deadline: u64,
        /// The head block's timestamp.
        head: u64,
        /// The latest deadline the registry accepts at the head.
        latest: u64,
    },
    /// This signer's share of the daily budget cannot cover this relay.
    #[error("Signer's share of the daily gas budget exhausted ({0}%). Try again tomorrow.")]
    SignerShareExhausted(u64),
    /// This client's (IP address, IPv6 /48) share of the daily budget cannot cover this relay.
    #[error("Client's share of the daily gas budget exhausted ({0}%). Try again tomorrow.")]
    ClientShareExhausted(u64),
    /// The registry call would fail: the contract's revert reason.
    #[error("{0}")]
    Reverted(String),
    /// The node could not be reached or answered with an error. Clients get a fixed message:
    /// the transport's text can name the RPC URL, and with it an API key. The detail (with any
    /// URL's path, query and credentials redacted) goes to the log through [`Error::detail`].
    #[error("RPC request failed; try again later")]
    Rpc(String),
    /// The transaction was signed and submitted but the node's answer was lost (timeout): it
    /// may still be mined, so the relay stays recorded and its reservation counted.
    #[error("Sending the transaction failed; it may still be mined as {tx_hash}")]
    Unconfirmed {
        /// Hash of the submitted transaction.
        tx_hash: String,
        /// Relayer-account nonce it used.
        nonce: u64,
        /// The transport's message, redacted like [`Error::Rpc`]'s; logged, never answered.
        message: String,
    },
    /// The store failed (SQLite, or PostgreSQL: its SQLSTATE and message, never the URL).
    #[error("storage error: {0}")]
    Store(String),
    /// The store could not answer in time or at all: a lock held past `DATABASE_LOCK_TIMEOUT_MS`
    /// (another daemon frozen in a transaction), a statement past `DATABASE_STATEMENT_TIMEOUT_MS`,
    /// a connection lost or refused. Nothing was written (the transaction rolled back), so the
    /// client may simply try again: 503 with `Retry-After`. The detail (the server's SQLSTATE and
    /// words, never the URL or its password) is logged through [`Error::detail`].
    #[error("The relayer's database is busy or unreachable; try again shortly")]
    StoreUnavailable(String),
    /// A store call passed the daemon's own deadline (`DATABASE_CALL_TIMEOUT_MS`): the server
    /// stopped answering with its connections open, so none of its timeouts fired. Unlike
    /// [`Error::StoreUnavailable`] the call's outcome is unknown (its commit may land when the
    /// server resumes), but a retry of the same signed request is always safe: a request has at
    /// most one live relay, and a retry is answered with it. 503 with `Retry-After`; the
    /// detail (which call, how long) is logged through [`Error::detail`].
    #[error(
        "The relayer's database did not answer in time; try again shortly (retrying the same signed request is safe: it is never relayed twice)"
    )]
    StoreTimedOut(String),
    /// The store holds something this version cannot read (a wei amount or a status that does
    /// not parse): a damaged file, not a configuration mistake.
    #[error("corrupt store: {0}")]
    StoreCorrupt(String),
    /// A background task failed (a bug: it panicked).
    #[error("internal error: {0}")]
    Internal(String),
    /// The configuration is incomplete or invalid (startup only).
    #[error("configuration: {0}")]
    Config(String),
    /// No relay with that id, hash or request.
    #[error("Relay not found")]
    RelayNotFound,
    /// No such route.
    #[error("Not found")]
    NotFound,
    /// The route exists but not for this HTTP method.
    #[error("Method not allowed")]
    MethodNotAllowed,
    /// A body sent without `Content-Length` (chunked): the size cap needs it up front.
    #[error("Content-Length header required")]
    LengthRequired,
}

/// `Result` with [`Error`] as the default error.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Seconds a client should wait before trying again (`Retry-After`), for errors that pass.
    pub fn retry_after_secs(&self) -> Option<u64> {
        match self {
            Self::StoreUnavailable(_) | Self::StoreTimedOut(_) => Some(1),
            Self::BudgetSliceSpent { wait_secs, .. } => Some(*wait_secs),
            _ => None,
        }
    }

    /// The stable code a client branches on, sent beside the message (`{"error", "code"}`): the
    /// message is SPEC.md's words, some of which carry figures, and several refusals share a
    /// status. One code per way a client should act, so internal failures a client cannot tell
    /// apart share `relayer_failure`, and the lease failures a client meets as
    /// [`Error::NoFreeLane`] share its `no_free_key`. The Python package's exceptions carry it
    /// (`kya.relayer_errors`); docs/relayer.md lists them.
    pub fn code(&self) -> &'static str {
        match self {
            Self::MissingRequestOrSignature => "missing_request_or_signature",
            Self::BadRequest(_) => "bad_request",
            Self::WrongTarget => "wrong_target",
            Self::ValueTransfer => "value_transfer",
            Self::GasAboveCap { .. } => "gas_above_cap",
            Self::IpRateLimited(_) => "ip_rate_limited",
            Self::SignerRateLimited(_) => "signer_rate_limited",
            Self::ReadRateLimited(_) => "read_rate_limited",
            Self::InvalidSignature => "invalid_signature",
            Self::BalanceTooLow => "balance_too_low",
            Self::NoFreeLane | Self::LaneLost(_) | Self::Withheld { .. } => "no_free_key",
            Self::BudgetExhausted => "budget_exhausted",
            Self::BudgetSliceSpent { .. } => "budget_slice_spent",
            Self::NotExactCall(_) => "not_a_registry_write",
            Self::DeadlineTooNear { .. } => "deadline_too_near",
            Self::ConsentDeadlineTooNear { .. } => "consent_deadline_too_near",
            Self::ConsentDeadlineTooFar { .. } => "consent_deadline_too_far",
            Self::SignerShareExhausted(_) => "signer_share_exhausted",
            Self::ClientShareExhausted(_) => "client_share_exhausted",
            Self::Reverted(_) => "reverted",
            Self::Rpc(_) => "rpc_failed",
            Self::Unconfirmed { .. } => "unconfirmed",
            Self::Store(_) | Self::StoreCorrupt(_) | Self::Internal(_) | Self::Config(_) => "relayer_failure",
            Self::StoreUnavailable(_) | Self::StoreTimedOut(_) => "store_unavailable",
            Self::RelayNotFound => "relay_not_found",
            Self::NotFound => "not_found",
            Self::MethodNotAllowed => "method_not_allowed",
            Self::LengthRequired => "length_required",
        }
    }

    /// The body of an error answer: the message clients see, and its [`Error::code`].
    pub fn body(&self) -> serde_json::Value {
        serde_json::json!({ "error": self.to_string(), "code": self.code() })
    }

    /// A short, fixed label for metrics (`reason="…"`), so label cardinality stays bounded.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::MissingRequestOrSignature => "missing_fields",
            Self::BadRequest(_) => "bad_request",
            Self::WrongTarget => "wrong_target",
            Self::ValueTransfer => "value_transfer",
            Self::GasAboveCap { .. } => "gas_above_cap",
            Self::IpRateLimited(_) => "ip_rate_limit",
            Self::SignerRateLimited(_) => "signer_rate_limit",
            Self::ReadRateLimited(_) => "read_rate_limit",
            Self::InvalidSignature => "invalid_signature",
            Self::BalanceTooLow => "balance_too_low",
            Self::NoFreeLane | Self::LaneLost(_) | Self::Withheld { .. } => "no_free_lane",
            Self::BudgetExhausted => "budget_exhausted",
            Self::BudgetSliceSpent { .. } => "budget_slice_spent",
            Self::NotExactCall(_) => "not_exact_call",
            Self::DeadlineTooNear { .. } => "deadline_too_near",
            Self::ConsentDeadlineTooNear { .. } => "consent_deadline_too_near",
            Self::ConsentDeadlineTooFar { .. } => "consent_deadline_too_far",
            Self::SignerShareExhausted(_) => "signer_share_exhausted",
            Self::ClientShareExhausted(_) => "client_share_exhausted",
            Self::Reverted(_) => "reverted",
            Self::Rpc(_) => "rpc",
            Self::Unconfirmed { .. } => "unconfirmed",
            Self::Store(_) => "store",
            Self::StoreUnavailable(_) => "store_unavailable",
            Self::StoreTimedOut(_) => "store_timed_out",
            Self::StoreCorrupt(_) => "store_corrupt",
            Self::Internal(_) => "internal",
            Self::Config(_) => "config",
            Self::NotFound => "not_found",
            Self::RelayNotFound => "relay_not_found",
            Self::MethodNotAllowed => "method_not_allowed",
            Self::LengthRequired => "length_required",
        }
    }

    /// The budget's open slices spent at `now`; the next opens at `opens_at`.
    pub(crate) fn slice_spent(opens_at: u64, now: u64) -> Self {
        Self::BudgetSliceSpent { opens_at, wait_secs: opens_at.saturating_sub(now).max(1) }
    }

    /// What a relay's send failed with, from the words its record keeps (`error`, the failure's
    /// `Display`, written when the send released it): for a client of another daemon (a
    /// standby, which handed the relay off) to get the status and words the sending daemon's
    /// own client would have got. Words no send fails with read as an RPC failure.
    pub(crate) fn of_released(reason: &str) -> Self {
        let fixed = [
            Self::NoFreeLane,
            Self::BalanceTooLow,
            Self::InvalidSignature,
            Self::StoreUnavailable(String::new()),
            Self::StoreTimedOut(String::new()),
            Self::Rpc(String::new()),
        ];
        if let Some(error) = fixed.into_iter().find(|error| error.to_string() == reason) {
            return error;
        }
        type Detailed = (&'static str, fn(String) -> Error);
        let with_detail: [Detailed; 3] = [
            ("storage error: ", Self::Store),
            ("corrupt store: ", Self::StoreCorrupt),
            ("internal error: ", Self::Internal),
        ];
        with_detail
            .into_iter()
            .find_map(|(prefix, error)| reason.strip_prefix(prefix).map(|detail| error(detail.to_owned())))
            .unwrap_or_else(|| Self::Rpc(reason.to_owned()))
    }

    /// An RPC failure, keeping the node's message for the log with any URL in it redacted (it
    /// never holds the key: the key only signs locally and is never sent).
    pub(crate) fn rpc(error: impl std::fmt::Display) -> Self {
        Self::Rpc(redact::urls_in(&error.to_string()))
    }

    /// The text for the server's log: what clients see, plus the transport's (redacted) detail
    /// where clients get a fixed message.
    pub fn detail(&self) -> String {
        match self {
            Self::Rpc(detail) => format!("RPC error: {detail}"),
            Self::StoreUnavailable(detail) => format!("store unavailable: {detail}"),
            Self::StoreTimedOut(detail) => format!("store call past its deadline: {detail}"),
            Self::Unconfirmed { tx_hash, message, .. } => {
                format!("sending {tx_hash} failed ({message}); it may still be mined")
            }
            other => other.to_string(),
        }
    }
}
