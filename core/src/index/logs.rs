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
use alloy_primitives::{Address, B256, Bytes, U64, U256};
use alloy_sol_types::SolEvent;
use serde::{Deserialize, Serialize};

use crate::{
    Error, Result,
    chain::{
        abi::AgentRegistry,
        rpc::{excerpt, rpc_error},
    },
    feed::{AgentLog, EventBlock, EventLog, LogKind},
    registry::record::small,
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
/// logs that are gone, new or of another block), up to the head, at most `max_blocks` at once (the
/// rest is the next run's; a window wider than that still ends past `indexed`, so every run moves
/// on). `None` when there is nothing new: no block past `indexed`, and the index's own block still
/// the chain's (`replaced` false). A chain whose block at `indexed` was replaced, with no block
/// past it yet, is re-scanned up to `indexed`.
pub fn follow_range(
    indexed: u64,
    head: u64,
    window: u64,
    max_blocks: u64,
    replaced: bool,
) -> Option<RangeInclusive<u64>> {
    if head < indexed || (head == indexed && !replaced) {
        return None;
    }
    let from = rescan_from(indexed, window).min(head);
    let to = from.saturating_add(max_blocks.max(1) - 1).max((indexed + 1).min(head)).min(head);
    Some(from..=to)
}

/// The first block a run re-scans when the index stands at `indexed`: `window` blocks back, from
/// block 1 at the least. The block before it is the window's anchor
/// (`crate::index::window_touches::Anchor`).
pub const fn rescan_from(indexed: u64, window: u64) -> u64 {
    indexed.saturating_sub(window).saturating_add(1)
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

/// A log as a node answers it (pending logs have no block yet; some nodes add `blockTimestamp`).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Log {
    block_number: Option<U64>,
    block_hash: Option<B256>,
    block_timestamp: Option<U64>,
    transaction_hash: Option<B256>,
    log_index: Option<U64>,
    #[serde(default)]
    topics: Vec<B256>,
    #[serde(default)]
    data: Bytes,
    #[serde(default)]
    removed: bool,
}

/// One of the registry's [`AGENT_EVENTS`], with where it is and, for the change feed, what it
/// says ([`crate::feed::LogKind`]; `None` when its data does not decode as the event's, which a
/// registry other than ours may emit: the agent is still touched).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AgentLogEntry {
    pub touch: Touch,
    pub block_hash: B256,
    /// The block's time when the node gave it with the log.
    pub block_time: Option<u64>,
    pub transaction_hash: B256,
    pub log_index: u64,
    pub kind: Option<LogKind>,
}

impl AgentLogEntry {
    /// The feed's view of the log, given its block's time (the entry's own, or the block
    /// header's); `None` when its data did not decode.
    pub fn for_feed(&self, block_time: u64) -> Option<AgentLog> {
        Some(AgentLog {
            agent_id: self.touch.agent_id,
            block: EventBlock { number: self.touch.block, hash: self.block_hash, time: block_time },
            log: EventLog { transaction_hash: self.transaction_hash, log_index: self.log_index },
            kind: self.kind?,
        })
    }
}

/// What the provider answered to [`logs_request`], each log whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AgentLogs {
    /// The registry's agent logs of the range, in the node's order (block, then log index).
    Found(Vec<AgentLogEntry>),
    /// As [`Logs::Refused`].
    Refused { hint: Option<u64>, message: String },
}

/// The answer to [`logs_request`]: the agents touched, or the provider's refusal of the range.
/// Logs a node marks `removed` (reorganised away) and events other than [`AGENT_EVENTS`] are
/// skipped.
pub fn decode_logs(body: &str) -> Result<Logs> {
    Ok(match decode_agent_logs(body)? {
        AgentLogs::Found(entries) => Logs::Touched(entries.iter().map(|entry| entry.touch).collect()),
        AgentLogs::Refused { hint, message } => Logs::Refused { hint, message },
    })
}

