//! Standard Webhooks signing (standardwebhooks.com): the one implementation the relayer's relay
//! events and the registry's change feed both sign with, so a receiver verifies either with the
//! same library. A delivery carries `webhook-id`, `webhook-timestamp` (Unix seconds) and
//! `webhook-signature: v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">`.

use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The prefix Standard Webhooks writes before a secret's base64.
pub const SECRET_PREFIX: &str = "whsec_";

/// The fewest bytes a signing key may have: HMAC-SHA256's block of security, 256 bits.
pub const MIN_SECRET_BYTES: usize = 32;

/// Why a secret's text was refused. Neither variant quotes the secret.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecretError {
    /// `whsec_` followed by something that is not base64.
    NotBase64,
    /// Fewer than [`MIN_SECRET_BYTES`] bytes once decoded.
    TooShort,
}

impl std::fmt::Display for SecretError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NotBase64 => f.write_str("whsec_ must be followed by base64"),
            Self::TooShort => {
                write!(f, "must be at least {MIN_SECRET_BYTES} bytes (after base64 decoding, with whsec_)")
            }
        }
    }
}

impl SecretError {
    /// The refusal of the setting `name` (`WEBHOOK_SECRET`), in the words every service uses:
    /// the one place they are written. Never quotes the secret.
    pub fn describe(&self, name: &str) -> String {
        match self {
            Self::NotBase64 => format!("{name}: {self}"),
            Self::TooShort => format!("{name} {self}"),
        }
    }
}

/// A secret's key bytes from its text: `whsec_` and base64 (as Standard Webhooks writes secrets),
/// or the raw text's bytes; surrounding whitespace ignored.
pub fn decode_secret(text: &str) -> Result<Vec<u8>, SecretError> {
    let text = text.trim();
    let bytes = match text.strip_prefix(SECRET_PREFIX) {
        Some(encoded) => {
            base64::engine::general_purpose::STANDARD.decode(encoded).map_err(|_| SecretError::NotBase64)?
        }
        None => text.as_bytes().to_vec(),
    };
    if bytes.len() < MIN_SECRET_BYTES {
        return Err(SecretError::TooShort);
    }
    Ok(bytes)
}

/// The `webhook-signature` header of one attempt: `v1,` and the base64 HMAC-SHA256, keyed with
/// the secret's bytes, of `{id}.{timestamp}.{body}`.
pub fn signature(secret: &[u8], id: &str, timestamp: u64, body: &str) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes a key of any length");
    mac.update(format!("{id}.{timestamp}.").as_bytes());
    mac.update(body.as_bytes());
    format!("v1,{}", base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSwg7duQoLFbaY=";

    /// The signature Python's `standardwebhooks` package (an implementation independent of this
    /// one) gives for this secret, id, time and body: the example of its own tests.
    #[test]
    fn signs_as_standard_webhooks_does() {
        let secret = decode_secret(SECRET).unwrap();
        let body = r#"{"test": 2432232314}"#;
        assert_eq!(
            signature(&secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1_614_265_330, body),
            "v1,tA4UOeJPm7Cral3TNUxB8sBj0mxQ1AK9p9uctQSFqqM="
        );
    }

    #[test]
    fn secrets_are_whsec_base64_or_raw_text_of_at_least_32_bytes() {
        assert_eq!(decode_secret(&format!("  {SECRET}\n")).unwrap().len(), 32);
        assert_eq!(decode_secret(&"k".repeat(32)).unwrap(), vec![b'k'; 32]);
        assert_eq!(decode_secret(&"k".repeat(31)), Err(SecretError::TooShort));
        assert_eq!(decode_secret("whsec_AAAA"), Err(SecretError::TooShort), "3 bytes once decoded");
        assert_eq!(decode_secret("whsec_not base64!"), Err(SecretError::NotBase64));
        let message = SecretError::NotBase64.to_string() + &SecretError::TooShort.to_string();
        assert!(!message.contains("not base64!"), "errors never quote the secret: {message}");
        assert_eq!(
            SecretError::TooShort.describe("WEBHOOK_SECRET"),
            "WEBHOOK_SECRET must be at least 32 bytes (after base64 decoding, with whsec_)"
        );
        assert_eq!(
            SecretError::NotBase64.describe("WEBHOOK_SECRET"),
            "WEBHOOK_SECRET: whsec_ must be followed by base64"
        );
    }
}
