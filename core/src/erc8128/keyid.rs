//! The ERC-8128 `keyid`: `erc8128:<chain-id>:<address>` (section 3.3.1).

use core::fmt;

use alloy_primitives::{Address, hex};

use super::refusal::{Refusal, malformed, unsupported};

/// The account a signature claims, on the chain where it is checked (EOA recovery needs no
/// chain; an ERC-1271 contract account is called there).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KeyId {
    /// The EIP-155 chain id.
    pub chain_id: u64,
    /// The signing account.
    pub address: Address,
}

impl KeyId {
    /// Parses a `keyid` parameter's value. The address's hex is case-insensitive (the ERC says
    /// verifiers MUST accept any case); the chain id is base-10 digits only.
    pub fn parse(keyid: &str) -> Result<Self, Refusal> {
        let Some(rest) = keyid.strip_prefix("erc8128:") else {
            return Err(unsupported(format!(
                "keyid {keyid:?} is not an ERC-8128 key id (erc8128:<chain-id>:<address>)"
            )));
        };
        let bad = || malformed(format!("keyid {keyid:?} is not erc8128:<chain-id>:<address>"));
        let (chain, address) = rest.split_once(':').ok_or_else(bad)?;
        if chain.is_empty() || !chain.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        let chain_id = chain.parse::<u64>().map_err(|_| bad())?;
        let digits = address.strip_prefix("0x").ok_or_else(bad)?;
        if digits.len() != 40 || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(bad());
        }
        let address = digits.parse::<Address>().map_err(|_| bad())?;
        Ok(Self { chain_id, address })
    }
}

/// The canonical form: lowercase hex, as the ERC recommends signers write it. Two keyids that
/// differ only in the case of their hex are one account, so nonces are remembered under this.
impl fmt::Display for KeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "erc8128:{}:{}", self.chain_id, hex::encode_prefixed(self.address))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::erc8128::Reason;

    const VITALIK: &str = "0xd8dA6BF26964aF9D7eEd9e03E53415D37aA96045";

    #[test]
    fn parses_the_erc_example_and_writes_lowercase() {
        let key = KeyId::parse(&format!("erc8128:1:{VITALIK}")).unwrap();
        assert_eq!(key.chain_id, 1);
        assert_eq!(key.address, VITALIK.parse::<Address>().unwrap());
        assert_eq!(key.to_string(), format!("erc8128:1:{}", VITALIK.to_lowercase()));
        let upper = format!("erc8128:84532:0x{}", VITALIK[2..].to_uppercase());
        assert_eq!(KeyId::parse(&upper).unwrap().address, key.address);
    }

    #[test]
    fn other_namespaces_are_unsupported() {
        let err = KeyId::parse(&format!("eip155:1:{VITALIK}")).unwrap_err();
        assert_eq!(err.reason, Reason::Unsupported);
    }

    #[test]
    fn broken_keyids_are_malformed() {
        for keyid in [
            "erc8128:1".to_owned(),
            format!("erc8128::{VITALIK}"),
            format!("erc8128:-1:{VITALIK}"),
            format!("erc8128:+1:{VITALIK}"),
            format!("erc8128:99999999999999999999999:{VITALIK}"),
            format!("erc8128:1:{}", &VITALIK[2..]),
            format!("erc8128:1:{}", &VITALIK[..41]),
            format!("erc8128:1:{VITALIK}00"),
            format!("erc8128:1:0X{}", &VITALIK[2..]),
            "erc8128:1:0xzz000000000000000000000000000000000000zz".to_owned(),
        ] {
            let err = KeyId::parse(&keyid).unwrap_err();
            assert_eq!(err.reason, Reason::Malformed, "{keyid}");
        }
    }
}
