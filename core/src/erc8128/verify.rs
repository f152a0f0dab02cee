//! Verifying a signed request (ERC-8128 section 4): the policy, the checks in order, and what a
//! caller must still do with the result (an ERC-1271 call, a nonce to remember once).

use alloy_primitives::{B256, Bytes, eip191_hash_message};

use super::base::{Message, field_value, signature_base};
use super::digest;
use super::erc1271::{Erc1271Check, PendingErc1271};
use super::fields::{self, Selected};
use super::keyid::{KeyId, check_tag};
use super::refusal::{Reason, Refusal, malformed, unsupported};
use super::replay::{NonceClaim, ReplayGuard, ReplayableCheck};
use super::target::{Target, normalize_authority};
use super::verified::{SignatureFacts, Verified};

/// What every verifier says when it is not told the host the provider serves (the API's 400,
/// the packages' errors).
pub const AUTHORITY_REQUIRED: &str = "authority is required: the host[:port] the provider serves (such as \
     \"api.provider.example\"), which the signature must name; not read from the request's own Host header";

/// A request as the provider received it. Time is passed in: core reads no clock.
#[derive(Debug, Clone, Copy)]
pub struct SignedRequest<'a> {
    /// The HTTP method, as received.
    pub method: &'a str,
    /// The absolute URL the request was sent to: `@authority`, `@path`, `@query` come from it.
    pub url: &'a str,
    /// The header fields, names in any case; at least `signature-input` and `signature`.
    pub headers: &'a [(&'a str, &'a str)],
    /// The body, when the caller has it: its `content-digest` is then checked. Without it, a
    /// covered `content-digest` header is trusted to match the body the provider holds.
    pub body: Option<&'a [u8]>,
    /// Which signature to verify; by default `eth`, else the only one.
    pub label: Option<&'a str>,
    /// The host the provider serves (`host[:port]`), which the covered `@authority` must be.
    /// Required, as at the API (INTERFACE.md section 6): a provider that rebuilds the URL from
    /// the request's own `Host` header would otherwise accept a request signed for another host.
    pub authority: &'a str,
    /// Now, in Unix seconds.
    pub now: u64,
}

/// What a verifier accepts. [`VerifyPolicy::new`] gives the API's defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyPolicy {
    /// The chain the keyid must name.
    pub chain_id: u64,
    /// How far clocks may disagree, both before `created` and after `expires`.
    pub clock_skew_secs: u64,
    /// The longest `expires - created` accepted: nonces are remembered this long (plus skew).
    pub max_window_secs: u64,
    /// Whether a signature must carry a nonce (Non-Replayable). With `false`, Replayable
    /// signatures pass, and their early invalidation (ERC-8128 5.2) is the caller's to enforce
    /// through [`ReplayableCheck::enforce`].
    pub require_nonce: bool,
    /// Whether a signature that does not recover to its keyid's address may still be a contract
    /// account's (an ERC-1271 call to make). With `false` it is refused at once.
    pub allow_erc1271: bool,
}

impl VerifyPolicy {
    /// The default clock-skew allowance, in seconds.
    pub const DEFAULT_CLOCK_SKEW_SECS: u64 = 60;
    /// The default longest validity window, in seconds.
    pub const DEFAULT_MAX_WINDOW_SECS: u64 = 300;

    /// The defaults for `chain_id`: 60 s of skew, a 300 s window, nonces required, ERC-1271 on.
    pub fn new(chain_id: u64) -> Self {
        Self {
            chain_id,
            clock_skew_secs: Self::DEFAULT_CLOCK_SKEW_SECS,
            max_window_secs: Self::DEFAULT_MAX_WINDOW_SECS,
            require_nonce: true,
            allow_erc1271: true,
        }
    }
}

/// A signature that passed every check but one that needs the chain, or none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verification {
    /// It recovered to the keyid's address: an EOA's signature.
    Verified(Verified),
    /// It did not: valid only if the contract account at the keyid's address says so.
    Erc1271(PendingErc1271),
}

