//! `kya pass`: a wallet's KYA pass from the API, checked offline against the API's JWKS before
//! it is printed; and the offline check `kya verify` makes of a request's `KYA-Pass`.

use anyhow::Result;
use kya_core::pass::PassTrust;
use serde_json::json;

use super::{
    render::{self, Style},
    settings::Settings,
};
use crate::PassVerifier;

/// Exit codes by the standing a pass states, as `kya check`'s.
const EXIT_RENEW: i32 = 3;
const EXIT_DENY: i32 = 4;

/// What a pass from this API must say: the API's origin as issuer, the chain, and the registry
/// (given, the chain's, else the relayer's).
pub(super) async fn trust(settings: &Settings) -> Result<PassTrust> {
    let api = settings.api()?;
    Ok(PassTrust {
        issuer: api.base_url().to_owned(),
        chain_id: settings.chain_id,
        registry: settings.write_registry(false).await?,
    })
}

/// A verifier of this API's passes (fetches its JWKS).
pub(super) async fn verifier(settings: &Settings) -> Result<PassVerifier> {
    Ok(PassVerifier::new(settings.api()?, trust(settings).await?).await?)
}

/// `kya pass [<wallet>]`.
pub(super) async fn show(
    settings: &Settings,
    style: Style,
    wallet: alloy::primitives::Address,
) -> Result<i32> {
    let jws = settings.api()?.pass(wallet).await?;
    let pass = verifier(settings).await?.verify(&jws).await?;
    if settings.json {
        let document = json!({ "pass": jws, "kid": pass.kid, "claims": pass.claims });
        println!("{}", serde_json::to_string_pretty(&document)?);
    } else {
        println!("{jws}");
        eprintln!("{}", render::pass(style, &pass));
    }
    let standing = &pass.claims.kya;
    Ok(match (standing.is_registered, standing.is_compliant) {
        (true, true) => 0,
        (true, false) => EXIT_RENEW,
        (false, _) => EXIT_DENY,
    })
}
