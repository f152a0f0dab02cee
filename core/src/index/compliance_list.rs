//! `/agents/compliance` served by the index, in parts to stream: the head, each item as the
//! database renders it from an index row ([`compliance_item_sql`]), the separator and the tail;
//! and the quotes of the items as the database hands them over restored
//! ([`restore_compliance_quotes`]).

use std::fmt::Write as _;

#[cfg(test)]
use alloy_primitives::Address;

#[cfg(test)]
use super::json;
use crate::AgentStatus;
#[cfg(test)]
use crate::{Compliance, StandingClock};

/// What `/agents/compliance` needs of an agent: the Rust statement of an item's rendering, which
/// the Worker leaves to D1 ([`compliance_item_sql`]) and the tests hold it to.
#[cfg(test)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ComplianceRow {
    pub(crate) agent_id: u64,
    pub(crate) creator: Address,
    pub(crate) status: AgentStatus,
    pub(crate) last_attestation: u64,
    pub(crate) child_count: u64,
}

/// `/agents/compliance` in parts, for a body streamed in order of ascending `lastAttestation`,
/// then ascending id (stalest first: at a block no attestation is later than its time): the
/// head, each item (joined by [`COMPLIANCE_SEPARATOR`]), then [`COMPLIANCE_TAIL`]. Together
/// they are the JSON of [`crate::snapshot::stats::compliance_list`].
pub fn compliance_head(total: u64) -> String {
    format!("{{\"total\":{total},\"data\":[")
}

/// Between two items of `/agents/compliance`.
pub const COMPLIANCE_SEPARATOR: &str = ",";
/// The end of `/agents/compliance`.
pub const COMPLIANCE_TAIL: &str = "]}";

/// What the index's reads hand over in place of each `"` of `/agents/compliance`'s items: a
/// character no item holds (its names, a checksummed address, status names, booleans and
/// numbers), which JSON carries as it is. D1's results reach the Worker as JSON, where each
/// `"` would be escaped, and parsing those escapes was the largest part of the endpoint's CPU.
pub const COMPLIANCE_QUOTE_STAND_IN: char = '\'';

/// `items` (the UTF-8 of items read with [`COMPLIANCE_QUOTE_STAND_IN`]) with each stand-in back
/// to `"`.
/// Eight bytes at a time (the Worker's wasm has no vector instructions): a megabyte a slice.
pub fn restore_compliance_quotes(items: &mut [u8]) {
    const STAND_IN: u8 = COMPLIANCE_QUOTE_STAND_IN as u8;
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const LOW_SEVEN: u64 = ONES * 0x7f;
    const HIGH: u64 = ONES * 0x80;
    let mut words = items.chunks_exact_mut(8);
    for word in &mut words {
        let bytes: &mut [u8; 8] = word.try_into().expect("eight bytes");
        let value = u64::from_ne_bytes(*bytes);
        // A byte of `found` is 0 exactly where `value`'s is the stand-in; its high bit is set
        // where `found`'s byte is not 0 (exact, unlike the usual test, so no byte is changed
        // that is not a stand-in), and a stand-in XOR its difference from `"` is `"`.
        let found = value ^ (ONES * u64::from(STAND_IN));
        let nonzero = (((found & LOW_SEVEN) + LOW_SEVEN) | found) & HIGH;
        let stand_ins = (!nonzero & HIGH) >> 7;
        *bytes = (value ^ (stand_ins * u64::from(STAND_IN ^ b'"'))).to_ne_bytes();
    }
    for byte in words.into_remainder() {
        if *byte == STAND_IN {
            *byte = b'"';
        }
    }
}

/// One item of `/agents/compliance`, judged by `clock`.
#[cfg(test)]
pub(crate) fn compliance_item(row: &ComplianceRow, clock: StandingClock) -> String {
    json(&crate::snapshot::stats::ComplianceItem {
        agent_id: row.agent_id,
        creator: row.creator,
        status: row.status,
        compliance: Compliance::at(row.status, row.last_attestation, row.child_count, clock),
    })
}

