//! What one bounded run of the registry index reads, with no I/O: up to which block it follows
//! the registry's logs ([`bounded_end`]), and which agents it reads again at that block
//! ([`plan`]): the agents the logs touched, the next ids of the fill (new registrations, and
//! every agent on the first fill), and a slice of the safety-net sweep.
//!
//! Ids are dense (the registry counts agents from 1 and never removes one), so "every agent" is
//! the id range `1..next` of `nextAgentId`, and the index holds `1..filled`: the first fill, and
//! any registrations a run had no room for, are the ids from `filled` on. A reorganisation can
//! take registrations away (`nextAgentId` falls): the ids past it leave the index.

use std::{collections::BTreeSet, ops::Range};

use serde::{Deserialize, Serialize};

use crate::logs::Touch;

/// The agents whose logs in the re-scanned window (blocks up to `indexed`, which earlier runs
/// already applied) differ from what those runs saw (`recorded`): a touch that is gone was taken
/// away by a reorganisation, one that is new was missed (a backend that lagged) or came with the
/// other chain. Only these are read again; agents whose logs are as recorded are not, so a
/// window costs one `eth_getLogs`, not a re-read of every agent it touched.
pub fn changed_in_window(recorded: &BTreeSet<Touch>, rescanned: &[Touch], indexed: u64) -> BTreeSet<u64> {
    let seen: BTreeSet<Touch> = rescanned.iter().filter(|touch| touch.block <= indexed).copied().collect();
    let recorded: BTreeSet<Touch> = recorded.iter().filter(|touch| touch.block <= indexed).copied().collect();
    recorded.symmetric_difference(&seen).map(|touch| touch.agent_id).collect()
}

/// The last block up to which a run follows the logs and still reads every agent they touched
/// within `cap` agents: `touches` (any order) are counted block by block, whole blocks only,
/// after `carried` (agents the run reads whatever its end: those earlier runs saw touched in
/// the re-scanned window). Blocks up to `at_least` (the first block past the index) are taken
/// whatever they hold, so every run moves on: a block past the cap on its own is then one run's.
pub fn bounded_end(
    touches: &[Touch],
    carried: &BTreeSet<u64>,
    at_least: u64,
    range_end: u64,
    cap: u64,
) -> u64 {
    let mut by_block: Vec<Touch> = touches.iter().filter(|touch| touch.block <= range_end).copied().collect();
    by_block.sort_unstable();
    let mut seen = carried.clone();
    for block in by_block.chunk_by(|a, b| a.block == b.block) {
        let number = block[0].block;
        let fresh: BTreeSet<u64> =
            block.iter().map(|touch| touch.agent_id).filter(|id| !seen.contains(id)).collect();
        if number > at_least && (seen.len() + fresh.len()) as u64 > cap {
            return number - 1;
        }
        seen.extend(fresh);
    }
    range_end
}

/// Where the index stands before a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Cursor {
    /// Ids below this are in the index.
    pub filled: u64,
    /// The sweep's next id.
    pub sweep: u64,
}

impl Default for Cursor {
    /// An empty index: the fill and the sweep start at the first agent.
    fn default() -> Self {
        Self { filled: 1, sweep: 1 }
    }
}

/// What a run reads at its block, and where the index stands after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// Agents to read (ascending); each is written back if it changed.
    pub read: Vec<u64>,
    /// Agents in the index that the chain no longer has (a reorganisation took their
    /// registration away): they leave the index.
    pub gone: Range<u64>,
    /// The cursor after the run.
    pub next: Cursor,
}

impl Plan {
    /// True when the index holds every agent of the chain after the run.
    pub fn complete(&self, chain_next: u64) -> bool {
        self.next.filled >= chain_next
    }
}

