//! Revenue amounts (cents) as JSON numbers.
//!
//! `reportRevenue` takes any `uint256`, and anyone can register an agent and report, so amounts
//! and their sums are kept as full `U256`: one absurd report must neither fail a whole registry
//! read nor wrap a total. In JSON an amount is a number (INTERFACE.md section 2): exact digits up
//! to `u128::MAX` (3.4 × 10³⁸ cents), beyond that the nearest double, which is all a JavaScript
//! caller could hold of it anyway. Read back, a number is exact up to `u64::MAX` and the nearest
//! whole number beyond (serde_json hands larger numbers over as doubles).

use alloy_primitives::U256;
use serde::{Deserialize, Deserializer, Serialize, Serializer, de};

/// An amount in cents, or a sum of them (saturating at `U256::MAX`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
// Its TypeScript type is what its `Serialize` below writes: always a JSON number.
#[cfg_attr(feature = "browser", derive(tsify::Tsify), tsify(type = "number"))]
pub struct Cents(pub U256);

impl Cents {
    /// `self + other`, saturating: only sums of absurd amounts ever reach the bound.
    #[must_use]
    pub fn plus(self, other: Self) -> Self {
        Self(self.0.saturating_add(other.0))
    }
}

impl From<u64> for Cents {
    fn from(cents: u64) -> Self {
        Self(U256::from(cents))
    }
}

impl core::ops::AddAssign for Cents {
    fn add_assign(&mut self, other: Self) {
        *self = self.plus(other);
    }
}

impl Serialize for Cents {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        // u64 first: every serializer writes it as a plain number (u128 may become a BigInt).
        if let Ok(cents) = u64::try_from(self.0) {
            return serializer.serialize_u64(cents);
        }
        match u128::try_from(self.0) {
            Ok(cents) => serializer.serialize_u128(cents),
            Err(_) => serializer.serialize_f64(f64::from(self.0)),
        }
    }
}

impl<'de> Deserialize<'de> for Cents {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(CentsVisitor)
    }
}

struct CentsVisitor;

impl de::Visitor<'_> for CentsVisitor {
    type Value = Cents;

    fn expecting(&self, formatter: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        formatter.write_str("a whole, non-negative number of cents")
    }

    fn visit_u64<E: de::Error>(self, cents: u64) -> Result<Cents, E> {
        Ok(Cents::from(cents))
    }

    fn visit_u128<E: de::Error>(self, cents: u128) -> Result<Cents, E> {
        Ok(Cents(U256::from(cents)))
    }

    fn visit_i64<E: de::Error>(self, cents: i64) -> Result<Cents, E> {
        u64::try_from(cents)
            .map(Cents::from)
            .map_err(|_| E::invalid_value(de::Unexpected::Signed(cents), &self))
    }

    fn visit_f64<E: de::Error>(self, cents: f64) -> Result<Cents, E> {
        let whole = cents.fract() == 0.0;
        U256::try_from(cents)
            .ok()
            .filter(|_| whole)
            .map(Cents)
            .ok_or_else(|| E::invalid_value(de::Unexpected::Float(cents), &self))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(cents: Cents) -> String {
        serde_json::to_string(&cents).expect("serializes")
    }

    #[test]
    fn amounts_up_to_u128_are_exact_json_integers() {
        assert_eq!(json(Cents::from(0)), "0");
        assert_eq!(json(Cents::from(u64::MAX)), "18446744073709551615");
        assert_eq!(json(Cents(U256::from(u128::MAX))), "340282366920938463463374607431768211455");
    }

    #[test]
    fn larger_amounts_are_the_nearest_double() {
        let text = json(Cents(U256::MAX));
        let parsed: f64 = text.parse().expect("a JSON number");
        assert!((parsed / 1.157_920_892_373_162e77 - 1.0).abs() < 1e-15, "{text}");
        assert_eq!(json(Cents(U256::from(1) << 200)), "1.6069380442589903e+60");
    }

    #[test]
    fn reads_back_whole_numbers_only() {
        let read = |text: &str| serde_json::from_str::<Cents>(text).ok();
        assert_eq!(read("18446744073709551615"), Some(Cents::from(u64::MAX)));
        // serde_json parses doubles to within an ulp or so (no `float_roundtrip`).
        let big = read(&json(Cents(U256::from(1) << 200))).expect("a whole number");
        assert!((f64::from(big.0) / 2f64.powi(200) - 1.0).abs() < 1e-15, "{big:?}");
        assert_eq!(read("12.5"), None);
        assert_eq!(read("-1"), None);
        assert_eq!(read("\"12\""), None);
    }

    #[test]
    fn sums_saturate_instead_of_wrapping() {
        let mut total = Cents(U256::MAX - U256::from(1));
        total += Cents::from(5);
        assert_eq!(total, Cents(U256::MAX));
        assert_eq!(Cents::from(2).plus(Cents::from(3)), Cents::from(5));
    }
}
