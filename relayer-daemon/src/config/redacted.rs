//! A URL that may carry a secret: hosted nodes put API keys in the path, the query or the user
//! info, and webhook receivers put tokens there.

/// A URL whose `Debug` shows only its scheme, host and port ([`kya_core::chain::redact::url`]).
#[derive(Clone, PartialEq, Eq)]
pub struct RedactedUrl(String);

impl RedactedUrl {
    pub(crate) fn new(url: String) -> Self {
        Self(url)
    }

    /// The whole URL, to connect to (never to a log).
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for RedactedUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RedactedUrl({})", kya_core::chain::redact::url(&self.0))
    }
}
