//! The error type of the edge API, and the one place where errors become HTTP statuses.

/// Why a request did not get its normal answer.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bad input, a missing agent, or a chain answer that did not decode (see [`kya_core::Error`]).
    #[error(transparent)]
    Core(#[from] kya_core::Error),
    /// `REGISTRY_ADDRESS` is unset or empty.
    #[error("REGISTRY_ADDRESS is not configured")]
    RegistryNotConfigured,
    /// `REGISTRY_ADDRESS` or `RPC_URL` is set to something unusable.
    #[error("{0}")]
    BadConfig(String),
    /// The RPC endpoint could not be reached or answered with an HTTP error.
    #[error("RPC endpoint unreachable: {0}")]
    RpcUnreachable(String),
    /// The RPC provider kept answering with server errors (HTTP 5xx) through every retry.
    #[error("RPC provider failing: {0}")]
    ProviderFailed(String),
    /// The RPC provider is rate-limiting this API, or this request used up its RPC requests:
    /// the client may try again later (`Retry-After` when the provider named a time).
    #[error("RPC provider unavailable: {message}")]
    ProviderUnavailable {
        /// What the provider did.
        message: String,
        /// Seconds the provider asked to wait, if it said.
        retry_after: Option<u64>,
    },
    /// No route has this path. SPEC.md section 7 gives every 404 ("agent ID or resource does
    /// not exist") the one prefix, so clients can test for it.
    #[error("Agent not found: no resource at {0}")]
    NoRoute(String),
    /// The API is read-only: only GET and HEAD (and the OPTIONS preflight) are served.
    #[error("Method {0} not allowed: the API is read-only (GET)")]
    MethodNotAllowed(String),
    /// `POST /api/v1/kya/verify` with a body that is not its shape (INTERFACE.md section 6).
    #[error("{0}")]
    BadBody(String),
    /// A method other than POST on `/api/v1/kya/verify`, the API's one write-shaped endpoint.
    #[error("Method {method} not allowed: {path} takes POST")]
    PostOnly { method: String, path: &'static str },
    /// More than the allowed requests in the current window.
    #[error("Rate limit exceeded. Try again in 1 minute.")]
    RateLimited {
        /// Seconds until the window resets.
        retry_after: u64,
    },
    /// A D1 statement would pass one of D1's limits (`index::limits`), named in the message.
    #[error("KYA passes are not configured on this deployment")]
    PassesNotConfigured,
    #[error("D1 limit: {0}")]
    D1Limit(String),
    /// An answer larger than the Worker renders (the registry's revenue names too many
    /// currencies and categories, or too long ones), named in the message.
    #[error("{0}")]
    AnswerTooLarge(String),
    /// `after` names a batch older than the change feed keeps: events after it may be gone.
    #[error(
        "Gone: the cursor is older than the change feed keeps (its oldest batch is {oldest}); start again without after"
    )]
    ChangesGone {
        /// The oldest batch kept.
        oldest: u64,
    },
    /// `after` is well-formed but past the newest batch: no event this feed has written (a
    /// cursor of another deployment, say). A 404 with SPEC's prefix, as a well-formed id that
    /// names no agent is.
    #[error("Agent not found: no event {after} in this change feed (its newest batch is {newest})")]
    ChangesCursorUnknown {
        /// The cursor as sent.
        after: String,
        /// The newest batch written (0: none yet).
        newest: u64,
    },
    /// `GET /api/v1/changes/stream` with a `Last-Event-ID` that is not an event id.
    #[error(
        "invalid Last-Event-ID header: must be an event id such as 12-0, as the feed gave it (got {0:?})"
    )]
    InvalidLastEventId(String),
    /// An `X-D1-Bookmark` header that is no bookmark (`d1::ReadSession`); its length.
    #[error(
        "invalid X-D1-Bookmark header: must be the X-D1-Bookmark of an answer, letters, digits and '-' up to 256 bytes (got {0} bytes)"
    )]
    InvalidBookmark(usize),
    /// The change feed needs the registry index: its D1 binding, with its tables.
    #[error(
        "the change feed needs the registry index (D1 binding INDEX with its migrations applied), which this deployment has not"
    )]
    FeedUnavailable,
    /// The Workers runtime failed (Cache API, KV, fetch plumbing).
    #[error("worker runtime: {0}")]
    Runtime(#[from] worker::Error),
}

