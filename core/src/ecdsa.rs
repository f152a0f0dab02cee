//! Ethereum's 65-byte secp256k1 signatures of a 32-byte hash, `r ‖ s ‖ v`: made with a local key
//! (`v` 27 or 28, what OpenZeppelin's `ECDSA.recover` and `SignatureChecker` take), and recovered
//! to the address that made them. ERC-8128 signs and checks requests' EIP-191 hashes with them;
//! hosts without alloy's signers (the Python package) sign a forward request's or a consent's
//! EIP-712 digest with them.

use alloy_primitives::{Address, B256};
use k256::ecdsa::{RecoveryId, Signature, SigningKey, VerifyingKey};

/// The address of `key`: the last 20 bytes of the keccak of its uncompressed public key.
pub fn address_of(key: &SigningKey) -> Address {
    address_of_public(key.verifying_key())
}

fn address_of_public(key: &VerifyingKey) -> Address {
    Address::from_raw_public_key(&key.to_encoded_point(false).as_bytes()[1..])
}

/// `hash` signed with `key`, as is (no prefix, no hashing again): `r ‖ s ‖ v` with a low `s`
/// (RFC 6979, deterministic) and `v` 27 or 28.
pub fn sign_hash(key: &SigningKey, hash: &B256) -> Result<[u8; 65], k256::ecdsa::Error> {
    let (signature, recovery) = key.sign_prehash_recoverable(hash.as_slice())?;
    let mut bytes = [0u8; 65];
    bytes[..64].copy_from_slice(&signature.to_bytes());
    bytes[64] = 27 + u8::from(recovery.is_y_odd());
    Ok(bytes)
}

/// The address a 65-byte `r || s || v` signature recovers to for `hash`, if it does. `v` may be
/// 27/28 or 0/1. A high `s` is accepted, as `ecrecover` does: replay protection keys on the
/// nonce or on the signature base, never on the signature's bytes.
pub fn recover(signature: &[u8], hash: &B256) -> Option<Address> {
    let [rs @ .., v] = <&[u8; 65]>::try_from(signature).ok()?;
    let y_odd = match v {
        0 | 27 => false,
        1 | 28 => true,
        _ => return None,
    };
    let signature = Signature::from_slice(rs).ok()?;
    let (signature, y_odd) = match signature.normalize_s() {
        Some(low) => (low, !y_odd),
        None => (signature, y_odd),
    };
    let recovery = RecoveryId::new(y_odd, false);
    let key = VerifyingKey::recover_from_prehash(hash.as_slice(), &signature, recovery).ok()?;
    Some(address_of_public(&key))
}

/// `signature` with an EOA's `v` written as 27 or 28: a 65-byte signature whose last byte is 0
/// or 1 (what KMSs and some signers give) gets 27 added; anything else (a contract account's
/// signature bytes) is left as it is.
pub fn with_v_27_28(signature: &[u8]) -> Vec<u8> {
    let mut bytes = signature.to_vec();
    if let [_, .., v] = bytes.as_mut_slice()
        && signature.len() == 65
        && *v <= 1
    {
        *v += 27;
    }
    bytes
}

#[cfg(test)]
mod tests {
    use alloy_primitives::{address, keccak256};

    use super::*;

    /// Anvil's first development key, public test material.
    fn key() -> SigningKey {
        let secret =
            alloy_primitives::hex!("ac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80");
        SigningKey::from_slice(&secret).unwrap()
    }

    #[test]
    fn a_signature_recovers_to_its_keys_address_with_either_v() {
        let key = key();
        assert_eq!(address_of(&key), address!("0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"));
        let hash = keccak256(b"a digest");
        let signature = sign_hash(&key, &hash).unwrap();
        assert!(matches!(signature[64], 27 | 28));
        assert_eq!(recover(&signature, &hash), Some(address_of(&key)));
        let mut zero_one = signature;
        zero_one[64] -= 27;
        assert_eq!(recover(&zero_one, &hash), Some(address_of(&key)));
        assert_eq!(with_v_27_28(&zero_one), signature.to_vec());
        assert_eq!(
            recover(&signature, &keccak256(b"another")).map(|other| other == address_of(&key)),
            Some(false)
        );
        assert_eq!(recover(&signature[..64], &hash), None);
    }

    #[test]
    fn only_a_65_byte_signatures_v_is_rewritten() {
        assert_eq!(with_v_27_28(&[1; 65])[64], 28);
        assert_eq!(with_v_27_28(&[0x1c; 65])[64], 0x1c);
        assert_eq!(with_v_27_28(&[0; 66]), vec![0; 66], "a contract account's bytes stay");
        assert_eq!(with_v_27_28(&[]), Vec::<u8>::new());
    }
}
