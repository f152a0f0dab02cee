//! The `/api/v1` endpoints: parameter validation (into a cache key) and their bodies, computed by
//! `kya_core` from what [`reads`] fetched. Handlers stay thin: parse, read, render.

use alloy_primitives::{Address, keccak256};
use kya_core::{
    BlockRef, Compliance, Snapshot,
    pagination::window,
    query::{AgentsQuery, RevenueQuery, parse_agent_id, parse_wallet},
    record::{AgentView, KyaAgent, RevenueView, checksummed},
    redact, stats,
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
    /// When (Unix seconds, wall clock) its chain data was read: the start of its TTL.
    pub(crate) read_at: u64,
}

/// What the endpoints need to read the chain.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Deps<'a> {
    pub(crate) rpc: Rpc<'a>,
    pub(crate) registry: Address,
    /// Scheme and host of the request, the namespace of cache keys.
    pub(crate) origin: &'a str,
    /// The request's wall-clock time, Unix seconds.
    pub(crate) now: u64,
}

impl Deps<'_> {
    /// The Cache API key of `path` (starting with `/`). The configuration is part of every key,
    /// so a changed registry or RPC endpoint never serves what the old one answered.
    pub(crate) fn cache_key(&self, path: &str) -> String {
        let config = keccak256(format!("{:#x} {}", self.registry, self.rpc.url));
        format!("{}/__kya/{}{path}", self.origin, alloy_primitives::hex::encode(&config[..12]))
    }
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
        // `chain` names the endpoint without the API key a hosted node's URL may carry.
        let rpc_url = &*redact::url(deps.rpc.url);
        // Answers read the chain now (`deps.now`), except those computed from the cached
        // snapshot, which are as old as the snapshot.
        match self {
            Self::Stats => {
                let (snapshot, read_at) = snapshot(deps).await?;
                render(snapshot.block, read_at, &stats::stats(&snapshot, &deps.registry, rpc_url))
            }
            Self::StatsDetailed => {
                let (snapshot, read_at) = snapshot(deps).await?;
                let detailed = stats::detailed(&snapshot, stats::stats(&snapshot, &deps.registry, rpc_url));
                render(snapshot.block, read_at, &detailed)
            }
            Self::Agents(query) => {
                let (snapshot, read_at) = snapshot(deps).await?;
                render(snapshot.block, read_at, &stats::agents_page(&snapshot, query))
            }
            Self::AgentsCompliance => {
                let (snapshot, read_at) = snapshot(deps).await?;
                render(snapshot.block, read_at, &stats::compliance_list(&snapshot))
            }
            Self::RevenueAggregate => {
                let (snapshot, read_at) = snapshot(deps).await?;
                render(snapshot.block, read_at, &stats::revenue_aggregate(&snapshot.revenue))
            }
            Self::Agent(id) => {
                let (block, agent, children) = reads::agent(&deps.rpc, deps.registry, *id).await?;
                let compliance = Compliance::of(&agent, children.len() as u64, block.timestamp);
                render(block, deps.now, &AgentDetail { agent: AgentView::from(&agent), children, compliance })
            }
            Self::Lineage(id) => {
                let (block, tree) = reads::lineage(&deps.rpc, deps.registry, *id).await?;
                render(block, deps.now, &tree)
            }
            Self::Revenue(id, query) => {
                let (block, history) = reads::revenue(&deps.rpc, deps.registry, *id).await?;
                let shown = window(&history, query.offset, query.limit);
                render(block, deps.now, &shown.map(|report| RevenueView::from(&report)))
            }
            Self::Kya(wallet) => {
                let (block, agent) = reads::kya(&deps.rpc, deps.registry, *wallet).await?;
                // Child count plays no part in compliance, so it is not fetched here.
                let compliant = agent
                    .as_ref()
                    .is_some_and(|agent| Compliance::of(agent, 0, block.timestamp).is_compliant());
                render(
                    block,
                    deps.now,
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

/// The registry snapshot and when it was read: from the Cache API while younger than 5 minutes,
/// else read afresh (and cached).
async fn snapshot(deps: &Deps<'_>) -> Result<(Snapshot, u64)> {
    let key = deps.cache_key("/snapshot");
    if let Some(cached) = cache::snapshot(&key, AGENT_DATA_TTL, deps.now).await {
        return Ok(cached);
    }
    let snapshot = reads::snapshot(&deps.rpc, deps.registry).await?;
    cache::store_snapshot(&key, &snapshot, deps.now, AGENT_DATA_TTL).await?;
    Ok((snapshot, deps.now))
}

fn render<T: Serialize>(block: BlockRef, read_at: u64, value: &T) -> Result<Answer> {
    let body = serde_json::to_string(value).map_err(|error| Error::Runtime(error.into()))?;
    Ok(Answer { body, block, read_at })
}
