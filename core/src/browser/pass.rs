//! KYA passes in JavaScript (INTERFACE.md section 7): `verifyPass`, the offline check of a pass
//! against the issuer's JWKS, and `verifyAgentRequest`, a provider's whole admission of a request:
//! its ERC-8128 signature and the `KYA-Pass` it carries, the pass's wallet being the signer. The
//! checks are [`crate::pass`]'s and [`crate::erc8128`]'s: a page, a Node server and the Rust
//! client cannot disagree.

use std::{cell::RefCell, rc::Rc};

use serde::{Deserialize, Serialize};
use tsify::{Ts, Tsify};
use wasm_bindgen::prelude::*;

use super::{
    JsResult,
    erc8128::{VerifiedSignature, VerifyRequestInput},
    from_js, to_js, whole,
};
use crate::{
    api::{checksum::checksummed, query::parse_wallet},
    erc8128::{self, Verification},
    pass::{self, Jwks, PassClaims, PassRefusal, PassTrust, VerifiedPass},
};

/// What a verifier trusts, and its clock.
#[derive(Debug, Deserialize, Tsify)]
#[serde(rename_all = "camelCase")]
pub struct PassTrustInput {
    /// The issuer's JWKS document (`GET /.well-known/jwks.json`), as parsed JSON. Kept as the
    /// JavaScript value: `keys_of` reads it once while it does not change.
    #[tsify(type = "{ keys: object[] }")]
    #[serde(with = "serde_wasm_bindgen::preserve")]
    pub jwks: JsValue,
    /// The issuer: the API's origin (`https://kya.example`).
    pub issuer: String,
    pub chain_id: f64,
    /// The registry's address.
    pub registry: String,
    /// Now, in Unix seconds; default: `Date.now()`.
    #[serde(default)]
    #[tsify(optional)]
    pub now: Option<f64>,
}

impl PassTrustInput {
    fn read(&self) -> JsResult<(Rc<Jwks>, PassTrust, u64)> {
        let jwks = keys_of(&self.jwks)?;
        let registry =
            parse_wallet(&self.registry).map_err(|error| JsError::new(&format!("registry: {error}")))?;
        let trust =
            PassTrust { issuer: self.issuer.clone(), chain_id: whole(self.chain_id, "chainId")?, registry };
        let now = match self.now {
            Some(now) => whole(now, "now")?,
            None => whole((super::erc8128::date_now() / 1000.0).floor(), "now")?,
        };
        Ok((jwks, trust, now))
    }
}

#[wasm_bindgen]
extern "C" {
    /// `JSON.stringify(value)`: V8's own, far cheaper than walking the object from wasm.
    #[wasm_bindgen(js_namespace = JSON, js_name = stringify, catch)]
    fn json_stringify(value: &JsValue) -> Result<JsValue, JsValue>;
}

thread_local! {
    /// The last JWKS read, by its JSON text. A provider passes the same keys with every request,
    /// and reading them again (a curve point from each key's 32 bytes, the object walked from
    /// wasm) cost a fifth of a check in Node. Keyed by content, so keys changed in place are
    /// read again, never trusted from before.
    static LAST_JWKS: RefCell<Option<(String, Rc<Jwks>)>> = const { RefCell::new(None) };
}

/// The keys of `jwks` (a JavaScript JWKS object), read once while its content stays the same.
pub(super) fn keys_of(jwks: &JsValue) -> JsResult<Rc<Jwks>> {
    let text = json_stringify(jwks)
        .ok()
        .and_then(|text| text.as_string())
        .ok_or_else(|| JsError::new("invalid trust: jwks must be a JWKS object ({ keys: [...] })"))?;
    LAST_JWKS.with(|last| {
        if let Some((seen, keys)) = &*last.borrow()
            && *seen == text
        {
            return Ok(Rc::clone(keys));
        }
        let keys = Rc::new(Jwks::from_json(&text).map_err(|message| JsError::new(&message))?);
        *last.borrow_mut() = Some((text, Rc::clone(&keys)));
        Ok(keys)
    })
}

/// A pass that verified: whose it is, the key that signed it, and what it states.
#[derive(Debug, Serialize, Tsify)]
#[serde(rename_all = "camelCase")]
pub struct PassView {
    /// EIP-55: the wallet `sub` names.
    pub wallet: String,
    pub kid: String,
    pub claims: PassClaims,
}

impl From<VerifiedPass> for PassView {
    fn from(pass: VerifiedPass) -> Self {
        Self { wallet: checksummed(&pass.wallet), kid: pass.kid, claims: pass.claims }
    }
}

