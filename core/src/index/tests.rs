//! The index kept incrementally, held to whole snapshots: a model of the edge's store, moved
//! through random versions of a registry (forward in time, and back after a reorganisation, with
//! the owner changing the grace period between them) by applying only what changed, answers every
//! endpoint as [`SnapshotAnswers`] does.

use std::collections::HashMap;

use proptest::prelude::*;

use super::compliance_list::{ComplianceRow, compliance_item};
use super::*;
use crate::{
    AgentStatus, BlockRef, Snapshot, SnapshotAnswers,
    api::{pagination::AGENTS_MAX_LIMIT, query::AgentsQuery},
    snapshot::stats,
};

const WEEK: u64 = crate::DEFAULT_GRACE_PERIOD_SECS;
/// Ids per bucket of the model's status counts: the registries here hold up to 40 agents.
const MODEL_BUCKET_IDS: u64 = 4;

/// The whole index, held in memory as the edge holds it in its store.
struct Index {
    agents: BTreeMap<u64, IndexedAgent>,
    child_counts: HashMap<u64, i64>,
    totals: Totals,
    /// Each status's agents per bucket of ids, kept by [`BucketMoves`] only.
    buckets: BTreeMap<(AgentStatus, u64), i64>,
    clock: StandingClock,
}

impl Default for Index {
    /// Empty, its clock at the epoch under the registry's initial grace period.
    fn default() -> Self {
        Self {
            agents: BTreeMap::new(),
            child_counts: HashMap::new(),
            totals: Totals::default(),
            buckets: BTreeMap::new(),
            clock: StandingClock::new(0, WEEK),
        }
    }
}

impl Index {
    /// Moves to `snapshot` as an indexer does: the clock first (its time and grace period),
    /// counted on the agents as held, then only the agents that differ.
    fn follow(&mut self, snapshot: &Snapshot) {
        let clock = snapshot.clock();
        let lapse = lapsing(self.clock, clock);
        let range = match &lapse {
            Lapse::Lapsed(range) | Lapse::Renewed(range) => range.clone(),
        };
        let changed = self
            .agents
            .values()
            .filter(|agent| {
                agent.record.status == AgentStatus::Active && range.contains(&agent.record.last_attestation)
            })
            .count() as u64;
        self.totals.shift_time(&lapse, changed);
        self.clock = clock;
        let new = indexed(snapshot);
        let ids: BTreeSet<u64> = self.agents.keys().chain(new.keys()).copied().collect();
        let mut moves = BucketMoves { ids_per_bucket: MODEL_BUCKET_IDS, ..BucketMoves::default() };
        for id in ids {
            let (old, fresh) = (self.agents.get(&id), new.get(&id));
            if old == fresh {
                continue;
            }
            self.totals.apply(old, fresh, clock);
            moves.apply(id, old.map(|agent| agent.record.status), fresh.map(|agent| agent.record.status));
            for (parent, change) in
                child_change(old.map(|agent| &agent.record), fresh.map(|agent| &agent.record))
            {
                *self.child_counts.entry(parent).or_default() += change;
            }
            match fresh {
                Some(agent) => self.agents.insert(id, agent.clone()),
                None => self.agents.remove(&id),
            };
        }
        // As the index writes them: a row of four counts per bucket that moved.
        for (bucket, changes) in moves.by_bucket() {
            for (status, change) in AgentStatus::ALL.into_iter().zip(changes) {
                *self.buckets.entry((status, bucket)).or_default() += change;
            }
        }
    }

    /// The bucket counts recounted from the agents held.
    fn recount_buckets(&self) -> BTreeMap<(AgentStatus, u64), i64> {
        let mut counts = BTreeMap::new();
        for agent in self.agents.values() {
            *counts.entry((agent.record.status, agent.record.agent_id / MODEL_BUCKET_IDS)).or_default() += 1;
        }
        counts
    }

