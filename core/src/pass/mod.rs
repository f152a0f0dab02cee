//! KYA passes (INTERFACE.md section 7): the edge's signed statement of one wallet's KYA standing
//! at one block, which an agent carries beside its ERC-8128 signature and a provider checks
//! offline, in microseconds, with no call to us.
//!
//! A pass is a compact JWS (RFC 7515) signed with Ed25519 (RFC 8037), header
//! `{"alg":"EdDSA","typ":"kya-pass+jwt","kid":<RFC 7638 thumbprint>}`. The pieces, each with one
//! job:
//! - [`claims`]: what a pass says, and how the edge builds it from a standing read at a block;
//! - [`keys`]: the issuer's signing keys (a JWK set, the Worker's secret) and the public JWKS;
//! - [`jws`]: compact serialisation, signing and the signature check;
//! - [`verify`]: every check a provider makes, each refusal named;
//! - [`key_cache`]: how a verifier keeps the issuer's keys between fetches, throttled and
//!   bounded so that no stranger can steer it.
//!
//! One implementation serves the Worker (issuing), the client crate and the `kya` command line,
//! and the browser package (verifying).

pub mod claims;
pub mod jws;
pub mod key_cache;
pub mod keys;
pub mod verify;

pub use claims::{PassBlock, PassClaims, PassStanding};
pub use key_cache::{FetchReason, FetchTicket, KeyCache, KeyCachePolicy};
pub use keys::{Jwks, PublicJwk, SigningKey, SigningKeys};
pub use verify::{PassRefusal, PassTrust, VerifiedPass, verify_pass};

/// The JWS `typ` of a pass (RFC 8725 section 3.11: explicit typing, so a pass is never taken
/// for another JWT the same key might sign).
pub const TYP: &str = "kya-pass+jwt";
/// The JWS `alg` of Ed25519 (RFC 8037 section 3.1).
pub const ALG: &str = "EdDSA";
/// How far a verifier's clock may be from the issuer's (INTERFACE.md section 7).
pub const SKEW_SECS: u64 = 60;
/// A pass's lifetime unless the deployment sets `PASS_TTL_SECS`.
pub const DEFAULT_TTL_SECS: u64 = 300;
/// The longest lifetime `PASS_TTL_SECS` may set: revocation is pushed by the feed, but a
/// verifier that does not follow it relies on expiry alone.
pub const MAX_TTL_SECS: u64 = 3_600;
/// The header an agent sends its pass in, beside its ERC-8128 signature.
pub const HEADER: &str = "KYA-Pass";
/// Where the issuer serves its public keys.
pub const JWKS_PATH: &str = "/.well-known/jwks.json";
/// The media type of `GET /api/v1/kya/:wallet/pass`'s body.
pub const MEDIA_TYPE: &str = "application/jwt";
