//! The operational scopes of an index filled before it kept them (migration 0012): its agents'
//! point answers read the chain ("an agent's operational scope is not indexed") until the index
//! holds their scopes. The safety-net sweep would read them all again in time, but at its pace
//! (20 agents a minute: 100,000 in three and a half days); this reads them in the room a run's
//! plan leaves, in id order, so such an index answers from D1 within minutes of the upgrade.
//!
//! Its cursor (`State::scopes_from`) is the first id not looked at yet; `None` once every held id
//! was, and for an index that kept scopes from its first run (the fill writes an agent's scope
//! with its registration).

use std::{collections::BTreeSet, ops::Range};

use kya_core::index::plan::Plan;

use crate::{Result, d1::Store};

/// The ids a run reads for their scopes alone, and where the next run looks.
#[derive(Debug, Default)]
pub(super) struct Backfill {
    /// Unscoped agents the plan did not read already.
    only: BTreeSet<u64>,
    /// The cursor after the run.
    pub(super) next: Option<u64>,
}

/// The ids a run looks at from `from` with `room` reads to spare, the index holding ids below
/// `held_end`, and the cursor after them (`None`: every held id looked at).
fn window(from: u64, room: u64, held_end: u64) -> (Range<u64>, Option<u64>) {
    let end = from.saturating_add(room).min(held_end).max(from);
    (from..end, (end < held_end).then_some(end))
}

impl Backfill {
    /// Adds to `planned` the unscoped agents of this run's window: from `from` (the state's
    /// cursor), as many ids as `cap` leaves after the plan's own reads, below the ids the
    /// index held before the run (`held_end`: those past it come with the fill, scope and all).
    pub(super) async fn add_to(
        planned: &mut Plan,
        store: &Store,
        from: Option<u64>,
        cap: u64,
        held_end: u64,
    ) -> Result<Self> {
        let Some(from) = from else { return Ok(Self::default()) };
        let room = cap.saturating_sub(planned.read.len() as u64);
        let (ids, next) = window(from, room, held_end);
        let mut only: BTreeSet<u64> = store.unscoped_in(&ids).await?.into_iter().collect();
        for id in &planned.read {
            only.remove(id);
        }
        if !only.is_empty() {
            planned.read.extend(&only);
            planned.read.sort_unstable();
        }
        Ok(Self { only, next })
    }

    /// Whether the run read `id` for its scope alone (not for the plan).
    pub(super) fn only(&self, id: u64) -> bool {
        self.only.contains(&id)
    }

    /// `id`, read for its scope alone, had no room in the run's writes: the next run looks
    /// from it again (rather than the plan's reading it again, which would hold the index's
    /// answers until it is).
    pub(super) fn put_back(&mut self, id: u64) {
        self.next = Some(self.next.map_or(id, |next| next.min(id)));
    }
}

#[cfg(test)]
mod tests {
    use super::window;

    #[test]
    fn the_window_is_the_room_left_within_the_held_ids_and_ends_the_backfill_at_their_end() {
        assert_eq!(window(1, 100, 1_001), (1..101, Some(101)));
        assert_eq!(window(901, 100, 1_001), (901..1_001, None), "the last window");
        assert_eq!(window(951, 100, 1_001), (951..1_001, None));
        assert_eq!(window(5, 0, 1_001), (5..5, Some(5)), "no room: the cursor stays");
        assert_eq!(window(1_001, 100, 1_001), (1_001..1_001, None), "nothing held past it");
        assert_eq!(window(2_000, 100, 1_001), (2_000..2_000, None), "a reorganisation shortened the chain");
        assert_eq!(window(1, u64::MAX, 11), (1..11, None));
    }
}
