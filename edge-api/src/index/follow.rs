//! The registry's logs over a range of blocks (`eth_getLogs`), the range split as a provider
//! refuses it for its width or its number of results (`kya_core::logs::split`), within the
//! run's subrequest budget. A single block the provider refuses (more logs than its result cap:
//! anyone can fill a block with 10,001 of the registry's events) cannot be split: it is
//! reported, and the run reads its agents another way, instead of failing on it for ever.

use std::ops::RangeInclusive;

use alloy_primitives::Address;
use kya_core::logs::{Logs, Touch, decode_logs, logs_request, split};

use crate::{Result, rpc::Rpc};

/// What the logs of a range gave.
pub(super) struct Followed {
    /// Every agent the registry's logs touched, in the blocks the provider answered for.
    pub(super) touched: Vec<Touch>,
    /// Blocks whose logs the provider refused even alone (ascending).
    pub(super) refused: Vec<u64>,
    /// `eth_getLogs` requests it took.
    pub(super) requests: u32,
}

/// The agents the registry's logs in `range` touched.
pub(super) async fn touches(
    rpc: &Rpc<'_>,
    registry: Address,
    range: RangeInclusive<u64>,
) -> Result<Followed> {
    let mut pending = vec![range];
    let mut touched = Vec::new();
    let mut refused = Vec::new();
    let mut requests = 0;
    while let Some(range) = pending.pop() {
        requests += 1;
        match decode_logs(&rpc.request(logs_request(registry, &range)).await?)? {
            Logs::Touched(found) => touched.extend(found),
            Logs::Refused { message, .. } if range.start() == range.end() => {
                worker::console_warn!("eth_getLogs of block {} refused alone ({message})", range.start());
                refused.push(*range.start());
            }
            Logs::Refused { hint, message } => {
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
    Ok(Followed { touched, refused, requests })
}
