//! What each endpoint reads from the registry: plans of calls, each read at one block by
//! [`Rpc::read`] (through Multicall3: one round trip that also says which block it read),
//! decoded by `kya_core`.
//!
//! Every read that states compliance reads the registry's `attestationGracePeriod()` in the same
//! plan, so at the same block: the owner may change it, and standing is the chain's at the block
//! an answer names (INTERFACE.md section 2).

use std::collections::BTreeMap;

use alloy_primitives::{Address, B256, U256};
use kya_core::{
    Agent, BlockRef, Error as CoreError, Revenue, Snapshot,
    chain::{
        abi::AgentRegistry,
        multicall::CALLS_PER_AGGREGATE,
        rpc::{CallPlan, Outcome},
    },
    erc8128::{Erc1271Check, IERC1271},
    index::{AgentRevenue, IndexedAgent, RevenueSums},
    registry::{
        lineage::{self, LineageNode, NodeData, shown_children},
        record::small,
        reverts,
    },
};

use crate::{Result, rpc::Rpc};

/// Agents the snapshot's first round reads before it knows how many there are: with their
/// revenue histories and `nextAgentId`, one `aggregate3`. Registries this small take one round
/// trip; larger ones read the rest in a second, at the first round's block.
const FIRST_ROUND_AGENTS: u64 = ((CALLS_PER_AGGREGATE - 1) / 2) as u64;

/// The whole registry at the latest block: every record and every revenue report (but those
/// of histories past the provider's `eth_call` gas cap, whose agents the snapshot names).
pub(crate) async fn snapshot(rpc: &Rpc<'_>, registry: Address) -> Result<Snapshot> {
    if rpc.uses_multicall() {
        return snapshot_in_two_rounds(rpc, registry).await;
    }
    // Without Multicall3 every call is billed: records first, then only the histories of the
    // agents that ever reported revenue.
    let (block, next, grace_period) = next_agent_id(rpc, registry, None).await?;
    let records = plan(registry, |plan| push_records(plan, 1..next));
    let (_, outcomes) = rpc.read(&records, Some(block)).await?;
    let agents = outcomes.iter().map(decode_record).collect::<Result<Vec<_>>>()?;
    let reporting: Vec<u64> =
        agents.iter().filter(|agent| agent.last_revenue_report != 0).map(|agent| agent.agent_id).collect();
    let histories = plan(registry, |plan| push_histories(plan, &reporting));
    let (_, outcomes) = rpc.read(&histories, Some(block)).await?;
    let mut snapshot =
        Snapshot { block, grace_period, agents, revenue: Vec::new(), revenue_unreadable: Vec::new() };
    for (&agent_id, outcome) in reporting.iter().zip(&outcomes) {
        add_history(&mut snapshot, agent_id, outcome)?;
    }
    Ok(snapshot)
}

/// The snapshot through Multicall3: `nextAgentId` with the first agents' records and histories,
/// then, at that block, the rest.
async fn snapshot_in_two_rounds(rpc: &Rpc<'_>, registry: Address) -> Result<Snapshot> {
    let first = plan(registry, |plan| {
        plan.push(&AgentRegistry::nextAgentIdCall {});
        plan.push(&AgentRegistry::attestationGracePeriodCall {});
        push_agents(plan, 1..=FIRST_ROUND_AGENTS);
    });
    let (block, mut outcomes) = rpc.read(&first, None).await?;
    let next: u64 = small(outcomes.remove(0).decode::<AgentRegistry::nextAgentIdCall>()?, "nextAgentId")?;
    let grace_period = grace_of(&outcomes.remove(0))?;
    let count = next.saturating_sub(1);
    // The first round asked for ids past the last agent (they revert): keep only real ones.
    outcomes.truncate(2 * count.min(FIRST_ROUND_AGENTS) as usize);
    if count > FIRST_ROUND_AGENTS {
        let rest = plan(registry, |plan| push_agents(plan, FIRST_ROUND_AGENTS + 1..=count));
        outcomes.extend(rpc.read(&rest, Some(block)).await?.1);
    }
    let agents = Vec::with_capacity(count as usize);
    let mut snapshot =
        Snapshot { block, grace_period, agents, revenue: Vec::new(), revenue_unreadable: Vec::new() };
    for pair in outcomes.chunks(2) {
        let agent = decode_record(&pair[0])?;
        let agent_id = agent.agent_id;
        snapshot.agents.push(agent);
        add_history(&mut snapshot, agent_id, &pair[1])?;
    }
    Ok(snapshot)
}

