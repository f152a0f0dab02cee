//! The route table: paths to endpoints, before any validation of their parameters.

/// A matched route; path parameters are still raw text (validated by the endpoint, so that a
/// malformed id is a 400, not a 404).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Route {
    Health,
    Stats,
    StatsDetailed,
    Agent(String),
    Agents,
    AgentsCompliance,
    Lineage(String),
    Revenue(String),
    RevenueAggregate,
    Kya(String),
}

/// The route of `path`, or `None`.
pub(crate) fn route(path: &str) -> Option<Route> {
    if path == "/health" {
        return Some(Route::Health);
    }
    let rest = path.strip_prefix("/api/v1/")?;
    let segments: Vec<&str> = rest.split('/').collect();
    Some(match segments.as_slice() {
        ["stats"] => Route::Stats,
        ["stats", "detailed"] => Route::StatsDetailed,
        ["agents"] => Route::Agents,
        ["agents", "compliance"] => Route::AgentsCompliance,
        ["agent", id] => Route::Agent((*id).to_owned()),
        ["agent", id, "lineage"] => Route::Lineage((*id).to_owned()),
        ["agent", id, "revenue"] => Route::Revenue((*id).to_owned()),
        ["revenue", "aggregate"] => Route::RevenueAggregate,
        ["kya", wallet] => Route::Kya((*wallet).to_owned()),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table() {
        assert_eq!(route("/health"), Some(Route::Health));
        assert_eq!(route("/api/v1/agent/7/lineage"), Some(Route::Lineage("7".into())));
        assert_eq!(route("/api/v1/agent/x"), Some(Route::Agent("x".into())));
        assert_eq!(route("/api/v1/kya/0xab"), Some(Route::Kya("0xab".into())));
        assert_eq!(route("/api/v1/agent/"), Some(Route::Agent(String::new())));
        for missing in ["/", "/api/v1", "/api/v2/stats", "/api/v1/stats/", "/api/v1/agent/1/x", "/health/"] {
            assert_eq!(route(missing), None, "{missing}");
        }
    }
}
