//! The ERC-8128 `keyid` (section 3.3.1) in both the forms the draft has had: the original
//! `erc8128:<chain-id>:<address>`, and CAIP-10's `eip155:<chain-id>:<address>` of its August
//! 2026 revision, which marks the signature as ERC-8128's with `tag="erc8128"` instead of the
//! prefix. Signers here write the first: every verifier we know accepts it, and the revision's
//! verifiers accept both ([`KeyId::parse`] does).

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
    /// Parses a `keyid` parameter's value, in either form (the signature's `tag` is
    /// [`check_tag`]'s). The address's hex is case-insensitive (the ERC says verifiers MUST
    /// accept any case); the chain id is base-10 digits only.
    pub fn parse(keyid: &str) -> Result<Self, Refusal> {
        let Some((namespace, rest)) = [ORIGINAL_PREFIX, CAIP10_PREFIX]
            .into_iter()
            .find_map(|prefix| Some((prefix, keyid.strip_prefix(prefix)?)))
        else {
            return Err(unsupported(format!(
                "keyid {keyid:?} is not an ERC-8128 key id (erc8128:<chain-id>:<address> or \
                 eip155:<chain-id>:<address>)"
            )));
        };
        let bad = || malformed(format!("keyid {keyid:?} is not {namespace}<chain-id>:<address>"));
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

/// The original form's prefix, which alone says "ERC-8128".
const ORIGINAL_PREFIX: &str = "erc8128:";
/// CAIP-10's namespace for EVM chains: an account on a chain, which many protocols name.
const CAIP10_PREFIX: &str = "eip155:";
/// The `tag` by which the draft's revision marks a signature with a CAIP-10 keyid as ERC-8128's.
pub const TAG: &str = "erc8128";

/// A CAIP-10 keyid names an account, not a protocol: without `tag="erc8128"` the signature may
/// be another RFC 9421 profile's over Ethereum keys, whose signature base need not mean what
/// ERC-8128's does (RFC 9421 section 7.2.5 on `tag`: a verifier checks it is its own). The
/// original form's prefix says it already; its signatures are taken with any tag or none, as
/// before.
pub(crate) fn check_tag(keyid: &str, tag: Option<&str>) -> Result<(), Refusal> {
    if !keyid.starts_with(CAIP10_PREFIX) || tag == Some(TAG) {
        return Ok(());
    }
    Err(unsupported(match tag {
        Some(tag) => format!("tag {tag:?} is not ERC-8128's: a CAIP-10 keyid needs tag=\"{TAG}\""),
        None => format!("a CAIP-10 keyid ({keyid:?}) needs tag=\"{TAG}\" to be an ERC-8128 signature"),
    }))
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
    fn the_caip10_form_names_the_same_account() {
        let caip10 = KeyId::parse(&format!("eip155:84532:{VITALIK}")).unwrap();
        let original = KeyId::parse(&format!("erc8128:84532:{VITALIK}")).unwrap();
        assert_eq!(caip10, original);
        // One account, one canonical name: its nonces are one set whichever form signed.
        assert_eq!(caip10.to_string(), format!("erc8128:84532:{}", VITALIK.to_lowercase()));
    }

    #[test]
    fn other_namespaces_are_unsupported() {
        for keyid in [format!("solana:1:{VITALIK}"), format!("eip155x:1:{VITALIK}"), VITALIK.to_owned()] {
            let err = KeyId::parse(&keyid).unwrap_err();
            assert_eq!(err.reason, Reason::Unsupported, "{keyid}");
        }
    }

    #[test]
    fn a_caip10_keyid_needs_the_erc8128_tag() {
        let caip10 = format!("eip155:1:{VITALIK}");
        assert_eq!(check_tag(&caip10, Some("erc8128")), Ok(()));
        for tag in [None, Some("web-bot-auth"), Some("ERC8128")] {
            let err = check_tag(&caip10, tag).unwrap_err();
            assert_eq!(err.reason, Reason::Unsupported, "{tag:?}");
            assert!(err.message.contains("tag=\"erc8128\""), "{}", err.message);
        }
        // The original form: any tag, or none, as before the revision.
        for tag in [None, Some("erc8128"), Some("anything")] {
            assert_eq!(check_tag(&format!("erc8128:1:{VITALIK}"), tag), Ok(()));
        }
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
            "eip155:1".to_owned(),
            format!("eip155::{VITALIK}"),
            format!("eip155:1:{VITALIK}00"),
        ] {
            let err = KeyId::parse(&keyid).unwrap_err();
            assert_eq!(err.reason, Reason::Malformed, "{keyid}");
        }
    }
}
