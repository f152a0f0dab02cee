//! `/agents` served by the index: the counts of each status's agents per bucket of ids that
//! place a `?status=` page ([`BucketMoves`]), parents' child counts ([`child_change`]), and the
//! list's items and pages, rendered as [`crate::SnapshotAnswers`] renders them.

use std::{collections::BTreeMap, ops::Range};

use super::json;
use crate::{
    Agent, AgentStatus,
    api::{pagination::Page, query::AgentsQuery, view::AgentListItem},
};

/// Ids per bucket of [`BucketMoves`]: a `?status=` page deep in the registry is placed by
/// summing one count per bucket, then skipping fewer than this many agents of the status, so
/// its reads grow with the registry 256 times slower than skipping every agent before it.
pub const STATUS_BUCKET_IDS: u64 = 256;

/// How the counts of each status's agents per bucket of ids move as agents change: the index
/// keeps them beside its rows so that a `?status=` page finds its first agent without counting
/// the agents before it. Changes that cancel (an agent suspended and reactivated in one run,
/// two agents of a bucket swapping statuses) leave no move.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BucketMoves {
    pub(super) moves: BTreeMap<(AgentStatus, u64), i64>,
    /// [`STATUS_BUCKET_IDS`], but in tests whose registries are smaller than a bucket.
    pub(super) ids_per_bucket: u64,
}

impl Default for BucketMoves {
    fn default() -> Self {
        Self { moves: BTreeMap::new(), ids_per_bucket: STATUS_BUCKET_IDS }
    }
}

impl BucketMoves {
    /// Agent `id` leaves status `old` (`None`: it was not in the index) for `new` (`None`: it
    /// leaves the index, as after a reorganisation).
    pub fn apply(&mut self, id: u64, old: Option<AgentStatus>, new: Option<AgentStatus>) {
        if old == new {
            return;
        }
        let bucket = id / self.ids_per_bucket;
        for (status, change) in [(old, -1), (new, 1)] {
            if let Some(status) = status {
                *self.moves.entry((status, bucket)).or_default() += change;
            }
        }
    }

    /// The moves that do not cancel: (status, bucket, change of its count).
    pub fn moves(&self) -> impl Iterator<Item = (AgentStatus, u64, i64)> + '_ {
        self.moves
            .iter()
            .filter(|(_, change)| **change != 0)
            .map(|(&(status, bucket), &change)| (status, bucket, change))
    }

    pub fn is_empty(&self) -> bool {
        self.moves().next().is_none()
    }

    /// The moves by bucket: each bucket whose counts move, with the change of each status's
    /// count there (indexed by the status's number, [`AgentStatus::ALL`]'s order). The index
    /// keeps a bucket's four counts in one row, so that a status change, which moves two counts
    /// of its agent's bucket, writes one row.
    pub fn by_bucket(&self) -> BTreeMap<u64, [i64; 4]> {
        let mut buckets: BTreeMap<u64, [i64; 4]> = BTreeMap::new();
        for (status, bucket, change) in self.moves() {
            buckets.entry(bucket).or_default()[status as usize] += change;
        }
        buckets
    }
}

/// Changes to parents' child counts when an agent's `old` state becomes `new`. The registry
/// never moves a child, so only an agent that appears or disappears counts, and one whose id a
/// reorganisation gave to another registration under another parent: one less for the old
/// parent, one more for the new.
pub fn child_change(old: Option<&Agent>, new: Option<&Agent>) -> impl Iterator<Item = (u64, i64)> {
    let parent = |agent: Option<&Agent>| agent.map_or(0, |agent| agent.parent_agent_id);
    let (was, is) = (parent(old), parent(new));
    let moved = was != is;
    [(was, -1), (is, 1)].into_iter().filter(move |(parent, _)| moved && *parent != 0)
}

/// An agent's `/agents` item as JSON, rendered once when it is indexed.
pub fn list_item(agent: &Agent) -> String {
    json(&AgentListItem::from(agent))
}

/// The `/agents` answer from `total` (agents matching the query's status) and the page's items
/// as [`list_item`] rendered them: the same JSON as [`crate::snapshot::stats::agents_page`].
pub fn agents_page_body(total: u64, query: &AgentsQuery, items: &[&str]) -> String {
    let limit = query.limit.max(1);
    let data: Vec<&serde_json::value::RawValue> =
        items.iter().map(|item| serde_json::from_str(item).expect("items are list_item's JSON")).collect();
    json(&Page { total, page: query.page, limit, total_pages: total.div_ceil(limit), data })
}

