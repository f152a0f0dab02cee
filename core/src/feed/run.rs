//! What one run of the index adds to the feed: the settlements of earlier provisional entries
//! ([`settle_entries`]: confirmed once deep enough, retracted once their block is gone), every
//! agent's changes over the run, merged in block order ([`changes_of_run`]), then all of it
//! numbered into batches a D1 row each ([`append`], [`into_batches`]), with the feed's new
//! `settled_through`.

use std::collections::BTreeMap;

use alloy_primitives::{Address, B256};

use crate::{
    Agent, StandingClock,
    feed::{
        AgentLog, Change, Cursor, Event, EventBlock, Known, Standing, Walk,
        finality::{self, Settlement},
    },
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
    /// Agents walked from a block before the index's instead (a reorganisation withdrew changes
    /// of theirs, or the agent's standing moved without a log of its own: an attestation that
    /// lapsed, or that a lengthened grace period renewed): what they were there (`None`: not
    /// registered yet) and the clock the feed showed that at. They take the place of `before`.
    pub rewound: BTreeMap<u64, (Option<Known>, StandingClock)>,
    /// The registry's `attestationGracePeriod()` at the run's block: what every walk judges by.
    pub grace_period: u64,
}

/// Every change of the run, in block order: each agent walked from what the index held, as shown
/// at `from` (the index's block's time and grace period before the run), through its logs, and settled at
/// `end` against what the run read. Changes of one block come in the order of their logs; those
/// no log made (an expiry, a correction) after the block's logs; one agent's changes keep their
/// order.
pub fn changes_of_run(run: &RunChanges<'_>, from: StandingClock, end: EventBlock) -> Vec<Change> {
    let mut logs_of: BTreeMap<u64, Vec<&AgentLog>> = BTreeMap::new();
    for log in run.logs {
        logs_of.entry(log.agent_id).or_default().push(log);
    }
    let mut keyed = Vec::new();
    for (&agent_id, &after) in &run.after {
        let (before, shown_at) = run
            .rewound
            .get(&agent_id)
            .copied()
            .unwrap_or_else(|| (run.before.get(&agent_id).copied().flatten(), from));
        let mut walk = Walk::new(agent_id, before, shown_at, run.grace_period);
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
    numbered(entries, next_batch, max_bytes, make).0
}

/// [`into_batches`], with the id each entry got.
fn numbered<T>(
    entries: &[T],
    next_batch: u64,
    max_bytes: usize,
    make: impl Fn(Cursor, &T) -> Event,
) -> (Vec<(u64, String)>, Vec<Cursor>) {
    let mut batches = Vec::new();
    let mut ids = Vec::with_capacity(entries.len());
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
        ids.push(id);
        id.index += 1;
    }
    if id.index > 0 {
        current.push(']');
        batches.push((id.batch, current));
    }
    (batches, ids)
}

/// An entry a run appends, before its id is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Appending {
    /// A change, first seen: `provisional`.
    New(Change),
    /// An earlier provisional entry whose block is deep enough: `final`.
    Confirm(Event),
    /// An earlier provisional entry whose block a reorganisation removed, with the agent's
    /// standing once the reorganisation was applied: `retracted`.
    Retract(Event, Standing),
}

impl Appending {
    /// The entry at `id`.
    pub const fn at(&self, id: Cursor) -> Event {
        match self {
            Self::New(change) => Event::provisional(id, *change),
            Self::Confirm(provisional) => Event::confirmation(id, provisional),
            Self::Retract(provisional, standing) => Event::retraction(id, provisional, *standing),
        }
    }
}

/// What becomes of the feed's unsettled entries in a run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settling {
    /// Their confirmations and retractions, in the entries' order.
    pub settled: Vec<Appending>,
    /// The entries still waiting for depth.
    pub waiting: Vec<Event>,
}

impl Settling {
    /// The lowest block a retraction withdraws: the chain was reorganised from there on, so the
    /// agents whose changes it withdrew are walked again from the block before it.
    pub fn fork(&self) -> Option<u64> {
        self.settled
            .iter()
            .filter_map(|entry| match entry {
                Appending::Retract(provisional, _) => Some(provisional.change.block.number),
                _ => None,
            })
            .min()
    }

    /// How many entries it confirms and how many it retracts.
    pub fn counts(&self) -> (usize, usize) {
        let retracted = self.settled.iter().filter(|entry| matches!(entry, Appending::Retract(..))).count();
        (self.settled.len() - retracted, retracted)
    }

