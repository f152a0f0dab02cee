//! A registration's consents: the latest deadline the registry accepts, which consents a
//! registration needs (`consentsNeeded`), and their EIP-712 typed data and digests. The call
//! that carries the signed consents is in `calldata` (`registerAgentWithConsentCalldata`).

use alloy_primitives::Address;
use serde::{Deserialize, Serialize};
use tsify::{Ts, Tsify};
use wasm_bindgen::prelude::*;

use super::{JsResult, UintInput, address_of, from_js, to_js, whole};
use crate::{
    api::{checksum::checksummed, query::parse_wallet},
    registry::consent::{self, AgentWalletConsent, Consent, ConsentTypedData, LiabilityConsent, Parties},
};

/// The latest consent `deadline` the registry accepts in a block at `blockTimestamp` (Unix
/// seconds): 7 days after it (`MAX_CONSENT_LIFETIME`); a later one reverts `Consent deadline too
/// far`. Use the chain's latest block time, which the block a registration lands in only passes.
#[wasm_bindgen(js_name = latestConsentDeadline)]
pub fn latest_consent_deadline(block_timestamp: f64) -> JsResult<f64> {
    let latest = consent::latest_deadline(whole(block_timestamp, "blockTimestamp")?);
    #[allow(clippy::cast_precision_loss, reason = "a block time 7 days on stays far below 2^53")]
    Ok(latest as f64)
}

/// An `AgentWalletConsent` as a page holds it: the agent wallet's consent to be bound to the
/// agent `creator` registers under `parentAgentId` (0: a root).
#[derive(Debug, Deserialize, Tsify)]
#[serde(rename_all = "camelCase")]
pub struct AgentWalletConsentInput {
    pub agent_wallet: String,
    /// The registering caller: the forward request's `from` when relayed.
    pub creator: String,
    pub parent_agent_id: UintInput,
    /// The agent wallet's `consentNonce` on the registry.
    pub nonce: UintInput,
    /// Unix seconds.
    pub deadline: UintInput,
}

impl AgentWalletConsentInput {
    fn parse(self) -> JsResult<AgentWalletConsent> {
        Ok(AgentWalletConsent {
            agentWallet: address_of(&self.agent_wallet, "agentWallet")?,
            creator: address_of(&self.creator, "creator")?,
            parentAgentId: self.parent_agent_id.into_uint("parentAgentId")?,
            nonce: self.nonce.into_uint("nonce")?,
            deadline: self.deadline.into_uint("deadline")?,
        })
    }
}

/// A `LiabilityConsent` as a page holds it: a root's Haftungsperson's consent to be named liable
/// for the agent `creator` registers for `agentWallet`.
#[derive(Debug, Deserialize, Tsify)]
#[serde(rename_all = "camelCase")]
pub struct LiabilityConsentInput {
    pub haftungsperson: String,
    /// The registering caller: the forward request's `from` when relayed.
    pub creator: String,
    pub agent_wallet: String,
    /// The Haftungsperson's `consentNonce` on the registry.
    pub nonce: UintInput,
    /// Unix seconds.
    pub deadline: UintInput,
}

impl LiabilityConsentInput {
    fn parse(self) -> JsResult<LiabilityConsent> {
        Ok(LiabilityConsent {
            haftungsperson: address_of(&self.haftungsperson, "haftungsperson")?,
            creator: address_of(&self.creator, "creator")?,
            agentWallet: address_of(&self.agent_wallet, "agentWallet")?,
            nonce: self.nonce.into_uint("nonce")?,
            deadline: self.deadline.into_uint("deadline")?,
        })
    }
}

/// Either consent, named by its `primaryType` (what [`consents_needed`] returns).
#[derive(Debug, Deserialize, Tsify)]
#[serde(tag = "primaryType")]
pub enum ConsentInput {
    AgentWalletConsent(AgentWalletConsentInput),
    LiabilityConsent(LiabilityConsentInput),
}

impl ConsentInput {
    fn parse(self) -> JsResult<Consent> {
        Ok(match self {
            Self::AgentWalletConsent(consent) => Consent::AgentWallet(consent.parse()?),
            Self::LiabilityConsent(consent) => Consent::Liability(consent.parse()?),
        })
    }
}

fn registry_address(text: &str) -> JsResult<Address> {
    parse_wallet(text).map_err(|reason| JsError::new(&format!("registry: {reason}")))
}

fn consent_digest(consent: &Consent, chain_id: f64, registry: &str) -> JsResult<String> {
    let domain = consent::domain(whole(chain_id, "chainId")?, registry_address(registry)?);
    Ok(consent.signing_digest(&domain).to_string())
}

/// The 32-byte EIP-712 digest (0x hex) the agent wallet signs to consent, in the domain of the
/// registry at `registry` on `chainId`.
#[wasm_bindgen(js_name = agentWalletConsentDigest)]
pub fn agent_wallet_consent_digest(
    consent: Ts<AgentWalletConsentInput>,
    chain_id: f64,
    registry: &str,
) -> JsResult<String> {
    let consent = Consent::AgentWallet(from_js(&consent, "consent")?.parse()?);
    consent_digest(&consent, chain_id, registry)
}

/// The 32-byte EIP-712 digest (0x hex) a root's Haftungsperson signs to consent.
#[wasm_bindgen(js_name = liabilityConsentDigest)]
pub fn liability_consent_digest(
    consent: Ts<LiabilityConsentInput>,
    chain_id: f64,
    registry: &str,
) -> JsResult<String> {
    let consent = Consent::Liability(from_js(&consent, "consent")?.parse()?);
    consent_digest(&consent, chain_id, registry)
}

