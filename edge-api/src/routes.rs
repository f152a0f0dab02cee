//! The endpoint table: every path the Worker serves, with its parameters validated into an
//! [`Endpoint`] (400 on anything malformed), and each endpoint's cache policy. A new endpoint is
//! one row here, one variant, and its answer in [`crate::answers`].

use alloy_primitives::Address;
use kya_core::{
    api::query::{AgentsQuery, RevenueQuery, parse_agent_id, parse_wallet},
    feed::ChangesQuery,
};

use crate::{Error, Result};

/// SPEC.md section 1: agent data is cached 5 minutes, lineage 10, KYA checks 1.
pub(crate) const AGENT_DATA_TTL: u64 = 300;
const LINEAGE_TTL: u64 = 600;
const KYA_TTL: u64 = 60;

/// A validated request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Endpoint {
    Health,
    OpenApi,
    Stats,
    StatsDetailed,
    Agent(u64),
    Agents(AgentsQuery),
    AgentsCompliance,
    Lineage(u64),
    Revenue(u64, RevenueQuery),
    RevenueAggregate,
    Kya(Address),
    /// A KYA pass of the wallet (INTERFACE.md section 7).
    KyaPass(Address),
    /// The issuer's public keys of passes.
    Jwks,
    Changes(ChangesQuery),
    ChangesStream(ChangesQuery),
}

/// Query parameters as decoded from the URL.
type Query<'a> = &'a [(String, String)];

/// One row: a path pattern (`:name` segments capture) and how its captures and query become
/// an [`Endpoint`].
struct Route {
    pattern: &'static str,
    parse: fn(&[&str], Query<'_>) -> Result<Endpoint>,
}

const ROUTES: [Route; 15] = [
    Route { pattern: "/health", parse: |_, _| Ok(Endpoint::Health) },
    Route { pattern: "/openapi.json", parse: |_, _| Ok(Endpoint::OpenApi) },
    Route { pattern: "/api/v1/stats", parse: |_, _| Ok(Endpoint::Stats) },
    Route { pattern: "/api/v1/stats/detailed", parse: |_, _| Ok(Endpoint::StatsDetailed) },
    Route {
        pattern: "/api/v1/agents",
        parse: |_, query| Ok(Endpoint::Agents(AgentsQuery::parse(pairs(query))?)),
    },
    Route { pattern: "/api/v1/agents/compliance", parse: |_, _| Ok(Endpoint::AgentsCompliance) },
    Route { pattern: "/api/v1/agent/:id", parse: |path, _| Ok(Endpoint::Agent(parse_agent_id(path[0])?)) },
    Route {
        pattern: "/api/v1/agent/:id/lineage",
        parse: |path, _| Ok(Endpoint::Lineage(parse_agent_id(path[0])?)),
    },
    Route {
        pattern: "/api/v1/agent/:id/revenue",
        parse: |path, query| {
            Ok(Endpoint::Revenue(parse_agent_id(path[0])?, RevenueQuery::parse(pairs(query))?))
        },
    },
    Route { pattern: "/api/v1/revenue/aggregate", parse: |_, _| Ok(Endpoint::RevenueAggregate) },
    Route { pattern: "/api/v1/kya/:wallet", parse: |path, _| Ok(Endpoint::Kya(parse_wallet(path[0])?)) },
    Route {
        pattern: "/api/v1/kya/:wallet/pass",
        parse: |path, _| Ok(Endpoint::KyaPass(parse_wallet(path[0])?)),
    },
    Route { pattern: kya_core::pass::JWKS_PATH, parse: |_, _| Ok(Endpoint::Jwks) },
    Route {
        pattern: "/api/v1/changes",
        parse: |_, query| Ok(Endpoint::Changes(ChangesQuery::parse(pairs(query))?)),
    },
    Route {
        pattern: "/api/v1/changes/stream",
        parse: |_, query| Ok(Endpoint::ChangesStream(ChangesQuery::parse(pairs(query))?)),
    },
];

/// Every path pattern of the table (`:name` for a captured segment), for the OpenAPI
/// document's check ([`crate::openapi`]).
#[cfg(test)]
pub(crate) fn patterns() -> impl Iterator<Item = &'static str> {
    ROUTES.iter().map(|route| route.pattern)
}

/// True when a row of the table matches `path`, whatever its parameters hold: the CORS
/// preflight is answered there (a malformed parameter is for the request itself to refuse).
pub(crate) fn serves(path: &str) -> bool {
    ROUTES.iter().any(|route| captures(route.pattern, path).is_some())
}

fn pairs(query: Query<'_>) -> impl Iterator<Item = (&str, &str)> {
    query.iter().map(|(name, value)| (name.as_str(), value.as_str()))
}

/// The endpoint at `path`, validated with `query`. A path no row matches is a 404
/// ([`Error::NoRoute`]); a malformed parameter of a matching row is a 400.
pub(crate) fn resolve(path: &str, query: Query<'_>) -> Result<Endpoint> {
    for route in &ROUTES {
        if let Some(captures) = captures(route.pattern, path) {
            return (route.parse)(&captures, query);
        }
    }
    Err(Error::NoRoute(path.to_owned()))
}