    /// The agents whose changes a retraction withdraws.
    pub fn retracted_agents(&self) -> std::collections::BTreeSet<u64> {
        self.settled
            .iter()
            .filter_map(|entry| match entry {
                Appending::Retract(provisional, _) => Some(provisional.change.agent_id),
                _ => None,
            })
            .collect()
    }
}

/// Settles `unsettled` (the feed's provisional entries no later entry settles, in order, as
/// [`finality::unsettled`] finds them): `canonical` names the chain's hash at a height (`None`:
/// the chain is not that high), blocks up to `final_block` are deep enough, and `standing`
/// gives a wallet's standing once a reorganisation is applied (by agent id and wallet: the other
/// chain may have given the id to another wallet, and the entry's is then unregistered).
pub fn settle_entries(
    unsettled: &[Event],
    canonical: impl Fn(u64) -> Option<B256>,
    final_block: u64,
    standing: impl Fn(u64, Address) -> Standing,
) -> Settling {
    let mut settling = Settling::default();
    for entry in unsettled {
        match finality::settlement(entry, canonical(entry.change.block.number), final_block) {
            Settlement::Confirm => settling.settled.push(Appending::Confirm(*entry)),
            Settlement::Retract => {
                let now = standing(entry.change.agent_id, entry.change.wallet);
                settling.settled.push(Appending::Retract(*entry, now));
            }
            Settlement::Wait => settling.waiting.push(*entry),
        }
    }
    settling
}

/// What a run appends to the feed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Appended {
    /// The new batches: number and JSON array of events, each a D1 row.
    pub batches: Vec<(u64, String)>,
    /// The number the next batch takes.
    pub next_batch: u64,
    /// The last entry appended (`None`: none).
    pub last: Option<Cursor>,
    /// Every provisional entry up to here is settled: the next run reads the feed after it.
    pub settled_through: Option<Cursor>,
}

