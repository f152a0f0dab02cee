//! EIP-712 consents of a registration (INTERFACE.md section 5): the agent wallet's
//! `AgentWalletConsent` and a root's Haftungsperson's `LiabilityConsent`, in the registry's own
//! domain. Their digests (what a key signs), their typed data (what a wallet is asked to sign with
//! `eth_signTypedData_v4`), and the `registerAgentWithConsent` call that carries them.
//!
//! No signing happens here: a native caller signs the digest with its key, a browser asks the
//! wallet to sign the typed data, and the registry checks either with `SignatureChecker`.

use alloy_primitives::{Address, B256, Bytes, U256};
use alloy_sol_types::{Eip712Domain, SolStruct, eip712_domain};
use serde::Serialize;

use crate::{
    chain::abi::AgentRegistry,
    registry::forward_request::{TypedDataDomain, TypedDataField},
};

/// EIP-712 domain name of the registry's consents (`eip712Domain()` on chain says the same).
pub const DOMAIN_NAME: &str = "AgentRegistry";
/// EIP-712 domain version of the registry's consents.
pub const DOMAIN_VERSION: &str = "1";

/// Longest `operationalScope` the registry stores, in bytes.
pub const MAX_OPERATIONAL_SCOPE_BYTES: usize = 1024;
/// Longest revenue `currency`, in bytes.
pub const MAX_CURRENCY_BYTES: usize = 16;
/// Longest revenue `category`, in bytes.
pub const MAX_CATEGORY_BYTES: usize = 64;
/// Furthest a consent's `deadline` may lie past the block that uses it, in seconds (the
/// registry's `MAX_CONSENT_LIFETIME`, 7 days): a later one reverts `Consent deadline too far`.
/// A consent is good for anyone holding it until its nonce moves, so its life is bounded.
pub const MAX_CONSENT_LIFETIME_SECS: u64 = 7 * 24 * 60 * 60;

/// The latest consent deadline the registry accepts in a block at `block_time`.
pub fn latest_deadline(block_time: u64) -> u64 {
    block_time.saturating_add(MAX_CONSENT_LIFETIME_SECS)
}

alloy_sol_types::sol! {
    /// The agent wallet's consent to be bound to an agent that `creator` registers under
    /// `parentAgentId` (0: a root), at the wallet's `consentNonce`, valid until `deadline`.
    #[derive(Debug, PartialEq, Eq)]
    struct AgentWalletConsent {
        address agentWallet;
        address creator;
        uint256 parentAgentId;
        uint256 nonce;
        uint256 deadline;
    }

    /// A Haftungsperson's consent to be named liable for the root agent `creator` registers for
    /// `agentWallet`, at the Haftungsperson's `consentNonce`, valid until `deadline`.
    #[derive(Debug, PartialEq, Eq)]
    struct LiabilityConsent {
        address haftungsperson;
        address creator;
        address agentWallet;
        uint256 nonce;
        uint256 deadline;
    }
}

/// The registry's EIP-712 domain on `chain_id` at `registry`.
pub fn domain(chain_id: u64, registry: Address) -> Eip712Domain {
    eip712_domain! {
        name: DOMAIN_NAME,
        version: DOMAIN_VERSION,
        chain_id: chain_id,
        verifying_contract: registry,
    }
}

/// One consent, of either kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Consent {
    /// Signed by the agent wallet.
    AgentWallet(AgentWalletConsent),
    /// Signed by a root's Haftungsperson.
    Liability(LiabilityConsent),
}

impl Consent {
    /// Who must sign this consent.
    pub fn signer(&self) -> Address {
        match self {
            Self::AgentWallet(consent) => consent.agentWallet,
            Self::Liability(consent) => consent.haftungsperson,
        }
    }

    /// The digest the signer signs: `keccak256(0x1901 ‖ domainSeparator ‖ structHash)`.
    pub fn signing_digest(&self, domain: &Eip712Domain) -> B256 {
        match self {
            Self::AgentWallet(consent) => consent.eip712_signing_hash(domain),
            Self::Liability(consent) => consent.eip712_signing_hash(domain),
        }
    }