/// The SQL expression that renders one `/agents/compliance` item of an index row (columns `id`,
/// `creator`, stored checksummed, `status`, `last_attestation`, `child_count`) exactly as
/// `compliance_item` (a test's) renders it, at the Unix time bound to the parameter `now_param` (e.g.
/// `?5`), with the registry's grace period at that time's block bound to `grace_param`. The database renders the list, so the Worker copies text instead of decoding every
/// row into values and encoding them again: at 100,000 agents that decoding was nearly all of
/// the endpoint's CPU. The rule is [`Compliance::at`](crate::Compliance::at)'s, written once
/// more in SQL and held to it by a property test over every status and time
/// (`compliance_item_sql_renders_as_compliance_item`).
pub fn compliance_item_sql(now_param: &str, grace_param: &str) -> String {
    let mut status_name = String::from("CASE status");
    for status in AgentStatus::ALL {
        let _ = write!(status_name, " WHEN {} THEN '{}'", status as u8, status.as_str());
    }
    status_name.push_str(" END");
    // `Compliance::at`'s saturating subtraction; the parameters cast so that a time bound as a
    // JavaScript number (a REAL) prints as an integer. A grace past SQLite's integers (the
    // owner may set any uint256) casts to its largest: every attestation current, as on chain.
    let since = format!("max(CAST({now_param} AS INTEGER) - last_attestation, 0)");
    let grace = format!("CAST({grace_param} AS INTEGER)");
    format!(
        "'{{\"agentId\":' || id || ',\"creator\":\"' || creator || '\",\"status\":\"' || {status_name} \
         || '\",\"compliance\":{{\"isActive\":' || (CASE WHEN status = {active} THEN 'true' ELSE 'false' END) \
         || ',\"attestationCurrent\":' || (CASE WHEN {since} <= {grace} THEN 'true' ELSE 'false' END) \
         || ',\"secondsSinceAttestation\":' || {since} || ',\"childCount\":' || child_count \
         || ',\"status\":\"' || {status_name} || '\"}}}}'",
        active = AgentStatus::Active as u8,
    )
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const WEEK: u64 = crate::DEFAULT_GRACE_PERIOD_SECS;

    proptest! {
        /// Every stand-in, and only those (not its neighbours, nor it with the high bit set),
        /// becomes `"`, at any position and length.
        #[test]
        fn restoring_quotes_changes_only_the_stand_ins(
            bytes in proptest::collection::vec(
                prop_oneof![Just(b'\''), Just(b'\'' | 0x80), Just(b'\'' - 1), Just(b'\'' + 1), any::<u8>()],
                0..64,
            ),
        ) {
            let mut restored = bytes.clone();
            restore_compliance_quotes(&mut restored);
            let expected: Vec<u8> = bytes
                .iter()
                .map(|&byte| if byte == COMPLIANCE_QUOTE_STAND_IN as u8 { b'"' } else { byte })
                .collect();
            prop_assert_eq!(restored, expected);
        }

        /// The database's rendering of an item is [`compliance_item`]'s, byte for byte, for every
        /// status, grace period and any attestation before, at, across and after the grace's edge
        /// (a week's, or one the owner set, up to the largest a uint256 saturates to; SQLite here is
        /// rusqlite's bundled one; the Worker's end-to-end tests compare the streamed list too).
        #[test]
        fn compliance_item_sql_renders_as_compliance_item(
            agent_id in 1u64..(1 << 53),
            creator in any::<[u8; 20]>(),
            status in 0u8..4,
            last_attestation in 0u64..(1 << 40),
            age in prop_oneof![Just(0i64), Just(WEEK as i64), Just(WEEK as i64 + 1), -1_000i64..(3 * WEEK as i64)],
            child_count in 0u64..100_000,
            grace in prop_oneof![Just(WEEK), Just(0u64), Just(u64::MAX), 0u64..(4 * WEEK)],
            at_the_grace_edge in prop_oneof![Just(None), Just(Some(0u64)), Just(Some(1u64))],
        ) {
            let row = ComplianceRow {
                agent_id,
                creator: Address::from(creator),
                status: AgentStatus::try_from(status).unwrap(),
                last_attestation,
                child_count,
            };
            // Some cases at the grace's own edge (its last current second, and the one past),
            // for the graces whose edge is a block time (a grace near u64::MAX has none).
            let time = match at_the_grace_edge {
                Some(past) if grace < 1 << 41 => last_attestation + grace + past,
                _ => last_attestation.saturating_add_signed(age),
            };
            let clock = StandingClock::new(time, grace);
            let db = rusqlite::Connection::open_in_memory().unwrap();
            let sql = format!(
                "SELECT {} FROM (SELECT ?1 AS id, ?2 AS creator, ?3 AS status, ?4 AS last_attestation, \
                 ?5 AS child_count)",
                compliance_item_sql("?6", "?7")
            );
            // The time bound as a REAL, as a JavaScript number reaches D1.
            let rendered: String = db
                .query_row(
                    &sql,
                    rusqlite::params![
                        agent_id as i64,
                        row.creator.to_checksum(None),
                        status,
                        last_attestation as i64,
                        child_count as i64,
                        clock.time as f64,
                        clock.grace_period as f64
                    ],
                    |found| found.get(0),
                )
                .unwrap();
            prop_assert!(!rendered.contains(COMPLIANCE_QUOTE_STAND_IN), "{rendered}");
            let mut read = rendered.replace('"', &COMPLIANCE_QUOTE_STAND_IN.to_string()).into_bytes();
            restore_compliance_quotes(&mut read);
            prop_assert_eq!(String::from_utf8(read).unwrap(), compliance_item(&row, clock));
            prop_assert_eq!(rendered, compliance_item(&row, clock));
        }
    }
}
