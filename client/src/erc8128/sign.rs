//! The agent's side: a [`RequestSigner`] holds the key, the chain and the validity window, and
//! signs each request with the clock's time and a fresh random nonce (`kya_core::erc8128` does
//! the signing itself, without I/O; the clock and the randomness are read here).

use alloy::{primitives::Address, signers::local::PrivateKeySigner};
use base64::Engine;
use kya_core::erc8128::{RequestToSign, SignParams, SignedHeaders, SigningKey, VerifyPolicy, sign_request};
use reqwest::header::{HeaderName, HeaderValue};
use serde::Serialize;

use crate::{Error, Result};

/// Signs HTTP requests for one account with ERC-8128: label `eth`, Request-Bound (method,
/// authority, path, the query when there is one, and the body's `content-digest`), and
/// Non-Replayable (a fresh nonce each time).
///
/// ```no_run
/// # async fn run(key: alloy::signers::local::PrivateKeySigner) -> Result<(), Box<dyn std::error::Error>> {
/// use kya_client::RequestSigner;
///
/// let signer = RequestSigner::new(&key, 84532);
/// let http = reqwest::Client::new();
/// let mut request = http.post("https://api.provider.example/v1/infer").body(r#"{"prompt":"hi"}"#).build()?;
/// signer.sign_reqwest(&mut request)?;
/// let response = http.execute(request).await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct RequestSigner {
    key: SigningKey,
    address: Address,
    chain_id: u64,
    window: u64,
    covered: Vec<String>,
}

/// One signature made: the header values to send and what they say.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestSignature {
    /// The signing account (EIP-55 in JSON).
    pub signer: Address,
    /// `erc8128:<chain id>:<address in lowercase>`.
    pub keyid: String,
    /// Unix seconds the signature was made at.
    pub created: u64,
    /// Unix seconds it stops being valid.
    pub expires: u64,
    /// The nonce: 16 random bytes in base64url, unless given to [`RequestSigner::sign_at`].
    pub nonce: String,
    /// `Signature-Input`, `Signature` and, with a body, `Content-Digest`.
    #[serde(flatten)]
    pub headers: SignedHeaders,
}

impl RequestSigner {
    /// How long a signature stays valid unless [`RequestSigner::with_window`] says otherwise.
    pub const DEFAULT_WINDOW_SECS: u64 = 60;
    /// The longest window accepted here: the API's (and `kya_core`'s default policy's) limit,
    /// past which a verifier refuses the signature as `window_too_long`.
    pub const MAX_WINDOW_SECS: u64 = VerifyPolicy::DEFAULT_MAX_WINDOW_SECS;

    /// A signer for `key`'s account, with keyids on `chain_id` (the chain whose registry knows
    /// the agent: 84532 for Base Sepolia), and the default 60-second window.
    pub fn new(key: &PrivateKeySigner, chain_id: u64) -> Self {
        let key = SigningKey::from_slice(key.to_bytes().as_slice())
            .expect("a PrivateKeySigner holds a valid secp256k1 secret");
        Self::from_key(key, chain_id)
    }

    /// A signer for the key given as its 32 secret bytes.
    pub fn from_secret(secret: &[u8; 32], chain_id: u64) -> Result<Self> {
        let key = SigningKey::from_slice(secret)
            .map_err(|_| Error::Invalid("the secret is not a valid secp256k1 private key".into()))?;
        Ok(Self::from_key(key, chain_id))
    }

    fn from_key(key: SigningKey, chain_id: u64) -> Self {
        let public = key.verifying_key().to_encoded_point(false);
        let address = Address::from_raw_public_key(&public.as_bytes()[1..]);
        Self { key, address, chain_id, window: Self::DEFAULT_WINDOW_SECS, covered: Vec::new() }
    }

    /// Signatures valid for `seconds` (1 to [`RequestSigner::MAX_WINDOW_SECS`]). Shorter is
    /// safer: a verifier remembers each nonce only as long as the signature could pass.
    pub fn with_window(mut self, seconds: u64) -> Result<Self> {
        if !(1..=Self::MAX_WINDOW_SECS).contains(&seconds) {
            return Err(Error::Invalid(format!(
                "a signature's window must be 1 to {} seconds, not {seconds}",
                Self::MAX_WINDOW_SECS
            )));
        }
        self.window = seconds;
        Ok(self)
    }

    /// Also covers these header fields (by name, any case), which each request must then carry:
    /// `content-type`, say, so that no one on the way can change how the body is read.
    pub fn covering<I, S>(mut self, headers: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        self.covered = headers.into_iter().map(|name| name.as_ref().trim().to_ascii_lowercase()).collect();
        self
    }

    /// The signing account.
    pub fn address(&self) -> Address {
        self.address
    }

    /// The chain the keyids name.
    pub fn chain_id(&self) -> u64 {
        self.chain_id
    }

    /// The validity window, in seconds.
    pub fn window(&self) -> u64 {
        self.window
    }

    /// Signs `request` now, with a fresh nonce.
    pub fn sign(&self, request: &RequestToSign<'_>) -> Result<RequestSignature> {
        self.sign_at(request, unix_now(), &fresh_nonce()?)
    }

    /// Signs `request` as made at `created` (Unix seconds) with `nonce`: for tests and for
    /// callers with a clock or a nonce source of their own. A nonce must never be used twice.
    pub fn sign_at(
        &self,
        request: &RequestToSign<'_>,
        created: u64,
        nonce: &str,
    ) -> Result<RequestSignature> {
        let extra: Vec<&str> = self.covered.iter().map(String::as_str).collect();
        let expires = created.saturating_add(self.window);
        let params = SignParams {
            chain_id: self.chain_id,
            created,
            expires,
            nonce: Some(nonce),
            extra_components: &extra,
        };
        let headers =
            sign_request(request, &params, &self.key).map_err(|error| Error::Sign(error.to_string()))?;
        Ok(RequestSignature {
            signer: self.address,
            keyid: format!("erc8128:{}:{:#x}", self.chain_id, self.address),
            created,
            expires,
            nonce: nonce.to_owned(),
            headers,
        })
    }

