//! A KYA pass as the Worker signs it, and what a provider checks it against: the fixture of the
//! pass cases, which measure natively and as wasm what `benches/passes.rs` measures in the npm
//! package, so that the wasm factor of the signature check shows beside the whole check's.

use alloy_primitives::{Address, B256};
use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use kya_core::{
    Agent, AgentStatus,
    pass::{
        Jwks, PassBlock, PassClaims, PassTrust, SigningKey, SigningKeys, claims::Issue, jws,
        verify::verify_pass,
    },
};

const ISSUER: &str = "https://kya.example";
const CHAIN_ID: u64 = 84_532;
/// The wallet of [`PassFixture::compliant`]'s agent: anvil's fourth account, whose key
/// [`WALLET_KEY`] is, so a bench can sign the requests that carry the pass.
pub const WALLET: &str = "0x90F79bf6EB2c4f870365E785982E1f101E93b906";
/// [`WALLET`]'s private key (anvil's well-known fourth key: a test key, never a real one).
pub const WALLET_KEY: &str = "0x7c852118294e51e653712a81e05800f419141751be58f605c371e15141b007a6";

pub struct PassFixture {
    keys: SigningKeys,
    agent: Agent,
    now: u64,
    /// The signed pass (compact JWS).
    pub jws: String,
    pub jwks: Jwks,
    pub trust: PassTrust,
    /// The pass's first two parts, what its signature covers.
    pub signing_input: String,
    pub signature: ed25519_dalek::Signature,
    pub key: ed25519_dalek::VerifyingKey,
}

impl PassFixture {
    /// The pass of [`WALLET`]'s agent, Active and attested an hour before `now`, checked at
    /// `now`: what `benches/passes.rs` and `benches/python.rs` measure (at the wall clock, so
    /// that verifiers reading the clock themselves, jose and PyJWT, accept it too).
    pub fn compliant(now: u64) -> Self {
        let wallet: Address = WALLET.parse().expect("an address");
        let agent = Agent {
            agent_id: 1,
            creator: wallet,
            haftungsperson: wallet,
            agent_wallet: wallet,
            constitution_hash: B256::ZERO,
            capability_hash: B256::ZERO,
            operational_scope: "Invoice reconciliation".into(),
            parent_agent_id: 0,
            generation: 0,
            self_modifying: false,
            registered_at: now - 3_600,
            last_attestation: now - 3_600,
            last_revenue_report: 0,
            status: AgentStatus::Active,
        };
        Self::new(agent, now)
    }

    /// A pass of `agent`'s wallet at `now`, by a two-key set (a rotation's), checked at `now`.
    pub fn new(agent: Agent, now: u64) -> Self {
        let keys =
            SigningKeys::new(SigningKey::from_seed(&[0x42; 32]), vec![SigningKey::from_seed(&[0x43; 32])]);
        let registry = Address::repeat_byte(0x2e);
        let jws = jws::sign(
            &PassClaims::new(issue(registry, agent.agent_wallet, now), Some(&agent)),
            keys.signer(),
        );
        let (signing_input, signature) = jws.rsplit_once('.').expect("a compact JWS");
        let signature = URL_SAFE_NO_PAD.decode(signature).expect("base64url");
        let jwks = keys.public();
        let key: [u8; 32] =
            URL_SAFE_NO_PAD.decode(&jwks.keys()[0].x).expect("base64url").try_into().expect("32");
        Self {
            signing_input: signing_input.to_owned(),
            signature: ed25519_dalek::Signature::from_slice(&signature).expect("64 bytes"),
            key: ed25519_dalek::VerifyingKey::from_bytes(&key).expect("a curve point"),
            trust: PassTrust { issuer: ISSUER.into(), chain_id: CHAIN_ID, registry },
            jwks,
            jws,
            keys,
            agent,
            now,
        }
    }

    /// What the Worker does per pass: the claims of the agent, signed.
    pub fn sign(&self) -> String {
        let issue = issue(self.trust.registry, self.agent.agent_wallet, self.now);
        jws::sign(&PassClaims::new(issue, Some(&self.agent)), self.keys.signer())
    }

    /// What a provider does per request: the whole offline check.
    pub fn verify(&self) -> bool {
        verify_pass(&self.jws, &self.jwks, &self.trust, self.now).is_ok()
    }

    /// The Ed25519 check alone, as `verify_pass` makes it.
    pub fn check_signature(&self) -> bool {
        self.key.verify_strict(self.signing_input.as_bytes(), &self.signature).is_ok()
    }
}

fn issue(registry: Address, wallet: Address, now: u64) -> Issue<'static> {
    Issue {
        issuer: ISSUER,
        chain_id: CHAIN_ID,
        registry,
        wallet,
        block: PassBlock { number: 1_234, hash: B256::repeat_byte(0xab), time: now - 2 },
        grace_period: kya_core::DEFAULT_GRACE_PERIOD_SECS,
        now,
        ttl_secs: 300,
        jti: "Y5cA3Rj0n2z7wS3JqXw3Gg".into(),
    }
}
