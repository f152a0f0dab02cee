//! Unix seconds to the API's timestamps (ISO 8601 UTC with milliseconds, `null` for 0) and back.
//!
//! Written out (days-from-civil arithmetic) rather than pulling a date crate into the Worker.

/// `1970-01-01T00:00:00.000Z` style text of a Unix time in seconds. Years past 9999 (a reporter
/// may put any `uint64` in a revenue period) take ISO 8601's expanded form, as JavaScript's
/// `toISOString` writes them: `+010000-01-01T00:00:00.000Z`.
pub fn iso8601(seconds: u64) -> String {
    let days = seconds / 86_400;
    let in_day = seconds % 86_400;
    let (year, month, day) = civil_from_days(days);
    let year = if year > 9_999 { format!("+{year:06}") } else { format!("{year:04}") };
    format!(
        "{year}-{month:02}-{day:02}T{:02}:{:02}:{:02}.000Z",
        in_day / 3_600,
        in_day % 3_600 / 60,
        in_day % 60
    )
}

/// The JSON form of an on-chain timestamp: 0 means "never" on chain, so it is `None` (`null`).
pub fn timestamp(seconds: u64) -> Option<String> {
    (seconds != 0).then(|| iso8601(seconds))
}

/// Unix seconds of an API timestamp, `YYYY-MM-DDTHH:MM:SS.mmmZ` (milliseconds optional and
/// dropped: the chain counts whole seconds). `None` for anything else, or a time before 1970.
pub fn parse_iso8601(text: &str) -> Option<u64> {
    let text = text.strip_suffix('Z')?;
    let (date, time) = text.split_once('T')?;
    let time = match time.split_once('.') {
        Some((whole, millis)) if !millis.is_empty() && millis.bytes().all(|b| b.is_ascii_digit()) => whole,
        Some(_) => return None,
        None => time,
    };
    let fields = |text: &str, separator: char, widths: &[usize]| -> Option<Vec<u64>> {
        let parts: Vec<&str> = text.split(separator).collect();
        (parts.len() == widths.len()
            && parts
                .iter()
                .zip(widths)
                .all(|(part, width)| part.len() == *width && part.bytes().all(|b| b.is_ascii_digit())))
        .then(|| parts.iter().map(|part| part.parse().expect("checked digits")).collect())
    };
    let date = fields(date, '-', &[4, 2, 2])?;
    let time = fields(time, ':', &[2, 2, 2])?;
    let (year, month, day) = (date[0], date[1], date[2]);
    let (hour, minute, second) = (time[0], time[1], time[2]);
    if !(1970..=9999).contains(&year) || !(1..=12).contains(&month) || hour > 23 || minute > 59 || second > 59
    {
        return None;
    }
    let days = days_from_civil(year, month, day)?;
    Some(days * 86_400 + hour * 3_600 + minute * 60 + second)
}

/// Days since 1970-01-01 of a calendar date (Howard Hinnant's `days_from_civil`); `None` for a
/// day that the month does not have.
fn days_from_civil(year: u64, month: u64, day: u64) -> Option<u64> {
    let leap = year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400));
    let month_days = [31, if leap { 29 } else { 28 }, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    if day == 0 || day > month_days[usize::try_from(month - 1).ok()?] {
        return None;
    }
    let year = if month <= 2 { year - 1 } else { year };
    let era = year / 400;
    let year_of_era = year - era * 400;
    let month_index = if month > 2 { month - 3 } else { month + 9 };
    let day_of_year = (153 * month_index + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    (era * 146_097 + day_of_era).checked_sub(719_468)
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
        assert_eq!(iso8601(253_402_300_799), "9999-12-31T23:59:59.000Z");
        assert_eq!(iso8601(253_402_300_800), "+010000-01-01T00:00:00.000Z");
        assert_eq!(iso8601(8_640_000_000_000), "+275760-09-13T00:00:00.000Z");
        assert_eq!(iso8601(u64::MAX), "+584554051223-11-09T07:00:15.000Z");
        assert_eq!(timestamp(0), None);
        assert_eq!(timestamp(1).as_deref(), Some("1970-01-01T00:00:01.000Z"));
    }

    #[test]
    fn parses_what_it_prints_and_refuses_the_rest() {
        assert_eq!(parse_iso8601("2000-02-29T00:00:00.000Z"), Some(951_782_400));
        assert_eq!(parse_iso8601("2023-11-14T22:13:20Z"), Some(1_700_000_000));
        assert_eq!(parse_iso8601("1970-01-01T00:00:00.999Z"), Some(0));
        for bad in [
            "",
            "2023-11-14",
            "2023-11-14T22:13:20",
            "2023-11-14 22:13:20Z",
            "2023-02-29T00:00:00Z",
            "2023-13-01T00:00:00Z",
            "2023-11-14T24:00:00Z",
            "1969-12-31T23:59:59Z",
            "2023-11-14T22:13:20.Z",
            "+2023-11-14T22:13:20Z",
        ] {
            assert_eq!(parse_iso8601(bad), None, "{bad}");
        }
    }

    proptest! {
        /// Parsing inverts printing.
        #[test]
        fn parse_inverts_iso8601(seconds in 0u64..253_402_300_799) {
            prop_assert_eq!(parse_iso8601(&iso8601(seconds)), Some(seconds));
        }

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
