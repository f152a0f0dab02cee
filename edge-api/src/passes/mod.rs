//! KYA passes at the edge (INTERFACE.md section 7): `GET /api/v1/kya/:wallet/pass`, the pass in
//! a verified `POST /api/v1/kya/verify` answer, the issuer's public keys at
//! `GET /.well-known/jwks.json`, and `POST /api/v1/kya/batch` ([`batch`]). Claims, keys and
//! signatures are `kya_core::pass`'s; what is here is the Worker's part: the secret, the block's
//! hash, a random `jti`, and the responses.

pub(crate) mod batch;
mod runtime_signer;

use std::{cell::OnceCell, rc::Rc};

use alloy_primitives::{Address, B256};
use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use kya_core::{
    Agent, BlockRef,
    pass::{self, PassBlock, PassClaims, SigningKeys, claims::Issue},
};
use wasm_bindgen::prelude::*;
use worker::{Env, Response, ResponseBuilder};

use crate::{
    Error, Result,
    config::Config,
    http,
    rpc::Rpc,
    wallet_standing::{self, StandingRead, WalletStanding},
};

/// How long a verifier may keep the JWKS: a rotation publishes the new key at least this long
/// before it signs (docs/passes.md).
const JWKS_CACHE_CONTROL: &str = "public, max-age=300";
/// The secret holding the private JWK set.
const KEYS_SECRET: &str = "PASS_SIGNING_KEYS";

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_namespace = crypto, js_name = getRandomValues, catch)]
    fn get_random_values(bytes: &mut [u8]) -> Result<JsValue, JsValue>;
}

thread_local! {
    /// The signing keys, read once per isolate (a secret does not change under a running
    /// isolate): `None` without the secret, an error message naming the bad key otherwise.
    static KEYS: OnceCell<Result<Option<Rc<SigningKeys>>, String>> = const { OnceCell::new() };
}

/// The deployment's signing keys, `None` when `PASS_SIGNING_KEYS` is not set.
fn keys(env: &Env) -> Result<Option<Rc<SigningKeys>>> {
    KEYS.with(|keys| {
        keys.get_or_init(|| {
            let Ok(secret) = env.secret(KEYS_SECRET) else { return Ok(None) };
            let text = secret.to_string();
            if text.trim().is_empty() {
                return Ok(None);
            }
            // The error names the key and the reason, never the value.
            SigningKeys::from_json(&text).map(|keys| Some(Rc::new(keys))).map_err(|error| error.to_string())
        })
        .clone()
        .map_err(Error::BadConfig)
    })
}

/// Everything a pass is signed with: the keys, and the claims the deployment fixes.
pub(crate) struct Issuer {
    keys: Rc<SigningKeys>,
    issuer: String,
    ttl_secs: u64,
    chain_id: u64,
    registry: Address,
}

impl Issuer {
    /// This deployment's issuer, `None` when passes are not configured. `origin` is the
    /// request's, the issuer without `PASS_ISSUER`.
    pub(crate) fn of(env: &Env, config: &Config, origin: &str, registry: Address) -> Result<Option<Self>> {
        let Some(keys) = keys(env)? else { return Ok(None) };
        Ok(Some(Self {
            keys,
            issuer: config.passes.issuer.clone().unwrap_or_else(|| origin.to_owned()),
            ttl_secs: config.passes.ttl_secs,
            chain_id: config.verify.chain_id,
            registry,
        }))
    }

    /// [`Issuer::of`], or the 503 of a deployment without passes.
    pub(crate) fn required(env: &Env, config: &Config, origin: &str, registry: Address) -> Result<Self> {
        Self::of(env, config, origin, registry)?.ok_or(Error::PassesNotConfigured)
    }

    /// The pass of `wallet`, whose agent is `agent` at `block` (of hash `hash`), where the
    /// registry's grace period is `grace_period`, issued at `now`: the claims `kya_core`'s, the
    /// signature the runtime's ([`runtime_signer`]).
    pub(crate) async fn sign(
        &self,
        wallet: Address,
        (block, hash): (BlockRef, B256),
        grace_period: u64,
        agent: Option<&Agent>,
        now: u64,
    ) -> Result<String> {
        let issue = Issue {
            issuer: &self.issuer,
            chain_id: self.chain_id,
            registry: self.registry,
            wallet,
            block: PassBlock { number: block.number, hash, time: block.timestamp },
            grace_period,
            now,
            ttl_secs: self.ttl_secs,
            jti: jti()?,
        };
        let signer = self.keys.signer();
        let unsigned = pass::jws::Unsigned::new(&PassClaims::new(issue, agent), signer.kid());
        let signature = runtime_signer::sign(signer, unsigned.signing_input()).await;
        Ok(unsigned.signed(&signature))
    }
}

/// 128 random bits, base64url: a pass's unique id.
fn jti() -> Result<String> {
    let mut bytes = [0u8; 16];
    get_random_values(&mut bytes)
        .map_err(|_| Error::BadConfig("crypto.getRandomValues is not available".into()))?;
    Ok(URL_SAFE_NO_PAD.encode(bytes))
}

/// What a pass request names: the wallet, the wall-clock time, and the client's D1 bookmark.
pub(crate) struct PassRead<'a> {
    pub(crate) wallet: Address,
    pub(crate) now: u64,
    pub(crate) bookmark: Option<&'a str>,
}

/// `GET /api/v1/kya/:wallet/pass`: the wallet's standing read now, signed. Never cached: a pass
/// carries the block it was read at, and each has its own `jti`.
pub(crate) async fn answer_pass(
    env: &Env,
    config: &Config,
    rpc: &Rpc<'_>,
    origin: &str,
    PassRead { wallet, now, bookmark }: PassRead<'_>,
) -> Result<Response> {
    let registry = config.registry()?;
    // Checked before the chain is read: a deployment without keys costs no RPC.
    let issuer = Issuer::required(env, config, origin, registry)?;
    // From the index with no RPC while it is fresh: the block and hash it recorded together.
    let read = StandingRead { wallet, now, bookmark, with_hash: true };
    let WalletStanding { block, hash, grace_period, agent, headers } =
        wallet_standing::read(env, config, rpc, read).await?;
    let hash = hash.ok_or_else(|| {
        Error::Runtime(worker::Error::RustError("a standing read with its hash named none".into()))
    })?;
    let jws = issuer.sign(wallet, (block, hash), grace_period, agent.as_ref(), now).await?;
    let mut pairs =
        vec![("content-type", pass::MEDIA_TYPE.to_owned()), ("cache-control", "no-store".to_owned())];
    http::push_block(&mut pairs, block, Some(grace_period));
    pairs.extend(headers);
    http::with_pairs(ResponseBuilder::new().fixed(jws.into_bytes()), &pairs)
}

/// `GET /.well-known/jwks.json`: the public keys, the signing key first.
pub(crate) fn answer_jwks(env: &Env) -> Result<Response> {
    let keys = keys(env)?.ok_or(Error::PassesNotConfigured)?;
    let body = serde_json::to_string(&keys.public()).map_err(|error| Error::BadConfig(error.to_string()))?;
    http::json(200, &body, JWKS_CACHE_CONTROL)
}