/// Verifies a signed request against `policy`, without I/O. Checks run in this order, the first
/// failure deciding the reason: the headers and URL parse (`malformed`, `unsupported`), the
/// keyid's chain (`wrong_chain`), Request-Bound coverage (`not_request_bound`), the authority
/// (`wrong_authority`), the validity window and time (`window_too_long`, `not_yet_valid`,
/// `expired`), the nonce (`unsupported` when required and absent), the body's digest
/// (`digest_mismatch`), and last the signature (`bad_signature`). The caller then makes the
/// ERC-1271 call if asked, and only then claims the nonce ([`ReplayGuard`]), so that a bad
/// signature cannot use up someone's nonce.
pub fn verify_request(request: &SignedRequest<'_>, policy: &VerifyPolicy) -> Result<Verification, Refusal> {
    let target = Target::parse(request.url).map_err(malformed)?;
    let header =
        |name: &str| field_value(request.headers, name).ok_or_else(|| malformed(format!("no {name} header")));
    let mut selected = fields::select(&header("signature-input")?, &header("signature")?, request.label)?;
    let key = KeyId::parse(&selected.keyid)?;
    check_tag(&selected.keyid, selected.tag.as_deref())?;
    if key.chain_id != policy.chain_id {
        return Err(Refusal::new(
            Reason::WrongChain,
            format!("keyid names chain {}; this verifier checks chain {}", key.chain_id, policy.chain_id),
        ));
    }
    check_request_bound(&selected, &target, request)?;
    check_authority(&target, request.authority)?;
    check_time(&selected, request.now, policy)?;
    if selected.nonce.is_none() && policy.require_nonce {
        return Err(unsupported("the signature has no nonce: Replayable signatures are not accepted here"));
    }
    check_digest(&selected, request)?;

    let message = Message { method: request.method, target: &target, headers: request.headers };
    let base = signature_base(&message, &selected.components, &selected.params_line)?;
    let hash = eip191_hash_message(base.as_bytes());
    let recovered = crate::ecdsa::recover(&selected.signature, &hash);
    let signature = Bytes::from(core::mem::take(&mut selected.signature));
    let verified = verified(selected, key, hash, policy);
    if recovered == Some(key.address) {
        return Ok(Verification::Verified(verified));
    }
    if !policy.allow_erc1271 {
        return Err(Refusal::new(
            Reason::BadSignature,
            format!("the signature does not recover to {}", key.address),
        ));
    }
    let check = Erc1271Check { chain_id: key.chain_id, address: key.address, hash, signature };
    Ok(Verification::Erc1271(PendingErc1271::new(check, verified)))
}

/// ERC-8128 3.1.1: `@authority`, `@method`, `@path`; `@query` when the URL has a query;
/// `content-digest` when the request has a body (given, non-empty, or announced by a
/// `content-digest` header when the body is not given).
fn check_request_bound(
    selected: &Selected,
    target: &Target,
    request: &SignedRequest<'_>,
) -> Result<(), Refusal> {
    let has_body = match request.body {
        Some(body) => !body.is_empty(),
        None => field_value(request.headers, "content-digest").is_some(),
    };
    let required = ["@authority", "@method", "@path"]
        .into_iter()
        .chain(target.has_query().then_some("@query"))
        .chain(has_body.then_some("content-digest"));
    let missing: Vec<&str> = required.filter(|name| !selected.components.iter().any(|c| c == name)).collect();
    match missing.as_slice() {
        [] => Ok(()),
        missing => Err(Refusal::new(
            Reason::NotRequestBound,
            format!("the signature does not cover {}", missing.join(", ")),
        )),
    }
}

/// The covered `@authority` (the URL's, normalised) must be the host the provider serves.
fn check_authority(target: &Target, expected: &str) -> Result<(), Refusal> {
    let expected = normalize_authority(&target.scheme, expected).map_err(malformed)?;
    match expected == target.authority {
        true => Ok(()),
        false => Err(Refusal::new(
            Reason::WrongAuthority,
            format!("the signature is for {}, not for {expected}", target.authority),
        )),
    }
}

/// ERC-8128 3.3.2: now within `[created, expires]`, each end widened by the skew, and the
/// window no longer than the verifier remembers nonces for (3.1.2).
fn check_time(selected: &Selected, now: u64, policy: &VerifyPolicy) -> Result<(), Refusal> {
    let (created, expires) = (selected.created, selected.expires);
    let window = expires - created;
    if window > policy.max_window_secs {
        return Err(Refusal::new(
            Reason::WindowTooLong,
            format!("valid for {window} s, longer than the {} s accepted", policy.max_window_secs),
        ));
    }
    if now.saturating_add(policy.clock_skew_secs) < created {
        return Err(Refusal::new(
            Reason::NotYetValid,
            format!("created at {created}, ahead of now ({now}) by more than the skew"),
        ));
    }
    if now > expires.saturating_add(policy.clock_skew_secs) {
        return Err(Refusal::new(Reason::Expired, format!("expired at {expires}; now is {now}")));
    }
    Ok(())
}

/// With the body in hand, a covered `content-digest` must be its digest.
fn check_digest(selected: &Selected, request: &SignedRequest<'_>) -> Result<(), Refusal> {
    let Some(body) = request.body else { return Ok(()) };
    if !selected.components.iter().any(|c| c == "content-digest") {
        return Ok(());
    }
    let header = field_value(request.headers, "content-digest")
        .ok_or_else(|| malformed("covers content-digest, but the request has none"))?;
    digest::check(&header, body)
}

fn verified(selected: Selected, key: KeyId, hash: B256, policy: &VerifyPolicy) -> Verified {
    let replay = match &selected.nonce {
        Some(nonce) => ReplayGuard::Nonce(NonceClaim::new(
            key,
            nonce,
            selected.expires.saturating_add(policy.clock_skew_secs),
        )),
        None => ReplayGuard::Replayable(ReplayableCheck {
            keyid: key.to_string(),
            created: selected.created,
            fingerprint: hash,
        }),
    };
    Verified {
        facts: SignatureFacts {
            signer: key.address,
            keyid: selected.keyid,
            chain_id: key.chain_id,
            created: selected.created,
            expires: selected.expires,
            nonce: selected.nonce,
            components: selected.components,
        },
        label: selected.label,
        replay,
    }
}
