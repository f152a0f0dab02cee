//! Validation of path segments and query parameters, with the 400 messages the API returns.
//!
//! Parsed queries know their canonical form ([`AgentsQuery::canonical`]), which the edge API uses
//! as its cache key: parameter order, defaults and clamped limits do not split the cache.

use alloy_primitives::Address;

use crate::{
    AgentStatus, Error, Result,
    api::pagination::{AGENTS_DEFAULT_LIMIT, AGENTS_MAX_LIMIT, REVENUE_DEFAULT_LIMIT, REVENUE_MAX_LIMIT},
};

/// An agent id from a path: a positive decimal integer (digits only, no sign). One past 64 bits
/// is well-formed but names no agent ([`Error::AgentIdBeyondRegistry`], a 404 rather than a 400).
pub fn parse_agent_id(segment: &str) -> Result<u64> {
    if segment.is_empty() || !segment.bytes().all(|byte| byte.is_ascii_digit()) {
        return Err(Error::InvalidAgentId(segment.to_owned()));
    }
    match segment.parse::<u64>() {
        Ok(0) => Err(Error::InvalidAgentId(segment.to_owned())),
        Ok(id) => Ok(id),
        // Digits only, so the one failure left is overflow.
        Err(_) => Err(Error::AgentIdBeyondRegistry(segment.to_owned())),
    }
}

/// A wallet from a path: `0x` and 40 hex digits, all lowercase, all uppercase, or with a valid
/// EIP-55 checksum (mixed case that fails the checksum is most likely a typo, so it is refused).
pub fn parse_wallet(segment: &str) -> Result<Address> {
    let invalid = |reason| Error::InvalidWallet { input: segment.to_owned(), reason };
    let digits = segment
        .strip_prefix("0x")
        .or_else(|| segment.strip_prefix("0X"))
        .ok_or_else(|| invalid("must start with 0x"))?;
    if digits.len() != 40 {
        return Err(invalid("must be 0x followed by 40 hex digits"));
    }
    if !digits.bytes().all(|byte| byte.is_ascii_hexdigit()) {
        return Err(invalid("must be 0x followed by 40 hex digits"));
    }
    let address: Address = digits.parse().map_err(|_| invalid("must be 0x followed by 40 hex digits"))?;
    let uniform_case = !digits.bytes().any(|byte| byte.is_ascii_lowercase())
        || !digits.bytes().any(|byte| byte.is_ascii_uppercase());
    if uniform_case || address.to_checksum(None)[2..] == *digits {
        Ok(address)
    } else {
        Err(invalid("mixed-case address with an invalid EIP-55 checksum"))
    }
}

/// The query of `/agents`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AgentsQuery {
    /// From 1.
    pub page: u64,
    /// Clamped to [`AGENTS_MAX_LIMIT`].
    pub limit: u64,
    pub status: Option<AgentStatus>,
}

impl AgentsQuery {
    /// Parses `page`, `limit` and `status`; other parameters are ignored, and when one is given
    /// twice the last value counts (as most URL parsers do).
    pub fn parse<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Result<Self> {
        let mut query = Self { page: 1, limit: AGENTS_DEFAULT_LIMIT, status: None };
        for (name, value) in pairs {
            match name {
                "page" => query.page = position(value, "page", 1)?,
                "limit" => query.limit = limit(value, AGENTS_MAX_LIMIT)?,
                "status" => query.status = Some(value.parse()?),
                _ => {}
            }
        }
        Ok(query)
    }

    /// The canonical query string (fixed order, defaults spelled out, limit clamped).
    pub fn canonical(&self) -> String {
        let status = self.status.map_or("", AgentStatus::as_str);
        format!("limit={}&page={}&status={status}", self.limit, self.page)
    }
}

/// The query of `/agent/:id/revenue`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RevenueQuery {
    pub offset: u64,
    /// Clamped to [`REVENUE_MAX_LIMIT`].
    pub limit: u64,
}

