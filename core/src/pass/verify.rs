//! A provider's checks of a pass (INTERFACE.md section 7), offline: the signature under a key of
//! the issuer's JWKS, the lifetime within the skew, the issuer, chain and registry it trusts,
//! and, to admit a request, the request's signer and the standing. Each refusal says why.

use alloy_primitives::Address;

use super::{Jwks, PassClaims, SKEW_SECS, jws::Parsed};

/// What a verifier trusts: the issuer's origin, and the chain and registry whose standing it
/// accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PassTrust {
    pub issuer: String,
    pub chain_id: u64,
    pub registry: Address,
}

/// A pass whose signature, lifetime and origin check out: a statement of a standing, which may
/// be "not compliant" ([`admit_pass`] also asks that it is compliant and the signer's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedPass {
    pub claims: PassClaims,
    /// The wallet `sub` names.
    pub wallet: Address,
    /// The key that signed it.
    pub kid: String,
}

/// Why a pass is refused. [`PassRefusal::reason`] is a stable code for logs and APIs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PassRefusal {
    #[error("the pass is malformed: {0}")]
    Malformed(String),
    #[error("the pass's alg is {alg:?} and typ {typ:?}: a pass is EdDSA, kya-pass+jwt")]
    WrongType { alg: String, typ: String },
    #[error("the pass is signed by key {0:?}, which the issuer's JWKS does not hold")]
    UnknownKey(String),
    #[error("the pass's signature does not verify")]
    BadSignature,
    #[error("the pass is not valid before {nbf} (now {now}, skew {SKEW_SECS} s)")]
    NotYetValid { nbf: u64, now: u64 },
    #[error("the pass expired at {exp} (now {now}, skew {SKEW_SECS} s)")]
    Expired { exp: u64, now: u64 },
    #[error("the pass's issuer is {found:?}, not the trusted {trusted:?}")]
    WrongIssuer { found: String, trusted: String },
    #[error("the pass is for chain {found}, not the trusted {trusted}")]
    WrongChain { found: u64, trusted: u64 },
    #[error("the pass is for registry {found}, not the trusted {trusted}")]
    WrongRegistry { found: Address, trusted: Address },
    #[error("the pass's sub {0:?} is not a CAIP-10 account of its chain")]
    BadSubject(String),
    #[error("the pass is for {pass}, but the request is signed by {signer}")]
    NotTheSigner { pass: Address, signer: Address },
    #[error("the pass states that {0} is not compliant")]
    NotCompliant(Address),
    #[error("{wallet}'s compliance was lost at block {lost_at}, at or after the pass's block {block}")]
    Revoked { wallet: Address, block: u64, lost_at: u64 },
}

impl PassRefusal {
    /// A stable, machine-readable code of the refusal.
    pub const fn reason(&self) -> &'static str {
        match self {
            Self::Malformed(_) => "malformed",
            Self::WrongType { .. } => "wrong_type",
            Self::UnknownKey(_) => "unknown_key",
            Self::BadSignature => "bad_signature",
            Self::NotYetValid { .. } => "not_yet_valid",
            Self::Expired { .. } => "expired",
            Self::WrongIssuer { .. } => "wrong_issuer",
            Self::WrongChain { .. } => "wrong_chain",
            Self::WrongRegistry { .. } => "wrong_registry",
            Self::BadSubject(_) => "bad_subject",
            Self::NotTheSigner { .. } => "not_the_signer",
            Self::NotCompliant(_) => "not_compliant",
            Self::Revoked { .. } => "revoked",
        }
    }
}

/// Checks `jws` against the issuer's `jwks` and what the verifier trusts, at wall-clock time
/// `now` (Unix seconds): the statement it makes, compliant or not.
pub fn verify_pass(jws: &str, jwks: &Jwks, trust: &PassTrust, now: u64) -> Result<VerifiedPass, PassRefusal> {
    let parsed = Parsed::new(jws)?;
    let kid = parsed.header.kid.clone();
    let key = jwks.find(&kid).ok_or_else(|| PassRefusal::UnknownKey(kid.clone()))?;
    let claims = parsed.verified_claims(key)?;
    if now.saturating_add(SKEW_SECS) < claims.nbf {
        return Err(PassRefusal::NotYetValid { nbf: claims.nbf, now });
    }
    if now >= claims.exp.saturating_add(SKEW_SECS) {
        return Err(PassRefusal::Expired { exp: claims.exp, now });
    }
    if claims.iss != trust.issuer {
        return Err(PassRefusal::WrongIssuer { found: claims.iss, trusted: trust.issuer.clone() });
    }
    if claims.chain_id != trust.chain_id {
        return Err(PassRefusal::WrongChain { found: claims.chain_id, trusted: trust.chain_id });
    }
    if claims.registry != trust.registry {
        return Err(PassRefusal::WrongRegistry { found: claims.registry, trusted: trust.registry });
    }
    let wallet = claims.wallet().ok_or_else(|| PassRefusal::BadSubject(claims.sub.clone()))?;
    Ok(VerifiedPass { claims, wallet, kid })
}

