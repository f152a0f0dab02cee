//! Confirming or retracting the feed's provisional entries as the chain moves on.
//!
//! Each change enters the feed `provisional`. A later run that finds its block still on the
//! chain and at least the setting's depth of blocks deep appends its `final` entry; one that
//! finds its block gone (a reorganisation, seen as a different hash at that height) appends its
//! `retracted` entry, and the index then reads the agents of the new blocks again, whose changes
//! enter as new provisional entries. An entry is settled once, by whichever comes first.
//!
//! The index keeps one cursor, `settled_through`: every provisional entry up to it is settled.
//! A run reads the entries after it (a few blocks' worth: the depth bounds them), finds the
//! provisional ones not yet settled ([`unsettled`]), settles what it can ([`settle`]), and moves
//! the cursor to just before the first entry it still waits on ([`settled_through`]).

use std::collections::BTreeSet;

use alloy_primitives::{Address, B256};

use crate::feed::{Cursor, Event, Finality, Standing};

/// The provisional entries among `entries` (the feed after `settled_through`, in order) that no
/// later entry confirms or retracts.
pub fn unsettled(entries: &[Event]) -> Vec<Event> {
    let settled: BTreeSet<Cursor> =
        entries.iter().filter_map(|entry| entry.confirms.or(entry.retracts)).collect();
    entries
        .iter()
        .filter(|entry| entry.finality == Finality::Provisional && !settled.contains(&entry.id))
        .copied()
        .collect()
}

/// What becomes of one unsettled entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settlement {
    /// Its block is still the chain's and deep enough.
    Confirm,
    /// Its block is no longer the chain's.
    Retract,
    /// Not deep enough yet.
    Wait,
}

/// Settles an entry whose block the chain now has as `canonical` (`None`: the chain is not that
/// high any more), when blocks up to `final_block` count as final.
pub fn settlement(entry: &Event, canonical: Option<B256>, final_block: u64) -> Settlement {
    let block = &entry.change.block;
    if canonical != Some(block.hash) {
        Settlement::Retract
    } else if block.number <= final_block {
        Settlement::Confirm
    } else {
        Settlement::Wait
    }
}

/// The entries that settle `unsettled`, in its order, each given the next cursor by `next_id`:
/// `canonical` names the chain's hash at a height, `standing` an agent's standing once the
/// reorganisation is applied (for retractions).
pub fn settle(
    unsettled: &[Event],
    canonical: impl Fn(u64) -> Option<B256>,
    final_block: u64,
    standing: impl Fn(u64, Address) -> Standing,
    mut next_id: impl FnMut() -> Cursor,
) -> Vec<Event> {
    let mut settling = Vec::new();
    for entry in unsettled {
        match settlement(entry, canonical(entry.change.block.number), final_block) {
            Settlement::Confirm => settling.push(Event::confirmation(next_id(), entry)),
            Settlement::Retract => {
                let now = standing(entry.change.agent_id, entry.change.wallet);
                settling.push(Event::retraction(next_id(), entry, now));
            }
            Settlement::Wait => {}
        }
    }
    settling
}

/// The new `settled_through`: just before the first entry of `still_waiting` (the unsettled
/// entries a run left waiting), or `last` (the feed's last entry) when none waits.
pub fn settled_through(still_waiting: &[Event], last: Option<Cursor>) -> Option<Cursor> {
    match still_waiting.first() {
        Some(first) if first.id.index > 0 => Some(Cursor { index: first.id.index - 1, ..first.id }),
        // The first of its batch: settled through the batch before, whatever its length.
        Some(first) => first
            .id
            .batch
            .checked_sub(1)
            .filter(|&batch| batch > 0)
            .map(|batch| Cursor { batch, index: u32::MAX }),
        None => last,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::feed::{EventBlock, testing::attested};

    fn provisional(batch: u64, index: u32, number: u64, hash: u8) -> Event {
        let block = EventBlock { number, hash: B256::repeat_byte(hash), time: number };
        attested(Cursor { batch, index }, number, block)
    }

    #[test]
    fn entries_are_confirmed_when_deep_and_retracted_when_their_block_is_gone() {
        // Blocks 10, 11, 12 with hashes 0xa0, 0xa1, 0xa2; the chain replaced 12 (now 0xb2).
        let entries = [provisional(1, 0, 10, 0xa0), provisional(1, 1, 11, 0xa1), provisional(2, 0, 12, 0xa2)];
        let canonical = |number: u64| match number {
            10 => Some(B256::repeat_byte(0xa0)),
            11 => Some(B256::repeat_byte(0xa1)),
            12 => Some(B256::repeat_byte(0xb2)),
            _ => None,
        };
        let mut ids = (0..).map(|index| Cursor { batch: 3, index });
        let settling = settle(
            &unsettled(&entries),
            canonical,
            10,
            |_, _| Standing::UNREGISTERED,
            || ids.next().unwrap(),
        );
        assert_eq!(settling.len(), 2);
        assert_eq!((settling[0].finality, settling[0].confirms), (Finality::Final, Some(entries[0].id)));
        assert_eq!((settling[1].finality, settling[1].retracts), (Finality::Retracted, Some(entries[2].id)));
        assert_eq!(
            settling[1].change.standing,
            Standing::UNREGISTERED,
            "the standing after the reorganisation"
        );
        assert_eq!(settling[1].change.block, entries[2].change.block, "names the block it withdraws");

        // The next run sees those settlements and waits only on block 11's entry.
        let mut feed = entries.to_vec();
        feed.extend(settling);
        let waiting = unsettled(&feed);
        assert_eq!(waiting, vec![entries[1]]);
        assert_eq!(settled_through(&waiting, Some(Cursor { batch: 3, index: 1 })), Some(entries[0].id));
        assert_eq!(
            settled_through(&[], Some(Cursor { batch: 3, index: 1 })),
            Some(Cursor { batch: 3, index: 1 })
        );
        assert_eq!(settled_through(&[entries[2]], None), Some(Cursor { batch: 1, index: u32::MAX }));
        assert_eq!(settled_through(&[entries[0]], None), None, "nothing before the first batch");
    }

    #[test]
    fn settlement_by_depth_and_hash() {
        let entry = provisional(1, 0, 20, 0xcc);
        let hash = Some(B256::repeat_byte(0xcc));
        assert_eq!(settlement(&entry, hash, 19), Settlement::Wait);
        assert_eq!(settlement(&entry, hash, 20), Settlement::Confirm);
        assert_eq!(settlement(&entry, Some(B256::ZERO), 30), Settlement::Retract);
        assert_eq!(settlement(&entry, None, 30), Settlement::Retract, "the chain is no longer that high");
    }
}