impl RevenueQuery {
    /// Parses `offset` and `limit` like [`AgentsQuery::parse`].
    pub fn parse<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Result<Self> {
        let mut query = Self { offset: 0, limit: REVENUE_DEFAULT_LIMIT };
        for (name, value) in pairs {
            match name {
                "offset" => query.offset = position(value, "offset", 0)?,
                "limit" => query.limit = limit(value, REVENUE_MAX_LIMIT)?,
                _ => {}
            }
        }
        Ok(query)
    }
}

/// The largest `page` or `offset` accepted: JavaScript's `Number.MAX_SAFE_INTEGER`, so the value
/// echoed in the response is exactly what the caller sent, even to a JavaScript client.
pub const MAX_POSITION: u64 = 9_007_199_254_740_991;

/// A page size: a positive integer, clamped to `max` however large it is.
pub(crate) fn limit(value: &str, max: u64) -> Result<u64> {
    // Digits only once `whole` accepts it, so the one parse failure left is overflow: clamped.
    whole(value)
        .filter(|&number| number > 0)
        .map(|number| number.min(max))
        .ok_or(Error::InvalidQuery { name: "limit", reason: "must be a positive integer" })
}

/// A `page` (`first` 1) or an `offset` (`first` 0): an integer from `first` to [`MAX_POSITION`].
fn position(value: &str, name: &'static str, first: u64) -> Result<u64> {
    let number = whole(value).filter(|&number| number >= first).ok_or(Error::InvalidQuery {
        name,
        reason: if first == 0 { "must be a non-negative integer" } else { "must be a positive integer" },
    })?;
    if number > MAX_POSITION {
        return Err(Error::InvalidQuery { name, reason: "must be at most 9007199254740991" });
    }
    Ok(number)
}

