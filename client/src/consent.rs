//! A registration's consents as a client gathers them (INTERFACE.md section 5): which ones it
//! needs at the parties' current nonces, signed by keys at hand or attached as signatures made
//! elsewhere, and, for those still missing, the typed data their signers' wallets are asked to
//! sign. The digests, typed data and call are `kya-core`'s (`kya_core::registry::consent`); this adds the
//! signing and the bookkeeping of one registration.

use alloy::{
    primitives::{Address, B256, Bytes, Signature, U256},
    signers::{SignerSync, local::PrivateKeySigner},
};
use kya_core::registry::consent::{self, Consent, ConsentKind, ConsentSignatures, ConsentTypedData};

use crate::{Error, Registration, Result};

/// The parties' current `consentNonce`s (read with [`crate::Rpc::consent_nonces`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConsentNonces {
    /// The agent wallet's.
    pub wallet: U256,
    /// The Haftungsperson's.
    pub haftungsperson: U256,
}

/// One consent of a [`ConsentPlan`]: what its signer signs, and the signature once there is one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedConsent {
    pub consent: Consent,
    /// The EIP-712 digest the signer signs (what `eth_signTypedData_v4` of [`Self::typed_data`]
    /// signs too).
    pub digest: B256,
    pub typed_data: ConsentTypedData,
    pub signature: Option<Bytes>,
}

impl PlannedConsent {
    /// Which of the two consents it is.
    pub fn kind(&self) -> ConsentKind {
        match self.consent {
            Consent::AgentWallet(_) => ConsentKind::AgentWalletConsent,
            Consent::Liability(_) => ConsentKind::LiabilityConsent,
        }
    }

    /// Who must sign it.
    pub fn signer(&self) -> Address {
        self.consent.signer()
    }

    /// The nonce it is signed at: its signer's `consentNonce` when the registration is sent.
    pub fn nonce(&self) -> U256 {
        match &self.consent {
            Consent::AgentWallet(consent) => consent.nonce,
            Consent::Liability(consent) => consent.nonce,
        }
    }

    /// Whom `signature` recovers to as an ordinary key's signature of this consent.
    pub fn recover(&self, signature: &[u8]) -> Recovered {
        let Ok(parsed) = Signature::from_raw(signature) else { return Recovered::Nobody };
        match parsed.recover_address_from_prehash(&self.digest) {
            Ok(address) if address == self.signer() => Recovered::Signer,
            Ok(address) => Recovered::Other(address),
            Err(_) => Recovered::Nobody,
        }
    }
}

/// What a consent signature recovers to, read as an ordinary key's (65 bytes, ECDSA). A
/// signature that is not the signer's may still be valid: an ERC-1271 contract wallet decides
/// for itself in `isValidSignature`, which only the chain can ask.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recovered {
    /// The consent's signer: the registry will accept it.
    Signer,
    /// Another address: signed by another key, or for other values (nonce, deadline, creator,
    /// chain or registry).
    Other(Address),
    /// No address: not a 65-byte ECDSA signature.
    Nobody,
}

/// The consents one registration needs when `creator` sends it, each with its signature once
/// there is one. All of them carry one deadline and the nonces they were planned at, so they are
/// valid for the registration sent next by `creator` with them, until another consent of the
/// same signer is used first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsentPlan {
    /// The chain id of the registry's EIP-712 domain.
    pub chain_id: u64,
    /// The registry, the domain's verifying contract.
    pub registry: Address,
    /// Unix seconds; the registry refuses the consents after it (`Consent expired`).
    pub deadline: U256,
    /// `None` when the creator is the agent wallet.
    pub agent_wallet: Option<PlannedConsent>,
    /// `None` for a child, or when the creator is the root's Haftungsperson.
    pub liability: Option<PlannedConsent>,
}

impl ConsentPlan {
    /// The consents `registration` needs when `creator` sends it, at `nonces`, valid until
    /// `deadline`, in the registry's domain on `chain_id`; none signed yet.
    pub fn new(
        registration: &Registration,
        creator: Address,
        (chain_id, registry): (u64, Address),
        nonces: ConsentNonces,
        deadline: U256,
    ) -> Self {
        let needed =
            registration.parties(creator).consents_needed(nonces.wallet, nonces.haftungsperson, deadline);
        let domain = consent::domain(chain_id, registry);
        let plan = |consent: Consent| PlannedConsent {
            digest: consent.signing_digest(&domain),
            typed_data: consent.typed_data(chain_id, registry),
            consent,
            signature: None,
        };
        Self {
            chain_id,
            registry,
            deadline,
            agent_wallet: needed.agent_wallet.map(plan),
            liability: needed.liability.map(plan),
        }
    }