/// A refusal: a stable reason (`expired`, `bad_signature`, `not_the_signer`, …) and a message.
#[derive(Debug, Serialize, Tsify)]
pub struct RefusedPass {
    pub reason: String,
    pub message: String,
}

impl From<PassRefusal> for RefusedPass {
    fn from(refusal: PassRefusal) -> Self {
        Self { reason: refusal.reason().to_owned(), message: refusal.to_string() }
    }
}

/// `verifyPass`'s verdict, by `outcome`.
#[derive(Debug, Serialize, Tsify)]
#[serde(tag = "outcome", rename_all = "lowercase")]
pub enum PassVerdict {
    Verified(Box<PassView>),
    Refused(RefusedPass),
}

/// Checks a pass (a compact JWS) offline: its signature under a key of `jwks`, its lifetime
/// (60 s of skew), its issuer, chain and registry. `verified` states a standing, compliant or
/// not (`claims.kya.isCompliant`); admitting a request is `verifyAgentRequest`'s.
#[wasm_bindgen(js_name = verifyPass)]
pub fn verify_pass(jws: &str, trust: Ts<PassTrustInput>) -> JsResult<Ts<PassVerdict>> {
    let (jwks, trust, now) = from_js(&trust, "trust")?.read()?;
    let verdict = match pass::verify::verify_pass(jws.trim(), &jwks, &trust, now) {
        Ok(pass) => PassVerdict::Verified(Box::new(pass.into())),
        Err(refusal) => PassVerdict::Refused(refusal.into()),
    };
    to_js(&verdict)
}

/// `verifyAgentRequest`'s verdict. `admitted`: claim `signature.nonceKey` in your store (once,
/// until `signature.rememberUntil`) and serve. `refused`: at `stage` `signature` (answer 401) or
/// `pass` (answer 403, or 401 when the request carried none).
#[derive(Debug, Serialize, Tsify)]
#[serde(tag = "outcome", rename_all = "lowercase")]
pub enum AgentRequestVerdict {
    Admitted { signature: Box<VerifiedSignature>, pass: Box<PassView> },
    Refused { stage: String, reason: String, message: String },
}

/// Admits a request offline: its ERC-8128 signature (an EOA's: a contract account needs the
/// chain, and is refused here), then its `KYA-Pass` header, which must verify, be the signer's,
/// and state a compliant agent. `request` is `verifyRequest`'s input (its `now` is used for both).
#[wasm_bindgen(js_name = verifyAgentRequest)]
pub fn verify_agent_request(
    request: Ts<VerifyRequestInput>,
    trust: Ts<PassTrustInput>,
) -> JsResult<Ts<AgentRequestVerdict>> {
    let input = VerifyRequestInput::read(&request)?;
    let mut trust = from_js(&trust, "trust")?;
    trust.now = Some(input.now);
    let (jwks, trust, now) = trust.read()?;
    let mut policy = input.policy()?;
    policy.allow_erc1271 = false;
    let fields = input.headers.fields();
    let headers = super::erc8128::pairs(&fields);
    let refused = |stage: &str, reason: &str, message: String| AgentRequestVerdict::Refused {
        stage: stage.to_owned(),
        reason: reason.to_owned(),
        message,
    };
    let signed = input.signed_request(&headers, now)?;
    let verified = match erc8128::verify_request(&signed, &policy) {
        Ok(Verification::Verified(verified)) => verified,
        Ok(Verification::Erc1271(_)) => {
            let message =
                "a contract account's signature needs the chain: use verifyRequest and erc1271Accepts";
            return to_js(&refused("signature", "bad_signature", message.to_owned()));
        }
        Err(refusal) => return to_js(&refused("signature", refusal.reason.as_str(), refusal.message)),
    };
    let Some((_, jws)) = headers.iter().find(|(name, _)| name.eq_ignore_ascii_case(pass::HEADER)) else {
        let message = "no KYA-Pass header: the agent fetches its pass from GET /api/v1/kya/:wallet/pass";
        return to_js(&refused("pass", "no_pass", message.to_owned()));
    };
    let verdict = match pass::verify::admit_pass(jws.trim(), &jwks, &trust, verified.facts.signer, now) {
        Ok(pass) => AgentRequestVerdict::Admitted {
            signature: Box::new(verified.into()),
            pass: Box::new(pass.into()),
        },
        Err(refusal) => refused("pass", refusal.reason(), refusal.to_string()),
    };
    to_js(&verdict)
}
