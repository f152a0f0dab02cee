//! The registry's logs over a range of blocks (`eth_getLogs`), the range split as a provider
//! refuses it for its width or its number of results (`kya_core::index::logs::split`), within the
//! run's subrequest budget. A single block the provider refuses (more logs than its result cap:
//! anyone can fill a block with 10,001 of the registry's events) cannot be split: it is
//! reported, and the run reads its agents another way, instead of failing on it for ever.
//!
//! Each log is decoded whole (`kya_core::index::logs::decode_agent_logs`): the index needs only the
//! agents it touched, the change feed what it says, with its block's hash and time.

use std::ops::RangeInclusive;

use alloy_primitives::Address;
use kya_core::index::logs::{AgentLogEntry, AgentLogs, decode_agent_logs, logs_request, split};

use crate::{Result, rpc::Rpc};

/// What the logs of a range gave.
pub(super) struct Followed {
    /// The registry's agent logs, in the blocks the provider answered for, in block and log
    /// order.
    pub(super) logs: Vec<AgentLogEntry>,
    /// Blocks whose logs the provider refused even alone (ascending).
    pub(super) refused: Vec<u64>,
    /// `eth_getLogs` requests it took.
    pub(super) requests: u32,
}

/// The registry's agent logs in `range`.
pub(super) async fn logs(rpc: &Rpc<'_>, registry: Address, range: RangeInclusive<u64>) -> Result<Followed> {
    let mut pending = vec![range];
    let mut logs = Vec::new();
    let mut refused = Vec::new();
    let mut requests = 0;
    while let Some(range) = pending.pop() {
        requests += 1;
        match decode_agent_logs(&rpc.request(logs_request(registry, &range)).await?)? {
            AgentLogs::Found(found) => logs.extend(found),
            AgentLogs::Refused { message, .. } if range.start() == range.end() => {
                worker::console_warn!("eth_getLogs of block {} refused alone ({message})", range.start());
                refused.push(*range.start());
            }
            AgentLogs::Refused { hint, message } => {
                worker::console_warn!(
                    "eth_getLogs of blocks {} to {} refused ({message}): splitting",
                    range.start(),
                    range.end()
                );
                let (first, second) = split(&range, hint)?;
                // The first half next: the stack is last in, first out.
                pending.push(second);
                pending.push(first);
            }
        }
    }
    refused.sort_unstable();
    // Halves are taken in order, but a node's order within an answer is kept as given: sorted
    // here, so the feed walks each agent's logs as they happened.
    logs.sort_by_key(|log| (log.touch.block, log.log_index));
    Ok(Followed { logs, refused, requests })
}