    /// Every consent needed, the wallet's first.
    pub fn consents(&self) -> impl Iterator<Item = &PlannedConsent> {
        self.agent_wallet.iter().chain(&self.liability)
    }

    /// The consents still without a signature.
    pub fn missing(&self) -> impl Iterator<Item = &PlannedConsent> {
        self.consents().filter(|planned| planned.signature.is_none())
    }

    /// True when the registration needs no consent at all: a self-registration.
    pub fn is_empty(&self) -> bool {
        self.agent_wallet.is_none() && self.liability.is_none()
    }

    /// Signs, with `signer`, every consent still unsigned whose signer it is; returns how many.
    pub fn sign_with(&mut self, signer: &PrivateKeySigner) -> Result<usize> {
        let mut signed = 0;
        for planned in [&mut self.agent_wallet, &mut self.liability].into_iter().flatten() {
            if planned.signature.is_some() || planned.signer() != signer.address() {
                continue;
            }
            let signature =
                signer.sign_hash_sync(&planned.digest).map_err(|error| Error::Sign(error.to_string()))?;
            planned.signature = Some(Bytes::from(signature.as_bytes().to_vec()));
            signed += 1;
        }
        Ok(signed)
    }

    /// Attaches a signature of the `kind` consent made elsewhere (a wallet's
    /// `eth_signTypedData_v4` of its typed data), and says whom it recovers to. Whether to keep
    /// one that is not the signer's (an ERC-1271 wallet's) is the caller's decision; the
    /// registry checks it either way. An error when the registration needs no such consent or
    /// the signature is empty.
    pub fn attach(&mut self, kind: ConsentKind, signature: Bytes) -> Result<Recovered> {
        let slot = match kind {
            ConsentKind::AgentWalletConsent => &mut self.agent_wallet,
            ConsentKind::LiabilityConsent => &mut self.liability,
        };
        let Some(planned) = slot else {
            return Err(Error::Invalid(match kind {
                ConsentKind::AgentWalletConsent => {
                    "this registration needs no agent wallet consent: its sender is the agent wallet".into()
                }
                ConsentKind::LiabilityConsent => "this registration needs no liability consent: its sender is \
                                                  the Haftungsperson, or it registers a child (which inherits \
                                                  its parent's)"
                    .into(),
            }));
        };
        if signature.is_empty() {
            return Err(Error::Invalid("a consent signature must not be empty".into()));
        }
        let recovered = planned.recover(&signature);
        planned.signature = Some(signature);
        Ok(recovered)
    }

    /// The signatures for `registerAgentWithConsent`, once every consent has one; otherwise
    /// [`Error::ConsentMissing`] naming the signers still missing.
    pub fn signatures(&self) -> Result<ConsentSignatures> {
        let missing: Vec<String> = self.missing().map(describe).collect();
        if !missing.is_empty() {
            return Err(Error::ConsentMissing(missing.join(" and ")));
        }
        let signature = |planned: &Option<PlannedConsent>| {
            planned.as_ref().and_then(|planned| planned.signature.clone()).unwrap_or_default()
        };
        Ok(ConsentSignatures {
            deadline: self.deadline,
            wallet_consent: signature(&self.agent_wallet),
            liability_consent: signature(&self.liability),
        })
    }

    /// `registration` carrying this plan's signatures (`registerAgentWithConsent`), or left a
    /// plain `registerAgent` when it needs none.
    pub fn apply(&self, mut registration: Registration) -> Result<Registration> {
        registration.consents = if self.is_empty() { None } else { Some(self.signatures()?) };
        Ok(registration)
    }
}

/// `the agent wallet 0x…'s AgentWalletConsent`, for messages.
fn describe(planned: &PlannedConsent) -> String {
    match planned.kind() {
        ConsentKind::AgentWalletConsent => {
            format!("the agent wallet {}'s AgentWalletConsent", planned.signer())
        }
        ConsentKind::LiabilityConsent => {
            format!("the Haftungsperson {}'s LiabilityConsent", planned.signer())
        }
    }
}

