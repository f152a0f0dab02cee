//! Following the registry's events for the index, with no I/O: which blocks a run scans
//! ([`follow_range`]: from a window of blocks before where the last run stopped, so a
//! reorganisation cannot leave a change unseen), the `eth_getLogs` request for a range
//! ([`logs_request`]), the agents its logs touched ([`decode_logs`]), and the halves of a range a
//! provider refused for its width or its number of results ([`split`]), as refused batches are
//! split.
//!
//! Every write of the registry emits one event whose first indexed argument is the agent's id
//! ([`AGENT_EVENTS`]); the agent is then read again whole, so an event's other fields are not
//! needed.

use std::ops::RangeInclusive;

use alloy_json_rpc::{Id, Request, Response, ResponsePayload};
use alloy_primitives::{Address, B256, U64, U256};
use alloy_sol_types::SolEvent;
use serde::{Deserialize, Serialize};

use crate::{
    Error, Result,
    abi::AgentRegistry,
    record::small,
    rpc::{excerpt, rpc_error},
};

/// The registry's events that change an agent, each with the agent's id as its first topic.
pub const AGENT_EVENTS: [B256; 7] = [
    AgentRegistry::AgentRegistered::SIGNATURE_HASH,
    AgentRegistry::ComplianceAttested::SIGNATURE_HASH,
    AgentRegistry::RevenueReported::SIGNATURE_HASH,
    AgentRegistry::AgentSuspended::SIGNATURE_HASH,
    AgentRegistry::AgentReactivated::SIGNATURE_HASH,
    AgentRegistry::AgentRevoked::SIGNATURE_HASH,
    AgentRegistry::AgentTerminated::SIGNATURE_HASH,
];

/// The blocks a run scans when the index stands at `indexed` and the chain's head is `head`:
/// from `window` blocks before `indexed` (re-scanned: a reorganisation within them shows as
/// logs that are gone or new), up to the head, at most `max_blocks` at once (the rest is the next
/// run's; a window wider than that still ends past `indexed`, so every run moves on). `None`
/// when there is nothing new.
pub fn follow_range(indexed: u64, head: u64, window: u64, max_blocks: u64) -> Option<RangeInclusive<u64>> {
    if head <= indexed {
        return None;
    }
    let from = indexed.saturating_sub(window).saturating_add(1).min(head);
    let to = from.saturating_add(max_blocks.max(1) - 1).clamp(indexed + 1, head);
    Some(from..=to)
}

/// `eth_getLogs` of the registry's [`AGENT_EVENTS`] in `range` (inclusive), with JSON-RPC id 0.
pub fn logs_request(registry: Address, range: &RangeInclusive<u64>) -> String {
    let filter = serde_json::json!({
        "address": registry,
        "fromBlock": format!("{:#x}", range.start()),
        "toBlock": format!("{:#x}", range.end()),
        "topics": [AGENT_EVENTS],
    });
    let request = Request::new("eth_getLogs", Id::Number(0), [filter]);
    serde_json::to_string(&request).expect("a filter serialises")
}

/// An agent a log touched, and the block of the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Touch {
    pub block: u64,
    pub agent_id: u64,
}

/// What a provider answered to [`logs_request`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Logs {
    /// The agents the range's logs touched, in the order of the logs.
    Touched(Vec<Touch>),
    /// The provider refused the range (too many blocks or too many results); `hint` is the last
    /// block of a range starting at the same block that it names as one that would work.
    Refused { hint: Option<u64>, message: String },
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Log {
    block_number: Option<U64>,
    #[serde(default)]
    topics: Vec<B256>,
    #[serde(default)]
    removed: bool,
}

/// The answer to [`logs_request`]: the agents touched, or the provider's refusal of the range.
/// Logs a node marks `removed` (reorganised away) and events other than [`AGENT_EVENTS`] are
/// skipped.
pub fn decode_logs(body: &str) -> Result<Logs> {
    let response: Response = serde_json::from_str(body)
        .map_err(|error| Error::Rpc(format!("not a JSON-RPC answer ({error}): {}", excerpt(body))))?;
    let raw = match response.payload {
        ResponsePayload::Success(raw) => raw,
        ResponsePayload::Failure(error) if is_range_refusal(error.code, &error.message) => {
            return Ok(Logs::Refused {
                hint: hinted_end(&error.message),
                message: error.message.into_owned(),
            });
        }
        ResponsePayload::Failure(error) => return Err(rpc_error(&error)),
    };
    let logs: Vec<Log> = serde_json::from_str(raw.get())
        .map_err(|error| Error::Decode(format!("eth_getLogs: {error}: {}", excerpt(raw.get()))))?;
    let mut touched = Vec::with_capacity(logs.len());
    for log in logs {
        let (Some(block), Some(event), Some(agent)) =
            (log.block_number, log.topics.first(), log.topics.get(1))
        else {
            continue;
        };
        if log.removed || !AGENT_EVENTS.contains(event) {
            continue;
        }
        touched.push(Touch { block: block.to(), agent_id: small(U256::from_be_bytes(agent.0), "agent id")? });
    }
    Ok(Logs::Touched(touched))
}

/// A provider's refusal of a log query's range or result count (`../shared/PROVIDERS.md`): Infura
/// `-32005` "query returned more than 10000 results", Alchemy `-32602` "Log response size
/// exceeded", QuickNode's and others' block range limits, a node's `--rpc.logs-limit`.
fn is_range_refusal(code: i64, message: &str) -> bool {
    let message = message.to_ascii_lowercase();
    let says = |words: &[&str]| words.iter().any(|word| message.contains(word));
    matches!(code, -32005 | -32602 | -32600 | -32614 | -32000 | -32001 | -32011)
        && says(&["more than", "block range", "range is too", "too large", "exceed", "limit", "too many"])
}

