//! What one run of the index adds to the feed: every agent's changes over the run, merged in
//! block order ([`changes_of_run`]), then numbered into batches a D1 row each
//! ([`into_batches`]).

use std::collections::BTreeMap;

use crate::{
    Agent,
    feed::{AgentLog, Change, Cursor, Event, EventBlock, Known, Walk},
};

/// What a run knows of the agents it changed.
#[derive(Debug, Clone, Default)]
pub struct RunChanges<'a> {
    /// The registry's agent logs of the blocks the run followed past the index's block, in
    /// block and log order (any agent).
    pub logs: &'a [AgentLog],
    /// Each agent the run read, as the index held it before the run (`None`: not held).
    pub before: BTreeMap<u64, Option<Known>>,
    /// Each agent the run read, as read at the run's block (`None`: no such agent there).
    pub after: BTreeMap<u64, Option<&'a Agent>>,
}

/// Every change of the run, in block order: each agent walked from what the index held, at
/// `from_time` (the index's block's time before the run), through its logs, and settled at
/// `end` against what the run read. Changes of one block come in the order of their logs; those
/// no log made (an expiry, a correction) after the block's logs; one agent's changes keep their
/// order.
pub fn changes_of_run(run: &RunChanges<'_>, from_time: u64, end: EventBlock) -> Vec<Change> {
    let mut logs_of: BTreeMap<u64, Vec<&AgentLog>> = BTreeMap::new();
    for log in run.logs {
        logs_of.entry(log.agent_id).or_default().push(log);
    }
    let mut keyed = Vec::new();
    for (&agent_id, &after) in &run.after {
        let before = run.before.get(&agent_id).copied().flatten();
        let mut walk = Walk::new(agent_id, before, from_time);
        for log in logs_of.get(&agent_id).into_iter().flatten() {
            walk.log(log);
        }
        for (step, change) in walk.settle(after, end).into_iter().enumerate() {
            let log_index = change.log.map_or(u64::MAX, |log| log.log_index);
            keyed.push(((change.block.number, log_index, agent_id, step), change));
        }
    }
    keyed.sort_by_key(|(key, _)| *key);
    keyed.into_iter().map(|(_, change)| change).collect()
}