/// The `:name` segments of `path` if it matches `pattern` segment for segment.
fn captures<'a>(pattern: &str, path: &'a str) -> Option<Vec<&'a str>> {
    let (mut wanted, mut given) = (pattern.split('/'), path.split('/'));
    let mut captured = Vec::new();
    loop {
        match (wanted.next(), given.next()) {
            (None, None) => return Some(captured),
            (Some(name), Some(segment)) if name.starts_with(':') => captured.push(segment),
            (Some(literal), Some(segment)) if literal == segment => {}
            _ => return None,
        }
    }
}

/// How an endpoint's answers are cached: under `path` (normalised, so spellings of one request
/// share an entry) for `ttl` seconds from when the chain was read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CachePolicy {
    pub(crate) path: String,
    pub(crate) ttl: u64,
}

impl Endpoint {
    /// The five registry-wide endpoints: answered from the index, each reading up to every row.
    pub(crate) const fn registry_wide(&self) -> bool {
        matches!(
            self,
            Self::Stats
                | Self::StatsDetailed
                | Self::Agents(_)
                | Self::AgentsCompliance
                | Self::RevenueAggregate
        )
    }

    /// The cache policy, `None` for answers not cached here (`/health`, the OpenAPI document,
    /// revenue history).
    pub(crate) fn cache_policy(&self) -> Option<CachePolicy> {
        let (path, ttl) = match self {
            // The feed moves every run: a page is read from D1 each time (its cost is bounded).
            // A pass is signed at each request (its own `jti`, the block read now); the JWKS
            // is the secret's, read from memory.
            Self::Health
            | Self::OpenApi
            | Self::Revenue(..)
            | Self::Changes(_)
            | Self::ChangesStream(_)
            | Self::KyaPass(_)
            | Self::Jwks => {
                return None;
            }
            Self::Stats => ("/api/v1/stats".into(), AGENT_DATA_TTL),
            Self::StatsDetailed => ("/api/v1/stats/detailed".into(), AGENT_DATA_TTL),
            Self::Agent(id) => (format!("/api/v1/agent/{id}"), AGENT_DATA_TTL),
            Self::Agents(query) => (format!("/api/v1/agents?{}", query.canonical()), AGENT_DATA_TTL),
            Self::AgentsCompliance => ("/api/v1/agents/compliance".into(), AGENT_DATA_TTL),
            Self::Lineage(id) => (format!("/api/v1/agent/{id}/lineage"), LINEAGE_TTL),
            Self::RevenueAggregate => ("/api/v1/revenue/aggregate".into(), AGENT_DATA_TTL),
            // Lowercase hex: checksummed and lowercase spellings share one entry.
            Self::Kya(wallet) => (format!("/api/v1/kya/{wallet:#x}"), KYA_TTL),
        };
        Some(CachePolicy { path, ttl })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(path: &str) -> Result<Endpoint> {
        resolve(path, &[])
    }

    #[test]
    fn table() {
        assert_eq!(route("/health").unwrap(), Endpoint::Health);
        assert_eq!(route("/api/v1/agent/7/lineage").unwrap(), Endpoint::Lineage(7));
        assert_eq!(route("/api/v1/agent/7").unwrap(), Endpoint::Agent(7));
        assert_eq!(route("/api/v1/agents/compliance").unwrap(), Endpoint::AgentsCompliance);
        let query = [("limit".to_owned(), "500".to_owned()), ("page".to_owned(), "2".to_owned())];
        let Endpoint::Agents(agents) = resolve("/api/v1/agents", &query).unwrap() else { panic!("agents") };
        assert_eq!((agents.page, agents.limit), (2, 100));
        // A malformed parameter of a matching route is a 400, not a 404.
        for bad in ["/api/v1/agent/x", "/api/v1/agent/", "/api/v1/kya/0xab", "/api/v1/agent/0/revenue"] {
            assert_eq!(route(bad).unwrap_err().status(), 400, "{bad}");
        }
        for missing in ["/", "/api/v1", "/api/v2/stats", "/api/v1/stats/", "/api/v1/agent/1/x", "/health/"] {
            assert!(matches!(route(missing), Err(Error::NoRoute(path)) if path == missing), "{missing}");
            assert!(!serves(missing), "{missing}");
        }
        for served in
            ["/health", "/openapi.json", "/api/v1/agent/x", "/api/v1/kya/0xab", "/api/v1/agent/7/lineage"]
        {
            assert!(serves(served), "{served}");
        }
    }

    #[test]
    fn cache_keys_are_normalised() {
        let wallet = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266";
        let checksummed = route(&format!("/api/v1/kya/{wallet}")).unwrap().cache_policy().unwrap();
        let lowercase =
            route(&format!("/api/v1/kya/{}", wallet.to_lowercase())).unwrap().cache_policy().unwrap();
        assert_eq!(checksummed, lowercase);
        assert_eq!(checksummed.ttl, KYA_TTL);
        assert_eq!(route("/api/v1/agent/3/lineage").unwrap().cache_policy().unwrap().ttl, LINEAGE_TTL);
        assert_eq!(route("/api/v1/agent/3/revenue").unwrap().cache_policy(), None);
        assert_eq!(route("/health").unwrap().cache_policy(), None);
    }
}