    /// The typed data of this consent for `eth_signTypedData_v4`.
    pub fn typed_data(&self, chain_id: u64, registry: Address) -> ConsentTypedData {
        let (root, primary_type, message) = match self {
            Self::AgentWallet(consent) => (
                AgentWalletConsent::eip712_root_type(),
                ConsentKind::AgentWalletConsent,
                ConsentMessage::AgentWallet {
                    agent_wallet: consent.agentWallet.to_checksum(None),
                    creator: consent.creator.to_checksum(None),
                    parent_agent_id: consent.parentAgentId.to_string(),
                    nonce: consent.nonce.to_string(),
                    deadline: consent.deadline.to_string(),
                },
            ),
            Self::Liability(consent) => (
                LiabilityConsent::eip712_root_type(),
                ConsentKind::LiabilityConsent,
                ConsentMessage::Liability {
                    haftungsperson: consent.haftungsperson.to_checksum(None),
                    creator: consent.creator.to_checksum(None),
                    agent_wallet: consent.agentWallet.to_checksum(None),
                    nonce: consent.nonce.to_string(),
                    deadline: consent.deadline.to_string(),
                },
            ),
        };
        let fields = members_of(&root);
        let (agent_wallet_consent, liability_consent) = match primary_type {
            ConsentKind::AgentWalletConsent => (Some(fields), None),
            ConsentKind::LiabilityConsent => (None, Some(fields)),
        };
        ConsentTypedData {
            types: ConsentTypes { eip712_domain: domain_fields(), agent_wallet_consent, liability_consent },
            primary_type,
            domain: TypedDataDomain {
                name: DOMAIN_NAME.to_owned(),
                version: DOMAIN_VERSION.to_owned(),
                chain_id,
                verifying_contract: registry.to_checksum(None),
            },
            message,
        }
    }
}

/// The consents a registration needs, given who calls and for whom: the wallet's unless the
/// caller is the wallet, and a root's Haftungsperson's unless the caller is that person. Nonces
/// are the signers' current `consentNonce`s; when the wallet and the Haftungsperson are one
/// signer who must sign both, the liability consent takes the nonce after the wallet's, as the
/// registry checks the wallet's first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsentsNeeded {
    /// `None` when the caller is the agent wallet.
    pub agent_wallet: Option<Consent>,
    /// `None` for a child, or when the caller is the root's Haftungsperson.
    pub liability: Option<Consent>,
}

/// The parties of one registration, as `registerAgentWithConsent` receives them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parties {
    /// The registering caller (`_msgSender()`: the forward request's `from` when relayed).
    pub creator: Address,
    pub agent_wallet: Address,
    /// Read only for a root: a child inherits its parent's.
    pub haftungsperson: Address,
    /// 0: a root.
    pub parent_agent_id: u64,
}

impl Parties {
    /// The consents this registration needs, at the given signers' current nonces.
    pub fn consents_needed(
        &self,
        wallet_nonce: U256,
        haftungsperson_nonce: U256,
        deadline: U256,
    ) -> ConsentsNeeded {
        let agent_wallet = (self.creator != self.agent_wallet).then(|| {
            Consent::AgentWallet(AgentWalletConsent {
                agentWallet: self.agent_wallet,
                creator: self.creator,
                parentAgentId: U256::from(self.parent_agent_id),
                nonce: wallet_nonce,
                deadline,
            })
        });
        let is_root = self.parent_agent_id == 0;
        let liability = (is_root && self.creator != self.haftungsperson).then(|| {
            let same_signer_signed_first = agent_wallet.is_some() && self.haftungsperson == self.agent_wallet;
            let nonce = if same_signer_signed_first {
                haftungsperson_nonce + U256::from(1)
            } else {
                haftungsperson_nonce
            };
            Consent::Liability(LiabilityConsent {
                haftungsperson: self.haftungsperson,
                creator: self.creator,
                agentWallet: self.agent_wallet,
                nonce,
                deadline,
            })
        });
        ConsentsNeeded { agent_wallet, liability }
    }
}

/// What a registration carries besides its fields: one deadline and the two signatures, each
/// empty when its party is the caller.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConsentSignatures {
    pub deadline: U256,
    pub wallet_consent: Bytes,
    pub liability_consent: Bytes,
}