/// Adds an agent's revenue history to the snapshot; a history that ran out of gas even read
/// alone (longer than the provider's `eth_call` gas cap allows, which anyone can cause by
/// reporting often) names the agent in `revenue_unreadable` instead of failing the snapshot.
fn add_history(snapshot: &mut Snapshot, agent_id: u64, outcome: &Outcome) -> Result<()> {
    if let Outcome::OutOfGas(message) = outcome {
        worker::console_warn!("agent {agent_id}'s revenue history exceeds the eth_call gas cap: {message}");
        snapshot.revenue_unreadable.push(agent_id);
        return Ok(());
    }
    snapshot.revenue.extend(decode_histories(std::slice::from_ref(outcome))?);
    Ok(())
}

/// The registry's `nextAgentId` and `attestationGracePeriod()` at `at` (the latest block when
/// `None`), and that block: one read (one `aggregate3` through Multicall3).
pub(crate) async fn next_agent_id(
    rpc: &Rpc<'_>,
    registry: Address,
    at: Option<BlockRef>,
) -> Result<(BlockRef, u64, u64)> {
    let calls = plan(registry, |plan| {
        plan.push(&AgentRegistry::nextAgentIdCall {});
        plan.push(&AgentRegistry::attestationGracePeriodCall {});
    });
    let (block, outcomes) = rpc.read(&calls, at).await?;
    let next = small(outcomes[0].decode::<AgentRegistry::nextAgentIdCall>()?, "nextAgentId")?;
    Ok((block, next, grace_of(&outcomes[1])?))
}

/// The registry's `attestationGracePeriod()` (a `uint256` of seconds the owner sets), saturated
/// at `u64::MAX`: any larger period keeps every attestation current, as it does on chain.
fn grace_of(outcome: &Outcome) -> Result<u64> {
    let seconds = outcome.decode::<AgentRegistry::attestationGracePeriodCall>()?;
    Ok(u64::try_from(seconds).unwrap_or(u64::MAX))
}

/// The agents `ids` as the index holds them (record and revenue sums), read at `at`. A history
/// past the provider's `eth_call` gas cap is [`AgentRevenue::Unreadable`], as in [`snapshot`].
pub(crate) async fn indexed_agents(
    rpc: &Rpc<'_>,
    registry: Address,
    ids: &[u64],
    at: BlockRef,
) -> Result<Vec<IndexedAgent>> {
    let (_, outcomes) =
        rpc.read(&plan(registry, |plan| push_agents(plan, ids.iter().copied())), Some(at)).await?;
    let mut agents = Vec::with_capacity(outcomes.len() / 2);
    for pair in outcomes.chunks(2) {
        let record = decode_record(&pair[0])?;
        let revenue = match &pair[1] {
            Outcome::OutOfGas(_) => AgentRevenue::Unreadable,
            history => AgentRevenue::Read(RevenueSums::of(&decode_histories(std::slice::from_ref(history))?)),
        };
        agents.push(IndexedAgent { record, revenue });
    }
    Ok(agents)
}

/// One agent and its direct children, at the latest block, with the grace period there.
pub(crate) async fn agent(
    rpc: &Rpc<'_>,
    registry: Address,
    agent_id: u64,
) -> Result<(BlockRef, u64, Agent, Vec<u64>)> {
    let id = U256::from(agent_id);
    let calls = plan(registry, |plan| {
        plan.push(&AgentRegistry::getAgentCall { agentId: id });
        plan.push(&AgentRegistry::getChildrenCall { agentId: id });
        plan.push(&AgentRegistry::attestationGracePeriodCall {});
    });
    let (block, outcomes) = rpc.read(&calls, None).await?;
    let agent = decode_agent(&outcomes[0], agent_id)?;
    Ok((block, grace_of(&outcomes[2])?, agent, decode_children(&outcomes[1])?))
}

