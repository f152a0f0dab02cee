//! What each endpoint reads from the registry: plans of calls at one pinned block, run as few
//! JSON-RPC batches as possible, decoded by `kya_core`.

use std::collections::BTreeMap;

use alloy_primitives::{Address, U256};
use kya_core::{
    Agent, BlockRef, Error as CoreError, Revenue, Snapshot,
    abi::AgentRegistry,
    lineage::{self, LineageNode, NodeData, shown_children},
    record::small,
    rpc::{CallPlan, Outcome},
};

use crate::{Result, rpc::Rpc};

/// The registry's revert for an unknown agent id.
const AGENT_NOT_FOUND: &str = "Agent not found";
/// The registry's revert for a wallet without an agent.
const NO_AGENT_FOR_WALLET: &str = "No agent registered for this wallet";

/// The whole registry at the latest block: block, `nextAgentId`, then every record, then the
/// histories of the agents that ever reported revenue. Round trips: 3 plus one per further batch.
pub(crate) async fn snapshot(rpc: &Rpc<'_>, registry: Address) -> Result<Snapshot> {
    let block = rpc.pin().await?;
    let mut plan = CallPlan::new(registry, block.number);
    plan.push(&AgentRegistry::nextAgentIdCall {});
    let next: u64 =
        small(rpc.run(&plan).await?[0].decode::<AgentRegistry::nextAgentIdCall>()?, "nextAgentId")?;

    let mut plan = CallPlan::new(registry, block.number);
    for agent_id in 1..next {
        plan.push(&AgentRegistry::getAgentCall { agentId: U256::from(agent_id) });
    }
    let agents = rpc
        .run(&plan)
        .await?
        .iter()
        .map(|outcome| Agent::try_from(outcome.decode::<AgentRegistry::getAgentCall>()?))
        .collect::<Result<Vec<_>, CoreError>>()?;

    let mut plan = CallPlan::new(registry, block.number);
    for agent in agents.iter().filter(|agent| agent.last_revenue_report != 0) {
        plan.push(&AgentRegistry::getRevenueHistoryCall { agentId: U256::from(agent.agent_id) });
    }
    let mut revenue = Vec::new();
    for outcome in rpc.run(&plan).await? {
        for report in outcome.decode::<AgentRegistry::getRevenueHistoryCall>()? {
            revenue.push(Revenue::try_from(report)?);
        }
    }
    Ok(Snapshot { block, agents, revenue })
}

/// One agent and its direct children, at the latest block.
pub(crate) async fn agent(
    rpc: &Rpc<'_>,
    registry: Address,
    agent_id: u64,
) -> Result<(BlockRef, Agent, Vec<u64>)> {
    let block = rpc.pin().await?;
    let mut plan = CallPlan::new(registry, block.number);
    plan.push(&AgentRegistry::getAgentCall { agentId: U256::from(agent_id) });
    plan.push(&AgentRegistry::getChildrenCall { agentId: U256::from(agent_id) });
    let outcomes = rpc.run(&plan).await?;
    let agent = decode_agent(&outcomes[0], agent_id)?;
    let children = decode_children(&outcomes[1])?;
    Ok((block, agent, children))
}

/// The lineage tree under `root`, fetched level by level (one batch round per level, at most 15).
pub(crate) async fn lineage(rpc: &Rpc<'_>, registry: Address, root: u64) -> Result<(BlockRef, LineageNode)> {
    let block = rpc.pin().await?;
    let mut nodes = BTreeMap::new();
    let mut frontier = vec![root];
    let mut level = 1;
    while !frontier.is_empty() {
        let mut plan = CallPlan::new(registry, block.number);
        for &agent_id in &frontier {
            plan.push(&AgentRegistry::getAgentCall { agentId: U256::from(agent_id) });
            plan.push(&AgentRegistry::getChildrenCall { agentId: U256::from(agent_id) });
        }
        let outcomes = rpc.run(&plan).await?;
        let mut next = Vec::new();
        for (&agent_id, pair) in frontier.iter().zip(outcomes.chunks(2)) {
            let agent = decode_agent(&pair[0], agent_id)?;
            let children = decode_children(&pair[1])?;
            next.extend_from_slice(shown_children(&children, level));
            nodes.insert(
                agent_id,
                NodeData {
                    wallet: agent.agent_wallet,
                    generation: agent.generation,
                    status: agent.status,
                    children,
                },
            );
        }
        frontier = next;
        level += 1;
    }
    Ok((block, lineage::build(root, &nodes)?))
}

/// The revenue history of an existing agent (an unknown id is a 404, not an empty list).
pub(crate) async fn revenue(
    rpc: &Rpc<'_>,
    registry: Address,
    agent_id: u64,
) -> Result<(BlockRef, Vec<Revenue>)> {
    let block = rpc.pin().await?;
    let mut plan = CallPlan::new(registry, block.number);
    plan.push(&AgentRegistry::getAgentCall { agentId: U256::from(agent_id) });
    plan.push(&AgentRegistry::getRevenueHistoryCall { agentId: U256::from(agent_id) });
    let outcomes = rpc.run(&plan).await?;
    decode_agent(&outcomes[0], agent_id)?;
    let history = outcomes[1].decode::<AgentRegistry::getRevenueHistoryCall>()?;
    Ok((block, history.into_iter().map(Revenue::try_from).collect::<Result<_, _>>()?))
}

/// The agent of `wallet` (if any) and its direct child count, at the latest block.
pub(crate) async fn kya(
    rpc: &Rpc<'_>,
    registry: Address,
    wallet: Address,
) -> Result<(BlockRef, Option<Agent>)> {
    let block = rpc.pin().await?;
    let mut plan = CallPlan::new(registry, block.number);
    plan.push(&AgentRegistry::getAgentByWalletCall { wallet });
    let outcome = rpc.run(&plan).await?.remove(0);
    match outcome {
        Outcome::Reverted(reason) if reason == NO_AGENT_FOR_WALLET => Ok((block, None)),
        outcome => {
            let record = outcome.decode::<AgentRegistry::getAgentByWalletCall>()?;
            Ok((block, Some(Agent::try_from(record)?)))
        }
    }
}

fn decode_agent(outcome: &Outcome, agent_id: u64) -> Result<Agent> {
    match outcome {
        Outcome::Reverted(reason) if reason == AGENT_NOT_FOUND => {
            Err(CoreError::AgentNotFound(agent_id).into())
        }
        outcome => Ok(Agent::try_from(outcome.decode::<AgentRegistry::getAgentCall>()?)?),
    }
}

fn decode_children(outcome: &Outcome) -> Result<Vec<u64>> {
    let children = outcome.decode::<AgentRegistry::getChildrenCall>()?;
    Ok(children.into_iter().map(|child| small(child, "child id")).collect::<Result<_, _>>()?)
}