    fn compliance_body(&self) -> String {
        let mut rows: Vec<ComplianceRow> = self
            .agents
            .values()
            .map(|agent| ComplianceRow {
                agent_id: agent.record.agent_id,
                creator: agent.record.creator,
                status: agent.record.status,
                last_attestation: agent.record.last_attestation,
                child_count: self.child_counts.get(&agent.record.agent_id).copied().unwrap_or(0) as u64,
            })
            .collect();
        rows.sort_by_key(|row| (row.last_attestation, row.agent_id));
        let items: Vec<String> = rows.iter().map(|row| compliance_item(row, self.clock)).collect();
        compliance_head(self.totals.agents) + &items.join(COMPLIANCE_SEPARATOR) + COMPLIANCE_TAIL
    }

    fn recent(&self) -> Vec<Agent> {
        let mut newest: Vec<&Agent> = self.agents.values().map(|agent| &agent.record).collect();
        newest.sort_by_key(|agent| core::cmp::Reverse((agent.registered_at, agent.agent_id)));
        newest.into_iter().take(stats::RECENT_REGISTRATIONS).cloned().collect()
    }

    fn page(&self, query: &AgentsQuery) -> String {
        let matching: Vec<&IndexedAgent> = self
            .agents
            .values()
            .filter(|agent| query.status.is_none_or(|status| agent.record.status == status))
            .collect();
        let total = matching.len() as u64;
        let items: Vec<String> = if let Some(status) = query.status {
            // Placed as the edge's store places it: the bucket holding the page's first
            // agent, by the status's counts per bucket, then the agents of the status before
            // the page in that bucket skipped.
            let limit = query.limit.max(1);
            let offset = query.page.max(1).saturating_sub(1).saturating_mul(limit) as i64;
            let mut before = 0;
            let start =
                self.buckets.range((status, 0)..=(status, u64::MAX)).find_map(|(&(_, bucket), &count)| {
                    if before + count > offset {
                        Some((bucket, offset - before))
                    } else {
                        before += count;
                        None
                    }
                });
            match start {
                None => Vec::new(),
                Some((bucket, skip)) => matching
                    .iter()
                    .filter(|agent| agent.record.agent_id >= bucket * MODEL_BUCKET_IDS)
                    .skip(skip as usize)
                    .take(limit as usize)
                    .map(|agent| list_item(&agent.record))
                    .collect(),
            }
        } else {
            unfiltered_page_ids(total, query).map(|id| list_item(&self.agents[&id].record)).collect()
        };
        agents_page_body(total, query, &items.iter().map(String::as_str).collect::<Vec<_>>())
    }
}

fn indexed(snapshot: &Snapshot) -> BTreeMap<u64, IndexedAgent> {
    snapshot
        .agents
        .iter()
        .map(|agent| {
            let revenue = if snapshot.revenue_unreadable.contains(&agent.agent_id) {
                AgentRevenue::Unreadable
            } else {
                let history: Vec<Revenue> = snapshot
                    .revenue
                    .iter()
                    .filter(|report| report.agent_id == agent.agent_id)
                    .cloned()
                    .collect();
                AgentRevenue::Read(RevenueSums::of(&history))
            };
            (agent.agent_id, IndexedAgent { record: agent.clone(), revenue })
        })
        .collect()
}

fn agent(id: u64, status: u8, attested: u64, registered: u64) -> Agent {
    let status = AgentStatus::try_from(status).unwrap();
    Agent {
        generation: u64::from(id >= 3) + id / 9,
        ..crate::test_support::sample_agent(id, status, attested, registered)
    }
}

