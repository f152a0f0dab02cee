//! ERC-8128 "Signed HTTP Requests with Ethereum": RFC 9421 HTTP message signatures whose
//! signature is an Ethereum account's `personal_sign` (EIP-191) of the signature base.
//!
//! Pure and without I/O, like the rest of the crate: time comes in, and where the chain must be
//! asked (an ERC-1271 contract account) or state kept (a nonce seen once), the result says what
//! to do instead of doing it.
//!
//! - [`verify_request`] checks a [`SignedRequest`] against a [`VerifyPolicy`] and answers a
//!   [`Verification`]: [`Verified`] (the signature recovered to the keyid's address), or
//!   [`PendingErc1271`], whose [`Erc1271Check`] is the `isValidSignature` call to make and whose
//!   [`PendingErc1271::complete`] decides on its return data. A refusal is a [`Refusal`]: one of
//!   the API's eleven [`Reason`]s and a message.
//! - Every [`Verified`] carries its [`ReplayGuard`]: a [`NonceClaim`] to store exactly once, or,
//!   for a Replayable signature a policy allowed, the [`ReplayableCheck`] of its early
//!   invalidation.
//! - [`sign_request`] (or [`sign_request_with_secret`]) gives the [`SignedHeaders`] for a
//!   request; [`prepare_request`] the signature base and its hash for a key held elsewhere (a
//!   wallet, a KMS), whose signature [`PreparedRequest::finish`] makes the headers;
//!   [`content_digest`] the RFC 9530 digest of a body.
//!
//! # How the standard was read
//!
//! The ERC (draft of February 2026) builds on RFC 9421 for everything it does not say, and the
//! two existing implementations (`@slicekit/erc8128` in TypeScript, by the ERC's authors, and
//! the `erc8128` crate) were read for the signature base, so that signatures pass both ways:
//!
//! - Signing writes the ERC's example exactly: components `"@method" "@authority" "@path"`, then
//!   `"@query"` and `"content-digest"` when present; parameters `created`, `expires`, `nonce`,
//!   `keyid` in that order; label `eth`; the keyid's address in lowercase; `r || s || v` with
//!   `v` 27 or 28; `Content-Digest` as `sha-256`. (The other implementations put `@authority`
//!   first; the verifier follows whatever order the signature lists.)
//! - `@signature-params` is the signature's inner list re-serialised by RFC 8941, parameters
//!   in their received order, as RFC 9421 2.3 defines it. For the canonical serialisation
//!   every signer emits this is byte for byte the `Signature-Input` member; the TypeScript
//!   implementation copies the member's raw text instead, which differs only for input with
//!   non-canonical whitespace.
//! - Field values follow RFC 9421 2.1: trimmed, obsolete folding made a space, instances joined
//!   by `", "`; runs of spaces inside a value are kept (the TypeScript implementation collapses
//!   them, which RFC 9421 does not). `@method` is the method as received, no case changed (RFC
//!   9421 2.2.1; the TypeScript implementation upper-cases it, which differs only for a method
//!   sent in lower case). The URL goes through WHATWG parsing, as `fetch` and reqwest send it.
//!   `@query` of a URL without a query is `?` (RFC 9421 2.2.7), where both other implementations
//!   write an empty value; no signer covers `@query` without a query, so this never meets a
//!   real signature.
//!
//! # What the ERC leaves open, and what was chosen
//!
//! - **Which signature**: the caller's label, else `eth`, else the only one; several and none
//!   `eth` is `malformed` (the caller must name one), never a guess.
//! - **Unknown parameters** (such as `tag`): accepted and ignored; they are covered through
//!   `@signature-params` all the same. `alg` is refused as `unsupported`, as the ERC's rationale
//!   advises. Component parameters (`;sf`, `;key`, `;req`, `;bs`, `;name`) are `unsupported`, as
//!   are derived components other than `@method`, `@authority`, `@path`, `@query`, `@scheme`,
//!   `@target-uri` and `@request-target`. A component listed twice is `malformed` (RFC 9421).
//! - **Parameter types**: `created` and `expires` must be non-negative integers with `expires >
//!   created`, `keyid` and `nonce` strings; a nonce must be non-empty and at most
//!   [`MAX_NONCE_LEN`] bytes (it becomes a storage key). Otherwise `malformed`.
//! - **Request-Bound**: always required (Class-Bound signatures are not accepted). A query
//!   counts only when non-empty (`/p?` binds nothing, and its `@query` equals no query's `?`).
//!   The request has a body when the given body is non-empty, or, when the body is not given, when
//!   it carries a `content-digest` header; either way `content-digest` must then be covered. A
//!   covered digest is checked when the body is given and trusted to the caller otherwise.
//! - **Time**: skew widens both ends, `created - skew <= now <= expires + skew`; the window
//!   `expires - created` may not exceed the policy's (300 s by default), for Replayable
//!   signatures too. Nonces are kept until `expires + skew`, the last moment the same signature
//!   could pass again.
//! - **Missing nonce** with nonces required: `unsupported`. When a policy allows Replayable
//!   signatures, both early-invalidation mechanisms of section 5.2 are offered
//!   ([`ReplayableCheck::enforce`]); a signature so invalidated is `expired`. Its fingerprint
//!   is the EIP-191 hash of the signature base, not the signature bytes (which a third party
//!   can make malleable without changing what was signed).
//! - **EOA or contract**: a 65-byte signature that recovers to the keyid's address is an EOA's
//!   (a high `s` is accepted, as `ecrecover` accepts it). Anything else is left to ERC-1271 on
//!   the keyid's chain, with the hash the ERC defines (`H`, the EIP-191 hash of the base) and
//!   the signature bytes as sent; a valid answer is the magic value `0x1626ba7e` in the first
//!   word, as OpenZeppelin's `SignatureChecker` decides. ERC-6492 (undeployed accounts) is not
//!   handled.
//! - **Nonce keys**: `<keyid>:<nonce>` with the keyid in canonical lowercase, so that one
//!   account's two spellings share one nonce space.

mod base;
mod digest;
mod erc1271;
mod fields;
mod keyid;
mod nonce_memory;
mod refusal;
mod replay;
mod sign;
mod target;
mod verified;
mod verify;

#[cfg(test)]
mod tests;

pub use digest::content_digest;
pub use erc1271::{ERC1271_MAGIC_VALUE, Erc1271Check, IERC1271, PendingErc1271, is_valid_signature_magic};
pub use fields::{DEFAULT_LABEL, MAX_NONCE_LEN};
pub use k256::ecdsa::SigningKey;
pub use keyid::{KeyId, TAG};
pub use nonce_memory::NonceMemory;
pub use refusal::{Reason, Refusal};
pub use replay::{NonceClaim, ReplayGuard, ReplayableCheck};
pub use sign::{
    PreparedRequest, RequestToSign, SignError, SignParams, SignedHeaders, prepare_request, sign_request,
    sign_request_for_account, sign_request_with_secret,
};
pub use verified::{SignatureFacts, Verified};
pub use verify::{AUTHORITY_REQUIRED, SignedRequest, Verification, VerifyPolicy, verify_request};