/// The answer to [`logs_request`] with each log whole, for the change feed: as [`decode_logs`]
/// skips and refuses.
pub fn decode_agent_logs(body: &str) -> Result<AgentLogs> {
    let response: Response = serde_json::from_str(body)
        .map_err(|error| Error::Rpc(format!("not a JSON-RPC answer ({error}): {}", excerpt(body))))?;
    let raw = match response.payload {
        ResponsePayload::Success(raw) => raw,
        ResponsePayload::Failure(error) if is_range_refusal(error.code, &error.message) => {
            return Ok(AgentLogs::Refused {
                hint: hinted_end(&error.message),
                message: error.message.into_owned(),
            });
        }
        ResponsePayload::Failure(error) => return Err(rpc_error(&error)),
    };
    let logs: Vec<Log> = serde_json::from_str(raw.get())
        .map_err(|error| Error::Decode(format!("eth_getLogs: {error}: {}", excerpt(raw.get()))))?;
    let mut found = Vec::with_capacity(logs.len());
    for log in logs {
        let (Some(block), Some(event), Some(agent)) =
            (log.block_number, log.topics.first(), log.topics.get(1))
        else {
            continue;
        };
        if log.removed || !AGENT_EVENTS.contains(event) {
            continue;
        }
        found.push(AgentLogEntry {
            touch: Touch { block: block.to(), agent_id: small(U256::from_be_bytes(agent.0), "agent id")? },
            block_hash: log.block_hash.unwrap_or_default(),
            block_time: log.block_timestamp.map(|time| time.to()),
            transaction_hash: log.transaction_hash.unwrap_or_default(),
            log_index: log.log_index.map_or(0, |index| index.to()),
            kind: log_kind(&log.topics, &log.data),
        });
    }
    Ok(AgentLogs::Found(found))
}

