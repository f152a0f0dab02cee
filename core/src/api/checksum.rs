//! Addresses as the API writes them: EIP-55 checksummed (INTERFACE.md section 2). alloy's own
//! `Serialize` writes lower case, so typed fields of the API's answers serialise through here;
//! reading back takes any case (alloy's `Deserialize`).

use alloy_primitives::Address;
use serde::Serializer;

/// EIP-55 checksummed text of an address.
pub fn checksummed(address: &Address) -> String {
    address.to_checksum(None)
}

/// `serialize_with` for an [`Address`]: its checksummed text, built on the stack (the snapshot's
/// answers write one per agent).
pub fn serialize<S: Serializer>(address: &Address, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(address.to_checksum_buffer(None).as_str())
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloy_primitives::address;

    #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
    struct Holder(#[serde(serialize_with = "serialize")] Address);

    #[test]
    fn writes_the_checksum_and_reads_any_case() {
        let wallet = address!("0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266");
        let text = "\"0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266\"";
        assert_eq!(serde_json::to_string(&Holder(wallet)).unwrap(), text);
        assert_eq!(checksummed(&wallet), text.trim_matches('"'));
        assert_eq!(serde_json::from_str::<Holder>(text).unwrap(), Holder(wallet));
        let lower = "\"0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266\"";
        assert_eq!(serde_json::from_str::<Holder>(lower).unwrap(), Holder(wallet));
    }
}
