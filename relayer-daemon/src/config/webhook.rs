//! Webhooks: the receiver, the signing key, and the delivery's pace.

use super::{reader::Settings, redacted::RedactedUrl};
use crate::error::{Error, Result};

/// Default time one webhook delivery attempt may take, in seconds.
pub(crate) const DEFAULT_WEBHOOK_TIMEOUT_SECS: u64 = 10;
/// Default number of webhook deliveries in flight at once (each to a different relay).
pub(crate) const DEFAULT_WEBHOOK_CONCURRENCY: u64 = 8;
/// Default pause before the second attempt at a webhook delivery, in milliseconds; it doubles
/// with every failed attempt, up to the next.
pub(crate) const DEFAULT_WEBHOOK_RETRY_FIRST_MS: u64 = 1_000;
/// Default longest pause between two attempts at a webhook delivery: ten minutes.
pub(crate) const DEFAULT_WEBHOOK_RETRY_MAX_MS: u64 = 600_000;

/// The webhook receiver and the delivery's settings.
#[derive(Debug, Clone)]
pub struct WebhookConfig {
    /// The receiver (`WEBHOOK_URL`, http).
    pub url: RedactedUrl,
    /// The signing key (`WEBHOOK_SECRET`).
    pub secret: WebhookSecret,
    /// Longest time of one attempt (`WEBHOOK_TIMEOUT_SECS`, default 10).
    pub timeout: std::time::Duration,
    /// Deliveries in flight at once (`WEBHOOK_CONCURRENCY`, default 8, at least 1).
    pub concurrency: usize,
    /// Pause before the second attempt (`WEBHOOK_RETRY_FIRST_MS`, default 1000).
    pub retry_first: std::time::Duration,
    /// Longest pause between attempts (`WEBHOOK_RETRY_MAX_MS`, default 600000).
    pub retry_max: std::time::Duration,
}

impl WebhookConfig {
    /// `WEBHOOK_URL` and `WEBHOOK_SECRET` (both or neither) and the delivery's settings.
    pub(crate) fn read(settings: &Settings<impl Fn(&str) -> Option<String>>) -> Result<Option<Self>> {
        let (url, secret) = match (settings.text("WEBHOOK_URL"), settings.text("WEBHOOK_SECRET")) {
            (None, None) => return Ok(None),
            (Some(url), Some(secret)) => (url.trim().to_owned(), WebhookSecret::parse(&secret)?),
            (Some(_), None) => return Err(Error::Config("WEBHOOK_URL is set without WEBHOOK_SECRET".into())),
            (None, Some(_)) => return Err(Error::Config("WEBHOOK_SECRET is set without WEBHOOK_URL".into())),
        };
        // Any other scheme would fail every attempt: refused here, where the operator sees it.
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(Error::Config(format!(
                "WEBHOOK_URL must be an http:// or https:// URL: {}",
                kya_core::chain::redact::url(&url)
            )));
        }
        let millis =
            |name: &str, default: u64| settings.number(name, default).map(std::time::Duration::from_millis);
        Ok(Some(Self {
            url: RedactedUrl::new(url),
            secret,
            timeout: std::time::Duration::from_secs(
                settings.number("WEBHOOK_TIMEOUT_SECS", DEFAULT_WEBHOOK_TIMEOUT_SECS)?.max(1),
            ),
            concurrency: usize::try_from(
                settings.number("WEBHOOK_CONCURRENCY", DEFAULT_WEBHOOK_CONCURRENCY)?.clamp(1, 1_000),
            )
            .unwrap_or(1),
            retry_first: millis("WEBHOOK_RETRY_FIRST_MS", DEFAULT_WEBHOOK_RETRY_FIRST_MS)?
                .max(std::time::Duration::from_millis(1)),
            retry_max: millis("WEBHOOK_RETRY_MAX_MS", DEFAULT_WEBHOOK_RETRY_MAX_MS)?
                .max(std::time::Duration::from_millis(1)),
        }))
    }
}

/// The webhook signing key's bytes. Never formatted: `Debug` shows only its length.
#[derive(Clone, PartialEq, Eq)]
pub struct WebhookSecret(Vec<u8>);

impl WebhookSecret {
    /// Reads `WEBHOOK_SECRET`: `whsec_` and base64 (as Standard Webhooks writes secrets), or the
    /// raw text's bytes; at least `kya_core::standard_webhooks::MIN_SECRET_BYTES`. Errors never
    /// quote it.
    pub fn parse(text: &str) -> Result<Self> {
        kya_core::standard_webhooks::decode_secret(text)
            .map(Self)
            .map_err(|error| Error::Config(error.describe("WEBHOOK_SECRET")))
    }

    /// The key's bytes, for the HMAC.
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.0
    }
}

impl std::fmt::Debug for WebhookSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "WebhookSecret({} bytes, redacted)", self.0.len())
    }
}
