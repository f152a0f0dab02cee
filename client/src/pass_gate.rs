//! A provider's whole admission of an agent's request, offline (INTERFACE.md section 7): its
//! ERC-8128 signature checked here (`kya_core::erc8128`), its nonce remembered here, and the
//! `KYA-Pass` it carries checked against the issuer's keys ([`PassVerifier`]). No call to the
//! API per request: the keys are fetched once and kept, and revocations come from the feed.
//!
//! Contract accounts (ERC-1271) need a chain read to verify: they are refused here, and are for
//! [`crate::Verifier`], which asks the API.

use std::{
    sync::Mutex,
    time::{SystemTime, UNIX_EPOCH},
};

use alloy::primitives::Address;
use kya_core::{
    erc8128::{
        NonceMemory, ReplayGuard, SignatureFacts, SignedRequest, Verification, VerifyPolicy, verify_request,
    },
    pass::{HEADER, VerifiedPass},
};

use crate::{Error, PassVerifier, ReceivedRequest, Result, erc8128::Origin};

/// A request the gate let through: who signed it, what the signature says, and their pass.
#[derive(Debug, Clone)]
pub struct Admitted {
    pub signer: Address,
    pub signature: SignatureFacts,
    pub pass: VerifiedPass,
}

/// A request the gate turned away: the HTTP status to answer (401: no valid signature or no
/// pass; 403: a valid pass that does not admit the signer), a stable reason and a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Turned {
    pub status: u16,
    pub reason: String,
    pub message: String,
}

/// Admits requests signed by compliant agents that carry their pass.
#[derive(Debug)]
pub struct PassGate {
    passes: PassVerifier,
    origin: Origin,
    policy: VerifyPolicy,
    /// Nonces seen, each kept until its signature could no longer pass (`remember_until`).
    nonces: Mutex<NonceMemory>,
}

impl PassGate {
    /// A gate for the provider serving `origin` (`https://api.provider.example`), trusting the
    /// passes `passes` checks, and signatures of that trust's chain.
    pub fn new(passes: PassVerifier, origin: &str) -> Result<Self> {
        let mut policy = VerifyPolicy::new(passes.trust().chain_id);
        policy.require_nonce = true;
        policy.allow_erc1271 = false;
        Ok(Self { passes, origin: Origin::parse(origin)?, policy, nonces: Mutex::new(NonceMemory::new()) })
    }

    /// The pass verifier (to follow the feed with: [`PassVerifier::follow`]).
    pub fn passes(&self) -> &PassVerifier {
        &self.passes
    }

    /// The absolute URL of a path and query this provider received.
    pub fn url_for(&self, path_and_query: &str) -> String {
        self.origin.url_for(path_and_query)
    }

    /// Admits `request` or says why not. An error only when the issuer's keys cannot be had
    /// at all (never fetched and unreachable).
    pub async fn admit(&self, request: &ReceivedRequest<'_>) -> Result<Result<Admitted, Turned>> {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |since| since.as_secs());
        let headers: Vec<(&str, &str)> =
            request.headers.iter().map(|(name, value)| (name.as_str(), value.as_str())).collect();
        let signed = SignedRequest {
            method: &request.method,
            url: &request.url,
            headers: &headers,
            body: request.body,
            label: request.label.as_deref(),
            authority: &self.origin.authority,
            now,
        };
        let verified = match verify_request(&signed, &self.policy) {
            Ok(Verification::Verified(verified)) => verified,
            Ok(Verification::Erc1271(_)) => {
                return Ok(Err(turned(
                    401,
                    "unsupported",
                    "a contract account's signature needs the chain: ask the KYA API",
                )));
            }
            Err(refusal) => return Ok(Err(turned(401, refusal.reason.as_str(), &refusal.message))),
        };
        let signer = verified.facts.signer;
        let Some((_, jws)) = request.headers.iter().find(|(name, _)| name.eq_ignore_ascii_case(HEADER))
        else {
            return Ok(Err(turned(
                401,
                "no_pass",
                "no KYA-Pass header: fetch your pass from GET /api/v1/kya/:wallet/pass",
            )));
        };
        let pass = match self.passes.admit(jws.trim(), signer).await {
            Ok(pass) => pass,
            Err(Error::PassRefused(refusal)) => {
                return Ok(Err(turned(403, refusal.reason(), &refusal.to_string())));
            }
            Err(error) => return Err(error),
        };
        // Claimed last: a request turned away for its pass can be sent again with a new one.
        if let ReplayGuard::Nonce(claim) = &verified.replay
            && let Err(refusal) = self.nonces.lock().expect("the nonces' lock").claim(claim, now)
        {
            return Ok(Err(turned(401, refusal.reason.as_str(), &refusal.message)));
        }
        Ok(Ok(Admitted { signer, signature: verified.facts, pass }))
    }
}

fn turned(status: u16, reason: &str, message: &str) -> Turned {
    Turned { status, reason: reason.to_owned(), message: message.to_owned() }
}
