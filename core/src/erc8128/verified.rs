//! What a verified signature is: the account that signed, its window and nonce, the covered
//! components, and what the caller must still enforce against replay. Its own module because
//! both ways of verifying produce it: [`super::verify`] for an EOA's signature, and
//! [`super::erc1271`] once a contract account has accepted one.

use alloy_primitives::Address;
use serde::Serialize;

use super::replay::ReplayGuard;

/// A verified signature. Serialises as the fields of a `"verified": true` answer (`signer`,
/// `keyid`, `chainId`, `created`, `expires`, `nonce`, `components`); the label and the replay
/// guard are the caller's, not the answer's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Verified {
    /// The account that signed: the keyid's address (EIP-55 checksummed in JSON, as every
    /// address the API writes).
    #[serde(serialize_with = "crate::checksum::serialize")]
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
    /// The label of the verified signature.
    #[serde(skip)]
    pub label: String,
    /// What the caller must enforce against replay before it acts on the request.
    #[serde(skip)]
    pub replay: ReplayGuard,
}
