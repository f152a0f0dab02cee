//! A place in the change feed: an entry's id, `after=` and `Last-Event-ID`.
//!
//! The index writes the feed as numbered batches, one or a few per run (a row of D1 each, so a
//! change costs a fraction of a row, whatever it touches); an entry is its batch's number and its
//! place in the batch, written `<batch>-<index>`. Both only grow, so cursors compare as the feed
//! is ordered, and a page seeks its first batch by the table's key: its cost does not depend on
//! how far back the cursor is.

use core::{fmt, str::FromStr};

use serde::{Deserialize, Deserializer, Serialize, Serializer, de::Error as _};

use crate::{Error, Result};

/// An entry of the feed, ordered as the feed is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Cursor {
    /// The batch's number, from 1.
    pub batch: u64,
    /// The entry's place in its batch, from 0.
    pub index: u32,
}

impl Cursor {
    /// Parses a cursor a client sent as `name` (`after`, or `Last-Event-ID`).
    pub fn parse(text: &str, name: &'static str) -> Result<Self> {
        let invalid =
            || Error::InvalidQuery { name, reason: "must be an event id such as 12-0, as the feed gave it" };
        let (batch, index) = text.split_once('-').ok_or_else(invalid)?;
        let digits = |part: &str| {
            !part.is_empty() && part.len() <= 20 && part.bytes().all(|byte| byte.is_ascii_digit())
        };
        if !digits(batch) || !digits(index) {
            return Err(invalid());
        }
        let batch = batch.parse().ok().filter(|&batch| batch > 0).ok_or_else(invalid)?;
        let index = index.parse().map_err(|_| invalid())?;
        Ok(Self { batch, index })
    }
}

impl fmt::Display for Cursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.batch, self.index)
    }
}

impl FromStr for Cursor {
    type Err = Error;

    fn from_str(text: &str) -> Result<Self> {
        Self::parse(text, "after")
    }
}

impl Serialize for Cursor {
    fn serialize<S: Serializer>(&self, serializer: S) -> core::result::Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Cursor {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> core::result::Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(D::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn malformed_cursors_are_refused_by_name() {
        for text in [
            "",
            "12",
            "12-",
            "-3",
            "0-0",
            "a-1",
            "1-b",
            "1--1",
            "+1-0",
            "1-0-0",
            " 1-0",
            "1-4294967296",
            "99999999999999999999-0",
        ] {
            let error = Cursor::parse(text, "after").unwrap_err();
            assert!(error.is_bad_request(), "{text}");
            assert_eq!(
                error.to_string(),
                "invalid query parameter 'after': must be an event id such as 12-0, as the feed gave it",
                "{text}"
            );
        }
        assert!(Cursor::parse("x", "Last-Event-ID").unwrap_err().to_string().contains("'Last-Event-ID'"));
    }

    proptest! {
        #[test]
        fn cursors_round_trip_and_order_as_the_feed(
            a in (1..u64::MAX, any::<u32>()), b in (1..u64::MAX, any::<u32>()),
        ) {
            let (a, b) = (Cursor { batch: a.0, index: a.1 }, Cursor { batch: b.0, index: b.1 });
            prop_assert_eq!(a.to_string().parse::<Cursor>(), Ok(a));
            prop_assert_eq!(serde_json::from_value::<Cursor>(serde_json::to_value(a).unwrap()).unwrap(), a);
            prop_assert_eq!(a.cmp(&b), (a.batch, a.index).cmp(&(b.batch, b.index)));
        }
    }
}