/// `registerAgentWithConsent` with the fields of `registerAgent` and the consents.
pub fn register_with_consent_call(
    registration: AgentRegistry::registerAgentCall,
    consents: ConsentSignatures,
) -> AgentRegistry::registerAgentWithConsentCall {
    AgentRegistry::registerAgentWithConsentCall {
        haftungsperson: registration.haftungsperson,
        agentWallet: registration.agentWallet,
        constitutionHash: registration.constitutionHash,
        capabilityHash: registration.capabilityHash,
        operationalScope: registration.operationalScope,
        parentAgentId: registration.parentAgentId,
        selfModifying: registration.selfModifying,
        deadline: consents.deadline,
        walletConsent: consents.wallet_consent,
        liabilityConsent: consents.liability_consent,
    }
}

/// The typed data of a consent for `eth_signTypedData_v4`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "browser", derive(tsify::Tsify))]
#[serde(rename_all = "camelCase")]
pub struct ConsentTypedData {
    pub types: ConsentTypes,
    pub primary_type: ConsentKind,
    pub domain: TypedDataDomain,
    pub message: ConsentMessage,
}

/// The type lists of [`ConsentTypedData`]: the domain's and the one consent's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "browser", derive(tsify::Tsify))]
pub struct ConsentTypes {
    #[serde(rename = "EIP712Domain")]
    pub eip712_domain: Vec<TypedDataField>,
    #[serde(rename = "AgentWalletConsent", skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "browser", tsify(optional))]
    pub agent_wallet_consent: Option<Vec<TypedDataField>>,
    #[serde(rename = "LiabilityConsent", skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "browser", tsify(optional))]
    pub liability_consent: Option<Vec<TypedDataField>>,
}

/// Which consent a typed data signs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "browser", derive(tsify::Tsify))]
pub enum ConsentKind {
    AgentWalletConsent,
    LiabilityConsent,
}

/// A consent's message: addresses checksummed, numbers as decimal strings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "browser", derive(tsify::Tsify))]
#[serde(untagged, rename_all_fields = "camelCase")]
pub enum ConsentMessage {
    AgentWallet {
        agent_wallet: String,
        creator: String,
        parent_agent_id: String,
        nonce: String,
        deadline: String,
    },
    Liability {
        haftungsperson: String,
        creator: String,
        agent_wallet: String,
        nonce: String,
        deadline: String,
    },
}

fn field(name: &str, kind: &str) -> TypedDataField {
    TypedDataField { name: name.to_owned(), kind: kind.to_owned() }
}

fn domain_fields() -> Vec<TypedDataField> {
    vec![
        field("name", "string"),
        field("version", "string"),
        field("chainId", "uint256"),
        field("verifyingContract", "address"),
    ]
}

