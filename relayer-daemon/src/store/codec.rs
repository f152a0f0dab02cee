//! How typed values are kept as text in the store, and read back once, where a row is read.
//!
//! Addresses are checksummed, nonces decimal, hashes and bytes `0x` hex, wei decimal: the store
//! of earlier versions wrote exactly these, so it reads on. A value that does not parse is a
//! damaged file ([`Error::StoreCorrupt`]), named with what it was meant to be.

use alloy::primitives::{Address, B256, Bytes, U256};

use crate::error::{Error, Result};

/// A value kept in one text column.
pub(crate) trait Text: Sized {
    /// The text written.
    fn text(&self) -> String;
    /// The value of `text`; `what` names it in the error.
    fn from_text(text: &str, what: &str) -> Result<Self>;
}

fn corrupt(what: &str, text: &str) -> Error {
    Error::StoreCorrupt(format!("{what} {text:?}"))
}

/// Types whose `Display` is the text kept and whose `FromStr` reads it back.
macro_rules! text_as_displayed {
    ($($type:ty),*) => {$(
        impl Text for $type {
            fn text(&self) -> String {
                self.to_string()
            }

            fn from_text(text: &str, what: &str) -> Result<Self> {
                text.parse().map_err(|_| corrupt(what, text))
            }
        }
    )*};
}

text_as_displayed!(B256, Bytes, u128, i64, u64);

impl Text for Address {
    /// Checksummed (EIP-55), as the store has always kept signers.
    fn text(&self) -> String {
        self.to_checksum(None)
    }

    fn from_text(text: &str, what: &str) -> Result<Self> {
        text.parse().map_err(|_| corrupt(what, text))
    }
}

impl Text for U256 {
    fn text(&self) -> String {
        self.to_string()
    }

    fn from_text(text: &str, what: &str) -> Result<Self> {
        // Decimal only: U256's parser would also take hex, which this store never wrote.
        if text.is_empty() || !text.bytes().all(|byte| byte.is_ascii_digit()) {
            return Err(corrupt(what, text));
        }
        text.parse().map_err(|_| corrupt(what, text))
    }
}

/// Reads an optional column.
pub(crate) fn optional<T: Text>(text: Option<&str>, what: &str) -> Result<Option<T>> {
    text.map(|text| T::from_text(text, what)).transpose()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_read_back_as_written_and_damage_is_named() {
        let address = Address::repeat_byte(0xab);
        assert_eq!(Address::from_text(&address.text(), "signer").unwrap(), address);
        assert_eq!(address.text(), address.to_checksum(None));
        let nonce = U256::MAX;
        assert_eq!(U256::from_text(&nonce.text(), "nonce").unwrap(), nonce);
        let hash = B256::repeat_byte(7);
        assert_eq!(B256::from_text(&hash.text(), "hash").unwrap(), hash);
        let bytes = Bytes::from(vec![1, 2, 3]);
        assert_eq!(bytes.text(), "0x010203");
        assert_eq!(Bytes::from_text("0x010203", "input").unwrap(), bytes);
        assert_eq!(u128::from_text("123", "wei").unwrap(), 123);
        for (error, what) in [
            (U256::from_text("0x10", "forwarder nonce").unwrap_err(), "forwarder nonce \"0x10\""),
            (B256::from_text("0xabc", "transaction hash").unwrap_err(), "transaction hash \"0xabc\""),
            (u128::from_text("lots", "wei amount").unwrap_err(), "wei amount \"lots\""),
        ] {
            assert!(matches!(&error, Error::StoreCorrupt(detail) if detail == what), "{error:?}");
        }
        assert_eq!(optional::<B256>(None, "hash").unwrap(), None);
    }
}