/// `registration` as `creator` sends it, with every consent it needs signed by whichever of
/// `signers` is that party, at `nonces`, valid until `deadline`, for the registry at `registry`
/// on `chain_id`. A self-registration comes back unchanged (a plain `registerAgent`); a consent
/// whose signer is not among `signers` is [`Error::ConsentMissing`] (use [`ConsentPlan`] to
/// attach signatures made elsewhere).
pub fn sign_consents(
    registration: Registration,
    creator: Address,
    chain: (u64, Address),
    nonces: ConsentNonces,
    deadline: U256,
    signers: &[&PrivateKeySigner],
) -> Result<Registration> {
    let mut plan = ConsentPlan::new(&registration, creator, chain, nonces, deadline);
    for signer in signers {
        plan.sign_with(signer)?;
    }
    plan.apply(registration)
}

#[cfg(test)]
mod tests {
    use alloy::{primitives::address, sol_types::SolCall};
    use kya_core::chain::abi::AgentRegistry;

    use super::*;
    use crate::{Write, capability_hash, constitution_hash};

    const REGISTRY: Address = address!("0x5FbDB2315678afecb367f032d93F642f64180aa3");
    const CHAIN: (u64, Address) = (84532, REGISTRY);

    /// anvil's first three test keys: creator, agent wallet, Haftungsperson.
    fn keys() -> [PrivateKeySigner; 3] {
        [
            "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80",
            "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d",
            "0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a",
        ]
        .map(|key| key.parse().unwrap())
    }

    fn registration(wallet: Address, haftungsperson: Address, parent_agent_id: u64) -> Registration {
        Registration {
            haftungsperson,
            agent_wallet: wallet,
            constitution_hash: constitution_hash("Be honest."),
            capability_hash: capability_hash(&["search"]).unwrap(),
            operational_scope: "summarises papers".into(),
            parent_agent_id,
            self_modifying: false,
            consents: None,
        }
    }

    #[test]
    fn a_self_registration_stays_register_agent() {
        let [creator, ..] = keys();
        let own = registration(creator.address(), creator.address(), 0);
        let signed = sign_consents(
            own.clone(),
            creator.address(),
            CHAIN,
            ConsentNonces::default(),
            U256::from(9),
            &[],
        )
        .unwrap();
        assert_eq!(signed, own);
        assert!(own.is_self_registration(creator.address()));
        let calldata = Write::Register(signed).calldata();
        assert_eq!(calldata[..4], AgentRegistry::registerAgentCall::SELECTOR);
        assert_eq!(calldata, Bytes::from(own.call().abi_encode()));
    }

    #[test]
    fn both_consents_signed_give_the_exact_consented_call() {
        let [creator, wallet, person] = keys();
        let fields = registration(wallet.address(), person.address(), 0);
        assert!(!fields.is_self_registration(creator.address()));
        let nonces = ConsentNonces { wallet: U256::from(2), haftungsperson: U256::from(5) };
        let deadline = U256::from(1_900_000_000u64);
        let signed =
            sign_consents(fields.clone(), creator.address(), CHAIN, nonces, deadline, &[&person, &wallet])
                .unwrap();

        // What the signatures must be: each party's key over its consent's digest in the
        // registry's domain, at its own nonce.
        let domain = consent::domain(CHAIN.0, REGISTRY);
        let wallet_consent = Consent::AgentWallet(consent::AgentWalletConsent {
            agentWallet: wallet.address(),
            creator: creator.address(),
            parentAgentId: U256::ZERO,
            nonce: U256::from(2),
            deadline,
        });
        let liability_consent = Consent::Liability(consent::LiabilityConsent {
            haftungsperson: person.address(),
            creator: creator.address(),
            agentWallet: wallet.address(),
            nonce: U256::from(5),
            deadline,
        });
        let sign = |key: &PrivateKeySigner, consent: &Consent| {
            Bytes::from(key.sign_hash_sync(&consent.signing_digest(&domain)).unwrap().as_bytes().to_vec())
        };
        let expected = AgentRegistry::registerAgentWithConsentCall {
            haftungsperson: person.address(),
            agentWallet: wallet.address(),
            constitutionHash: keccak(b"Be honest."),
            capabilityHash: keccak(b"search"),
            operationalScope: "summarises papers".into(),
            parentAgentId: U256::ZERO,
            selfModifying: false,
            deadline,
            walletConsent: sign(&wallet, &wallet_consent),
            liabilityConsent: sign(&person, &liability_consent),
        };
        let write = Write::Register(signed);
        assert_eq!(write.calldata(), Bytes::from(expected.abi_encode()));
        assert_eq!(write.calldata()[..4], AgentRegistry::registerAgentWithConsentCall::SELECTOR);
        assert_eq!(write.gas(), 450_000 + 20_000 + 2 * 100_000);
    }