/// One version of the registry: `agents` of (status, attestation age, registration age)
/// at `now`, with the grace period `grace_period`, and revenue reports of (agent index, amount,
/// currency, category).
#[allow(clippy::type_complexity)]
fn registry(
    now: u64,
    grace_period: u64,
    agents: &[(u8, u64, u64)],
    reports: &[(usize, u128, u8, u8)],
    unreadable: &[usize],
) -> Snapshot {
    let agents: Vec<Agent> = agents
        .iter()
        .enumerate()
        .map(|(index, &(status, age, registered))| {
            agent(index as u64 + 1, status, now.saturating_sub(age), now.saturating_sub(registered))
        })
        .collect();
    let unreadable: BTreeSet<u64> =
        unreadable.iter().filter(|&&index| index < agents.len()).map(|&index| index as u64 + 1).collect();
    let revenue = reports
        .iter()
        .filter(|(index, ..)| *index < agents.len() && !unreadable.contains(&(*index as u64 + 1)))
        .map(|&(index, amount, currency, category)| Revenue {
            agent_id: index as u64 + 1,
            // Some amounts near the top of uint256, so sums saturate.
            amount: if amount.is_multiple_of(7) {
                U256::MAX - U256::from(amount)
            } else {
                U256::from(amount)
            },
            currency: ["EUR", "USD", "€"][usize::from(currency % 3)].into(),
            category: ["api", "compute"][usize::from(category % 2)].into(),
            period_start: 1,
            period_end: 2,
            reported_at: 3,
        })
        .collect();
    let mut revenue: Vec<Revenue> = revenue;
    revenue.sort_by_key(|report| report.agent_id);
    Snapshot {
        block: BlockRef { number: 1, timestamp: now },
        grace_period,
        agents,
        revenue,
        revenue_unreadable: unreadable.into_iter().collect(),
    }
}

fn check(index: &Index, snapshot: &Snapshot, queries: &[AgentsQuery]) -> Result<(), TestCaseError> {
    let registry = Address::with_last_byte(0xaa);
    let answers = SnapshotAnswers::render(snapshot, &registry, "http://node");
    let kept: BTreeMap<_, _> =
        index.buckets.iter().filter(|(_, count)| **count != 0).map(|(k, v)| (*k, *v)).collect();
    prop_assert_eq!(kept, index.recount_buckets(), "bucket counts kept by their moves");
    let recent = index.recent();
    prop_assert_eq!(&index.totals.stats_body(&registry, "http://node"), &answers.stats);
    prop_assert_eq!(&index.totals.detailed_body(&registry, "http://node", &recent), &answers.detailed);
    prop_assert_eq!(&index.totals.aggregate_body(), &answers.aggregate);
    prop_assert_eq!(&index.compliance_body(), &answers.compliance);
    for query in queries {
        prop_assert_eq!(index.page(query), answers.agents_page(query), "{:?}", query);
    }
    Ok(())
}

fn agents_strategy() -> impl Strategy<Value = Vec<(u8, u64, u64)>> {
    // Ages around the 7-day boundary, so time moves lapse and renew attestations.
    prop::collection::vec((0u8..4, 0u64..3 * WEEK, 0u64..4 * WEEK), 0..40)
}

fn query_strategy() -> impl Strategy<Value = AgentsQuery> {
    (1u64..6, 1u64..=AGENTS_MAX_LIMIT.min(12), prop::option::of(0u8..4)).prop_map(|(page, limit, status)| {
        AgentsQuery { page, limit, status: status.map(|status| AgentStatus::try_from(status).unwrap()) }
    })
}

proptest! {
    /// An index filled from nothing, then moved through later (and, after a reorganisation,
    /// earlier) versions of the registry, with the grace period the owner set at each, by
    /// applying only what changed, answers every endpoint exactly as a whole snapshot of the same
    /// version does.
    #[test]
    fn an_index_kept_incrementally_answers_as_the_snapshot_does(
        versions in prop::collection::vec(
            (
                0u64..2 * WEEK,
                // The week, shortened (to nothing, too), lengthened, or past every age.
                prop_oneof![Just(WEEK), Just(0u64), Just(u64::MAX), 0u64..4 * WEEK],
                agents_strategy(),
                prop::collection::vec((0usize..40, 0u128..1_000_000, 0u8..3, 0u8..2), 0..30),
                prop::collection::vec(0usize..40, 0..2),
            ),
            1..5,
        ),
        queries in prop::collection::vec(query_strategy(), 1..6),
    ) {
        let mut index = Index::default();
        let mut now = 1_800_000_000u64;
        for (step, (moved, grace, agents, reports, unreadable)) in versions.iter().enumerate() {
            // Mostly forward, sometimes back (another chain after a reorganisation).
            now = if step % 3 == 2 { now - moved / 4 } else { now + moved };
            let snapshot = registry(now, *grace, agents, reports, unreadable);
            index.follow(&snapshot);
            check(&index, &snapshot, &queries)?;
        }
    }
}

