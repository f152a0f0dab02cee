//! Contract accounts (ERC-1271): the `isValidSignature` call a verifier makes when a signature
//! does not recover to the keyid's address, and the decision on what the call returned.

use alloy_primitives::{Address, B256, Bytes};
use alloy_sol_types::SolCall;
use serde::Serialize;

use super::refusal::{Reason, Refusal};
use super::verified::Verified;

alloy_sol_types::sol!(
    /// ERC-1271's one function, from the standard's Solidity interface (there is no artifact to
    /// generate it from): a contract account's answer to "is `signature` yours for `hash`?".
    #[derive(Debug, PartialEq, Eq)]
    interface IERC1271 {
        function isValidSignature(bytes32 hash, bytes signature) external view returns (bytes4 magicValue);
    }
);

/// What `isValidSignature` returns for a valid signature: its own selector, `0x1626ba7e`.
pub const ERC1271_MAGIC_VALUE: [u8; 4] = IERC1271::isValidSignatureCall::SELECTOR;

/// The call to make: `isValidSignature(hash, signature)` on `address`, at chain `chain_id`.
/// `hash` is the EIP-191 hash of the signature base, the `H` that ERC-8128 3.4.3 defines and a
/// wallet's `personal_sign` signed: what a contract account validates for a signed message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Erc1271Check {
    /// The chain to call on (the keyid's).
    pub chain_id: u64,
    /// The contract account (the keyid's address).
    pub address: Address,
    /// `keccak256("\x19Ethereum Signed Message:\n" || len(M) || M)` for the signature base `M`.
    pub hash: B256,
    /// The signature's bytes, as the `Signature` header carried them.
    pub signature: Bytes,
}

impl Erc1271Check {
    /// The `eth_call` input: `isValidSignature(hash, signature)`, ABI-encoded.
    pub fn calldata(&self) -> Bytes {
        IERC1271::isValidSignatureCall { hash: self.hash, signature: self.signature.clone() }
            .abi_encode()
            .into()
    }
}

/// Whether a call's return data says "valid": at least one word, and that word is the magic
/// value left-aligned, as OpenZeppelin's `SignatureChecker` decides. An account without code
/// (an EOA) returns nothing, and a call that reverted has no return data to pass: both fail.
pub fn is_valid_signature_magic(return_data: &[u8]) -> bool {
    return_data.len() >= 32
        && return_data[..4] == ERC1271_MAGIC_VALUE
        && return_data[4..32].iter().all(|byte| *byte == 0)
}

/// A signature that passed every other check but did not recover to its keyid's address: it
/// stands or falls on the contract account's `isValidSignature`, which the caller calls.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingErc1271 {
    check: Erc1271Check,
    verified: Verified,
}

impl PendingErc1271 {
    pub(crate) fn new(check: Erc1271Check, verified: Verified) -> Self {
        Self { check, verified }
    }

    /// The call to make.
    pub fn check(&self) -> &Erc1271Check {
        &self.check
    }

    /// The outcome, given what the call returned (empty if it reverted or could not be made).
    pub fn complete(self, return_data: &[u8]) -> Result<Verified, Refusal> {
        match is_valid_signature_magic(return_data) {
            true => Ok(self.verified),
            false => Err(Refusal::new(
                Reason::BadSignature,
                format!(
                    "the signature neither recovers to {} nor is accepted by its ERC-1271 \
                     isValidSignature on chain {}",
                    self.check.address, self.check.chain_id
                ),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use alloy_primitives::{address, b256, hex};

    use super::*;

    #[test]
    fn magic_value_is_the_selector() {
        assert_eq!(ERC1271_MAGIC_VALUE, [0x16, 0x26, 0xba, 0x7e]);
    }

    #[test]
    fn decides_on_the_first_word() {
        let mut word = [0u8; 32];
        word[..4].copy_from_slice(&ERC1271_MAGIC_VALUE);
        assert!(is_valid_signature_magic(&word));
        assert!(!is_valid_signature_magic(&word[..4]));
        assert!(!is_valid_signature_magic(&[]));
        assert!(!is_valid_signature_magic(&[0u8; 32]));
        let mut dirty = word;
        dirty[31] = 1;
        assert!(!is_valid_signature_magic(&dirty));
        let longer = [word.as_slice(), &[0xff; 32]].concat();
        assert!(is_valid_signature_magic(&longer));
    }

    #[test]
    fn calldata_is_the_abi_call() {
        let check = Erc1271Check {
            chain_id: 84532,
            address: address!("0x00000000000000000000000000000000000000aa"),
            hash: b256!("0x1111111111111111111111111111111111111111111111111111111111111111"),
            signature: Bytes::from_static(&[0xab, 0xcd]),
        };
        let data = check.calldata();
        assert_eq!(&data[..4], &ERC1271_MAGIC_VALUE);
        assert_eq!(&data[4..36], check.hash.as_slice());
        // bytes: offset 0x40, length 2, then the two bytes padded to a word.
        assert_eq!(data.len(), 4 + 32 * 4);
        assert_eq!(data[4 + 63], 0x40);
        assert_eq!(data[4 + 95], 2);
        assert_eq!(hex::encode(&data[4 + 96..4 + 98]), "abcd");
    }
}