/// The digest of either consent, named by its `primaryType`.
#[wasm_bindgen(js_name = consentDigest)]
pub fn consent_digest_of(consent: Ts<ConsentInput>, chain_id: f64, registry: &str) -> JsResult<String> {
    consent_digest(&from_js(&consent, "consent")?.parse()?, chain_id, registry)
}

/// The EIP-712 typed data of a consent for `eth_signTypedData_v4`.
#[wasm_bindgen(js_name = consentTypedData)]
pub fn consent_typed_data(
    consent: Ts<ConsentInput>,
    chain_id: f64,
    registry: &str,
) -> JsResult<Ts<ConsentTypedData>> {
    let consent = from_js(&consent, "consent")?.parse()?;
    to_js(&consent.typed_data(whole(chain_id, "chainId")?, registry_address(registry)?))
}

/// The parties of a registration: who sends it (the forward request's `from` when relayed), its
/// agent wallet, its Haftungsperson (read only for a root) and its parent (0: a root).
#[derive(Debug, Deserialize, Tsify)]
#[serde(rename_all = "camelCase")]
pub struct PartiesInput {
    pub creator: String,
    pub agent_wallet: String,
    pub haftungsperson: String,
    pub parent_agent_id: UintInput,
}

/// `"AgentWalletConsent"`: the `primaryType` of an [`AgentWalletConsentView`].
#[derive(Debug, Serialize, Tsify)]
pub enum AgentWalletConsentType {
    AgentWalletConsent,
}

/// `"LiabilityConsent"`: the `primaryType` of a [`LiabilityConsentView`].
#[derive(Debug, Serialize, Tsify)]
pub enum LiabilityConsentType {
    LiabilityConsent,
}

/// An `AgentWalletConsent` to sign: addresses checksummed, numbers as decimal strings. It is a
/// [`ConsentInput`] as it is: pass it to `consentTypedData` or `consentDigest`.
#[derive(Debug, Serialize, Tsify)]
#[serde(rename_all = "camelCase")]
pub struct AgentWalletConsentView {
    pub primary_type: AgentWalletConsentType,
    pub agent_wallet: String,
    pub creator: String,
    pub parent_agent_id: String,
    pub nonce: String,
    pub deadline: String,
}

/// A `LiabilityConsent` to sign, like [`AgentWalletConsentView`].
#[derive(Debug, Serialize, Tsify)]
#[serde(rename_all = "camelCase")]
pub struct LiabilityConsentView {
    pub primary_type: LiabilityConsentType,
    pub haftungsperson: String,
    pub creator: String,
    pub agent_wallet: String,
    pub nonce: String,
    pub deadline: String,
}

/// The consents a registration needs: each `null` when its party is the sender (or, for the
/// liability consent, for a child, which inherits its parent's Haftungsperson).
#[derive(Debug, Serialize, Tsify)]
#[serde(rename_all = "camelCase")]
pub struct ConsentsNeededView {
    pub agent_wallet: Option<AgentWalletConsentView>,
    pub liability: Option<LiabilityConsentView>,
}

/// Which consents a registration by `parties.creator` needs, at the signers' current
/// `consentNonce`s (read from the registry), valid until `deadline` (Unix seconds). When the
/// agent wallet is also the root's Haftungsperson and signs both, the liability consent takes
/// the nonce after the wallet's.
#[wasm_bindgen(js_name = consentsNeeded)]
pub fn consents_needed(
    parties: Ts<PartiesInput>,
    wallet_nonce: Ts<UintInput>,
    haftungsperson_nonce: Ts<UintInput>,
    deadline: Ts<UintInput>,
) -> JsResult<Ts<ConsentsNeededView>> {
    let parties = from_js(&parties, "parties")?;
    let parent_agent_id = parties.parent_agent_id.into_uint("parentAgentId")?;
    let parties = Parties {
        creator: address_of(&parties.creator, "creator")?,
        agent_wallet: address_of(&parties.agent_wallet, "agentWallet")?,
        haftungsperson: address_of(&parties.haftungsperson, "haftungsperson")?,
        parent_agent_id: u64::try_from(parent_agent_id)
            .map_err(|_| JsError::new("parentAgentId is larger than any agent id"))?,
    };
    let needed = parties.consents_needed(
        from_js(&wallet_nonce, "walletNonce")?.into_uint("walletNonce")?,
        from_js(&haftungsperson_nonce, "haftungspersonNonce")?.into_uint("haftungspersonNonce")?,
        from_js(&deadline, "deadline")?.into_uint("deadline")?,
    );
    let agent_wallet = match needed.agent_wallet {
        Some(Consent::AgentWallet(consent)) => Some(AgentWalletConsentView {
            primary_type: AgentWalletConsentType::AgentWalletConsent,
            agent_wallet: checksummed(&consent.agentWallet),
            creator: checksummed(&consent.creator),
            parent_agent_id: consent.parentAgentId.to_string(),
            nonce: consent.nonce.to_string(),
            deadline: consent.deadline.to_string(),
        }),
        _ => None,
    };
    let liability = match needed.liability {
        Some(Consent::Liability(consent)) => Some(LiabilityConsentView {
            primary_type: LiabilityConsentType::LiabilityConsent,
            haftungsperson: checksummed(&consent.haftungsperson),
            creator: checksummed(&consent.creator),
            agent_wallet: checksummed(&consent.agentWallet),
            nonce: consent.nonce.to_string(),
            deadline: consent.deadline.to_string(),
        }),
        _ => None,
    };
    to_js(&ConsentsNeededView { agent_wallet, liability })
}