/// The members of an EIP-712 root type `Name(type name,…)`, read off the `sol!` struct so the
/// typed data cannot drift from what the digest hashes.
fn members_of(root: &str) -> Vec<TypedDataField> {
    let open = root.find('(').expect("an EIP-712 root type has members");
    root[open + 1..]
        .strip_suffix(')')
        .expect("the root type ends with `)`")
        .split(',')
        .map(|member| {
            let (kind, name) = member.split_once(' ').expect("an EIP-712 member is `type name`");
            field(name, kind)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use alloy_primitives::{address, keccak256};
    use alloy_sol_types::SolValue;

    use super::*;

    const REGISTRY: Address = address!("0x5FbDB2315678afecb367f032d93F642f64180aa3");
    const WALLET: Address = address!("0x1111111111111111111111111111111111111111");
    const CREATOR: Address = address!("0x2222222222222222222222222222222222222222");
    const PERSON: Address = address!("0x3333333333333333333333333333333333333333");

    #[test]
    fn type_strings_are_the_contracts() {
        assert_eq!(
            AgentWalletConsent::eip712_root_type(),
            "AgentWalletConsent(address agentWallet,address creator,uint256 parentAgentId,uint256 nonce,uint256 deadline)"
        );
        assert_eq!(
            LiabilityConsent::eip712_root_type(),
            "LiabilityConsent(address haftungsperson,address creator,address agentWallet,uint256 nonce,uint256 deadline)"
        );
        let source = include_str!("../../../contracts/src/AgentRegistry.sol");
        assert!(source.contains(&format!("\"{}\"", AgentWalletConsent::eip712_root_type())));
        assert!(source.contains(&format!("\"{}\"", LiabilityConsent::eip712_root_type())));
    }

    #[test]
    fn digest_is_1901_domain_separator_struct_hash() {
        let consent = AgentWalletConsent {
            agentWallet: WALLET,
            creator: CREATOR,
            parentAgentId: U256::from(4),
            nonce: U256::from(2),
            deadline: U256::from(1_900_000_000u64),
        };
        let type_hash = keccak256(AgentWalletConsent::eip712_root_type().as_bytes());
        let struct_hash = keccak256(
            (type_hash, WALLET, CREATOR, U256::from(4), U256::from(2), U256::from(1_900_000_000u64))
                .abi_encode(),
        );
        let domain_type =
            keccak256("EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)");
        let separator = keccak256(
            (domain_type, keccak256(DOMAIN_NAME), keccak256(DOMAIN_VERSION), U256::from(84532), REGISTRY)
                .abi_encode(),
        );
        let mut preimage = vec![0x19, 0x01];
        preimage.extend_from_slice(separator.as_slice());
        preimage.extend_from_slice(struct_hash.as_slice());
        assert_eq!(
            Consent::AgentWallet(consent).signing_digest(&domain(84532, REGISTRY)),
            keccak256(&preimage)
        );
    }

    #[test]
    fn a_caller_who_is_both_parties_needs_no_consent() {
        let parties =
            Parties { creator: WALLET, agent_wallet: WALLET, haftungsperson: WALLET, parent_agent_id: 0 };
        let needed = parties.consents_needed(U256::ZERO, U256::ZERO, U256::from(10));
        assert_eq!(needed, ConsentsNeeded { agent_wallet: None, liability: None });
    }

    #[test]
    fn a_stranger_needs_both_and_a_child_only_the_wallets() {
        let root =
            Parties { creator: CREATOR, agent_wallet: WALLET, haftungsperson: PERSON, parent_agent_id: 0 };
        let needed = root.consents_needed(U256::from(3), U256::from(7), U256::from(10));
        assert_eq!(needed.agent_wallet.as_ref().map(Consent::signer), Some(WALLET));
        let Some(Consent::Liability(liability)) = needed.liability else { panic!("a liability consent") };
        assert_eq!(
            (liability.haftungsperson, liability.nonce, liability.agentWallet),
            (PERSON, U256::from(7), WALLET)
        );
        let child = Parties { parent_agent_id: 5, ..root };
        let needed = child.consents_needed(U256::from(3), U256::from(7), U256::from(10));
        let Some(Consent::AgentWallet(wallet)) = needed.agent_wallet else { panic!("a wallet consent") };
        assert_eq!((wallet.parentAgentId, wallet.nonce), (U256::from(5), U256::from(3)));
        assert_eq!(needed.liability, None);
    }

    #[test]
    fn one_signer_for_both_signs_the_liability_at_the_next_nonce() {
        let parties =
            Parties { creator: CREATOR, agent_wallet: WALLET, haftungsperson: WALLET, parent_agent_id: 0 };
        let needed = parties.consents_needed(U256::from(4), U256::from(4), U256::from(10));
        let Some(Consent::Liability(liability)) = needed.liability else { panic!("a liability consent") };
        assert_eq!(liability.nonce, U256::from(5));
    }

    #[test]
    fn typed_data_names_the_consents_fields_and_decimal_numbers() {
        let consent = Consent::Liability(LiabilityConsent {
            haftungsperson: PERSON,
            creator: CREATOR,
            agentWallet: WALLET,
            nonce: U256::from(1),
            deadline: U256::from(1_900_000_000u64),
        });
        let json = serde_json::to_value(consent.typed_data(84532, REGISTRY)).unwrap();
        assert_eq!(json["primaryType"], "LiabilityConsent");
        assert_eq!(json["domain"]["name"], "AgentRegistry");
        assert_eq!(json["domain"]["verifyingContract"], REGISTRY.to_checksum(None));
        assert_eq!(
            json["types"]["LiabilityConsent"][2],
            serde_json::json!({"name": "agentWallet", "type": "address"})
        );
        assert!(json["types"].get("AgentWalletConsent").is_none());
        assert_eq!(
            json["message"],
            serde_json::json!({
                "haftungsperson": PERSON.to_checksum(None),
                "creator": CREATOR.to_checksum(None),
                "agentWallet": WALLET.to_checksum(None),
                "nonce": "1",
                "deadline": "1900000000",
            })
        );
    }
}