    fn keccak(bytes: &[u8]) -> B256 {
        alloy::primitives::keccak256(bytes)
    }

    #[test]
    fn a_child_needs_only_the_wallets_consent_and_a_missing_key_is_named() {
        let [creator, wallet, person] = keys();
        let child = registration(wallet.address(), person.address(), 7);
        let nonces = ConsentNonces { wallet: U256::from(1), haftungsperson: U256::from(3) };
        let mut plan = ConsentPlan::new(&child, creator.address(), CHAIN, nonces, U256::from(100));
        assert!(plan.liability.is_none());
        assert_eq!(plan.missing().map(PlannedConsent::signer).collect::<Vec<_>>(), [wallet.address()]);
        let refused = plan.signatures().unwrap_err().to_string();
        assert_eq!(
            refused,
            format!("consent missing: the agent wallet {}'s AgentWalletConsent", wallet.address())
        );
        assert!(plan.attach(ConsentKind::LiabilityConsent, Bytes::from(vec![1; 65])).is_err());
        assert_eq!(plan.sign_with(&person).unwrap(), 0, "not a party of a child");
        assert_eq!(plan.sign_with(&wallet).unwrap(), 1);
        let signatures = plan.signatures().unwrap();
        assert_eq!((signatures.wallet_consent.len(), signatures.liability_consent.len()), (65, 0));
        let call = AgentRegistry::registerAgentWithConsentCall::abi_decode(
            &Write::Register(plan.apply(child).unwrap()).calldata(),
        )
        .unwrap();
        assert_eq!((call.parentAgentId, call.deadline), (U256::from(7), U256::from(100)));
        assert_eq!(call.walletConsent, signatures.wallet_consent);
        assert!(call.liabilityConsent.is_empty());
    }

    #[test]
    fn attached_signatures_are_recovered_against_the_signer() {
        let [creator, wallet, person] = keys();
        let fields = registration(wallet.address(), person.address(), 0);
        let mut plan =
            ConsentPlan::new(&fields, creator.address(), CHAIN, ConsentNonces::default(), U256::from(9));
        let digest = plan.agent_wallet.as_ref().unwrap().digest;
        let by_wallet = Bytes::from(wallet.sign_hash_sync(&digest).unwrap().as_bytes().to_vec());
        let by_person = Bytes::from(person.sign_hash_sync(&digest).unwrap().as_bytes().to_vec());
        assert_eq!(
            plan.attach(ConsentKind::AgentWalletConsent, by_person).unwrap(),
            Recovered::Other(person.address())
        );
        assert_eq!(
            plan.attach(ConsentKind::AgentWalletConsent, by_wallet.clone()).unwrap(),
            Recovered::Signer
        );
        assert_eq!(
            plan.attach(ConsentKind::LiabilityConsent, Bytes::from(vec![7; 3])).unwrap(),
            Recovered::Nobody
        );
        assert!(plan.attach(ConsentKind::LiabilityConsent, Bytes::new()).is_err());
        // A signature given wins over a key at hand: the key signs only what is still missing.
        assert_eq!(plan.sign_with(&wallet).unwrap(), 0);
        assert_eq!(plan.signatures().unwrap().wallet_consent, by_wallet);
        // The typed data a wallet is shown is the very consent the digest hashes.
        let typed = &plan.agent_wallet.as_ref().unwrap().typed_data;
        let json = serde_json::to_value(typed).unwrap();
        assert_eq!(json["primaryType"], "AgentWalletConsent");
        assert_eq!(json["message"]["agentWallet"], wallet.address().to_checksum(None));
        assert_eq!(json["message"]["creator"], creator.address().to_checksum(None));
        assert_eq!(json["message"]["deadline"], "9");
    }
}
