//! `POST /api/v1/kya/verify` (INTERFACE.md section 6): a provider forwards the parts of a request
//! signed by ERC-8128, and learns in one answer whether the signature holds, who signed it, that
//! its nonce was fresh, and the signer's KYA standing at one block.
//!
//! The checks are `kya_core::erc8128`'s, without I/O. What needs the world is done here: the
//! signer's record (the same read as `/kya/:wallet`), an ERC-1271 contract account's
//! `isValidSignature` in the same round trip at the same block, and the nonce, claimed in the keyid's Durable Object
//! only once the signature is known good, so a forged request cannot use up someone's nonce, and
//! given back when the standing cannot be read, so a provider's retry after a 5xx passes once.

mod body;
pub(crate) mod nonces;

use alloy_primitives::Address;
use kya_core::{
    BlockRef, KyaResult,
    erc8128::{
        ReplayGuard, SignatureFacts, SignedRequest, Verification, Verified, VerifyPolicy, verify_request,
    },
};
use serde::Serialize;
use worker::{Env, Request, Response};

use crate::{Error, Result, http, reads, rpc::Rpc};

/// The path of the endpoint: the one `POST` route of the API.
pub(crate) const PATH: &str = "/api/v1/kya/verify";

/// The answer to one verification request, 200 either way but for a body of the wrong shape.
pub(crate) async fn answer(
    request: &mut Request,
    env: &Env,
    rpc: &Rpc<'_>,
    registry: Address,
    policy: &VerifyPolicy,
    now: u64,
) -> Result<Response> {
    // Refused before it is read, when the sender says how long it is.
    let declared = request.headers().get("content-length")?.and_then(|length| length.parse::<usize>().ok());
    if let Some(length) = declared.filter(|length| *length > body::MAX_BODY_BYTES) {
        return Err(Error::BadVerifyRequest(format!(
            "the body is {length} bytes; at most {} are accepted",
            body::MAX_BODY_BYTES
        )));
    }
    let text = request.text().await?;
    let input = body::parse(&text)?;
    let headers: Vec<(&str, &str)> =
        input.headers.iter().map(|(name, value)| (name.as_str(), value.as_str())).collect();
    let signed = SignedRequest {
        method: &input.method,
        url: &input.url,
        headers: &headers,
        body: input.body.as_deref(),
        label: input.label.as_deref(),
        authority: Some(&input.authority),
        now,
    };
    let verification = match verify_request(&signed, policy) {
        Ok(verification) => verification,
        Err(refusal) => return refused(&refusal),
    };
    let (verified, block, kya) = match verification {
        // An EOA's signature is settled: read its standing and claim its nonce side by side. A
        // nonce claimed for a read that failed is given back, so the provider's retry passes.
        Verification::Verified(verified) => {
            let (read, fresh) =
                futures::join!(reads::kya(rpc, registry, verified.facts.signer), claim(env, &verified, now));
            if let Some(refusal) = fresh? {
                return refused(&refusal);
            }
            let (block, agent) = match read {
                Ok(read) => read,
                Err(error) => {
                    release(env, &verified).await;
                    return Err(error);
                }
            };
            let kya = KyaResult::of(verified.facts.signer, agent.as_ref(), block.timestamp);
            (verified, block, kya)
        }
        // A contract account's stands on its own answer, read with its standing in one
        // round trip, at one block.
        Verification::Erc1271(pending) => {
            let (block, agent, return_data) = reads::kya_and_erc1271(rpc, registry, pending.check()).await?;
            let verified = match pending.complete(&return_data) {
                Ok(verified) => verified,
                Err(refusal) => return refused(&refusal),
            };
            if let Some(refusal) = claim(env, &verified, now).await? {
                return refused(&refusal);
            }
            let kya = KyaResult::of(verified.facts.signer, agent.as_ref(), block.timestamp);
            (verified, block, kya)
        }
    };
    accepted(&verified, block, &kya)
}

/// Claims the signature's nonce; `Some(refusal)` when it was used before.
async fn claim(env: &Env, verified: &Verified, now: u64) -> Result<Option<kya_core::erc8128::Refusal>> {
    match &verified.replay {
        ReplayGuard::Nonce(claim) => {
            let fresh = nonces::claim(env, claim, now).await?;
            Ok((!fresh).then(|| claim.replayed()))
        }
        // The policy this Worker builds always requires a nonce (`VerifyPolicy::require_nonce`).
        ReplayGuard::Replayable(_) => Err(Error::BadConfig(
            "Replayable signatures are not accepted by this deployment: a nonce is required".into(),
        )),
    }
}

/// Gives back the nonce [`claim`] took for `verified`; a store that cannot take it back is logged
/// (the nonce then stays used until its window ends, as before releases existed).
async fn release(env: &Env, verified: &Verified) {
    if let ReplayGuard::Nonce(claim) = &verified.replay
        && let Err(error) = nonces::release(env, claim).await
    {
        worker::console_warn!("verify: the nonce of a failed read was not given back: {error}");
    }
}

/// `{"verified": true, ..., "kya": ...}` with the block it read.
fn accepted(verified: &Verified, block: BlockRef, kya: &KyaResult) -> Result<Response> {
    #[derive(Serialize)]
    struct Accepted<'a> {
        verified: bool,
        #[serde(flatten)]
        signature: &'a SignatureFacts,
        kya: &'a KyaResult,
    }
    let body = serde_json::to_string(&Accepted { verified: true, signature: &verified.facts, kya })
        .map_err(|error| Error::Runtime(error.into()))?;
    let response = http::json(200, &body, "no-store")?;
    http::set_block(response.headers(), block)?;
    Ok(response)
}

/// `{"verified": false, "reason", "message"}`: a signature that does not hold is an answer, not
/// an error.
fn refused(refusal: &kya_core::erc8128::Refusal) -> Result<Response> {
    #[derive(Serialize)]
    struct Refused<'a> {
        verified: bool,
        #[serde(flatten)]
        refusal: &'a kya_core::erc8128::Refusal,
    }
    let body = serde_json::to_string(&Refused { verified: false, refusal })
        .map_err(|error| Error::Runtime(error.into()))?;
    http::json(200, &body, "no-store")
}
