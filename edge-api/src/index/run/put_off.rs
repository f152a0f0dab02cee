//! The agents earlier runs put off (a block touching more agents than a run reads): the run that
//! reads one walks it from the index's block it was put off at, through its logs since, so each
//! of its writes is still its own event (`kya_core::feed::put_off`).

use std::collections::BTreeMap;

use kya_core::{BlockRef, index::logs::AgentLogEntry};

use super::Followed;
use crate::{
    Result,
    index::{State, follow},
    rpc::Rpc,
};

/// The agents put off by earlier runs that this run reads, and their logs since.
pub(super) struct PutOffWalks {
    /// Each with the index's block it walks from.
    pub(super) agents: BTreeMap<u64, BlockRef>,
    /// Their logs from the earliest of those blocks up to the index's block (the logs past it
    /// are the run's own), in block and log order.
    pub(super) logs: Vec<AgentLogEntry>,
    /// Blocks whose logs the provider refused.
    pub(super) refused: Vec<u64>,
}

/// Takes the agents of `kept` (ascending) that earlier runs put off out of `state`'s record, with
/// their logs since then: from what this run `followed` when its re-scan reached back that far,
/// else one `eth_getLogs` range, split as the provider asks. Ids past `chain_next` (a
/// reorganisation took them away) are forgotten.
pub(super) async fn walk_put_off(
    rpc: &Rpc<'_>,
    registry: alloy_primitives::Address,
    state: &mut State,
    kept: &[u64],
    chain_next: u64,
    followed: Option<&Followed>,
) -> Result<PutOffWalks> {
    state.put_off.forget_from(chain_next);
    let agents = state.put_off.take(kept);
    let mut walks = PutOffWalks { agents, logs: Vec::new(), refused: Vec::new() };
    let (Some(from), Some(indexed)) =
        (walks.agents.values().map(|after| after.number + 1).min(), state.block)
    else {
        return Ok(walks);
    };
    if from > indexed.number {
        return Ok(walks);
    }
    let walked = |log: &AgentLogEntry| {
        log.touch.block <= indexed.number
            && walks.agents.get(&log.touch.agent_id).is_some_and(|after| log.touch.block > after.number)
    };
    let (logs, refused) = match followed.filter(|followed| followed.from <= from) {
        // The run's re-scan holds these blocks, as the chain has them now: no second request.
        Some(followed) => (
            followed.logs.iter().filter(|log| walked(log)).copied().collect(),
            followed.refused.iter().copied().filter(|block| *block <= indexed.number).collect(),
        ),
        None => {
            let fetched = follow::logs(rpc, registry, from..=indexed.number).await?;
            (fetched.logs.into_iter().filter(|log| walked(log)).collect(), fetched.refused)
        }
    };
    (walks.logs, walks.refused) = (logs, refused);
    Ok(walks)
}
