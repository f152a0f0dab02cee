//! Addresses in this crate's JSON output are EIP-55 checksummed, as the API writes them
//! (alloy's own `Serialize` writes lower case).

use alloy::primitives::Address;
use serde::Serializer;

/// `serialize_with` for an [`Address`].
pub(crate) fn checksummed<S: Serializer>(address: &Address, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&address.to_checksum(None))
}
