//! The `/api/v1` endpoints: parameter validation (into a cache key) and their bodies, computed by
//! `kya_core` from what [`reads`] fetched. Handlers stay thin: parse, read, render.

use alloy_primitives::{Address, keccak256};
use kya_core::{
    BlockRef, Compliance, Snapshot,
    pagination::window,
    query::{AgentsQuery, RevenueQuery, parse_agent_id, parse_wallet},
    record::{AgentView, KyaAgent, RevenueView, checksummed},
    stats,
    time::iso8601,
};
use serde::Serialize;
use worker::Url;

use crate::{Error, Result, cache, reads, routes::Route, rpc::Rpc};

/// SPEC.md section 1: agent data is cached 5 minutes, lineage 10, KYA checks 1.
const AGENT_DATA_TTL: u64 = 300;
const LINEAGE_TTL: u64 = 600;
const KYA_TTL: u64 = 60;

/// A validated `/api/v1` request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Endpoint {
    Stats,
    StatsDetailed,
    Agent(u64),
    Agents(AgentsQuery),
    AgentsCompliance,
    Lineage(u64),
    Revenue(u64, RevenueQuery),
    RevenueAggregate,
    Kya(Address),
}

/// `/agent/:id` (typed rather than `json!`, so fields keep SPEC.md's order).
#[derive(Serialize)]
struct AgentDetail {
    agent: AgentView,
    children: Vec<u64>,
    compliance: Compliance,
}

/// `/kya/:wallet`; `checkedAt` is the timestamp of the block the check read.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct KyaResult {
    wallet: String,
    is_registered: bool,
    is_compliant: bool,
    agent: Option<KyaAgent>,
    checked_at: String,
}

/// A successful answer's JSON body and the pinned block it was read at (sent, and cached, as
/// `X-Block-Number` and `X-Block-Timestamp`, so clients can evaluate it at the chain's time).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Answer {
    pub(crate) body: String,
    pub(crate) block: BlockRef,
}

/// What the endpoints need to read the chain.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Deps<'a> {
    pub(crate) rpc: Rpc<'a>,
    pub(crate) registry: Address,
    /// Scheme and host of the request, the namespace of cache keys.
    pub(crate) origin: &'a str,
}

impl Endpoint {
    /// Validates the route's parameters and the query (400 on anything malformed).
    pub(crate) fn parse(route: Route, url: &Url) -> Result<Self> {
        let pairs: Vec<(String, String)> = url.query_pairs().into_owned().collect();
        let pairs = pairs.iter().map(|(name, value)| (name.as_str(), value.as_str()));
        Ok(match route {
            // The router answers `/health` itself; it has no `/api/v1` endpoint.
            Route::Health => return Err(Error::NoRoute("/health".into())),
            Route::Stats => Self::Stats,
            Route::StatsDetailed => Self::StatsDetailed,
            Route::Agent(id) => Self::Agent(parse_agent_id(&id)?),
            Route::Agents => Self::Agents(AgentsQuery::parse(pairs)?),
            Route::AgentsCompliance => Self::AgentsCompliance,
            Route::Lineage(id) => Self::Lineage(parse_agent_id(&id)?),
            Route::Revenue(id) => Self::Revenue(parse_agent_id(&id)?, RevenueQuery::parse(pairs)?),
            Route::RevenueAggregate => Self::RevenueAggregate,
            Route::Kya(wallet) => Self::Kya(parse_wallet(&wallet)?),
        })
    }

    /// The normalised cache path and TTL, or `None` for uncached revenue history.
    pub(crate) fn cache(&self) -> Option<(String, u64)> {
        Some(match self {
            Self::Stats => ("/api/v1/stats".into(), AGENT_DATA_TTL),
            Self::StatsDetailed => ("/api/v1/stats/detailed".into(), AGENT_DATA_TTL),
            Self::Agent(id) => (format!("/api/v1/agent/{id}"), AGENT_DATA_TTL),
            Self::Agents(query) => (format!("/api/v1/agents?{}", query.canonical()), AGENT_DATA_TTL),
            Self::AgentsCompliance => ("/api/v1/agents/compliance".into(), AGENT_DATA_TTL),
            Self::Lineage(id) => (format!("/api/v1/agent/{id}/lineage"), LINEAGE_TTL),
            Self::Revenue(..) => return None,
            Self::RevenueAggregate => ("/api/v1/revenue/aggregate".into(), AGENT_DATA_TTL),
            // Lowercase hex: checksummed and lowercase spellings share one entry.
            Self::Kya(wallet) => (format!("/api/v1/kya/{wallet:#x}"), KYA_TTL),
        })
    }

