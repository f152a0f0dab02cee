//! Each `/api/v1` endpoint's answer: what it reads ([`reads`], the registry index, or the
//! snapshot's answers when the index cannot answer) and the JSON it renders with `kya_core`.
//! Handlers stay thin: read, render.

use kya_core::{
    BlockRef, KyaResult, StandingClock,
    api::{
        pagination::window,
        view::{AgentDetails, RevenueView},
    },
};
use serde::Serialize;

use worker::Response;

use crate::{
    Error, Result, apart,
    deps::Deps,
    http::{Answer, Source},
    index::{self, Served, point::Point},
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
///
/// Each kind of answer is a future of its own behind a pointer ([`apart()`]): the registry-wide
/// answers from the index, their fallback to the registry's snapshot, and the reads of one agent
/// from the chain. Inlined into their caller (`cached::refresh`) they were one function of
/// 35,260 bytes of wasm, which a restarted Worker's first registry-wide request compiled whole
/// before reading anything (`docs/bench/index-cold.md`).
pub(crate) async fn answer(endpoint: &Endpoint, deps: &Deps<'_>) -> Result<Reply> {
    match endpoint {
        // Answered in `serve`, without the chain's registry.
        Endpoint::Health => Err(Error::NoRoute("/health".into())),
        Endpoint::OpenApi => Err(Error::NoRoute("/openapi.json".into())),
        Endpoint::Changes(_) => Err(Error::NoRoute("/api/v1/changes".into())),
        Endpoint::ChangesStream(_) => Err(Error::NoRoute("/api/v1/changes/stream".into())),
        Endpoint::KyaPass(_) | Endpoint::Jwks => Err(Error::NoRoute("a pass endpoint".into())),
        Endpoint::Stats
        | Endpoint::StatsDetailed
        | Endpoint::Agents(_)
        | Endpoint::AgentsCompliance
        | Endpoint::RevenueAggregate => apart(registry_wide(endpoint, deps)).await,
        Endpoint::Agent(_) | Endpoint::Lineage(_) | Endpoint::Revenue(..) | Endpoint::Kya(_) => {
            apart(from_chain(endpoint, deps)).await.map(Reply::Answer)
        }
    }
}

/// A registry-wide answer: from the index, or else from the registry's snapshot, as old as the
/// snapshot.
async fn registry_wide(endpoint: &Endpoint, deps: &Deps<'_>) -> Result<Reply> {
    match index::answer(endpoint, deps).await? {
        Served::Answer(answer) => Ok(Reply::Answer(answer)),
        Served::Stream(response) => Ok(Reply::Stream(response)),
        Served::Fallback(reason) => apart(from_snapshot(endpoint, deps, reason)).await.map(Reply::Answer),
    }
}

/// A registry-wide answer from the registry's snapshot (the index cannot answer, for `reason`).
async fn from_snapshot(endpoint: &Endpoint, deps: &Deps<'_>, reason: String) -> Result<Answer> {
    let loaded = snapshot::load(deps).await?;
    let answers = &loaded.answers;
    let body = match endpoint {
        Endpoint::Stats => answers.stats.clone(),
        Endpoint::StatsDetailed => answers.detailed.clone(),
        Endpoint::Agents(query) => answers.agents_page(query),
        Endpoint::AgentsCompliance => answers.compliance.clone(),
        _ => answers.aggregate.clone(),
    };
    Ok(Answer {
        body,
        block: answers.block,
        grace_period: Some(answers.grace_period),
        read_at: loaded.read_at,
        source: Source::Fallback(reason),
    })
}

/// An answer about one agent, read from the chain now.
async fn from_chain(endpoint: &Endpoint, deps: &Deps<'_>) -> Result<Answer> {
    match endpoint {
        Endpoint::Agent(id) => {
            let (block, grace_period, agent, children) = reads::agent(&deps.rpc, deps.registry, *id).await?;
            // The block's time is "now" for compliance, as for every answer, judged by the
            // registry's grace period at that block.
            let clock = StandingClock::new(block.timestamp, grace_period);
            render((block, Some(grace_period)), deps.now, &AgentDetails::of(&agent, children, clock))
        }
        Endpoint::Lineage(id) => {
            let (block, tree) = reads::lineage(&deps.rpc, deps.registry, *id).await?;
            render((block, None), deps.now, &tree)
        }
        Endpoint::Revenue(id, query) => {
            let (block, history) = reads::revenue(&deps.rpc, deps.registry, *id).await?;
            let shown = window(&history, query.offset, query.limit);
            render((block, None), deps.now, &shown.map(|report| RevenueView::from(&report)))
        }
        Endpoint::Kya(wallet) => {
            let (block, (grace_period, agent)) = reads::kya(&deps.rpc, deps.registry, *wallet).await?;
            let clock = StandingClock::new(block.timestamp, grace_period);
            render((block, Some(grace_period)), deps.now, &KyaResult::of(*wallet, agent.as_ref(), clock))
        }
        _ => Err(Error::BadConfig("only the reads of one agent are answered from the chain here".into())),
    }
}

/// `/kya/:wallet`, `/agent/:id` or its lineage from the index, with no RPC, when it is fresh (`index::point`),
/// read in a D1 session from `bookmark` (the client's `X-D1-Bookmark`), with the session's
/// bookmark after the read: else the reason to read the chain instead. `None` for the other
/// endpoints.
pub(crate) async fn from_index(
    endpoint: &Endpoint,
    env: &worker::Env,
    config: &crate::config::Config,
    now: u64,
    bookmark: Option<&str>,
) -> Result<Option<std::result::Result<(Answer, Option<String>), String>>> {
    if !matches!(endpoint, Endpoint::Kya(_) | Endpoint::Agent(_) | Endpoint::Lineage(_)) {
        return Ok(None);
    }
    let Some(session) = crate::d1::ReadSession::open(env, bookmark) else {
        return Ok(Some(Err("no index: the Worker has no INDEX binding".into())));
    };
    let settings = &config.index;
    // The answer's block, its source, its body, and whether it states compliance (then it names
    // the grace period that judged it, as the chain-read path does).
    let (at, source, body, judged) = match endpoint {
        Endpoint::Kya(wallet) => {
            match index::point::agents_of_wallets(&session, settings, &[*wallet], now).await? {
                Point::Answer(at, source, mut agents) => {
                    let agent = agents.pop().flatten();
                    (at, source, json(&KyaResult::of(*wallet, agent.as_ref(), at.clock))?, true)
                }
                Point::Fallback(reason) => return Ok(Some(Err(reason))),
            }
        }
        Endpoint::Agent(id) => match index::point::agent(&session, settings, *id, now).await? {
            Point::Answer(at, source, Some((agent, children))) => {
                (at, source, json(&AgentDetails::of(&agent, children, at.clock))?, true)
            }
            Point::Answer(_, _, None) => return Err(kya_core::Error::AgentNotFound(*id).into()),
            Point::Fallback(reason) => return Ok(Some(Err(reason))),
        },
        Endpoint::Lineage(id) => match index::point::lineage(&session, settings, *id, now).await? {
            Point::Answer(at, source, Some(tree)) => (at, source, json(&tree)?, false),
            Point::Answer(_, _, None) => return Err(kya_core::Error::AgentNotFound(*id).into()),
            Point::Fallback(reason) => return Ok(Some(Err(reason))),
        },
        _ => return Ok(None),
    };
    let grace_period = judged.then_some(at.clock.grace_period);
    let answer = Answer { body, block: at.block, grace_period, read_at: now, source };
    Ok(Some(Ok((answer, session.bookmark()))))
}

fn json<T: Serialize>(value: &T) -> Result<String> {
    serde_json::to_string(value).map_err(|error| Error::Runtime(error.into()))
}

fn render<T: Serialize>(
    (block, grace_period): (BlockRef, Option<u64>),
    read_at: u64,
    value: &T,
) -> Result<Answer> {
    let body = serde_json::to_string(value).map_err(|error| Error::Runtime(error.into()))?;
    Ok(Answer { body, block, grace_period, read_at, source: Source::Chain })
}