/// The agents a run reads at a block where the registry's `nextAgentId` is `chain_next`:
/// - the `touched` agents the index holds (touched agents past it come with the fill);
/// - then, within `cap` agents in all, the fill: ids from `cursor.filled` up to `chain_next`;
/// - then up to `sweep` more of the safety-net sweep, from `cursor.sweep`, wrapping to 1.
pub fn plan(touched: &BTreeSet<u64>, cursor: Cursor, chain_next: u64, cap: u64, sweep: u64) -> Plan {
    let held = cursor.filled.min(chain_next).max(1);
    let gone = held..cursor.filled.max(held);
    let mut read: BTreeSet<u64> = touched.range(1..held).copied().collect();
    let mut room = cap.saturating_sub(read.len() as u64);
    let filled = held.saturating_add(room).min(chain_next).max(held);
    read.extend(held..filled);
    room -= filled - held;
    let mut next_sweep = if (1..filled).contains(&cursor.sweep) { cursor.sweep } else { 1 };
    let mut quota = room.min(sweep).min(filled.saturating_sub(1));
    while quota > 0 {
        read.insert(next_sweep);
        quota -= 1;
        next_sweep = if next_sweep + 1 >= filled { 1 } else { next_sweep + 1 };
    }
    Plan { read: read.into_iter().collect(), gone, next: Cursor { filled, sweep: next_sweep } }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touches(pairs: &[(u64, u64)]) -> Vec<Touch> {
        pairs.iter().map(|&(block, agent_id)| Touch { block, agent_id }).collect()
    }

    fn set(ids: &[u64]) -> BTreeSet<u64> {
        ids.iter().copied().collect()
    }

    #[test]
    fn a_run_ends_before_the_block_that_would_pass_the_cap() {
        let logs = touches(&[(11, 1), (11, 2), (12, 3), (12, 1), (14, 4), (14, 5), (15, 6)]);
        assert_eq!(bounded_end(&logs, &set(&[]), 10, 20, 10), 20, "room for all");
        // Blocks 11 and 12 touch agents 1, 2, 3: block 14 would make five.
        assert_eq!(bounded_end(&logs, &set(&[]), 10, 20, 3), 13);
        assert_eq!(bounded_end(&logs, &set(&[]), 10, 20, 4), 13, "blocks are taken whole");
        assert_eq!(bounded_end(&logs, &set(&[]), 10, 20, 5), 14);
        // Agents carried from the window count first.
        assert_eq!(bounded_end(&logs, &set(&[7, 8]), 10, 20, 3), 10, "only the carried fit");
        // The first block past the index is taken whatever it holds.
        let crowded = touches(&[(11, 1), (11, 2), (11, 3), (12, 4)]);
        assert_eq!(bounded_end(&crowded, &set(&[]), 10, 20, 2), 10);
        assert_eq!(bounded_end(&crowded, &set(&[]), 11, 20, 2), 11);
        assert_eq!(bounded_end(&[], &set(&[]), 10, 20, 2), 20, "no logs");
    }

    #[test]
    fn only_agents_whose_window_logs_changed_are_read_again() {
        let recorded: BTreeSet<Touch> = touches(&[(8, 1), (9, 2), (10, 3)]).into_iter().collect();
        // As recorded, plus block 11 past the index: nothing in the window changed.
        assert!(changed_in_window(&recorded, &touches(&[(8, 1), (9, 2), (10, 3), (11, 4)]), 10).is_empty());
        // A reorganisation took block 10's write away and put agent 5's in block 9; block 8's
        // log, missed by a lagging backend before, shows agent 6 too.
        let now = touches(&[(8, 1), (8, 6), (9, 2), (9, 5)]);
        assert_eq!(changed_in_window(&recorded, &now, 10), set(&[3, 5, 6]));
    }

    #[test]
    fn the_first_fill_reads_ids_in_slices_and_completes() {
        let start = Cursor { filled: 1, sweep: 1 };
        let first = plan(&set(&[]), start, 11, 4, 0);
        assert_eq!(first.read, vec![1, 2, 3, 4]);
        assert_eq!(first.next, Cursor { filled: 5, sweep: 1 });
        assert!(!first.complete(11));
        // Touched agents already held come first; touched ones past the fill wait for it.
        let second = plan(&set(&[2, 9]), first.next, 11, 4, 0);
        assert_eq!(second.read, vec![2, 5, 6, 7]);
        assert_eq!(second.next.filled, 8);
        let third = plan(&set(&[]), second.next, 11, 4, 0);
        assert_eq!((third.read.clone(), third.complete(11)), (vec![8, 9, 10], true));
        assert!(plan(&set(&[]), Cursor { filled: 1, sweep: 1 }, 1, 4, 4).read.is_empty(), "no agents");
    }

    #[test]
    fn the_sweep_uses_the_room_left_and_wraps() {
        let cursor = Cursor { filled: 6, sweep: 4 };
        let run = plan(&set(&[1]), cursor, 6, 10, 3);
        assert_eq!(run.read, vec![1, 4, 5], "1 touched; the sweep reads 4, 5, then 1 again");
        assert_eq!(run.next, Cursor { filled: 6, sweep: 2 });
        // New registrations take the room before the sweep.
        let run = plan(&set(&[6]), cursor, 8, 3, 3);
        assert_eq!((run.read, run.next), (vec![4, 6, 7], Cursor { filled: 8, sweep: 5 }));
        // A sweep cursor past the agents (after a reorganisation) starts again at 1.
        assert_eq!(plan(&set(&[]), Cursor { filled: 3, sweep: 9 }, 3, 5, 1).read, vec![1]);
    }

    #[test]
    fn registrations_a_reorganisation_took_away_leave_the_index() {
        let run = plan(&set(&[2, 5]), Cursor { filled: 7, sweep: 6 }, 4, 10, 0);
        assert_eq!(run.gone, 4..7);
        assert_eq!(run.read, vec![2], "agent 5 is gone, not read");
        assert_eq!(run.next, Cursor { filled: 4, sweep: 1 });
    }
}
