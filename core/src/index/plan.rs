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

use crate::index::logs::Touch;

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
    /// Ids from `reread_from` up to `reread_to` (empty when equal) are held but may be stale:
    /// a block touched more of them than a run reads, or a provider refused a block's logs
    /// whole, so they are read again in order, like the fill, before the index answers.
    #[serde(default)]
    pub reread_from: u64,
    #[serde(default)]
    pub reread_to: u64,
}

impl Default for Cursor {
    /// An empty index: the fill and the sweep start at the first agent.
    fn default() -> Self {
        Self { filled: 1, sweep: 1, reread_from: 0, reread_to: 0 }
    }
}

impl Cursor {
    /// The ids still to read again.
    pub fn reread(&self) -> Range<u64> {
        self.reread_from..self.reread_to.max(self.reread_from)
    }

    /// Widens the ids to read again to cover `ids` too (one range: what it holds is fixed-size).
    pub fn reread_also(&mut self, ids: Range<u64>) {
        if ids.is_empty() {
            return;
        }
        let held = self.reread();
        let (from, to) = if held.is_empty() {
            (ids.start, ids.end)
        } else {
            (held.start.min(ids.start), held.end.max(ids.end))
        };
        (self.reread_from, self.reread_to) = (from, to);
    }

    /// Puts off agent `id`, read by a run that had no room left to write it: an id of the fill
    /// (at or past `filled_before`, where the fill stood before the run) is filled again from
    /// there; any other is read again.
    pub fn defer(&mut self, id: u64, filled_before: u64) {
        if id >= filled_before {
            self.filled = self.filled.min(id);
        } else {
            self.reread_also(id..id + 1);
        }
    }

    /// True when the index holds every agent of a chain whose `nextAgentId` is `chain_next`,
    /// each read since it last changed.
    pub fn complete(&self, chain_next: u64) -> bool {
        self.filled >= chain_next && self.reread().is_empty()
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
        self.next.complete(chain_next)
    }
}