/// What an agent log says, if its topics and data decode as its event's.
fn log_kind(topics: &[B256], data: &Bytes) -> Option<LogKind> {
    use AgentRegistry::{
        AgentReactivated, AgentRegistered, AgentRevoked, AgentSuspended, AgentTerminated, ComplianceAttested,
        RevenueReported,
    };
    let topics = topics.iter().copied();
    Some(match topics.clone().next()? {
        AgentRegistered::SIGNATURE_HASH => {
            LogKind::Registered { wallet: AgentRegistered::decode_raw_log(topics, data).ok()?.agentWallet }
        }
        ComplianceAttested::SIGNATURE_HASH => {
            LogKind::Attested { at: ComplianceAttested::decode_raw_log(topics, data).ok()?.attestedAt }
        }
        RevenueReported::SIGNATURE_HASH => {
            RevenueReported::decode_raw_log(topics, data).ok()?;
            LogKind::RevenueReported
        }
        AgentSuspended::SIGNATURE_HASH => {
            AgentSuspended::decode_raw_log(topics, data).ok()?;
            LogKind::Suspended
        }
        AgentReactivated::SIGNATURE_HASH => {
            AgentReactivated::decode_raw_log(topics, data).ok()?;
            LogKind::Reactivated
        }
        AgentRevoked::SIGNATURE_HASH => {
            AgentRevoked::decode_raw_log(topics, data).ok()?;
            LogKind::Revoked
        }
        AgentTerminated::SIGNATURE_HASH => {
            AgentTerminated::decode_raw_log(topics, data).ok()?;
            LogKind::Terminated
        }
        _ => return None,
    })
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
        assert_eq!(follow_range(100, 100, 12, 1_000, false), None, "nothing new");
        assert_eq!(follow_range(100, 110, 12, 1_000, false), Some(89..=110));
        assert_eq!(follow_range(5, 110, 12, 1_000, false), Some(1..=110), "from the chain's start");
        assert_eq!(follow_range(0, 5_000, 12, 1_000, false), Some(1..=1_000), "a long way behind: in steps");
        assert_eq!(follow_range(100, 5_000, 12, 5, false), Some(89..=101), "a window wider than a step");
        // The index's own block replaced, no block past it: the window up to it, again.
        assert_eq!(follow_range(100, 100, 12, 1_000, true), Some(89..=100));
        assert_eq!(follow_range(100, 100, 12, 5, true), Some(89..=100), "whatever the step");
        assert_eq!(follow_range(100, 110, 12, 1_000, true), Some(89..=110));
        // The chain below the index: nothing to follow until it passes it again.
        assert_eq!(follow_range(100, 98, 12, 1_000, true), None);
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

    /// A node's JSON of `event` in block `number` at `index`.
    fn node_log<E: SolEvent>(event: &E, number: u64, index: u64) -> serde_json::Value {
        let topics: Vec<String> =
            event.encode_topics().iter().map(|topic| B256::from(topic.0).to_string()).collect();
        serde_json::json!({
            "blockNumber": format!("{number:#x}"),
            "blockHash": B256::repeat_byte(number as u8).to_string(),
            "transactionHash": B256::repeat_byte(0xf0 | index as u8).to_string(),
            "logIndex": format!("{index:#x}"),
            "topics": topics,
            "data": Bytes::from(event.encode_data()).to_string(),
            "removed": false,
        })
    }

    #[test]
    fn each_agent_event_decodes_whole_for_the_feed() {
        use AgentRegistry::*;
        let id = U256::from(7);
        let wallet = address!("0x70997970c51812dc3a010c7d01b50e0d17dc79c8");
        let registered = AgentRegistered {
            agentId: id,
            creator: Address::ZERO,
            agentWallet: wallet,
            haftungsperson: Address::ZERO,
            parentAgentId: U256::ZERO,
            generation: U256::ZERO,
        };
        let attested = ComplianceAttested { agentId: id, attester: Address::ZERO, attestedAt: 1_700_000_000 };
        let reported = RevenueReported {
            agentId: id,
            amount: U256::from(5),
            currency: "USD".into(),
            category: "x".into(),
            periodStart: 1,
            periodEnd: 2,
        };
        let mut logs = vec![
            node_log(&registered, 10, 0),
            node_log(&attested, 11, 1),
            node_log(&reported, 11, 2),
            node_log(&AgentSuspended { agentId: id, regulator: Address::ZERO }, 12, 0),
            node_log(&AgentReactivated { agentId: id, regulator: Address::ZERO }, 12, 1),
            node_log(&AgentRevoked { agentId: id, regulator: Address::ZERO }, 13, 0),
            node_log(&AgentTerminated { agentId: id, caller: Address::ZERO }, 13, 1),
        ];
        // A registry not ours: the attestation's data cut short. The agent is still touched.
        let mut short = node_log(&attested, 14, 0);
        short["data"] = "0x01".into();
        logs.push(short);
        let mut timed = node_log(&attested, 15, 0);
        timed["blockTimestamp"] = "0x6553f100".into();
        logs.push(timed);
        let body = serde_json::json!({"jsonrpc": "2.0", "id": 0, "result": logs}).to_string();
        let AgentLogs::Found(entries) = decode_agent_logs(&body).unwrap() else { panic!("found") };
        let kinds: Vec<Option<LogKind>> = entries.iter().map(|entry| entry.kind).collect();
        assert_eq!(
            kinds,
            vec![
                Some(LogKind::Registered { wallet }),
                Some(LogKind::Attested { at: 1_700_000_000 }),
                Some(LogKind::RevenueReported),
                Some(LogKind::Suspended),
                Some(LogKind::Reactivated),
                Some(LogKind::Revoked),
                Some(LogKind::Terminated),
                None,
                Some(LogKind::Attested { at: 1_700_000_000 }),
            ]
        );
        assert!(entries.iter().all(|entry| entry.touch.agent_id == 7));
        let second = &entries[2];
        assert_eq!((second.touch.block, second.block_hash, second.log_index), (11, B256::repeat_byte(11), 2));
        assert_eq!(second.transaction_hash, B256::repeat_byte(0xf2));
        assert_eq!((second.block_time, entries[8].block_time), (None, Some(0x6553f100)));
        let feed = second.for_feed(99).unwrap();
        assert_eq!((feed.block.number, feed.block.time, feed.log.log_index), (11, 99, 2));
        assert_eq!(entries[7].for_feed(99), None, "nothing to say of an undecodable log");
        assert_eq!(
            decode_logs(&body).unwrap(),
            Logs::Touched(entries.iter().map(|entry| entry.touch).collect()),
            "the index's touches are the same logs"
        );
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