impl Error {
    /// The HTTP status of this error.
    pub fn status(&self) -> u16 {
        match self {
            Self::Core(error) if error.is_bad_request() => 400,
            Self::Core(kya_core::Error::AgentNotFound(_) | kya_core::Error::AgentIdBeyondRegistry(_))
            | Self::NoRoute(_)
            | Self::ChangesCursorUnknown { .. } => 404,
            Self::BadBody(_) | Self::InvalidLastEventId(_) | Self::InvalidBookmark(_) => 400,
            Self::MethodNotAllowed(_) | Self::PostOnly { .. } => 405,
            Self::RateLimited { .. } => 429,
            Self::ChangesGone { .. } => 410,
            Self::FeedUnavailable | Self::PassesNotConfigured => 503,
            // A provider that refuses even a batch of one call, or keeps failing: a bad gateway.
            // So is one whose `eth_call` gas cap is below what a lone call needs.
            Self::Core(kya_core::Error::BatchRefused(_) | kya_core::Error::OutOfGas(_))
            | Self::ProviderFailed(_) => 502,
            Self::Core(kya_core::Error::RateLimitedByProvider(_)) | Self::ProviderUnavailable { .. } => 503,
            // SPEC.md section 7: RPC failures, call failures and reverts are all 500 (`/health`
            // alone reports an unreachable node as 503, in its own body).
            Self::Core(_)
            | Self::RpcUnreachable(_)
            | Self::RegistryNotConfigured
            | Self::BadConfig(_)
            | Self::D1Limit(_)
            | Self::Runtime(_) => 500,
            // The request is fine and the index whole; what it asks is more than the Worker
            // renders in one answer.
            Self::AnswerTooLarge(_) => 507,
        }
    }
}

/// `Result` with [`Error`] as the default error.
pub type Result<T, E = Error> = core::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses() {
        assert_eq!(Error::from(kya_core::Error::InvalidAgentId("x".into())).status(), 400);
        assert_eq!(Error::from(kya_core::Error::AgentNotFound(9)).status(), 404);
        assert_eq!(Error::from(kya_core::Error::AgentIdBeyondRegistry("1".repeat(30))).status(), 404);
        assert_eq!(Error::NoRoute("/api/v2/stats".into()).status(), 404);
        assert_eq!(Error::NoRoute("/x".into()).to_string(), "Agent not found: no resource at /x");
        assert_eq!(Error::from(kya_core::Error::Rpc("x".into())).status(), 500);
        assert_eq!(Error::RateLimited { retry_after: 3 }.status(), 429);
        assert_eq!(Error::BadBody("x".into()).status(), 400);
        let post_only = Error::PostOnly { method: "GET".into(), path: crate::verify::PATH };
        assert_eq!(post_only.status(), 405);
        assert_eq!(post_only.to_string(), "Method GET not allowed: /api/v1/kya/verify takes POST");
        assert_eq!(Error::RegistryNotConfigured.status(), 500);
        assert_eq!(Error::D1Limit("x".into()).status(), 500);
        assert_eq!(Error::AnswerTooLarge("x".into()).status(), 507);
        assert_eq!(Error::ChangesGone { oldest: 4 }.status(), 410);
        assert_eq!(Error::FeedUnavailable.status(), 503);
        assert_eq!(Error::PassesNotConfigured.status(), 503);
        assert_eq!(
            Error::PassesNotConfigured.to_string(),
            "KYA passes are not configured on this deployment"
        );
        assert_eq!(Error::InvalidLastEventId("x".into()).status(), 400);
        let unknown = Error::ChangesCursorUnknown { after: "9-0".into(), newest: 3 };
        assert_eq!((unknown.status(), unknown.to_string().starts_with("Agent not found: ")), (404, true));
        assert_eq!(Error::from(kya_core::Error::BatchRefused("x".into())).status(), 502);
        assert_eq!(Error::ProviderFailed("x".into()).status(), 502);
        assert_eq!(Error::from(kya_core::Error::OutOfGas("x".into())).status(), 502);
        assert_eq!(Error::ProviderUnavailable { message: "x".into(), retry_after: Some(2) }.status(), 503);
        assert_eq!(Error::from(kya_core::Error::RateLimitedByProvider("x".into())).status(), 503);
        assert_eq!(
            Error::RateLimited { retry_after: 3 }.to_string(),
            "Rate limit exceeded. Try again in 1 minute."
        );
    }
}
