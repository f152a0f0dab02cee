//! The registry index's record of its re-scanned window: which agents each block's logs touched,
//! as earlier runs saw them. A run compares the logs it re-scans with it to find what a
//! reorganisation took away or a lagging backend missed ([`changed_in_window`]).
//!
//! The record is one JSON value kept in a column of the index's state row, which every run that
//! writes saves anyway: keeping it costs no D1 row of its own, where a table of touches cost two
//! rows written per change (the touch inserted, and deleted once it left the window). So that the
//! row stays within D1's limits whatever the blocks hold, the record has a byte budget: past it,
//! the blocks touching the most agents are kept as a digest of their agents instead of the list.
//! A digested block whose logs differ when re-scanned cannot name the agents that are gone, so
//! the run reads every agent again ([`WindowChanges::unknown`]); such a block takes thousands of
//! writes in one block, in every block of the window, to arise.

use std::collections::{BTreeMap, BTreeSet};

use alloy_primitives::keccak256;
use serde::{Deserialize, Serialize};

use crate::logs::Touch;

/// Per block of the window, the agents its logs touched (JSON: an object keyed by the block's
/// number in decimal).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct WindowTouches(BTreeMap<u64, BlockTouches>);

/// The agents one block's logs touched, as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum BlockTouches {
    /// Their ids.
    Agents(BTreeSet<u64>),
    /// A digest of their ids ([`digest`]), for a block whose list did not fit the budget.
    Digest(String),
}

impl BlockTouches {
    /// The digest of the agents, whichever way they are recorded.
    fn digest(&self) -> String {
        match self {
            Self::Agents(agents) => digest(agents),
            Self::Digest(digest) => digest.clone(),
        }
    }

    /// Bytes of its JSON, about: the ids in decimal with their commas, or the digest's text.
    fn json_bytes(&self) -> usize {
        match self {
            Self::Agents(agents) => 2 + agents.iter().map(|id| decimal_len(*id) + 1).sum::<usize>(),
            Self::Digest(digest) => digest.len() + 2,
        }
    }
}

/// keccak256 of the ids in order, eight bytes each, big-endian; as 0x-prefixed hex.
fn digest(agents: &BTreeSet<u64>) -> String {
    let bytes: Vec<u8> = agents.iter().flat_map(|id| id.to_be_bytes()).collect();
    format!("{:#x}", keccak256(bytes))
}

fn decimal_len(number: u64) -> usize {
    number.checked_ilog10().map_or(1, |log| log as usize + 1)
}

impl WindowTouches {
    /// `touches` of blocks from `from` on, as recorded within about `budget` bytes of JSON: the
    /// blocks with the most agents are digested first until the rest fits.
    pub fn record(touches: impl IntoIterator<Item = Touch>, from: u64, budget: usize) -> Self {
        let mut blocks: BTreeMap<u64, BTreeSet<u64>> = BTreeMap::new();
        for touch in touches.into_iter().filter(|touch| touch.block >= from) {
            blocks.entry(touch.block).or_default().insert(touch.agent_id);
        }
        let mut record: BTreeMap<u64, BlockTouches> =
            blocks.into_iter().map(|(block, agents)| (block, BlockTouches::Agents(agents))).collect();
        let entry_bytes = |block: u64, touches: &BlockTouches| decimal_len(block) + 4 + touches.json_bytes();
        let mut bytes: usize =
            2 + record.iter().map(|(block, touches)| entry_bytes(*block, touches)).sum::<usize>();
        if bytes > budget {
            let mut largest: Vec<(usize, u64)> =
                record.iter().map(|(block, touches)| (touches.json_bytes(), *block)).collect();
            largest.sort_unstable_by(|a, b| b.cmp(a));
            for (_, block) in largest {
                if bytes <= budget {
                    break;
                }
                let touches = record.get_mut(&block).expect("a block of the record");
                let digested = BlockTouches::Digest(touches.digest());
                bytes = bytes - touches.json_bytes() + digested.json_bytes();
                *touches = digested;
            }
        }
        Self(record)
    }

    /// The record's blocks from `from` on.
    pub fn since(&self, from: u64) -> Self {
        Self(self.0.range(from..).map(|(block, touches)| (*block, touches.clone())).collect())
    }

    /// The blocks recorded.
    pub fn blocks(&self) -> impl Iterator<Item = u64> + '_ {
        self.0.keys().copied()
    }

    /// Whether a block is recorded as a digest.
    pub fn digested(&self, block: u64) -> bool {
        matches!(self.0.get(&block), Some(BlockTouches::Digest(_)))
    }
}

/// How the re-scanned window differs from its record.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WindowChanges {
    /// The agents whose logs in the window differ from the record: a touch that is gone was
    /// taken away by a reorganisation, one that is new was missed (a backend that lagged) or came
    /// with the other chain.
    pub agents: BTreeSet<u64>,
    /// Blocks recorded as a digest whose logs now differ: the agents they no longer touch are
    /// not known, so every agent the index holds is to be read again.
    pub unknown: BTreeSet<u64>,
}

