//! Where a run's searches for lapsed and renewed attestations start and stop, and which read
//! agents their walks have said ahead of them: the cursor arithmetic of `index::feed`'s lapses
//! and renewals, over `(lastAttestation, id)` keys, with no I/O (the two D1 queries stay in the
//! walk, between [`Searches::start`] and [`Searches::after_lapses`]).
//!
//! The keys order Active agents by when their attestation lapses. At the run's block every key
//! below `(edge, 0)` is lapsed (`edge`: the first `lastAttestation` still current there). What
//! the feed has shown is one cursor: below `from` every agent was shown lapsed, from it up
//! current, except a renewal backlog `[from, renewing)`, shown lapsed, which a lengthened grace
//! period made current again.

/// An Active agent's place in the searches: its `lastAttestation`, then its id.
pub(super) type Key = (u64, u64);

/// The searches of one run, from [`Searches::start`] to [`Searches::after_lapses`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Searches {
    /// The run's edge: keys below `(edge, 0)` are lapsed at its block.
    edge: u64,
    /// Where the lapse search starts, and the renewal backlog's bottom.
    pub(super) from: Key,
    /// The renewal backlog's top, exclusive, before the run walks any of it.
    pub(super) renewing: Option<Key>,
}

/// Where the searches stand after a run, for the state row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Cursors {
    /// `State::lapses_from`.
    pub(super) lapses_from: Key,
    /// `State::renewing_below`: the renewals the run left to the next runs.
    pub(super) renewing_below: Option<Key>,
    /// The lapse search stopped at its cap: more lapsed agents wait.
    pub(super) lapses_past_cap: bool,
}

impl Searches {
    /// The searches of a run whose edge is `edge`, after the last run left `lapses_from` and
    /// `renewing_below` (`None` before any search: the feed showed standing at
    /// `shown_current_from`, the index's edge before the run), the owner having `lengthened` the
    /// grace period since.
    pub(super) fn start(
        edge: u64,
        shown_current_from: u64,
        (lapses_from, renewing_below): (Option<Key>, Option<Key>),
        lengthened: bool,
    ) -> Self {
        let mut from = lapses_from.unwrap_or((shown_current_from, 0));
        let mut renewing = renewing_below;
        if lengthened && (edge, 0) < from {
            // Between the new edge and `from` every agent was shown lapsed and is current again.
            renewing = Some(renewing.unwrap_or(from));
            from = (edge, 0);
        } else {
            // Never ahead of the run's edge: after a reorganisation onto a chain whose blocks are
            // earlier in time, attestations the other chain saw lapse are current again (their
            // expiries were retracted with the standing they have now), and must be found when
            // they lapse here.
            from = from.min((edge, 0));
        }
        // A backlog that time (or a shortened grace period) lapsed again was shown lapsed and
        // is: nothing to say of it.
        if let Some(below) = renewing {
            if below <= (edge, 0) {
                from = from.max(below);
                renewing = None;
            } else {
                from = from.max((edge, 0));
            }
        }
        Self { edge, from, renewing }
    }

    /// The renewal backlog left once the run walked `renewed` (its highest keys, newest first,
    /// at most `limit`: fewer means it is done; else the rest lie below the last).
    pub(super) fn renewals_left(&self, renewed: &[Key], limit: u64) -> Option<Key> {
        self.renewing?;
        renewed.last().copied().filter(|_| renewed.len() as u64 >= limit)
    }

    /// How many lapses the run searches for, after `renewed` renewals of its `limit`: none while
    /// renewals wait (`renewals_left`), or when nothing is lapsed past `from`.
    pub(super) fn lapse_budget(&self, renewals_left: Option<Key>, renewed: usize, limit: u64) -> u64 {
        let budget = limit.saturating_sub(renewed as u64);
        if renewals_left.is_none() && self.from.0 < self.edge { budget } else { 0 }
    }