/// The run's entries: `settling`'s settlements first (they concern earlier blocks), then
/// `changes` (in block order), numbered into batches from `next_batch` of at most `max_bytes`
/// each. `settled_through` was the feed's before the run.
pub fn append(
    settling: &Settling,
    changes: &[Change],
    next_batch: u64,
    settled_through: Option<Cursor>,
    max_bytes: usize,
) -> Appended {
    let entries: Vec<Appending> =
        settling.settled.iter().copied().chain(changes.iter().copied().map(Appending::New)).collect();
    let (batches, ids) = numbered(&entries, next_batch, max_bytes, |id, entry| entry.at(id));
    let first_new = entries.iter().zip(&ids).find(|(entry, _)| matches!(entry, Appending::New(_)));
    // The oldest entry still waiting: one of the earlier ones, or else the run's first change.
    let waiting: Vec<Event> = match (settling.waiting.first(), first_new) {
        (Some(first), _) => vec![*first],
        (None, Some((entry, id))) => vec![entry.at(*id)],
        (None, None) => Vec::new(),
    };
    Appended {
        next_batch: batches.last().map_or(next_batch, |(batch, _)| batch + 1),
        last: ids.last().copied(),
        settled_through: finality::settled_through(&waiting, ids.last().copied().or(settled_through))
            .max(settled_through),
        batches,
    }
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

    const fn week(time: u64) -> StandingClock {
        StandingClock::new(time, crate::DEFAULT_GRACE_PERIOD_SECS)
    }

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
            rewound: BTreeMap::new(),
            grace_period: crate::DEFAULT_GRACE_PERIOD_SECS,
        };
        let changes = changes_of_run(&run, week(1_700_000_010), block(12));
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
            rewound: BTreeMap::new(),
            grace_period: crate::DEFAULT_GRACE_PERIOD_SECS,
        };
        let changes = changes_of_run(&run, week(1_700_000_000), block(20));
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

    /// A provisional entry of agent `agent_id` at block `number` whose hash ends in `hash`.
    fn entry(batch: u64, index: u32, agent_id: u64, number: u64, hash: u8) -> Event {
        let agent = sample_agent(agent_id, AgentStatus::Active, 1_700_000_000, 1_700_000_000);
        Event::provisional(
            Cursor { batch, index },
            Change {
                kind: EventType::RevenueReported,
                agent_id,
                wallet: agent.agent_wallet,
                block: EventBlock { number, hash: B256::with_last_byte(hash), time: 1_700_000_000 + number },
                log: None,
                standing: Standing::of(&agent, week(1_700_000_000)),
                detail: Detail::None {},
            },
        )
    }

    #[test]
    fn a_run_appends_settlements_then_its_changes_and_moves_settled_through() {
        // Blocks 10, 11, 12 as the feed saw them; the chain now has another block 12.
        let earlier = [entry(1, 0, 1, 10, 0xa0), entry(1, 1, 2, 11, 0xa1), entry(2, 0, 3, 12, 0xa2)];
        let canonical = |number: u64| match number {
            10 => Some(B256::with_last_byte(0xa0)),
            11 => Some(B256::with_last_byte(0xa1)),
            12 => Some(B256::with_last_byte(0xb2)),
            _ => None,
        };
        let now = |agent_id: u64, _| Standing { is_compliant: agent_id == 3, ..Standing::UNREGISTERED };
        let settling = settle_entries(&earlier, canonical, 10, now);
        assert_eq!(
            settling.settled,
            vec![Appending::Confirm(earlier[0]), Appending::Retract(earlier[2], now(3, Address::ZERO))]
        );
        assert_eq!(settling.waiting, vec![earlier[1]], "block 11 is not deep enough yet");
        assert_eq!((settling.fork(), settling.retracted_agents()), (Some(12), [3].into()));
        assert_eq!(settling.counts(), (1, 1));

        let new = [entry(9, 9, 4, 13, 0xc3).change, entry(9, 9, 4, 14, 0xc4).change];
        let appended = append(&settling, &new, 3, Some(Cursor { batch: 0, index: 0 }), 1 << 20);
        assert_eq!(appended.next_batch, 4);
        let events: Vec<Event> = serde_json::from_str(&appended.batches[0].1).unwrap();
        let at = |index| Cursor { batch: 3, index };
        assert_eq!(
            events,
            vec![
                Event::confirmation(at(0), &earlier[0]),
                Event::retraction(at(1), &earlier[2], now(3, Address::ZERO)),
                Event::provisional(at(2), new[0]),
                Event::provisional(at(3), new[1]),
            ]
        );
        assert_eq!(appended.settled_through, Some(earlier[0].id), "block 11's entry still waits");
        assert_eq!(appended.last, Some(at(3)));

        // Nothing waits: settled through the last settlement, before the run's first change.
        let settled = settle_entries(&earlier[..1], canonical, 10, now);
        let appended = append(&settled, &new, 3, None, 1 << 20);
        assert_eq!(appended.settled_through, Some(at(0)));
        let appended = append(&settled, &[], 3, None, 1 << 20);
        assert_eq!(appended.settled_through, Some(at(0)), "through the last entry");
        // A run that appends nothing leaves the feed as it was.
        let idle = append(&Settling::default(), &[], 5, Some(at(2)), 1 << 20);
        assert_eq!((idle.batches.len(), idle.next_batch, idle.settled_through), (0, 5, Some(at(2))));
        assert_eq!(idle.last, None);
    }

    #[test]
    fn agents_whose_changes_were_retracted_are_walked_from_before_the_fork() {
        // The index held agent 1 suspended (a suspension a reorganisation removed); at the block
        // before the fork, and at the run's block, it is Active.
        let active = sample_agent(1, AgentStatus::Active, 1_700_000_000, 1_700_000_000);
        let suspended = Agent { status: AgentStatus::Suspended, ..active.clone() };
        let mut run = RunChanges {
            logs: &[],
            before: BTreeMap::from([(1, Some(Known::of(&suspended)))]),
            after: BTreeMap::from([(1, Some(&active))]),
            rewound: BTreeMap::new(),
            grace_period: crate::DEFAULT_GRACE_PERIOD_SECS,
        };
        let walked_from_held = changes_of_run(&run, week(1_700_000_020), block(20));
        assert_eq!(
            walked_from_held.iter().map(|change| change.kind).collect::<Vec<_>>(),
            vec![EventType::StatusChanged, EventType::ComplianceChanged],
            "from the held row, a correction"
        );
        run.rewound.insert(1, (Some(Known::of(&active)), week(1_700_000_011)));
        assert_eq!(
            changes_of_run(&run, week(1_700_000_020), block(20)),
            vec![],
            "nothing changed since the fork"
        );
    }
}