/// `entries` (in feed order, without ids yet) as numbered batches from `next_batch`, each at
/// most `max_bytes` of JSON (an entry larger than that alone in its batch), with each entry's
/// id: its batch and place. `make` gives the entry for its id (a provisional change, or a
/// settlement naming an earlier id). Returns the batches as (number, JSON array).
pub fn into_batches<T>(
    entries: &[T],
    next_batch: u64,
    max_bytes: usize,
    make: impl Fn(Cursor, &T) -> Event,
) -> Vec<(u64, String)> {
    let mut batches = Vec::new();
    let mut current = String::new();
    let mut id = Cursor { batch: next_batch, index: 0 };
    for entry in entries {
        let mut json = make(id, entry).to_json();
        if id.index > 0 && current.len() + json.len() + 2 > max_bytes {
            current.push(']');
            batches.push((id.batch, std::mem::take(&mut current)));
            id = Cursor { batch: id.batch + 1, index: 0 };
            // The entry's id names the batch it lands in.
            json = make(id, entry).to_json();
        }
        current.push(if id.index == 0 { '[' } else { ',' });
        current.push_str(&json);
        id.index += 1;
    }
    if id.index > 0 {
        current.push(']');
        batches.push((id.batch, current));
    }
    batches
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        AgentStatus,
        feed::{Detail, EventLog, EventType, LogKind},
        test_support::sample_agent,
    };
    use alloy_primitives::{Address, B256};

    fn block(number: u64) -> EventBlock {
        EventBlock { number, hash: B256::with_last_byte(number as u8), time: 1_700_000_000 + number * 2 }
    }

    fn log(agent_id: u64, number: u64, log_index: u64, kind: LogKind) -> AgentLog {
        AgentLog {
            agent_id,
            block: block(number),
            log: EventLog { transaction_hash: B256::with_last_byte(log_index as u8), log_index },
            kind,
        }
    }

    #[test]
    fn a_runs_changes_are_in_block_and_log_order_across_agents() {
        let one = sample_agent(1, AgentStatus::Active, 1_700_000_000, 1_700_000_000);
        let two = Agent {
            status: AgentStatus::Suspended,
            ..sample_agent(2, AgentStatus::Active, 1_700_000_000, 1_700_000_000)
        };
        let three = sample_agent(3, AgentStatus::Active, block(12).time, block(12).time);
        let logs = [
            log(2, 11, 0, LogKind::Suspended),
            log(1, 11, 1, LogKind::RevenueReported),
            log(3, 12, 0, LogKind::Registered { wallet: three.agent_wallet }),
        ];
        let run = RunChanges {
            logs: &logs,
            before: BTreeMap::from([
                (1, Some(Known::of(&one))),
                (2, Some(Known::of(&sample_agent(2, AgentStatus::Active, 1_700_000_000, 1_700_000_000)))),
                (3, None),
            ]),
            after: BTreeMap::from([(1, Some(&one)), (2, Some(&two)), (3, Some(&three))]),
        };
        let changes = changes_of_run(&run, 1_700_000_010, block(12));
        let order: Vec<(u64, EventType, u64)> =
            changes.iter().map(|change| (change.agent_id, change.kind, change.block.number)).collect();
        assert_eq!(
            order,
            vec![
                (2, EventType::StatusChanged, 11),
                (2, EventType::ComplianceChanged, 11),
                (1, EventType::RevenueReported, 11),
                (3, EventType::Registered, 12),
                (3, EventType::ComplianceChanged, 12),
            ]
        );
        assert_eq!(
            changes[0].detail,
            Detail::Status { from: AgentStatus::Active, to: AgentStatus::Suspended }
        );
        assert_eq!(changes[3].wallet, three.agent_wallet);
        assert!(changes.iter().all(|change| change.wallet != Address::ZERO));
    }

    #[test]
    fn batches_stay_under_their_size_and_ids_name_where_entries_landed() {
        let one = sample_agent(1, AgentStatus::Active, 1_700_000_000, 1_700_000_000);
        let logs: Vec<AgentLog> = (0..10).map(|index| log(1, 20, index, LogKind::RevenueReported)).collect();
        let run = RunChanges {
            logs: &logs,
            before: BTreeMap::from([(1, Some(Known::of(&one)))]),
            after: BTreeMap::from([(1, Some(&one))]),
        };
        let changes = changes_of_run(&run, 1_700_000_000, block(20));
        assert_eq!(changes.len(), 10);
        let one_entry = Event::provisional(Cursor { batch: 7, index: 0 }, changes[0]).to_json().len();
        let max = 3 * one_entry + 10;
        let batches = into_batches(&changes, 7, max, |id, change| Event::provisional(id, *change));
        assert_eq!(batches.iter().map(|(batch, _)| *batch).collect::<Vec<_>>(), vec![7, 8, 9, 10]);
        let mut seen = Vec::new();
        for (batch, json) in &batches {
            assert!(json.len() <= max, "batch {batch}: {} bytes", json.len());
            let events: Vec<Event> = serde_json::from_str(json).unwrap();
            for (index, event) in events.iter().enumerate() {
                assert_eq!(event.id, Cursor { batch: *batch, index: index as u32 });
                seen.push(event.change);
            }
        }
        assert_eq!(seen, changes, "every change once, in order");
        let alone = into_batches(&changes[..2], 1, 1, |id, change| Event::provisional(id, *change));
        assert_eq!(alone.len(), 2, "an entry larger than a batch is alone in its own");
        assert!(
            into_batches(&changes[..0], 1, max, |id, change: &Change| Event::provisional(id, *change))
                .is_empty()
        );
    }
}