/// The lineage tree under `root`, one read per level (at most 15), every level at the block the
/// first one read.
pub(crate) async fn lineage(rpc: &Rpc<'_>, registry: Address, root: u64) -> Result<(BlockRef, LineageNode)> {
    let mut nodes = BTreeMap::new();
    let mut frontier = vec![root];
    let mut pinned: Option<BlockRef> = None;
    let mut level = 1;
    while !frontier.is_empty() {
        let calls = plan(registry, |plan| {
            for &agent_id in &frontier {
                plan.push(&AgentRegistry::getAgentCall { agentId: U256::from(agent_id) });
                plan.push(&AgentRegistry::getChildrenCall { agentId: U256::from(agent_id) });
            }
        });
        let (block, outcomes) = rpc.read(&calls, pinned).await?;
        pinned = Some(block);
        let mut next = Vec::new();
        for (&agent_id, pair) in frontier.iter().zip(outcomes.chunks(2)) {
            let agent = decode_agent(&pair[0], agent_id)?;
            let children = decode_children(&pair[1])?;
            next.extend_from_slice(shown_children(&children, level));
            let node = NodeData {
                wallet: agent.agent_wallet,
                generation: agent.generation,
                status: agent.status,
                children,
            };
            nodes.insert(agent_id, node);
        }
        frontier = next;
        level += 1;
    }
    let block = pinned.expect("the root level was read");
    Ok((block, lineage::build(root, &nodes)?))
}

/// The revenue history of an existing agent (an unknown id is a 404, not an empty list).
pub(crate) async fn revenue(
    rpc: &Rpc<'_>,
    registry: Address,
    agent_id: u64,
) -> Result<(BlockRef, Vec<Revenue>)> {
    let id = U256::from(agent_id);
    let calls = plan(registry, |plan| {
        plan.push(&AgentRegistry::getAgentCall { agentId: id });
        plan.push(&AgentRegistry::getRevenueHistoryCall { agentId: id });
    });
    let (block, outcomes) = rpc.read(&calls, None).await?;
    decode_agent(&outcomes[0], agent_id)?;
    Ok((block, decode_histories(&outcomes[1..])?))
}

/// The agent of `wallet`, if any, at the latest block, with the grace period there.
pub(crate) async fn kya(
    rpc: &Rpc<'_>,
    registry: Address,
    wallet: Address,
) -> Result<(BlockRef, (u64, Option<Agent>))> {
    let (block, (grace_period, mut agents)) = kya_many(rpc, registry, &[wallet]).await?;
    Ok((block, (grace_period, agents.pop().flatten())))
}

/// The agents of `wallets` (each `None` without one), in order, at one block, with the grace
/// period there: one plan, so one round trip for up to a batch of `aggregate3`s.
pub(crate) async fn kya_many(
    rpc: &Rpc<'_>,
    registry: Address,
    wallets: &[Address],
) -> Result<(BlockRef, (u64, Vec<Option<Agent>>))> {
    let calls = plan(registry, |plan| {
        plan.push(&AgentRegistry::attestationGracePeriodCall {});
        for &wallet in wallets {
            plan.push(&AgentRegistry::getAgentByWalletCall { wallet });
        }
    });
    let (block, outcomes) = rpc.read(&calls, None).await?;
    let agents = outcomes[1..].iter().map(agent_of_wallet).collect::<Result<_>>()?;
    Ok((block, (grace_of(&outcomes[0])?, agents)))
}

/// `read` (a read at the latest block) with the hash of the block it read, which no `eth_call`
/// can see. The latest header comes first, and `read` is given an endpoint pinned to that block
/// by its hash (EIP-1898): the hash an answer states (a pass) is the hash of the block whose
/// state it read, even when a same-height reorganisation comes between the two requests or two
/// backends behind one URL follow different forks. (Reading beside the header and matching them
/// by number and time signed, in those cases, the hash of another block.) One round trip more
/// than the read alone; the point answers from the index need none.
pub(crate) async fn hashed<'a, T, F>(
    rpc: &Rpc<'a>,
    read: impl FnOnce(Rpc<'a>) -> F,
) -> Result<(BlockRef, B256, T)>
where
    F: Future<Output = Result<(BlockRef, T)>>,
{
    let (header, hash) =
        rpc.latest_header().await?.ok_or_else(|| CoreError::Rpc("the node has no latest block".into()))?;
    let (block, value) = read(rpc.pinned_to(header, hash)).await?;
    Ok((block, hash, value))
}