impl WindowChanges {
    pub fn is_empty(&self) -> bool {
        self.agents.is_empty() && self.unknown.is_empty()
    }
}

/// How the logs re-scanned in the window (`rescanned`, blocks up to `indexed`, which earlier runs
/// already applied) differ from what those runs saw (`recorded`, from the window's first block
/// on). Only the agents found are read again; agents whose logs are as recorded are not, so a
/// window costs one `eth_getLogs`, not a re-read of every agent it touched.
pub fn changed_in_window(recorded: &WindowTouches, rescanned: &[Touch], indexed: u64) -> WindowChanges {
    let mut seen: BTreeMap<u64, BTreeSet<u64>> = BTreeMap::new();
    for touch in rescanned.iter().filter(|touch| touch.block <= indexed) {
        seen.entry(touch.block).or_default().insert(touch.agent_id);
    }
    let none = BTreeSet::new();
    let blocks: BTreeSet<u64> =
        recorded.0.range(..=indexed).map(|(block, _)| *block).chain(seen.keys().copied()).collect();
    let mut changes = WindowChanges::default();
    for block in blocks {
        let now = seen.get(&block).unwrap_or(&none);
        match recorded.0.get(&block) {
            Some(BlockTouches::Agents(then)) => changes.agents.extend(then.symmetric_difference(now)),
            Some(BlockTouches::Digest(then)) => {
                if *then != digest(now) {
                    changes.agents.extend(now);
                    changes.unknown.insert(block);
                }
            }
            None => changes.agents.extend(now),
        }
    }
    changes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{set, touches};

    #[test]
    fn only_agents_whose_window_logs_changed_are_read_again() {
        let recorded = WindowTouches::record(touches(&[(8, 1), (9, 2), (10, 3)]), 0, 1_000);
        // As recorded, plus block 11 past the index: nothing in the window changed.
        let same = changed_in_window(&recorded, &touches(&[(8, 1), (9, 2), (10, 3), (11, 4)]), 10);
        assert!(same.is_empty(), "{same:?}");
        // A reorganisation took block 10's write away and put agent 5's in block 9; block 8's
        // log, missed by a lagging backend before, shows agent 6 too.
        let now = touches(&[(8, 1), (8, 6), (9, 2), (9, 5)]);
        assert_eq!(
            changed_in_window(&recorded, &now, 10),
            WindowChanges { agents: set(&[3, 5, 6]), unknown: set(&[]) }
        );
    }

    #[test]
    fn the_record_keeps_its_window_and_round_trips_through_json() {
        let record = WindowTouches::record(touches(&[(7, 9), (8, 1), (8, 12), (9, 2)]), 8, 1_000);
        assert_eq!(record.blocks().collect::<Vec<_>>(), vec![8, 9], "blocks before the window are left out");
        let text = serde_json::to_string(&record).unwrap();
        assert_eq!(text, r#"{"8":[1,12],"9":[2]}"#);
        assert_eq!(serde_json::from_str::<WindowTouches>(&text).unwrap(), record);
        // As the migration from the table writes it: ids in any order.
        let migrated: WindowTouches = serde_json::from_str(r#"{"9":[2],"8":[12,1]}"#).unwrap();
        assert_eq!(migrated, record);
        assert_eq!(record.since(9), WindowTouches::record(touches(&[(9, 2)]), 0, 1_000));
    }

    #[test]
    fn past_its_budget_the_largest_blocks_are_digested_and_their_changes_read_everything() {
        // Block 20 touches agents 1 to 500 (about 2 KB as a list); block 21 agent 7.
        let crowded: Vec<(u64, u64)> = (1..=500).map(|id| (20, id)).chain([(21, 7)]).collect();
        let record = WindowTouches::record(touches(&crowded), 0, 200);
        assert!(record.digested(20) && !record.digested(21), "{record:?}");
        let text = serde_json::to_string(&record).unwrap();
        assert!(text.len() <= 200, "{text}");
        assert_eq!(serde_json::from_str::<WindowTouches>(&text).unwrap(), record, "a digest round-trips");
        // Re-scanned as recorded: nothing changed.
        assert!(changed_in_window(&record, &touches(&crowded), 21).is_empty());
        // Agent 500's log in block 20 gone, agent 7's in block 21 too: block 21 names its agent;
        // block 20 cannot name the one it lost.
        let now: Vec<(u64, u64)> = (1..500).map(|id| (20, id)).collect();
        let changes = changed_in_window(&record, &touches(&now), 21);
        assert_eq!(changes.unknown, set(&[20]));
        assert!(changes.agents.contains(&7) && changes.agents.contains(&1) && !changes.agents.contains(&500));
    }
}