/// [`verify_pass`], then the provider's admission: the pass is the request's `signer`'s (its
/// ERC-8128 signer, already verified) and states a compliant agent.
pub fn admit_pass(
    jws: &str,
    jwks: &Jwks,
    trust: &PassTrust,
    signer: Address,
    now: u64,
) -> Result<VerifiedPass, PassRefusal> {
    let pass = verify_pass(jws, jwks, trust, now)?;
    if pass.wallet != signer {
        return Err(PassRefusal::NotTheSigner { pass: pass.wallet, signer });
    }
    if !pass.claims.kya.is_compliant {
        return Err(PassRefusal::NotCompliant(pass.wallet));
    }
    Ok(pass)
}

impl VerifiedPass {
    /// Refuses this pass when its wallet lost compliance at block `lost_at` (from the change
    /// feed) at or after the block the pass states: the pass no longer tells the truth.
    pub fn check_not_revoked(&self, lost_at: Option<u64>) -> Result<(), PassRefusal> {
        match lost_at {
            Some(lost_at) if lost_at >= self.claims.block.number => {
                Err(PassRefusal::Revoked { wallet: self.wallet, block: self.claims.block.number, lost_at })
            }
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use alloy_primitives::{B256, address};
    use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};

    use super::*;
    use crate::{
        Agent, AgentStatus,
        pass::{
            PassBlock, SigningKey, SigningKeys,
            claims::Issue,
            jws::{self, Header},
        },
        test_support::sample_agent,
    };

    const NOW: u64 = 1_800_000_000;
    const WALLET: Address = address!("0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266");
    const REGISTRY: Address = address!("0x5fbdb2315678afecb367f032d93f642f64180aa3");

    fn trust() -> PassTrust {
        PassTrust { issuer: "https://kya.example".into(), chain_id: 84_532, registry: REGISTRY }
    }

    fn agent(status: AgentStatus) -> Agent {
        let attested = NOW - 100;
        Agent { haftungsperson: WALLET, agent_wallet: WALLET, ..sample_agent(3, status, attested, attested) }
    }

    fn claims(status: Option<AgentStatus>) -> PassClaims {
        let issue = Issue {
            issuer: "https://kya.example",
            chain_id: 84_532,
            registry: REGISTRY,
            wallet: WALLET,
            block: PassBlock { number: 40, hash: B256::repeat_byte(1), time: NOW - 2 },
            grace_period: crate::DEFAULT_GRACE_PERIOD_SECS,
            now: NOW,
            ttl_secs: 300,
            jti: "0123".into(),
        };
        PassClaims::new(issue, status.map(agent).as_ref())
    }

    fn keys() -> SigningKeys {
        SigningKeys::new(SigningKey::from_seed(&[7; 32]), vec![SigningKey::from_seed(&[8; 32])])
    }

    fn refusal(jws: &str, now: u64) -> &'static str {
        verify_pass(jws, &keys().public(), &trust(), now).unwrap_err().reason()
    }

    #[test]
    fn a_pass_verifies_and_admits_its_compliant_signer() {
        let keys = keys();
        let pass = jws::sign(&claims(Some(AgentStatus::Active)), keys.signer());
        let verified = admit_pass(&pass, &keys.public(), &trust(), WALLET, NOW).unwrap();
        assert_eq!(verified.wallet, WALLET);
        assert_eq!(verified.kid, keys.signer().kid());
        assert_eq!(verified.claims, claims(Some(AgentStatus::Active)));
        // A rotation's previous key still verifies what it signed.
        let old = jws::sign(&claims(Some(AgentStatus::Active)), &SigningKey::from_seed(&[8; 32]));
        assert!(admit_pass(&old, &keys.public(), &trust(), WALLET, NOW).is_ok());
    }

    #[test]
    fn lifetime_is_checked_with_sixty_seconds_of_skew() {
        let pass = jws::sign(&claims(Some(AgentStatus::Active)), keys().signer());
        let exp = NOW + 300;
        assert!(verify_pass(&pass, &keys().public(), &trust(), NOW - 60).is_ok());
        assert_eq!(refusal(&pass, NOW - 61), "not_yet_valid");
        assert!(verify_pass(&pass, &keys().public(), &trust(), exp + 59).is_ok());
        assert_eq!(refusal(&pass, exp + 60), "expired");
    }

    #[test]
    fn a_pass_of_another_issuer_chain_or_registry_is_refused() {
        let pass = jws::sign(&claims(Some(AgentStatus::Active)), keys().signer());
        let refuse =
            |trust: PassTrust| verify_pass(&pass, &keys().public(), &trust, NOW).unwrap_err().reason();
        assert_eq!(refuse(PassTrust { issuer: "https://other.example".into(), ..trust() }), "wrong_issuer");
        assert_eq!(refuse(PassTrust { chain_id: 8_453, ..trust() }), "wrong_chain");
        assert_eq!(refuse(PassTrust { registry: WALLET, ..trust() }), "wrong_registry");
    }

