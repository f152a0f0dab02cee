//! What a verified signature is: the account that signed, its window and nonce, the covered
//! components, and what the caller must still enforce against replay. Its own module because
//! both ways of verifying produce it: [`super::verify`] for an EOA's signature, and
//! [`super::erc1271`] once a contract account has accepted one.

use alloy_primitives::Address;
use serde::{Deserialize, Serialize};

use super::replay::ReplayGuard;

/// What a verified signature says, as a `"verified": true` answer carries it (`signer`, `keyid`,
/// `chainId`, `created`, `expires`, `nonce`, `components`): the Worker writes it and the client
/// reads it with this one type.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "browser", derive(tsify::Tsify))]
#[serde(rename_all = "camelCase")]
pub struct SignatureFacts {
    /// The account that signed: the keyid's address (EIP-55 checksummed in JSON, as every
    /// address the API writes).
    #[serde(serialize_with = "crate::api::checksum::serialize")]
    #[cfg_attr(feature = "browser", tsify(type = "string"))]
    pub signer: Address,
    /// The keyid as the signature carried it.
    pub keyid: String,
    /// The keyid's chain.
    pub chain_id: u64,
    /// When the signature was made (Unix seconds).
    pub created: u64,
    /// When it stops being valid (Unix seconds).
    pub expires: u64,
    /// The nonce, if the signature is Non-Replayable.
    pub nonce: Option<String>,
    /// The covered components, in the signature's order.
    pub components: Vec<String>,
}

/// A verified signature: what it says, with what only the verifier needs (its label, and what
/// the caller must still enforce against replay).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// What the signature says (the answer's fields).
    pub facts: SignatureFacts,
    /// The label of the verified signature.
    pub label: String,
    /// What the caller must enforce against replay before it acts on the request.
    pub replay: ReplayGuard,
}