    /// The cursors after the run found `lapsed` (ascending keys below `(edge, 0)`, from `from`) of
    /// its `budget`, with `renewals_left` waiting.
    pub(super) fn after_lapses(&self, lapsed: &[Key], budget: u64, renewals_left: Option<Key>) -> Cursors {
        let searched = budget > 0;
        let lapses_past_cap = searched && lapsed.len() as u64 >= budget;
        let lapses_from = match lapsed.last() {
            Some(&(last_attestation, id)) if lapses_past_cap => (last_attestation, id + 1),
            _ if searched => (self.edge, 0),
            _ => self.from,
        };
        Cursors { lapses_from, renewing_below: renewals_left, lapses_past_cap }
    }

    /// The agents the run reads, walked with their logs from their held rows (`read`: their held
    /// keys), against the searches' cursors: those in the renewal backlog were shown lapsed (the
    /// first set: walked from a lapsed second), and those the searches have not reached are said
    /// by their walk, so the searches skip them (`walked_ahead`: kept while the cursors have
    /// not passed them, at most `kept`, nearest first).
    pub(super) fn walked_ahead(
        &self,
        cursors: &Cursors,
        read: impl IntoIterator<Item = Key>,
        walked_ahead: &[Key],
        kept: usize,
    ) -> (std::collections::BTreeSet<u64>, Vec<Key>) {
        let mut ahead: std::collections::BTreeSet<Key> = walked_ahead.iter().copied().collect();
        let mut shown_lapsed = std::collections::BTreeSet::new();
        for key in read {
            let in_backlog = self.renewing.is_some_and(|below| key >= self.from && key < below);
            if in_backlog {
                shown_lapsed.insert(key.1);
                if cursors.renewing_below.is_some_and(|below| key < below) {
                    ahead.insert(key);
                }
            } else if key >= cursors.lapses_from && key.0 < self.edge {
                ahead.insert(key);
            }
        }
        // Those the searches passed are done with.
        ahead.retain(|key| {
            let lapse_side = *key >= cursors.lapses_from;
            let renewal_side = cursors.renewing_below.is_some_and(|below| *key < below && *key >= self.from);
            lapse_side || renewal_side
        });
        (shown_lapsed, ahead.into_iter().take(kept).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMIT: u64 = 3;

    /// A run with nothing pending: its searches, renewals (none) and lapse budget.
    fn run(
        edge: u64,
        shown_from: u64,
        cursors: (Option<Key>, Option<Key>),
        lengthened: bool,
    ) -> (Searches, u64) {
        let searches = Searches::start(edge, shown_from, cursors, lengthened);
        let left = searches.renewals_left(&[], LIMIT);
        (searches, searches.lapse_budget(left, 0, LIMIT))
    }

    #[test]
    fn time_passing_searches_lapses_from_where_the_feed_showed_standing_to_the_edge() {
        // The feed showed every attestation from 100 on current; the run's edge is 150.
        let (searches, budget) = run(150, 100, (None, None), false);
        assert_eq!((searches.from, searches.renewing, budget), ((100, 0), None, LIMIT));
        let cursors = searches.after_lapses(&[(110, 4), (120, 2)], budget, None);
        assert_eq!(
            cursors,
            Cursors { lapses_from: (150, 0), renewing_below: None, lapses_past_cap: false },
            "all found: the next run starts at this edge"
        );
        // Capped: the next run resumes past the last one walked, its id tie included.
        let cursors = searches.after_lapses(&[(110, 4), (120, 2), (120, 7)], budget, None);
        assert_eq!(cursors, Cursors { lapses_from: (120, 8), renewing_below: None, lapses_past_cap: true });
        let (next, budget) = run(150, 100, (Some(cursors.lapses_from), None), false);
        assert_eq!((next.from, budget), ((120, 8), LIMIT));
    }

    #[test]
    fn an_edge_that_did_not_move_searches_nothing() {
        let (searches, budget) = run(150, 100, (Some((150, 0)), None), false);
        assert_eq!(budget, 0);
        assert_eq!(searches.after_lapses(&[], budget, None).lapses_from, (150, 0));
    }

    #[test]
    fn a_lengthened_grace_period_renews_the_lapsed_in_capped_runs_before_any_lapse_is_searched() {
        // Shown lapsed below (150, 0); the grace period grows: the edge falls to 90.
        let (searches, _) = run(90, 100, (Some((150, 0)), None), true);
        assert_eq!((searches.from, searches.renewing), ((90, 0), Some((150, 0))));
        let renewed = [(140, 2), (130, 8), (120, 9)];
        let left = searches.renewals_left(&renewed, LIMIT);
        assert_eq!(left, Some((120, 9)), "capped: the rest, below the last, wait");
        assert_eq!(searches.lapse_budget(left, renewed.len(), LIMIT), 0, "no lapse while renewals wait");
        let cursors = searches.after_lapses(&[], 0, left);
        assert_eq!(
            cursors,
            Cursors { lapses_from: (90, 0), renewing_below: Some((120, 9)), lapses_past_cap: false }
        );
        // The next run takes the backlog below (120, 9).
        let next = Searches::start(90, 90, (Some(cursors.lapses_from), cursors.renewing_below), false);
        assert_eq!((next.from, next.renewing), ((90, 0), Some((120, 9))));
        let left = next.renewals_left(&[(100, 2)], LIMIT);
        assert_eq!(left, None, "fewer than the cap: the backlog is done");
        assert_eq!(next.lapse_budget(left, 1, LIMIT), 0, "nothing is lapsed past (90, 0) at edge 90");
    }

    #[test]
    fn a_backlog_that_time_lapsed_again_is_dropped() {
        // Renewals waited below (120, 9), but the edge has passed them: shown lapsed, and are.
        let (searches, budget) = run(200, 90, (Some((90, 0)), Some((120, 9))), false);
        assert_eq!((searches.from, searches.renewing, budget), ((120, 9), None, LIMIT));
        // Part of it only: the search starts at the run's edge past the backlog's bottom.
        let searches = Searches::start(100, 90, (Some((90, 0)), Some((120, 9))), false);
        assert_eq!((searches.from, searches.renewing), ((100, 0), Some((120, 9))));
    }

    #[test]
    fn a_reorganisation_onto_an_earlier_time_searches_again_from_its_edge() {
        let (searches, budget) = run(140, 100, (Some((150, 0)), None), false);
        assert_eq!((searches.from, budget), ((140, 0), 0), "nothing lapsed past the edge yet");
    }

    #[test]
    fn agents_read_ahead_of_the_searches_are_skipped_until_passed() {
        let (searches, budget) = run(150, 100, (None, None), false);
        let cursors = searches.after_lapses(&[(110, 4), (120, 2), (120, 7)], budget, None);
        // (130, 1) is lapsed and past the capped search: its walk says it; (160, 5) is current.
        let (shown_lapsed, ahead) = searches.walked_ahead(&cursors, [(130, 1), (160, 5), (105, 3)], &[], 256);
        assert!(shown_lapsed.is_empty());
        assert_eq!(ahead, vec![(130, 1)]);
        // The next run's search passes it: it is dropped.
        let next = Searches::start(150, 100, (Some(cursors.lapses_from), None), false);
        let done = next.after_lapses(&[(125, 1)], LIMIT, None);
        let (_, ahead) = next.walked_ahead(&done, [], &ahead, 256);
        assert!(ahead.is_empty(), "{ahead:?}");
        // At most `kept`, the nearest.
        let many: Vec<Key> = (0..10).map(|id| (130, id)).collect();
        let (_, ahead) = searches.walked_ahead(&cursors, many.clone(), &[], 4);
        assert_eq!(ahead, many[..4].to_vec());
    }

    #[test]
    fn agents_read_in_the_renewal_backlog_were_shown_lapsed() {
        let searches = Searches::start(90, 100, (Some((150, 0)), None), true);
        let left = searches.renewals_left(&[(140, 2), (130, 3), (120, 9)], LIMIT);
        let cursors = searches.after_lapses(&[], 0, left);
        let (shown_lapsed, ahead) = searches.walked_ahead(&cursors, [(110, 6), (130, 8), (155, 2)], &[], 256);
        assert_eq!(shown_lapsed.into_iter().collect::<Vec<_>>(), vec![6, 8], "both in the backlog [90, 150)");
        assert_eq!(
            ahead,
            vec![(110, 6)],
            "in the rest of the backlog (below (120, 9)): the next runs' renewals skip it"
        );
    }
}
