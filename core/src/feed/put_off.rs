//! Agents whose logs a run followed but did not read: a block touching more agents than a run
//! reads (anyone can register 2,000 agents in one block of a registry that limits nothing), or
//! rows past what a run writes. The index reads them in later runs; the feed must still tell
//! each of their writes, at its own block and with its log. So each run that puts agents off
//! records them with the index's block before it (where the index held them), and the run that
//! reads one walks it from there through its logs since ([`PutOff::take`]), instead of from the
//! index's block.
//!
//! What the record takes in the index's state row is bounded: ids as ranges, at most
//! [`MOST_RANGES`]. Agents past that are read by the index all the same, but the feed walks them
//! without those logs: what they changed shows as corrections at the reading run's block
//! (`super::reconcile`), the standing exact, the story shorter.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::BlockRef;

/// The most id ranges the record keeps (about 40 bytes each in the state row).
pub const MOST_RANGES: usize = 512;

/// Agents put off by one run: `ids`, held by the index as of block `after` (or not at all).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Deferral {
    after: BlockRef,
    /// Half-open ranges, ascending, disjoint.
    ids: Vec<(u64, u64)>,
}

/// The agents put off whose logs no run walked yet, oldest deferral first.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct PutOff(Vec<Deferral>);

impl PutOff {
    /// True when no agent waits for its walk.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Records `ids` (ascending) as put off by a run after the index's block `after`; how many
    /// could not be kept (past [`MOST_RANGES`]).
    pub fn add(&mut self, after: BlockRef, ids: impl IntoIterator<Item = u64>) -> usize {
        let room = MOST_RANGES.saturating_sub(self.ranges());
        let mut ranges: Vec<(u64, u64)> = Vec::new();
        let mut dropped = 0;
        for id in ids {
            let kept = ranges.len();
            match ranges.last_mut() {
                Some(last) if last.1 == id => last.1 += 1,
                Some(last) if last.1 > id => {}
                _ if kept < room => ranges.push((id, id + 1)),
                _ => dropped += 1,
            }
        }
        if !ranges.is_empty() {
            self.0.push(Deferral { after, ids: ranges });
        }
        dropped
    }

    /// The agents of `read` (ascending) that wait for their walk, each with the index's block
    /// it walks from; they no longer wait. A run that reads an agent walks it, whatever made
    /// it read it.
    pub fn take(&mut self, read: &[u64]) -> BTreeMap<u64, BlockRef> {
        let mut taken = BTreeMap::new();
        for deferral in &mut self.0 {
            let mut left = Vec::with_capacity(deferral.ids.len());
            for &(start, end) in &deferral.ids {
                let mut from = start;
                let inside = read.iter().copied().filter(|id| (start..end).contains(id));
                for id in inside {
                    // An id put off twice walks from the earlier deferral.
                    taken.entry(id).or_insert(deferral.after);
                    if id > from {
                        left.push((from, id));
                    }
                    from = id + 1;
                }
                if from < end {
                    left.push((from, end));
                }
            }
            deferral.ids = left;
        }
        self.0.retain(|deferral| !deferral.ids.is_empty());
        taken
    }

    /// Forgets ids from `from` on (agents a reorganisation took away: the run that registers
    /// such an id again follows its new logs).
    pub fn forget_from(&mut self, from: u64) {
        for deferral in &mut self.0 {
            deferral.ids.retain(|(start, _)| *start < from);
            if let Some(last) = deferral.ids.last_mut() {
                last.1 = last.1.min(from);
            }
        }
        self.0.retain(|deferral| !deferral.ids.is_empty());
    }

    /// The ids waiting, as ranges.
    #[cfg(test)]
    fn waiting(&self) -> Vec<std::ops::Range<u64>> {
        self.0.iter().flat_map(|deferral| deferral.ids.iter().map(|(start, end)| *start..*end)).collect()
    }

    fn ranges(&self) -> usize {
        self.0.iter().map(|deferral| deferral.ids.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const fn block(number: u64) -> BlockRef {
        BlockRef { number, timestamp: 1_700_000_000 + number }
    }

    #[test]
    fn agents_put_off_are_walked_once_from_the_block_before_the_run_that_put_them_off() {
        let mut put_off = PutOff::default();
        assert_eq!(put_off.add(block(4), (201..2001).chain([2005])), 0);
        assert_eq!(put_off.waiting(), vec![201..2001, 2005..2006]);
        // A run reads 201 to 400 (and agent 7, never put off).
        let read: Vec<u64> = [7].into_iter().chain(201..401).collect();
        let taken = put_off.take(&read);
        assert_eq!(taken.len(), 200);
        assert!(taken.values().all(|after| *after == block(4)));
        assert!(!taken.contains_key(&7));
        assert_eq!(put_off.waiting(), vec![401..2001, 2005..2006]);
        assert!(put_off.take(&read).is_empty(), "walked once");
        // A later run puts off others, and one again: it walks from its first deferral.
        put_off.add(block(9), [500, 3000]);
        let taken = put_off.take(&[500, 3000]);
        assert_eq!(taken, BTreeMap::from([(500, block(4)), (3000, block(9))]));
        // Read out of order and in pieces: what is left is exact.
        put_off.take(&[401, 403, 2000]);
        assert_eq!(put_off.waiting(), vec![402..403, 404..500, 501..2000, 2005..2006]);
        put_off.forget_from(1000);
        assert_eq!(put_off.waiting(), vec![402..403, 404..500, 501..1000]);
        put_off.take(&(1..1000).collect::<Vec<_>>());
        assert!(put_off.is_empty());
    }

    #[test]
    fn the_record_keeps_at_most_its_ranges() {
        let mut put_off = PutOff::default();
        // Every other id: one range each.
        let dropped = put_off.add(block(1), (0..MOST_RANGES as u64 + 10).map(|n| 2 * n + 1));
        assert_eq!((put_off.ranges(), dropped), (MOST_RANGES, 10));
        assert_eq!(put_off.add(block(2), [5_000]), 1, "full");
        let json = serde_json::to_string(&put_off).unwrap();
        assert_eq!(serde_json::from_str::<PutOff>(&json).unwrap(), put_off);
    }
}
