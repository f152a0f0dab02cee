//! The registry's logs over a range of blocks (`eth_getLogs`), the range split as a provider
//! refuses it for its width or its number of results (`kya_core::logs::split`), within the
//! run's subrequest budget.

use std::ops::RangeInclusive;

use alloy_primitives::Address;
use kya_core::logs::{Logs, Touch, decode_logs, logs_request, split};

use crate::{Result, rpc::Rpc};

/// Every agent the registry's logs in `range` touched, and the `eth_getLogs` requests it took.
pub(super) async fn touches(
    rpc: &Rpc<'_>,
    registry: Address,
    range: RangeInclusive<u64>,
) -> Result<(Vec<Touch>, u32)> {
    let mut pending = vec![range];
    let mut touched = Vec::new();
    let mut requests = 0;
    while let Some(range) = pending.pop() {
        requests += 1;
        match decode_logs(&rpc.request(logs_request(registry, &range)).await?)? {
            Logs::Touched(found) => touched.extend(found),
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
    Ok((touched, requests))
}