/// [`kya`]'s read of `check.address` (with the grace period), and that contract account's
/// ERC-1271 answer to `check`, at one block in one round trip (one `aggregate3`). The answer's
/// return data is empty when the call reverted or the account has no code: no valid signature
/// either way.
pub(crate) async fn kya_and_erc1271(
    rpc: &Rpc<'_>,
    registry: Address,
    check: &Erc1271Check,
) -> Result<(BlockRef, (u64, Option<Agent>), Vec<u8>)> {
    let calls = plan(registry, |plan| {
        plan.push(&AgentRegistry::getAgentByWalletCall { wallet: check.address });
        plan.push_to(
            check.address,
            &IERC1271::isValidSignatureCall { hash: check.hash, signature: check.signature.clone() },
        );
        plan.push(&AgentRegistry::attestationGracePeriodCall {});
    });
    let (block, outcomes) = rpc.read(&calls, None).await?;
    let answer = match &outcomes[1] {
        Outcome::Returned(data) => data.to_vec(),
        _ => Vec::new(),
    };
    Ok((block, (grace_of(&outcomes[2])?, agent_of_wallet(&outcomes[0])?), answer))
}

/// The agent `getAgentByWallet` returned, `None` for a wallet without one.
fn agent_of_wallet(outcome: &Outcome) -> Result<Option<Agent>> {
    if outcome.reverted_with(reverts::NO_AGENT_FOR_WALLET) {
        return Ok(None);
    }
    let record = outcome.decode::<AgentRegistry::getAgentByWalletCall>()?;
    Ok(Some(Agent::try_from(record)?))
}

/// A plan of calls to the registry, filled by `fill`.
fn plan(registry: Address, fill: impl FnOnce(&mut CallPlan)) -> CallPlan {
    let mut plan = CallPlan::new(registry);
    fill(&mut plan);
    plan
}

fn push_records(plan: &mut CallPlan, ids: impl Iterator<Item = u64>) {
    for agent_id in ids {
        plan.push(&AgentRegistry::getAgentCall { agentId: U256::from(agent_id) });
    }
}

fn push_histories(plan: &mut CallPlan, ids: &[u64]) {
    for &agent_id in ids {
        plan.push(&AgentRegistry::getRevenueHistoryCall { agentId: U256::from(agent_id) });
    }
}

/// Each agent's record and revenue history, side by side.
fn push_agents(plan: &mut CallPlan, ids: impl Iterator<Item = u64>) {
    for agent_id in ids {
        plan.push(&AgentRegistry::getAgentCall { agentId: U256::from(agent_id) });
        plan.push(&AgentRegistry::getRevenueHistoryCall { agentId: U256::from(agent_id) });
    }
}

fn decode_record(outcome: &Outcome) -> Result<Agent> {
    Ok(Agent::try_from(outcome.decode::<AgentRegistry::getAgentCall>()?)?)
}

fn decode_histories(outcomes: &[Outcome]) -> Result<Vec<Revenue>> {
    let mut revenue = Vec::new();
    for outcome in outcomes {
        for report in outcome.decode::<AgentRegistry::getRevenueHistoryCall>()? {
            revenue.push(Revenue::try_from(report)?);
        }
    }
    Ok(revenue)
}

fn decode_agent(outcome: &Outcome, agent_id: u64) -> Result<Agent> {
    if outcome.reverted_with(reverts::AGENT_NOT_FOUND) {
        return Err(CoreError::AgentNotFound(agent_id).into());
    }
    decode_record(outcome)
}

fn decode_children(outcome: &Outcome) -> Result<Vec<u64>> {
    let children = outcome.decode::<AgentRegistry::getChildrenCall>()?;
    Ok(children.into_iter().map(|child| small(child, "child id")).collect::<Result<_, _>>()?)
}