    /// The JSON body of a successful answer, with the block it read.
    pub(crate) async fn answer(&self, deps: &Deps<'_>) -> Result<Answer> {
        let rpc_url = deps.rpc.url;
        match self {
            Self::Stats => {
                let snapshot = snapshot(deps).await?;
                render(snapshot.block, &stats::stats(&snapshot, &deps.registry, rpc_url))
            }
            Self::StatsDetailed => {
                let snapshot = snapshot(deps).await?;
                let detailed = stats::detailed(&snapshot, stats::stats(&snapshot, &deps.registry, rpc_url));
                render(snapshot.block, &detailed)
            }
            Self::Agents(query) => {
                let snapshot = snapshot(deps).await?;
                render(snapshot.block, &stats::agents_page(&snapshot, query))
            }
            Self::AgentsCompliance => {
                let snapshot = snapshot(deps).await?;
                render(snapshot.block, &stats::compliance_list(&snapshot))
            }
            Self::RevenueAggregate => {
                let snapshot = snapshot(deps).await?;
                render(snapshot.block, &stats::revenue_aggregate(&snapshot.revenue))
            }
            Self::Agent(id) => {
                let (block, agent, children) = reads::agent(&deps.rpc, deps.registry, *id).await?;
                let compliance = Compliance::of(&agent, children.len() as u64, block.timestamp);
                render(block, &AgentDetail { agent: AgentView::from(&agent), children, compliance })
            }
            Self::Lineage(id) => {
                let (block, tree) = reads::lineage(&deps.rpc, deps.registry, *id).await?;
                render(block, &tree)
            }
            Self::Revenue(id, query) => {
                let (block, history) = reads::revenue(&deps.rpc, deps.registry, *id).await?;
                let shown = window(&history, query.offset, query.limit);
                render(block, &shown.map(|report| RevenueView::from(&report)))
            }
            Self::Kya(wallet) => {
                let (block, agent) = reads::kya(&deps.rpc, deps.registry, *wallet).await?;
                // Child count plays no part in compliance, so it is not fetched here.
                let compliant = agent
                    .as_ref()
                    .is_some_and(|agent| Compliance::of(agent, 0, block.timestamp).is_compliant());
                render(
                    block,
                    &KyaResult {
                        wallet: checksummed(wallet),
                        is_registered: agent.is_some(),
                        is_compliant: compliant,
                        agent: agent.as_ref().map(KyaAgent::from),
                        checked_at: iso8601(block.timestamp),
                    },
                )
            }
        }
    }
}

/// The registry snapshot, from the Cache API or read afresh (and then cached for 5 minutes).
async fn snapshot(deps: &Deps<'_>) -> Result<Snapshot> {
    // The configuration is part of the key, so a changed registry or RPC never reads old data.
    let config = keccak256(format!("{:#x} {}", deps.registry, deps.rpc.url));
    let key = format!("{}/__kya/snapshot/{}", deps.origin, alloy_primitives::hex::encode(&config[..12]));
    if let Some(snapshot) = cache::snapshot(&key).await? {
        return Ok(snapshot);
    }
    let snapshot = reads::snapshot(&deps.rpc, deps.registry).await?;
    cache::store_snapshot(&key, &snapshot, AGENT_DATA_TTL).await?;
    Ok(snapshot)
}

fn render<T: Serialize>(block: BlockRef, value: &T) -> Result<Answer> {
    let body = serde_json::to_string(value).map_err(|error| Error::Runtime(error.into()))?;
    Ok(Answer { body, block })
}