/// The end of the range a refusal names as one that would work (`[0x…, 0x…]`), if any.
fn hinted_end(message: &str) -> Option<u64> {
    let open = message.find('[')?;
    let close = open + message[open..].find(']')?;
    let (_, end) = message[open + 1..close].split_once(',')?;
    let end = end.trim().strip_prefix("0x")?;
    u64::from_str_radix(end, 16).ok()
}

/// Two ranges that together are `range`, for a provider that refused it: up to the block its
/// refusal named (`hint`) when that is inside the range, else halves. A single block cannot be
/// split: its logs exceed what the provider answers at all.
pub fn split(
    range: &RangeInclusive<u64>,
    hint: Option<u64>,
) -> Result<(RangeInclusive<u64>, RangeInclusive<u64>)> {
    let (start, end) = (*range.start(), *range.end());
    if start >= end {
        return Err(Error::Rpc(format!("the provider refuses the logs of block {start} alone")));
    }
    let middle = hint.filter(|hint| (start..end).contains(hint)).unwrap_or(start + (end - start) / 2);
    Ok((start..=middle, middle + 1..=end))
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloy_primitives::address;

    const REGISTRY: Address = address!("0x5fbdb2315678afecb367f032d93f642f64180aa3");

    fn topic(id: u64) -> String {
        format!("{:#066x}", id)
    }

    #[test]
    fn ranges_rescan_a_window_and_always_move_on() {
        assert_eq!(follow_range(100, 100, 12, 1_000), None, "nothing new");
        assert_eq!(follow_range(100, 110, 12, 1_000), Some(89..=110));
        assert_eq!(follow_range(5, 110, 12, 1_000), Some(1..=110), "from the chain's start");
        assert_eq!(follow_range(0, 5_000, 12, 1_000), Some(1..=1_000), "a long way behind: in steps");
        assert_eq!(follow_range(100, 5_000, 12, 5), Some(89..=101), "a window wider than a step");
    }

    #[test]
    fn the_request_names_the_registry_its_events_and_the_range() {
        let request: serde_json::Value = serde_json::from_str(&logs_request(REGISTRY, &(16..=255))).unwrap();
        assert_eq!(request["method"], "eth_getLogs");
        let filter = &request["params"][0];
        assert_eq!(filter["address"].as_str().unwrap().parse::<Address>().unwrap(), REGISTRY);
        assert_eq!((filter["fromBlock"].as_str(), filter["toBlock"].as_str()), (Some("0x10"), Some("0xff")));
        assert_eq!(filter["topics"][0].as_array().unwrap().len(), AGENT_EVENTS.len());
    }

    #[test]
    fn logs_name_their_agents_and_removed_or_foreign_logs_are_skipped() {
        let attested = AgentRegistry::ComplianceAttested::SIGNATURE_HASH.to_string();
        let regulator = AgentRegistry::RegulatorAdded::SIGNATURE_HASH.to_string();
        let body = serde_json::json!({"jsonrpc": "2.0", "id": 0, "result": [
            {"blockNumber": "0x7", "topics": [attested, topic(3), topic(9)], "removed": false},
            {"blockNumber": "0x8", "topics": [attested, topic(4)], "removed": true},
            {"blockNumber": "0x8", "topics": [regulator, topic(5)]},
            {"blockNumber": "0x9", "topics": [AgentRegistry::AgentRegistered::SIGNATURE_HASH, topic(12)]},
        ]});
        assert_eq!(
            decode_logs(&body.to_string()).unwrap(),
            Logs::Touched(vec![Touch { block: 7, agent_id: 3 }, Touch { block: 9, agent_id: 12 }])
        );
    }

    #[test]
    fn providers_refusals_are_told_from_errors_with_their_hints() {
        let refusal = |code: i64, message: &str| {
            serde_json::json!({"jsonrpc": "2.0", "id": 0, "error": {"code": code, "message": message}})
                .to_string()
        };
        let infura = refusal(
            -32005,
            "query returned more than 10000 results. Try with this block range [0x10, 0x1f].",
        );
        assert_eq!(
            decode_logs(&infura).unwrap(),
            Logs::Refused {
                hint: Some(0x1f),
                message: "query returned more than 10000 results. Try with this block range [0x10, 0x1f]."
                    .into()
            }
        );
        let alchemy = refusal(
            -32602,
            "Log response size exceeded. You can make eth_getLogs requests with up to a 2K block range and no limit on the response size, or you can request any block range with a cap of 10K logs in the response. Based on your parameters, this block range should work: [0x0, 0x7cf]",
        );
        assert!(matches!(decode_logs(&alchemy).unwrap(), Logs::Refused { hint: Some(0x7cf), .. }));
        let quicknode = refusal(-32614, "eth_getLogs is limited to a 10,000 range");
        assert!(matches!(decode_logs(&quicknode).unwrap(), Logs::Refused { hint: None, .. }));
        assert!(decode_logs(&refusal(-32000, "header not found")).is_err(), "not a range refusal");
    }

    #[test]
    fn refused_ranges_split_at_the_hint_or_in_halves() {
        assert_eq!(split(&(16..=31), Some(20)).unwrap(), (16..=20, 21..=31));
        assert_eq!(split(&(16..=31), Some(40)).unwrap(), (16..=23, 24..=31), "a hint outside: halves");
        assert_eq!(split(&(16..=17), None).unwrap(), (16..=16, 17..=17));
        assert!(split(&(16..=16), None).is_err());
    }
}
