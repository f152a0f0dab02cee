//! Registrations with their parties' consents (INTERFACE.md section 5), signed by local keys:
//! what the demo seed and the tests send when the caller is not the agent wallet, or not a
//! root's Haftungsperson.

use alloy::{
    primitives::{Address, Bytes, U256},
    signers::{SignerSync, local::PrivateKeySigner},
};
use kya_core::{
    chain::abi::AgentRegistry,
    registry::consent::{self, Consent, ConsentSignatures, Parties},
};

use crate::{Chain, TxError};

/// How long the consents signed here stay valid, in seconds of chain time: a day, longer than
/// any seed or test takes to send them, and well inside the registry's 7-day bound
/// ([`consent::MAX_CONSENT_LIFETIME_SECS`]).
pub const CONSENT_VALIDITY_SECS: u64 = 24 * 60 * 60;

/// The deadline of consents signed now: [`CONSENT_VALIDITY_SECS`] after the latest block's time.
/// Chain time, not the wall clock: tests move a local chain's clock days ahead.
pub async fn consent_deadline(chain: &Chain) -> Result<u64, TxError> {
    Ok(chain.latest_timestamp().await? + CONSENT_VALIDITY_SECS)
}

/// Whose consent nonces a registration reads: the wallet's and the Haftungsperson's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConsentNonces {
    pub wallet: U256,
    pub haftungsperson: U256,
}

impl ConsentNonces {
    /// The registry's current `consentNonce` of both parties of `registration`.
    pub async fn read(
        chain: &Chain,
        registry: Address,
        registration: &AgentRegistry::registerAgentCall,
    ) -> Result<Self, TxError> {
        let wallet = AgentRegistry::consentNonceCall(registration.agentWallet);
        let haftungsperson = AgentRegistry::consentNonceCall(registration.haftungsperson);
        Ok(Self {
            wallet: chain.view(registry, &wallet).await?,
            haftungsperson: chain.view(registry, &haftungsperson).await?,
        })
    }
}

/// `registration` as `registerAgentWithConsent` from `creator`, with each consent it needs
/// signed by whichever of `signers` is that party, at `nonces`, valid until `deadline` (Unix
/// seconds). A consent whose party is not among `signers` is left empty, so the registry refuses
/// it as a missing consent (what a test of that refusal wants).
pub fn sign_consents(
    registration: AgentRegistry::registerAgentCall,
    creator: Address,
    (chain_id, registry): (u64, Address),
    nonces: ConsentNonces,
    signers: &[&PrivateKeySigner],
    deadline: u64,
) -> AgentRegistry::registerAgentWithConsentCall {
    let parties = Parties {
        creator,
        agent_wallet: registration.agentWallet,
        haftungsperson: registration.haftungsperson,
        parent_agent_id: registration.parentAgentId.to(),
    };
    let deadline = U256::from(deadline);
    let needed = parties.consents_needed(nonces.wallet, nonces.haftungsperson, deadline);
    let domain = consent::domain(chain_id, registry);
    let sign = |consent: Option<Consent>| -> Bytes {
        let Some(consent) = consent else { return Bytes::new() };
        let Some(signer) = signers.iter().find(|signer| signer.address() == consent.signer()) else {
            return Bytes::new();
        };
        let signature =
            signer.sign_hash_sync(&consent.signing_digest(&domain)).expect("a local key signs any digest");
        Bytes::from(signature.as_bytes().to_vec())
    };
    let signatures = ConsentSignatures {
        deadline,
        wallet_consent: sign(needed.agent_wallet),
        liability_consent: sign(needed.liability),
    };
    consent::register_with_consent_call(registration, signatures)
}

/// [`sign_consents`] at the parties' current nonces, read from the chain, valid until
/// [`consent_deadline`].
pub async fn consented(
    chain: &Chain,
    (chain_id, registry): (u64, Address),
    registration: AgentRegistry::registerAgentCall,
    creator: Address,
    signers: &[&PrivateKeySigner],
) -> Result<AgentRegistry::registerAgentWithConsentCall, TxError> {
    let nonces = ConsentNonces::read(chain, registry, &registration).await?;
    let deadline = consent_deadline(chain).await?;
    Ok(sign_consents(registration, creator, (chain_id, registry), nonces, signers, deadline))
}