    /// Signs a built `reqwest` request now and sets its `Signature-Input`, `Signature` and
    /// `Content-Digest` (removed when it has no body). A streamed body cannot be signed: its
    /// bytes are not known before it is sent.
    pub fn sign_reqwest(&self, request: &mut reqwest::Request) -> Result<RequestSignature> {
        let body = match request.body() {
            None => None,
            Some(body) => Some(body.as_bytes().ok_or_else(|| {
                Error::Invalid("a streamed body cannot be signed: give the request its bytes".into())
            })?),
        };
        let headers: Vec<(&str, &str)> = request
            .headers()
            .iter()
            .filter_map(|(name, value)| Some((name.as_str(), value.to_str().ok()?)))
            .collect();
        let url = request.url().as_str();
        let signature =
            self.sign(&RequestToSign { method: request.method().as_str(), url, headers: &headers, body })?;
        let target = request.headers_mut();
        target.remove("content-digest");
        for (name, value) in signature.headers.pairs() {
            let value = HeaderValue::from_str(value).map_err(|error| Error::Sign(error.to_string()))?;
            target.insert(HeaderName::from_static(name), value);
        }
        Ok(signature)
    }
}

/// A fresh nonce: 16 bytes (128 bits, as the ERC suggests) from the operating system's random
/// source, in base64url without padding (22 characters).
pub fn fresh_nonce() -> Result<String> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes)
        .map_err(|error| Error::Sign(format!("no randomness for a nonce: {error}")))?;
    Ok(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes))
}

fn unix_now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |elapsed| elapsed.as_secs())
}

#[cfg(test)]
mod tests {
    use kya_core::erc8128::{SignedRequest, Verification, content_digest, verify_request};

    use super::*;

    const URL: &str = "https://api.provider.example/v1/infer?model=small";

    fn signer() -> RequestSigner {
        RequestSigner::from_secret(&[7; 32], 84532).unwrap()
    }

    #[test]
    fn signs_what_kya_core_verifies() {
        let signer = signer().with_window(120).unwrap();
        let body = br#"{"prompt":"hi"}"#;
        let request = RequestToSign { method: "POST", url: URL, headers: &[], body: Some(body) };
        let signature = signer.sign_at(&request, 1_700_000_000, "n-1").unwrap();
        assert_eq!(signature.keyid, format!("erc8128:84532:{:#x}", signer.address()));
        assert_eq!((signature.created, signature.expires), (1_700_000_000, 1_700_000_120));
        assert_eq!(signature.headers.content_digest.as_deref(), Some(content_digest(body).as_str()));
        let headers = signature.headers.pairs();
        let received = SignedRequest {
            method: "POST",
            url: URL,
            headers: &headers,
            body: Some(body),
            label: None,
            authority: "api.provider.example",
            now: 1_700_000_030,
        };
        let Ok(Verification::Verified(verified)) = verify_request(&received, &VerifyPolicy::new(84532))
        else {
            panic!("verifies");
        };
        assert_eq!(verified.facts.signer, signer.address());
        assert_eq!(verified.facts.nonce.as_deref(), Some("n-1"));
        assert_eq!(verified.facts.components, ["@method", "@authority", "@path", "@query", "content-digest"]);
    }

    #[test]
    fn nonces_are_fresh_and_windows_bounded() {
        let first = fresh_nonce().unwrap();
        assert_eq!(first.len(), 22);
        assert!(first.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'), "{first}");
        assert_ne!(first, fresh_nonce().unwrap());
        let request = RequestToSign { method: "GET", url: URL, headers: &[], body: None };
        let (a, b) = (signer().sign(&request).unwrap(), signer().sign(&request).unwrap());
        assert_ne!(a.nonce, b.nonce);
        assert_eq!(a.expires - a.created, 60);
        assert!(signer().with_window(0).is_err());
        assert!(signer().with_window(301).is_err());
        assert_eq!(signer().with_window(300).unwrap().window(), 300);
        assert!(RequestSigner::from_secret(&[0; 32], 1).is_err());
    }

    #[test]
    fn sets_the_headers_of_a_reqwest_request() {
        crate::install_crypto_provider();
        let http = reqwest::Client::new();
        let signer = signer().covering(["Content-Type"]);
        let mut request = http
            .post(URL)
            .header("content-type", "application/json")
            .header("content-digest", "sha-256=:stale:")
            .body("{}")
            .build()
            .unwrap();
        let signature = signer.sign_reqwest(&mut request).unwrap();
        let headers = request.headers();
        assert_eq!(headers["signature-input"], signature.headers.signature_input.as_str());
        assert_eq!(headers["signature"], signature.headers.signature.as_str());
        assert_eq!(headers["content-digest"], content_digest(b"{}").as_str());
        assert_eq!(headers.get_all("content-digest").iter().count(), 1);
        assert!(signature.headers.signature_input.contains(r#""content-digest" "content-type")"#));

        // No body: no digest, and a stale one is dropped.
        let mut get = http.get(URL).header("content-digest", "sha-256=:stale:").build().unwrap();
        signer.covering::<[&str; 0], &str>([]).sign_reqwest(&mut get).unwrap();
        assert!(get.headers().get("content-digest").is_none());
    }
}