/// Decimal digits only (no sign, no exponent), saturating at `u64::MAX`.
fn whole(value: &str) -> Option<u64> {
    (!value.is_empty() && value.bytes().all(|byte| byte.is_ascii_digit()))
        .then(|| value.parse().unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn agent_ids() {
        assert_eq!(parse_agent_id("42"), Ok(42));
        assert_eq!(parse_agent_id("007"), Ok(7));
        assert_eq!(parse_agent_id("18446744073709551615"), Ok(u64::MAX));
        for bad in ["0", "000", "", "-1", "+1", "1.5", "abc", "1e3", " 1", "0x1"] {
            assert_eq!(parse_agent_id(bad), Err(Error::InvalidAgentId(bad.into())), "{bad}");
        }
        let beyond = "18446744073709551616";
        assert_eq!(parse_agent_id(beyond), Err(Error::AgentIdBeyondRegistry(beyond.into())));
        assert_eq!(
            Error::AgentIdBeyondRegistry(beyond.into()).to_string(),
            "Agent not found: 18446744073709551616"
        );
        assert!(!Error::AgentIdBeyondRegistry(beyond.into()).is_bad_request());
        assert_eq!(
            Error::InvalidAgentId("x".into()).to_string(),
            "invalid agent id 'x': must be a positive integer"
        );
    }

    #[test]
    fn wallets() {
        let checksummed = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266";
        let address = parse_wallet(checksummed).unwrap();
        assert_eq!(parse_wallet(&checksummed.to_lowercase()), Ok(address));
        assert_eq!(parse_wallet(&checksummed.to_uppercase().replacen("0X", "0x", 1)), Ok(address));
        for bad in [
            "0xf39fd6e51aad88f6f4ce6ab8827279cfffb9226",
            "f39fd6e51aad88f6f4ce6ab8827279cfffb92266",
            "0xg39fd6e51aad88f6f4ce6ab8827279cfffb92266",
            "0xF39Fd6e51aad88F6F4ce6aB8827279cffFb92266",
            "",
        ] {
            assert!(matches!(parse_wallet(bad), Err(Error::InvalidWallet { .. })), "{bad}");
        }
    }

    #[test]
    fn agents_query_defaults_clamps_and_refuses() {
        assert_eq!(AgentsQuery::parse([]), Ok(AgentsQuery { page: 1, limit: 20, status: None }));
        let clamped = AgentsQuery::parse([("limit", "1000"), ("status", "Suspended"), ("x", "y")]);
        assert_eq!(clamped, Ok(AgentsQuery { page: 1, limit: 100, status: Some(AgentStatus::Suspended) }));
        assert_eq!(clamped.unwrap().canonical(), "limit=100&page=1&status=Suspended");
        for (name, value) in [("page", "0"), ("page", "-1"), ("limit", "0"), ("limit", "ten"), ("page", "")] {
            let error = AgentsQuery::parse([(name, value)]).unwrap_err();
            assert!(error.to_string().contains(&format!("'{name}'")), "{error}");
        }
        assert_eq!(
            AgentsQuery::parse([("status", "active")]).unwrap_err().to_string(),
            "invalid status 'active': must be one of Active, Suspended, Revoked, Terminated"
        );
    }

    #[test]
    fn revenue_query() {
        assert_eq!(RevenueQuery::parse([]), Ok(RevenueQuery { offset: 0, limit: 100 }));
        assert_eq!(
            RevenueQuery::parse([("limit", "501"), ("offset", "0")]),
            Ok(RevenueQuery { offset: 0, limit: 500 })
        );
        assert!(RevenueQuery::parse([("offset", "-3")]).is_err());
        assert!(RevenueQuery::parse([("limit", "0")]).is_err());
        let huge = "99999999999999999999999";
        assert_eq!(RevenueQuery::parse([("limit", huge)]), Ok(RevenueQuery { offset: 0, limit: 500 }));
    }

    #[test]
    fn positions_stay_within_what_javascript_holds_exactly() {
        let largest = MAX_POSITION.to_string();
        assert_eq!(AgentsQuery::parse([("page", &*largest)]).map(|query| query.page), Ok(MAX_POSITION));
        assert_eq!(RevenueQuery::parse([("offset", &*largest)]).map(|query| query.offset), Ok(MAX_POSITION));
        for too_large in ["9007199254740992", "18446744073709551616"] {
            for error in [
                AgentsQuery::parse([("page", too_large)]).unwrap_err(),
                RevenueQuery::parse([("offset", too_large)]).unwrap_err(),
            ] {
                assert!(error.to_string().ends_with("must be at most 9007199254740991"), "{error}");
                assert!(error.is_bad_request());
            }
        }
        assert_eq!(
            AgentsQuery::parse([("page", "0")]).unwrap_err().to_string(),
            "invalid query parameter 'page': must be a positive integer"
        );
        assert_eq!(
            RevenueQuery::parse([("offset", "x")]).unwrap_err().to_string(),
            "invalid query parameter 'offset': must be a non-negative integer"
        );
    }

    proptest! {
        /// Order of parameters never changes the canonical form.
        #[test]
        fn canonical_ignores_order(page in 1u64..1000, limit in 1u64..1000, status in 0u8..4) {
            let (page, limit) = (page.to_string(), limit.to_string());
            let status = AgentStatus::try_from(status).unwrap().as_str();
            let forward = AgentsQuery::parse([("page", &*page), ("limit", &*limit), ("status", status)]).unwrap();
            let backward = AgentsQuery::parse([("status", status), ("limit", &*limit), ("page", &*page)]).unwrap();
            prop_assert_eq!(forward.canonical(), backward.canonical());
            prop_assert!(forward.limit <= AGENTS_MAX_LIMIT);
        }

        /// Arbitrary text never panics: it parses or gives a bad-request error.
        #[test]
        fn arbitrary_input_is_a_clean_error(text in ".{0,50}") {
            for result in [parse_agent_id(&text).map(drop), parse_wallet(&text).map(drop),
                AgentsQuery::parse([("page", &*text)]).map(drop),
                RevenueQuery::parse([("offset", &*text)]).map(drop)] {
                if let Err(error) = result {
                    prop_assert!(error.is_bad_request() || matches!(error, Error::AgentIdBeyondRegistry(_)));
                }
            }
        }
    }
}
