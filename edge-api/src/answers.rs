//! Each `/api/v1` endpoint's answer: what it reads ([`reads`], the registry index, or the
//! snapshot's answers when the index cannot answer) and the JSON it renders with `kya_core`.
//! Handlers stay thin: read, render.

use kya_core::{
    BlockRef, KyaResult,
    pagination::window,
    view::{AgentDetails, RevenueView},
};
use serde::Serialize;

use worker::Response;

use crate::{
    Error, Result,
    deps::Deps,
    http::{Answer, Source},
    index::{self, Served},
    reads,
    routes::Endpoint,
    snapshot,
};

/// A successful answer: a JSON body with the block it read, or a body streamed as it is read.
pub(crate) enum Reply {
    Answer(Answer),
    Stream(Response),
}

/// `endpoint`'s successful answer.
pub(crate) async fn answer(endpoint: &Endpoint, deps: &Deps<'_>) -> Result<Reply> {
    Ok(Reply::Answer(match endpoint {
        // Answered in `serve`, without the chain's registry.
        Endpoint::Health => return Err(Error::NoRoute("/health".into())),
        Endpoint::OpenApi => return Err(Error::NoRoute("/openapi.json".into())),
        Endpoint::Changes(_) => return Err(Error::NoRoute("/api/v1/changes".into())),
        Endpoint::ChangesStream(_) => return Err(Error::NoRoute("/api/v1/changes/stream".into())),
        // The snapshot's answers are as old as the snapshot; every other answer reads the chain now.
        Endpoint::Stats
        | Endpoint::StatsDetailed
        | Endpoint::Agents(_)
        | Endpoint::AgentsCompliance
        | Endpoint::RevenueAggregate => {
            let reason = match index::answer(endpoint, deps).await? {
                Served::Answer(answer) => return Ok(Reply::Answer(answer)),
                Served::Stream(response) => return Ok(Reply::Stream(response)),
                Served::Fallback(reason) => reason,
            };
            let loaded = snapshot::load(deps).await?;
            let answers = &loaded.answers;
            let body = match endpoint {
                Endpoint::Stats => answers.stats.clone(),
                Endpoint::StatsDetailed => answers.detailed.clone(),
                Endpoint::Agents(query) => answers.agents_page(query),
                Endpoint::AgentsCompliance => answers.compliance.clone(),
                _ => answers.aggregate.clone(),
            };
            Answer { body, block: answers.block, read_at: loaded.read_at, source: Source::Fallback(reason) }
        }
        Endpoint::Agent(id) => {
            let (block, agent, children) = reads::agent(&deps.rpc, deps.registry, *id).await?;
            // The block's time is "now" for compliance, as for every answer.
            render(block, deps.now, &AgentDetails::of(&agent, children, block.timestamp))?
        }
        Endpoint::Lineage(id) => {
            let (block, tree) = reads::lineage(&deps.rpc, deps.registry, *id).await?;
            render(block, deps.now, &tree)?
        }
        Endpoint::Revenue(id, query) => {
            let (block, history) = reads::revenue(&deps.rpc, deps.registry, *id).await?;
            let shown = window(&history, query.offset, query.limit);
            render(block, deps.now, &shown.map(|report| RevenueView::from(&report)))?
        }
        Endpoint::Kya(wallet) => {
            let (block, agent) = reads::kya(&deps.rpc, deps.registry, *wallet).await?;
            render(block, deps.now, &KyaResult::of(*wallet, agent.as_ref(), block.timestamp))?
        }
    }))
}

fn render<T: Serialize>(block: BlockRef, read_at: u64, value: &T) -> Result<Answer> {
    let body = serde_json::to_string(value).map_err(|error| Error::Runtime(error.into()))?;
    Ok(Answer { body, block, read_at, source: Source::Chain })
}