    #[test]
    fn admission_needs_the_signers_pass_and_a_compliant_standing() {
        let keys = keys();
        let other = address!("0x70997970c51812dc3a010c7d01b50e0d17dc79c8");
        let pass = jws::sign(&claims(Some(AgentStatus::Active)), keys.signer());
        let refused = admit_pass(&pass, &keys.public(), &trust(), other, NOW).unwrap_err();
        assert_eq!(refused, PassRefusal::NotTheSigner { pass: WALLET, signer: other });
        for standing in [Some(AgentStatus::Suspended), None] {
            let pass = jws::sign(&claims(standing), keys.signer());
            assert!(verify_pass(&pass, &keys.public(), &trust(), NOW).is_ok(), "a true statement verifies");
            let refused = admit_pass(&pass, &keys.public(), &trust(), WALLET, NOW).unwrap_err();
            assert_eq!(refused, PassRefusal::NotCompliant(WALLET));
        }
    }

    #[test]
    fn any_change_to_the_header_claims_or_signature_is_refused() {
        let keys = keys();
        let pass = jws::sign(&claims(Some(AgentStatus::Active)), keys.signer());
        let parts: Vec<&str> = pass.split('.').collect();
        let payload = String::from_utf8(URL_SAFE_NO_PAD.decode(parts[1]).unwrap()).unwrap();
        // Claims edited to extend the pass or promote the agent: the signature no longer holds.
        for (from, to) in [
            (format!("\"exp\":{}", NOW + 300), format!("\"exp\":{}", NOW + 3_000)),
            ("\"isCompliant\":true".to_owned(), "\"isCompliant\":false".to_owned()),
            ("\"number\":40".to_owned(), "\"number\":41".to_owned()),
        ] {
            assert!(payload.contains(&from), "{payload}");
            let edited = URL_SAFE_NO_PAD.encode(payload.replace(&from, &to));
            assert_eq!(refusal(&format!("{}.{edited}.{}", parts[0], parts[2]), NOW), "bad_signature");
        }
        // A flipped bit of the signature.
        let mut signature = URL_SAFE_NO_PAD.decode(parts[2]).unwrap();
        signature[10] ^= 1;
        let flipped = URL_SAFE_NO_PAD.encode(&signature);
        assert_eq!(refusal(&format!("{}.{}.{flipped}", parts[0], parts[1]), NOW), "bad_signature");
        // A header naming a key the JWKS does not hold, or another type.
        let header = |alg: &str, typ: &str, kid: &str| {
            let header = Header { alg: alg.into(), typ: typ.into(), kid: kid.into() };
            URL_SAFE_NO_PAD.encode(serde_json::to_vec(&header).unwrap())
        };
        let kid = keys.signer().kid();
        let unknown = header("EdDSA", "kya-pass+jwt", "someone-else");
        assert_eq!(refusal(&format!("{unknown}.{}.{}", parts[1], parts[2]), NOW), "unknown_key");
        let as_jwt = header("EdDSA", "JWT", kid);
        assert_eq!(refusal(&format!("{as_jwt}.{}.{}", parts[1], parts[2]), NOW), "wrong_type");
        // The same header re-encoded (another spelling of the same JSON): not what was signed.
        let respelled = URL_SAFE_NO_PAD
            .encode(format!(r#"{{"typ":"kya-pass+jwt","alg":"EdDSA","kid":"{kid}"}}"#).as_bytes());
        assert_eq!(refusal(&format!("{respelled}.{}.{}", parts[1], parts[2]), NOW), "bad_signature");
        // Signed by a key of the right kid's owner? No: by another key under our kid.
        let forged_claims = claims(Some(AgentStatus::Active));
        let forger = SigningKey::from_seed(&[9; 32]);
        let forged = jws::sign(&forged_claims, &forger);
        let forged_parts: Vec<&str> = forged.split('.').collect();
        let ours = header("EdDSA", "kya-pass+jwt", kid);
        let forged = format!("{ours}.{}.{}", forged_parts[1], forged_parts[2]);
        assert_eq!(refusal(&forged, NOW), "bad_signature");
    }

    #[test]
    fn a_compliance_loss_at_or_after_the_passs_block_revokes_it() {
        let pass = jws::sign(&claims(Some(AgentStatus::Active)), keys().signer());
        let verified = verify_pass(&pass, &keys().public(), &trust(), NOW).unwrap();
        assert!(verified.check_not_revoked(None).is_ok());
        assert!(verified.check_not_revoked(Some(39)).is_ok(), "a loss the pass's block already shows");
        assert_eq!(verified.check_not_revoked(Some(40)).unwrap_err().reason(), "revoked");
        assert_eq!(verified.check_not_revoked(Some(41)).unwrap_err().reason(), "revoked");
    }
}