/// The first `id`s of an unfiltered `/agents` page and how many: ids run from 1 without gaps
/// (the registry counts agents one by one and never removes one), so a page is a range of ids.
pub fn unfiltered_page_ids(total: u64, query: &AgentsQuery) -> Range<u64> {
    let limit = query.limit.max(1);
    let start = query.page.max(1).saturating_sub(1).saturating_mul(limit);
    let first = start.saturating_add(1).min(total.saturating_add(1));
    first..start.saturating_add(limit).min(total).saturating_add(1).max(first)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_given_to_a_registration_under_another_parent_moves_a_child_between_parents() {
        let agent = |parent: u64| Agent {
            parent_agent_id: parent,
            ..crate::test_support::sample_agent(9, AgentStatus::Active, 0, 0)
        };
        let moves = |old: Option<&Agent>, new: Option<&Agent>| child_change(old, new).collect::<Vec<_>>();
        assert_eq!(moves(None, Some(&agent(3))), vec![(3, 1)], "a child appears");
        assert_eq!(moves(Some(&agent(3)), None), vec![(3, -1)], "a child is gone");
        assert_eq!(moves(Some(&agent(3)), Some(&agent(3))), vec![], "the same parent");
        assert_eq!(moves(Some(&agent(0)), Some(&agent(1))), vec![(1, 1)], "a root's id now a child's");
        assert_eq!(moves(Some(&agent(2)), Some(&agent(5))), vec![(2, -1), (5, 1)], "another parent");
        assert_eq!(moves(None, Some(&agent(0))), vec![], "a root counts for no one");
    }

    #[test]
    fn unfiltered_pages_are_id_ranges() {
        let query = |page, limit| AgentsQuery { page, limit, status: None };
        assert_eq!(unfiltered_page_ids(25, &query(1, 10)), 1..11);
        assert_eq!(unfiltered_page_ids(25, &query(3, 10)), 21..26);
        assert_eq!(unfiltered_page_ids(25, &query(4, 10)), 26..26);
        assert_eq!(unfiltered_page_ids(0, &query(1, 10)), 1..1);
        assert!(unfiltered_page_ids(25, &query(u64::MAX, 100)).is_empty());
    }

    #[test]
    fn bucket_moves_count_an_agent_out_of_its_old_status_and_into_its_new_one() {
        use AgentStatus::{Active, Revoked, Suspended};
        let mut moves = BucketMoves::default();
        moves.apply(5, None, Some(Active)); // registered
        moves.apply(300, Some(Active), Some(Suspended)); // suspended, in the next bucket
        moves.apply(301, Some(Active), Some(Active)); // attested: no move
        moves.apply(7, Some(Revoked), None); // taken away by a reorganisation
        // Two agents of one bucket swapping statuses cancel out.
        moves.apply(600, Some(Active), Some(Suspended));
        moves.apply(601, Some(Suspended), Some(Active));
        assert_eq!(
            moves.moves().collect::<Vec<_>>(),
            vec![(Active, 0, 1), (Active, 1, -1), (Suspended, 1, 1), (Revoked, 0, -1)]
        );
        assert!(!moves.is_empty());
        let mut cancelled = BucketMoves::default();
        cancelled.apply(9, Some(Active), Some(Suspended));
        cancelled.apply(9, Some(Suspended), Some(Active));
        assert!(cancelled.is_empty());
        // Ids 255 and 256 lie on either side of the first bucket edge.
        let mut edge = BucketMoves::default();
        edge.apply(255, None, Some(Active));
        edge.apply(256, None, Some(Active));
        assert_eq!(edge.moves().collect::<Vec<_>>(), vec![(Active, 0, 1), (Active, 1, 1)]);
        // By bucket, a row of four counts each: the suspension in bucket 1 moves two counts of
        // one row; bucket 2's swap moves none and has no row.
        assert_eq!(
            moves.by_bucket().into_iter().collect::<Vec<_>>(),
            vec![(0, [1, 0, -1, 0]), (1, [-1, 1, 0, 0])]
        );
        assert!(cancelled.by_bucket().is_empty());
    }
}