#[test]
fn lapsing_ranges() {
    let week = |time: u64| StandingClock::new(time, WEEK);
    assert_eq!(lapsing(week(10), week(20)), Lapse::Lapsed(0..0), "nothing lapses in the first week");
    assert_eq!(lapsing(week(WEEK + 5), week(WEEK + 9)), Lapse::Lapsed(5..9));
    assert_eq!(lapsing(week(WEEK + 9), week(WEEK + 5)), Lapse::Renewed(5..9));
    // An attestation exactly a week old is current: it lapses one second later.
    let attested = 1_000;
    let Lapse::Lapsed(range) = lapsing(week(attested + WEEK), week(attested + WEEK + 1)) else {
        panic!("forward")
    };
    assert_eq!(range, attested..attested + 1);
    // The owner shortens the grace to 120 s at the same time: every attestation older lapses;
    // lengthening it again renews them.
    let now = 10 * WEEK;
    assert_eq!(lapsing(week(now), StandingClock::new(now, 120)), Lapse::Lapsed(now - WEEK..now - 120));
    assert_eq!(
        lapsing(StandingClock::new(now, 120), week(now + 5)),
        Lapse::Renewed(now + 5 - WEEK..now - 120)
    );
}

#[test]
fn an_agent_is_stored_without_its_scope_and_with_its_names_as_keys() {
    let long = "\u{1}".repeat(1_000);
    let report = |currency: &str, category: &str| Revenue {
        agent_id: 1,
        amount: U256::from(3),
        currency: currency.into(),
        category: category.into(),
        period_start: 0,
        period_end: 0,
        reported_at: 0,
    };
    let agent = IndexedAgent {
        record: Agent {
            operational_scope: long.clone(),
            ..crate::test_support::sample_agent(1, AgentStatus::Active, 5, 4)
        },
        revenue: AgentRevenue::Read(RevenueSums::of(&[report(&long, "api"), report("EUR", "api")])),
    };
    let mut names = BTreeMap::new();
    let stored = agent.stored(&mut names);
    assert_eq!(stored.record.operational_scope, "");
    let AgentRevenue::Read(sums) = &stored.revenue else { panic!("read") };
    assert_eq!(
        sums.by_currency.keys().collect::<BTreeSet<_>>(),
        [name_key(&long), name_key("EUR")].iter().collect()
    );
    assert_eq!(sums.by_category[&name_key("api")], (2, U512::from(6)));
    assert_eq!(names[&name_key(&long)], long);
    assert_eq!(names.len(), 3);
    assert!(serde_json::to_string(&stored).unwrap().len() < 1_000, "a small row whatever the strings");
    assert_eq!(name_key("EUR").len(), 64);
}

#[test]
fn sums_taken_out_leave_no_key() {
    let report = |amount: u64, currency: &str| Revenue {
        agent_id: 1,
        amount: U256::from(amount),
        currency: currency.into(),
        category: "api".into(),
        period_start: 0,
        period_end: 0,
        reported_at: 0,
    };
    let first = RevenueSums::of(&[report(5, "EUR")]);
    let second = RevenueSums::of(&[report(0, "USD"), report(7, "EUR")]);
    let mut total = RevenueSums::default();
    total.add(&first, Sign::Add);
    total.add(&second, Sign::Add);
    assert_eq!(total.by_currency["USD"], (1, U512::ZERO), "a zero report still names its currency");
    total.add(&second, Sign::Remove);
    assert_eq!(total, first);
}
