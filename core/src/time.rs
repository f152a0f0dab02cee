//! Unix seconds to the API's timestamps: ISO 8601 UTC with milliseconds, `null` for 0.
//!
//! Written out (days-from-civil arithmetic) rather than pulling a date crate into the Worker.

/// `1970-01-01T00:00:00.000Z` style text of a Unix time in seconds.
pub fn iso8601(seconds: u64) -> String {
    let days = seconds / 86_400;
    let in_day = seconds % 86_400;
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.000Z",
        in_day / 3_600,
        in_day % 3_600 / 60,
        in_day % 60
    )
}

/// The JSON form of an on-chain timestamp: 0 means "never" on chain, so it is `None` (`null`).
pub fn timestamp(seconds: u64) -> Option<String> {
    (seconds != 0).then(|| iso8601(seconds))
}

/// Year, month (1..=12) and day (1..=31) of a day count since 1970-01-01 (Howard Hinnant's
/// `civil_from_days`, restricted to non-negative day counts, which is all a `uint64` time gives).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let day_of_era = z - era * 146_097;
    let year_of_era = (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 { month_index + 3 } else { month_index - 9 };
    let year = year_of_era + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn known_instants() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso8601(951_782_400), "2000-02-29T00:00:00.000Z");
        assert_eq!(iso8601(1_700_000_000), "2023-11-14T22:13:20.000Z");
        assert_eq!(iso8601(4_102_444_799), "2099-12-31T23:59:59.000Z");
        assert_eq!(timestamp(0), None);
        assert_eq!(timestamp(1).as_deref(), Some("1970-01-01T00:00:01.000Z"));
    }

    proptest! {
        /// Agrees with chrono, an independent implementation, over ten thousand years.
        #[test]
        fn matches_chrono(seconds in 0u64..253_402_300_799) {
            let expected = chrono::DateTime::from_timestamp(i64::try_from(seconds).unwrap(), 0)
                .unwrap()
                .format("%Y-%m-%dT%H:%M:%S%.3fZ")
                .to_string();
            prop_assert_eq!(iso8601(seconds), expected);
        }
    }
}