/// The agents a run reads at a block where the registry's `nextAgentId` is `chain_next`, `cap`
/// at most:
/// - the `touched` agents the index holds (touched agents past it come with the fill), the
///   lowest `cap` of them; the rest are read again over the next runs (the cursor's `reread`);
/// - then the ids to read again, in order;
/// - then the fill: ids from `cursor.filled` up to `chain_next`;
/// - then up to `sweep` more of the safety-net sweep, from `cursor.sweep`, wrapping to 1.
pub fn plan(touched: &BTreeSet<u64>, cursor: Cursor, chain_next: u64, cap: u64, sweep: u64) -> Plan {
    let held = cursor.filled.min(chain_next).max(1);
    let gone = held..cursor.filled.max(held);
    let mut next = cursor;
    let touched: Vec<u64> = touched.range(1..held).copied().collect();
    let (now, later) = touched.split_at(touched.len().min(usize::try_from(cap).unwrap_or(usize::MAX)));
    let mut read: BTreeSet<u64> = now.iter().copied().collect();
    if let (Some(first), Some(last)) = (later.first(), later.last()) {
        next.reread_also(*first..last + 1);
    }
    let reread = next.reread();
    let mut room = cap.saturating_sub(read.len() as u64);
    let mut reread_next = reread.start;
    let reread_end = reread.end.min(held);
    while room > 0 && reread_next < reread_end {
        if read.insert(reread_next) {
            room -= 1;
        }
        reread_next += 1;
    }
    (next.reread_from, next.reread_to) =
        if reread_next < reread_end { (reread_next, reread_end) } else { (0, 0) };
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
    (next.filled, next.sweep) = (filled, next_sweep);
    Plan { read: read.into_iter().collect(), gone, next }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{set, touches};

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
    fn the_first_fill_reads_ids_in_slices_and_completes() {
        let start = Cursor::default();
        let first = plan(&set(&[]), start, 11, 4, 0);
        assert_eq!(first.read, vec![1, 2, 3, 4]);
        assert_eq!(first.next, Cursor { filled: 5, ..Cursor::default() });
        assert!(!first.complete(11));
        // Touched agents already held come first; touched ones past the fill wait for it.
        let second = plan(&set(&[2, 9]), first.next, 11, 4, 0);
        assert_eq!(second.read, vec![2, 5, 6, 7]);
        assert_eq!(second.next.filled, 8);
        let third = plan(&set(&[]), second.next, 11, 4, 0);
        assert_eq!((third.read.clone(), third.complete(11)), (vec![8, 9, 10], true));
        assert!(plan(&set(&[]), Cursor::default(), 1, 4, 4).read.is_empty(), "no agents");
    }

    #[test]
    fn the_sweep_uses_the_room_left_and_wraps() {
        let cursor = Cursor { filled: 6, sweep: 4, ..Cursor::default() };
        let run = plan(&set(&[1]), cursor, 6, 10, 3);
        assert_eq!(run.read, vec![1, 4, 5], "1 touched; the sweep reads 4, 5, then 1 again");
        assert_eq!(run.next, Cursor { filled: 6, sweep: 2, ..Cursor::default() });
        // New registrations take the room before the sweep.
        let run = plan(&set(&[6]), cursor, 8, 3, 3);
        assert_eq!(
            (run.read, run.next),
            (vec![4, 6, 7], Cursor { filled: 8, sweep: 5, ..Cursor::default() })
        );
        // A sweep cursor past the agents (after a reorganisation) starts again at 1.
        assert_eq!(
            plan(&set(&[]), Cursor { filled: 3, sweep: 9, ..Cursor::default() }, 3, 5, 1).read,
            vec![1]
        );
    }

    #[test]
    fn registrations_a_reorganisation_took_away_leave_the_index() {
        let run = plan(&set(&[2, 5]), Cursor { filled: 7, sweep: 6, ..Cursor::default() }, 4, 10, 0);
        assert_eq!(run.gone, 4..7);
        assert_eq!(run.read, vec![2], "agent 5 is gone, not read");
        assert_eq!(run.next, Cursor { filled: 4, sweep: 1, ..Cursor::default() });
    }

    #[test]
    fn touched_agents_past_the_cap_are_read_again_over_the_next_runs() {
        let cursor = Cursor { filled: 21, sweep: 1, ..Cursor::default() };
        // A block touched ten held agents; a run reads four.
        let touched = set(&[2, 3, 5, 7, 11, 13, 14, 17, 19, 20]);
        let first = plan(&touched, cursor, 21, 4, 2);
        assert_eq!(first.read, vec![2, 3, 5, 7]);
        assert_eq!(first.next.reread(), 11..21, "the rest, as one range");
        assert!(!first.complete(21), "not complete while agents wait to be read again");
        let second = plan(&set(&[]), first.next, 21, 4, 0);
        assert_eq!(second.read, vec![11, 12, 13, 14]);
        let third = plan(&set(&[12]), second.next, 21, 4, 0);
        assert_eq!(third.read, vec![12, 15, 16, 17], "touched first; the range goes on");
        let fourth = plan(&set(&[]), third.next, 21, 4, 2);
        assert_eq!(fourth.read, vec![1, 18, 19, 20], "the room left goes to the sweep");
        assert!(fourth.next.reread().is_empty());
        assert!(fourth.complete(21));
    }

    #[test]
    fn agents_put_off_are_filled_or_read_again() {
        let mut cursor = Cursor { filled: 30, sweep: 3, ..Cursor::default() };
        cursor.defer(25, 20);
        assert_eq!(cursor.filled, 25, "an id of the fill: the fill resumes there");
        cursor.defer(9, 20);
        cursor.defer(4, 20);
        assert_eq!(cursor.reread(), 4..10);
        assert!(!cursor.complete(25));
        let mut empty = Cursor::default();
        empty.reread_also(5..5);
        assert!(empty.reread().is_empty());
        // An index stored before the range existed reads as having none.
        let old: Cursor = serde_json::from_str(r#"{"filled":7,"sweep":2}"#).unwrap();
        assert_eq!(old, Cursor { filled: 7, sweep: 2, ..Cursor::default() });
    }
}
