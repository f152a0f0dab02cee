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

use alloy_primitives::{Address, B256};
use kya_core::{
    BlockRef, KyaResult, StandingClock,
    erc8128::{
        ReplayGuard, SignatureFacts, SignedRequest, Verification, Verified, VerifyPolicy, verify_request,
    },
};
use serde::Serialize;
use worker::{Env, Request, Response};

use crate::{
    Error, Result,
    config::Config,
    http,
    passes::Issuer,
    reads, request_body,
    rpc::Rpc,
    wallet_standing::{self, StandingRead, WalletStanding},
};

/// The path of the endpoint: the one `POST` route of the API.
pub(crate) const PATH: &str = "/api/v1/kya/verify";

/// What a verification reads with and signs with.
pub(crate) struct Context<'a> {
    pub(crate) rpc: &'a Rpc<'a>,
    pub(crate) config: &'a Config,
    /// The client's `X-D1-Bookmark`, for a standing read from the index.
    pub(crate) bookmark: Option<&'a str>,
    pub(crate) registry: Address,
    pub(crate) policy: &'a VerifyPolicy,
    /// The pass issuer, when this deployment has keys: a verified answer then carries the
    /// signer's pass, at the block its standing was read.
    pub(crate) issuer: Option<&'a Issuer>,
}

/// The answer to one verification request, 200 either way but for a body of the wrong shape.
pub(crate) async fn answer(
    request: &mut Request,
    env: &Env,
    context: &Context<'_>,
    now: u64,
) -> Result<Response> {
    let Context { rpc, config, bookmark, registry, policy, issuer } = *context;
    let text = request_body::read_text(request, body::MAX_BODY_BYTES).await?;
    let input = body::parse(&text)?;
    let headers: Vec<(&str, &str)> =
        input.headers.iter().map(|(name, value)| (name.as_str(), value.as_str())).collect();
    let signed = SignedRequest {
        method: &input.method,
        url: &input.url,
        headers: &headers,
        body: input.body.as_deref(),
        label: input.label.as_deref(),
        authority: &input.authority,
        now,
    };
    let verification = match verify_request(&signed, policy) {
        Ok(verification) => verification,
        Err(refusal) => return refused(&refusal),
    };
    let (verified, (block, hash), (grace_period, agent), headers) = match verification {
        // An EOA's signature is settled: read its standing (from the index while fresh, with
        // no RPC) and claim its nonce side by side. A nonce claimed for a read that failed
        // is given back, so the provider's retry passes.
        Verification::Verified(verified) => {
            let standing =
                StandingRead { wallet: verified.facts.signer, now, bookmark, with_hash: issuer.is_some() };
            let read = wallet_standing::read(env, config, rpc, standing);
            let (read, fresh) = futures::join!(read, claim(env, &verified, now));
            if let Some(refusal) = fresh? {
                return refused(&refusal);
            }
            let WalletStanding { block, hash, grace_period, agent, headers } = match read {
                Ok(read) => read,
                Err(error) => {
                    release(env, &verified).await;
                    return Err(error);
                }
            };
            (verified, (block, hash), (grace_period, agent), Some(headers))
        }
        // A contract account's stands on its own answer, read with its standing in one
        // round trip, at one block: from the chain, as the account's answer must be.
        Verification::Erc1271(pending) => {
            let check = pending.check();
            let read = |rpc| async move {
                let (block, agent, return_data) = reads::kya_and_erc1271(&rpc, registry, check).await?;
                Ok((block, (agent, return_data)))
            };
            let (block, (agent, return_data)) = with_hash(rpc, issuer.is_some(), read).await?;
            let verified = match pending.complete(&return_data) {
                Ok(verified) => verified,
                Err(refusal) => return refused(&refusal),
            };
            if let Some(refusal) = claim(env, &verified, now).await? {
                return refused(&refusal);
            }
            (verified, block, agent, None)
        }
    };
    let signer = verified.facts.signer;
    let kya = KyaResult::of(signer, agent.as_ref(), StandingClock::new(block.timestamp, grace_period));
    let pass = match (issuer, hash) {
        (Some(issuer), Some(hash)) => {
            Some(issuer.sign(signer, (block, hash), grace_period, agent.as_ref(), now).await?)
        }
        _ => None,
    };
    accepted(&verified, (block, grace_period), &kya, pass.as_deref(), headers.unwrap_or_default())
}

/// `read`, with the hash of the block it read when a pass is to be signed (then the read is of
/// that block by its hash: [`reads::hashed`]); else none is asked for, and the read costs what it
/// did before passes.
async fn with_hash<'a, T, F>(
    rpc: &Rpc<'a>,
    wanted: bool,
    read: impl FnOnce(Rpc<'a>) -> F,
) -> Result<((BlockRef, Option<B256>), T)>
where
    F: Future<Output = Result<(BlockRef, T)>>,
{
    if wanted {
        let (block, hash, value) = reads::hashed(rpc, read).await?;
        Ok(((block, Some(hash)), value))
    } else {
        let (block, value) = read(*rpc).await?;
        Ok(((block, None), value))
    }
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

/// `{"verified": true, ..., "kya": ..., "pass": ...}` with the block it read.
fn accepted(
    verified: &Verified,
    (block, grace_period): (BlockRef, u64),
    kya: &KyaResult,
    pass: Option<&str>,
    standing_headers: Vec<(&'static str, String)>,
) -> Result<Response> {
    #[derive(Serialize)]
    struct Accepted<'a> {
        verified: bool,
        #[serde(flatten)]
        signature: &'a SignatureFacts,
        kya: &'a KyaResult,
        #[serde(skip_serializing_if = "Option::is_none")]
        pass: Option<&'a str>,
    }
    let body = serde_json::to_string(&Accepted { verified: true, signature: &verified.facts, kya, pass })
        .map_err(|error| Error::Runtime(error.into()))?;
    let mut pairs = vec![("cache-control", "no-store".to_owned())];
    http::push_block(&mut pairs, block, Some(grace_period));
    pairs.extend(standing_headers);
    http::json_with(200, &body, pairs)
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
