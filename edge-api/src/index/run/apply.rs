//! What a run's changes do to what the index keeps besides the rows: the totals move from each
//! agent as the index held it to the agent as read, the status counts per bucket of ids move,
//! and parents gain or lose children.

use std::collections::{BTreeMap, BTreeSet};

use kya_core::{
    StandingClock,
    index::{BucketMoves, IndexedAgent, child_change},
};

use crate::{
    Result,
    d1::Store,
    index::{
        State,
        store::Held,
        tally::{self, Loaded},
    },
};

/// Moves the totals from each agent as the index holds it to `new` (`None`: gone) at `clock`
/// (the run's block's time and grace period), and the child counts of parents whose children appeared or disappeared. Returns every
/// agent whose row changes (its new state with its child count, or `None` to leave the index),
/// how the status counts per bucket of ids move, and the tallies loaded into the totals.
pub(super) async fn apply(
    store: &Store,
    state: &mut State,
    new: &BTreeMap<u64, Option<IndexedAgent>>,
    held: &mut BTreeMap<u64, Held>,
    clock: StandingClock,
) -> Result<(BTreeMap<u64, Option<Held>>, BucketMoves, Loaded)> {
    let changed = new.iter().filter(|(id, fresh)| held.get(id).map(|old| &old.agent) != fresh.as_ref());
    let involved =
        changed.flat_map(|(id, fresh)| held.get(id).map(|old| &old.agent).into_iter().chain(fresh.as_ref()));
    let loaded = tally::load(store, &mut state.totals, involved).await?;
    let mut children: BTreeMap<u64, i64> = BTreeMap::new();
    let mut changes = BTreeMap::new();
    let mut bucket_moves = BucketMoves::default();
    for (&id, fresh) in new {
        let old = held.get(&id);
        if old.map(|old| &old.agent) == fresh.as_ref() {
            continue;
        }
        state.totals.apply(old.map(|old| &old.agent), fresh.as_ref(), clock);
        let status = |agent: &IndexedAgent| agent.record.status;
        bucket_moves.apply(id, old.map(|old| status(&old.agent)), fresh.as_ref().map(status));
        for (parent, change) in
            child_change(old.map(|old| &old.agent.record), fresh.as_ref().map(|agent| &agent.record))
        {
            *children.entry(parent).or_default() += change;
        }
        let child_count = old.map_or(0, |old| old.child_count);
        changes.insert(id, fresh.clone().map(|agent| Held { agent, child_count, scoped: true }));
    }
    // Parents whose child count moved, read when the run did not already have them.
    let missing: BTreeSet<u64> =
        children.keys().filter(|parent| !held.contains_key(parent)).copied().collect();
    if !missing.is_empty() {
        held.extend(store.held(&missing).await?);
    }
    for (parent, change) in children.into_iter().filter(|(_, change)| *change != 0) {
        let entry = match changes.get_mut(&parent) {
            Some(Some(changed)) => changed,
            // A parent that left the index in this run keeps no count.
            Some(None) => continue,
            None => match held.get(&parent) {
                Some(parent_row) => {
                    changes.entry(parent).or_insert(Some(parent_row.clone())).as_mut().expect("just set")
                }
                // A child's parent the index does not hold yet (the fill reads ids in order, and
                // a parent's id is lower): nothing to count.
                None => continue,
            },
        };
        entry.child_count = entry.child_count.saturating_add_signed(change);
    }
    Ok((changes, bucket_moves, loaded))
}
