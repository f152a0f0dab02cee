//! The registry index's model: what an index of the registry keeps per agent ([`IndexedAgent`])
//! and in total ([`Totals`]) so that the five registry-wide endpoints (`/stats`,
//! `/stats/detailed`, `/agents`, `/agents/compliance`, `/revenue/aggregate`) answer with work
//! that does not grow with the registry, kept exact as agents change one by one, and rendered
//! byte for byte as [`crate::SnapshotAnswers`] renders them from a whole snapshot.
//!
//! Compliance depends on time: an attestation lapses 7 days after it was made, without any write.
//! The index's compliant count is exact at its block's time; moving to a later block's time,
//! the agents whose attestation lapsed in between are counted out ([`lapsing`] names the range
//! of `lastAttestation` to count), before the agents the new block changed are applied at the new
//! time ([`Totals::apply`]).

use std::{
    collections::{BTreeMap, BTreeSet},
    fmt::Write as _,
    ops::Range,
};

use alloy_primitives::{Address, U256, U512, keccak256};
use serde::{Deserialize, Serialize};

use crate::{
    ATTESTATION_VALIDITY_SECS, Agent, AgentStatus, Cents, Compliance, Revenue,
    pagination::Page,
    query::AgentsQuery,
    stats::{DetailedStats, RevenueAggregate, Stats, StatusDistribution, percentage},
    view::{AgentListItem, RecentRegistration},
};

/// An agent as the index holds it: its record, and its revenue history summed (exactly).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexedAgent {
    pub record: Agent,
    pub revenue: AgentRevenue,
}

impl IndexedAgent {
    /// The agent as the index stores it: what no index-served answer shows left out, so a row's
    /// size does not grow with the strings a registrant chose. The operational scope is emptied
    /// (no registry-wide answer shows it), and each currency and category of the revenue sums is
    /// named by its [`name_key`] instead of itself. `names` gets each key's name: the index
    /// holds it once, in its table of totals. Two agents are equal as stored exactly when they
    /// are equal as read, but for the scope, which the registry never changes.
    pub fn stored(&self, names: &mut BTreeMap<String, String>) -> Self {
        let revenue = match &self.revenue {
            AgentRevenue::Unreadable => AgentRevenue::Unreadable,
            AgentRevenue::Read(sums) => {
                let mut keyed = |map: &BTreeMap<String, (u64, U512)>| -> BTreeMap<String, (u64, U512)> {
                    map.iter()
                        .map(|(name, sums)| {
                            let key = name_key(name);
                            names.entry(key.clone()).or_insert_with(|| name.clone());
                            (key, *sums)
                        })
                        .collect()
                };
                AgentRevenue::Read(RevenueSums {
                    reports: sums.reports,
                    total: sums.total,
                    by_currency: keyed(&sums.by_currency),
                    by_category: keyed(&sums.by_category),
                })
            }
        };
        Self { record: Agent { operational_scope: String::new(), ..self.record.clone() }, revenue }
    }
}

/// The fixed-size key a currency or category name is stored under: its Keccak-256, in hex (64
/// characters, whatever the name's length; a collision would need a preimage attack).
pub fn name_key(name: &str) -> String {
    alloy_primitives::hex::encode(keccak256(name.as_bytes()))
}

/// An agent's revenue history as the index holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum AgentRevenue {
    /// The history's sums.
    Read(RevenueSums),
    /// The history needs more gas than the provider's `eth_call` gas cap: left out of the sums,
    /// and the agent named in `revenueUnreadable`.
    Unreadable,
}

/// Revenue reports summed exactly (512 bits hold any number of `uint256` amounts the registry
/// can hold), so a report can be taken out again; rendered saturating at `uint256`, which is
/// what summing with saturation gives.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RevenueSums {
    pub reports: u64,
    pub total: U512,
    /// Per currency: reports and their sum.
    pub by_currency: BTreeMap<String, (u64, U512)>,
    /// Per category: reports and their sum.
    pub by_category: BTreeMap<String, (u64, U512)>,
}

impl RevenueSums {
    /// The sums of `reports`.
    pub fn of(reports: &[Revenue]) -> Self {
        let mut sums = Self::default();
        for report in reports {
            let amount = U512::from(report.amount);
            sums.reports += 1;
            sums.total += amount;
            for (map, key) in
                [(&mut sums.by_currency, &report.currency), (&mut sums.by_category, &report.category)]
            {
                let entry = map.entry(key.clone()).or_default();
                entry.0 += 1;
                entry.1 += amount;
            }
        }
        sums
    }

    /// Adds `other`'s reports (`sign` 1) or takes them out again (`sign` -1); a key left with no
    /// report is removed, as if it had never been summed.
    fn add(&mut self, other: &Self, sign: Sign) {
        self.reports = sign.apply(self.reports, other.reports);
        self.total = sign.apply_wide(self.total, other.total);
        for (map, others) in
            [(&mut self.by_currency, &other.by_currency), (&mut self.by_category, &other.by_category)]
        {
            for (key, (count, sum)) in others {
                let entry = map.entry(key.clone()).or_default();
                entry.0 = sign.apply(entry.0, *count);
                entry.1 = sign.apply_wide(entry.1, *sum);
                if entry.0 == 0 {
                    map.remove(key);
                }
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sign {
    Add,
    Remove,
}

impl Sign {
    fn apply(self, value: u64, by: u64) -> u64 {
        match self {
            Self::Add => value.saturating_add(by),
            Self::Remove => value.saturating_sub(by),
        }
    }

    fn apply_wide(self, value: U512, by: U512) -> U512 {
        match self {
            Self::Add => value.saturating_add(by),
            Self::Remove => value.saturating_sub(by),
        }
    }
}

/// A sum shown as the API shows sums: saturating at `uint256`.
fn cents(sum: U512) -> Cents {
    Cents(U256::saturating_from(sum))
}

/// What the five endpoints need in total, exact at the index's block.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Totals {
    pub agents: u64,
    pub status: StatusDistribution,
    pub generations: BTreeMap<u64, u64>,
    /// Active agents attested within the validity period at the index's block's time.
    pub compliant: u64,
    pub revenue: RevenueSums,
    /// Agents whose revenue history is unreadable (ascending).
    pub unreadable: BTreeSet<u64>,
}

/// The `lastAttestation` values at or above which an attestation is current at `now`.
pub const fn current_from(now: u64) -> u64 {
    now.saturating_sub(ATTESTATION_VALIDITY_SECS)
}

/// How moving the index's time from `from` to `to` changes which attestations are current:
/// Active agents whose `lastAttestation` lies in the range stop being compliant (`Lapsed`), or,
/// for a move back in time (a reorganisation onto a chain with an earlier timestamp), become
/// compliant again (`Renewed`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lapse {
    Lapsed(Range<u64>),
    Renewed(Range<u64>),
}

/// The `lastAttestation` range whose Active agents change compliance between `from` and `to`.
pub const fn lapsing(from: u64, to: u64) -> Lapse {
    let (from, to) = (current_from(from), current_from(to));
    if to >= from { Lapse::Lapsed(from..to) } else { Lapse::Renewed(to..from) }
}

impl Totals {
    /// Moves the compliant count from one time to another: `changed` is the number of Active
    /// agents (as held before this block's changes) in [`lapsing`]'s range.
    pub fn shift_time(&mut self, lapse: &Lapse, changed: u64) {
        match lapse {
            Lapse::Lapsed(_) => self.compliant = self.compliant.saturating_sub(changed),
            Lapse::Renewed(_) => self.compliant = self.compliant.saturating_add(changed),
        }
    }

    /// Replaces an agent's `old` state by its `new` one (`None`: not in the index, such as an
    /// agent a reorganisation removed), with compliance at `now`, the index's new time.
    pub fn apply(&mut self, old: Option<&IndexedAgent>, new: Option<&IndexedAgent>, now: u64) {
        if let Some(old) = old {
            self.count(old, now, Sign::Remove);
        }
        if let Some(new) = new {
            self.count(new, now, Sign::Add);
        }
    }

    fn count(&mut self, agent: &IndexedAgent, now: u64, sign: Sign) {
        let record = &agent.record;
        self.agents = sign.apply(self.agents, 1);
        let status = self.status.get_mut(record.status);
        *status = sign.apply(*status, 1);
        let generation = self.generations.entry(record.generation).or_default();
        *generation = sign.apply(*generation, 1);
        if *generation == 0 {
            self.generations.remove(&record.generation);
        }
        if Compliance::of(record, 0, now).is_compliant() {
            self.compliant = sign.apply(self.compliant, 1);
        }
        match (&agent.revenue, sign) {
            (AgentRevenue::Read(sums), _) => self.revenue.add(sums, sign),
            (AgentRevenue::Unreadable, Sign::Add) => {
                self.unreadable.insert(record.agent_id);
            }
            (AgentRevenue::Unreadable, Sign::Remove) => {
                self.unreadable.remove(&record.agent_id);
            }
        }
    }

    /// `/stats`.
    pub fn stats(&self, registry: &Address, chain: &str) -> Stats {
        Stats { total_agents: self.agents, registry_address: *registry, chain: chain.to_owned() }
    }

    /// `/stats` as JSON.
    pub fn stats_body(&self, registry: &Address, chain: &str) -> String {
        json(&self.stats(registry, chain))
    }

    /// `/stats/detailed` as JSON; `recent` are the newest registrations (by `registeredAt`, then
    /// id, descending, [`crate::stats::RECENT_REGISTRATIONS`] of them).
    pub fn detailed_body(&self, registry: &Address, chain: &str, recent: &[Agent]) -> String {
        let stats = self.stats(registry, chain);
        json(&DetailedStats {
            compliance_rate: percentage(self.compliant, stats.total_agents),
            stats,
            status_distribution: self.status,
            generation_distribution: self.generations.clone(),
            compliant_count: self.compliant,
            total_revenue: sums(&self.revenue.by_currency),
            recent_registrations: recent.iter().map(RecentRegistration::from).collect(),
            revenue_unreadable: self.unreadable.iter().copied().collect(),
        })
    }

    /// `/revenue/aggregate` as JSON.
    pub fn aggregate_body(&self) -> String {
        json(&RevenueAggregate {
            total_reports: self.revenue.reports,
            total_amount: cents(self.revenue.total),
            by_currency: sums(&self.revenue.by_currency),
            by_category: sums(&self.revenue.by_category),
            revenue_unreadable: self.unreadable.iter().copied().collect(),
        })
    }
}

fn sums(map: &BTreeMap<String, (u64, U512)>) -> BTreeMap<String, Cents> {
    map.iter().map(|(key, (_, sum))| (key.clone(), cents(*sum))).collect()
}

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
    moves: BTreeMap<(AgentStatus, u64), i64>,
    /// [`STATUS_BUCKET_IDS`], but in tests whose registries are smaller than a bucket.
    ids_per_bucket: u64,
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
/// as [`list_item`] rendered them: the same JSON as [`crate::stats::agents_page`].
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

/// What `/agents/compliance` needs of an agent: the Rust statement of an item's rendering, which
/// the Worker leaves to D1 ([`compliance_item_sql`]) and the tests hold it to.
#[cfg(test)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ComplianceRow {
    pub(crate) agent_id: u64,
    pub(crate) creator: Address,
    pub(crate) status: AgentStatus,
    pub(crate) last_attestation: u64,
    pub(crate) child_count: u64,
}

/// `/agents/compliance` in parts, for a body streamed in order of ascending `lastAttestation`,
/// then ascending id (stalest first: at a block no attestation is later than its time): the
/// head, each item (joined by [`COMPLIANCE_SEPARATOR`]), then [`COMPLIANCE_TAIL`]. Together
/// they are the JSON of [`crate::stats::compliance_list`].
pub fn compliance_head(total: u64) -> String {
    format!("{{\"total\":{total},\"data\":[")
}

/// Between two items of `/agents/compliance`.
pub const COMPLIANCE_SEPARATOR: &str = ",";
/// The end of `/agents/compliance`.
pub const COMPLIANCE_TAIL: &str = "]}";

/// What the index's reads hand over in place of each `"` of `/agents/compliance`'s items: a
/// character no item holds (its names, a checksummed address, status names, booleans and
/// numbers), which JSON carries as it is. D1's results reach the Worker as JSON, where each
/// `"` would be escaped, and parsing those escapes was the largest part of the endpoint's CPU.
pub const COMPLIANCE_QUOTE_STAND_IN: char = '\'';

/// `items` (the UTF-8 of items read with [`COMPLIANCE_QUOTE_STAND_IN`]) with each stand-in back
/// to `"`.
/// Eight bytes at a time (the Worker's wasm has no vector instructions): a megabyte a slice.
pub fn restore_compliance_quotes(items: &mut [u8]) {
    const STAND_IN: u8 = COMPLIANCE_QUOTE_STAND_IN as u8;
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const LOW_SEVEN: u64 = ONES * 0x7f;
    const HIGH: u64 = ONES * 0x80;
    let mut words = items.chunks_exact_mut(8);
    for word in &mut words {
        let bytes: &mut [u8; 8] = word.try_into().expect("eight bytes");
        let value = u64::from_ne_bytes(*bytes);
        // A byte of `found` is 0 exactly where `value`'s is the stand-in; its high bit is set
        // where `found`'s byte is not 0 (exact, unlike the usual test, so no byte is changed
        // that is not a stand-in), and a stand-in XOR its difference from `"` is `"`.
        let found = value ^ (ONES * u64::from(STAND_IN));
        let nonzero = (((found & LOW_SEVEN) + LOW_SEVEN) | found) & HIGH;
        let stand_ins = (!nonzero & HIGH) >> 7;
        *bytes = (value ^ (stand_ins * u64::from(STAND_IN ^ b'"'))).to_ne_bytes();
    }
    for byte in words.into_remainder() {
        if *byte == STAND_IN {
            *byte = b'"';
        }
    }
}

/// One item of `/agents/compliance`, at `now`.
#[cfg(test)]
pub(crate) fn compliance_item(row: &ComplianceRow, now: u64) -> String {
    json(&crate::stats::ComplianceItem {
        agent_id: row.agent_id,
        creator: row.creator,
        status: row.status,
        compliance: Compliance::at(row.status, row.last_attestation, row.child_count, now),
    })
}

/// The SQL expression that renders one `/agents/compliance` item of an index row (columns `id`,
/// `creator`, stored checksummed, `status`, `last_attestation`, `child_count`) exactly as
/// `compliance_item` (a test's) renders it, at the Unix time bound to the parameter `now_param` (e.g.
/// `?5`). The database renders the list, so the Worker copies text instead of decoding every
/// row into values and encoding them again: at 100,000 agents that decoding was nearly all of
/// the endpoint's CPU. The rule is [`Compliance::at`]'s, written once more in SQL and held to it
/// by a property test over every status and time (`compliance_item_sql_renders_as_compliance_item`).
pub fn compliance_item_sql(now_param: &str) -> String {
    let mut status_name = String::from("CASE status");
    for status in AgentStatus::ALL {
        let _ = write!(status_name, " WHEN {} THEN '{}'", status as u8, status.as_str());
    }
    status_name.push_str(" END");
    // `Compliance::at`'s saturating subtraction; the parameter cast so that a time bound as a
    // JavaScript number (a REAL) prints as an integer.
    let since = format!("max(CAST({now_param} AS INTEGER) - last_attestation, 0)");
    format!(
        "'{{\"agentId\":' || id || ',\"creator\":\"' || creator || '\",\"status\":\"' || {status_name} \
         || '\",\"compliance\":{{\"isActive\":' || (CASE WHEN status = {active} THEN 'true' ELSE 'false' END) \
         || ',\"attestationCurrent\":' || (CASE WHEN {since} <= {validity} THEN 'true' ELSE 'false' END) \
         || ',\"secondsSinceAttestation\":' || {since} || ',\"childCount\":' || child_count \
         || ',\"status\":\"' || {status_name} || '\"}}}}'",
        active = AgentStatus::Active as u8,
        validity = ATTESTATION_VALIDITY_SECS,
    )
}

fn json<T: Serialize>(value: &T) -> String {
    serde_json::to_string(value).expect("answers serialise")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{BlockRef, Snapshot, SnapshotAnswers, pagination::AGENTS_MAX_LIMIT, stats};
    use proptest::prelude::*;
    use std::collections::HashMap;

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

    const WEEK: u64 = ATTESTATION_VALIDITY_SECS;
    /// Ids per bucket of the model's status counts: the registries here hold up to 40 agents.
    const MODEL_BUCKET_IDS: u64 = 4;

    /// The whole index, held in memory as the edge holds it in its store.
    #[derive(Default)]
    struct Index {
        agents: BTreeMap<u64, IndexedAgent>,
        child_counts: HashMap<u64, i64>,
        totals: Totals,
        /// Each status's agents per bucket of ids, kept by [`BucketMoves`] only.
        buckets: BTreeMap<(AgentStatus, u64), i64>,
        now: u64,
    }

    impl Index {
        /// Moves to `snapshot` as an indexer does: the time first, counted on the agents as held,
        /// then only the agents that differ.
        fn follow(&mut self, snapshot: &Snapshot) {
            let now = snapshot.block.timestamp;
            let lapse = lapsing(self.now, now);
            let range = match &lapse {
                Lapse::Lapsed(range) | Lapse::Renewed(range) => range.clone(),
            };
            let changed = self
                .agents
                .values()
                .filter(|agent| {
                    agent.record.status == AgentStatus::Active
                        && range.contains(&agent.record.last_attestation)
                })
                .count() as u64;
            self.totals.shift_time(&lapse, changed);
            self.now = now;
            let new = indexed(snapshot);
            let ids: BTreeSet<u64> = self.agents.keys().chain(new.keys()).copied().collect();
            let mut moves = BucketMoves { ids_per_bucket: MODEL_BUCKET_IDS, ..BucketMoves::default() };
            for id in ids {
                let (old, fresh) = (self.agents.get(&id), new.get(&id));
                if old == fresh {
                    continue;
                }
                self.totals.apply(old, fresh, now);
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
                *counts
                    .entry((agent.record.status, agent.record.agent_id / MODEL_BUCKET_IDS))
                    .or_default() += 1;
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
            let items: Vec<String> = rows.iter().map(|row| compliance_item(row, self.now)).collect();
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
                let start = self.buckets.range((status, 0)..=(status, u64::MAX)).find_map(
                    |(&(_, bucket), &count)| {
                        if before + count > offset {
                            Some((bucket, offset - before))
                        } else {
                            before += count;
                            None
                        }
                    },
                );
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
    /// at `now`, and revenue reports of (agent index, amount, currency, category).
    #[allow(clippy::type_complexity)]
    fn registry(
        now: u64,
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
        (1u64..6, 1u64..=AGENTS_MAX_LIMIT.min(12), prop::option::of(0u8..4)).prop_map(
            |(page, limit, status)| AgentsQuery {
                page,
                limit,
                status: status.map(|status| AgentStatus::try_from(status).unwrap()),
            },
        )
    }

    proptest! {
        /// An index filled from nothing, then moved through later (and, after a reorganisation,
        /// earlier) versions of the registry by applying only what changed, answers every
        /// endpoint exactly as a whole snapshot of the same version does.
        #[test]
        fn an_index_kept_incrementally_answers_as_the_snapshot_does(
            versions in prop::collection::vec(
                (
                    0u64..2 * WEEK,
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
            for (step, (moved, agents, reports, unreadable)) in versions.iter().enumerate() {
                // Mostly forward, sometimes back (another chain after a reorganisation).
                now = if step % 3 == 2 { now - moved / 4 } else { now + moved };
                let snapshot = registry(now, agents, reports, unreadable);
                index.follow(&snapshot);
                check(&index, &snapshot, &queries)?;
            }
        }
    }

    #[test]
    fn lapsing_ranges() {
        assert_eq!(lapsing(10, 20), Lapse::Lapsed(0..0), "nothing lapses in the first week");
        assert_eq!(lapsing(WEEK + 5, WEEK + 9), Lapse::Lapsed(5..9));
        assert_eq!(lapsing(WEEK + 9, WEEK + 5), Lapse::Renewed(5..9));
        // An attestation exactly a week old is current: it lapses one second later.
        let attested = 1_000;
        let Lapse::Lapsed(range) = lapsing(attested + WEEK, attested + WEEK + 1) else { panic!("forward") };
        assert_eq!(range, attested..attested + 1);
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

    proptest! {
        /// Every stand-in, and only those (not its neighbours, nor it with the high bit set),
        /// becomes `"`, at any position and length.
        #[test]
        fn restoring_quotes_changes_only_the_stand_ins(
            bytes in proptest::collection::vec(
                prop_oneof![Just(b'\''), Just(b'\'' | 0x80), Just(b'\'' - 1), Just(b'\'' + 1), any::<u8>()],
                0..64,
            ),
        ) {
            let mut restored = bytes.clone();
            restore_compliance_quotes(&mut restored);
            let expected: Vec<u8> = bytes
                .iter()
                .map(|&byte| if byte == COMPLIANCE_QUOTE_STAND_IN as u8 { b'"' } else { byte })
                .collect();
            prop_assert_eq!(restored, expected);
        }

        /// The database's rendering of an item is [`compliance_item`]'s, byte for byte, for every
        /// status and any attestation before, at, across and after the week's edge (SQLite here is
        /// rusqlite's bundled one; the Worker's end-to-end tests compare the streamed list too).
        #[test]
        fn compliance_item_sql_renders_as_compliance_item(
            agent_id in 1u64..(1 << 53),
            creator in any::<[u8; 20]>(),
            status in 0u8..4,
            last_attestation in 0u64..(1 << 40),
            age in prop_oneof![Just(0i64), Just(WEEK as i64), Just(WEEK as i64 + 1), -1_000i64..(3 * WEEK as i64)],
            child_count in 0u64..100_000,
        ) {
            let row = ComplianceRow {
                agent_id,
                creator: Address::from(creator),
                status: AgentStatus::try_from(status).unwrap(),
                last_attestation,
                child_count,
            };
            let now = last_attestation.saturating_add_signed(age);
            let db = rusqlite::Connection::open_in_memory().unwrap();
            let sql = format!(
                "SELECT {} FROM (SELECT ?1 AS id, ?2 AS creator, ?3 AS status, ?4 AS last_attestation, \
                 ?5 AS child_count)",
                compliance_item_sql("?6")
            );
            // The time bound as a REAL, as a JavaScript number reaches D1.
            let rendered: String = db
                .query_row(
                    &sql,
                    rusqlite::params![
                        agent_id as i64,
                        row.creator.to_checksum(None),
                        status,
                        last_attestation as i64,
                        child_count as i64,
                        now as f64
                    ],
                    |found| found.get(0),
                )
                .unwrap();
            prop_assert!(!rendered.contains(COMPLIANCE_QUOTE_STAND_IN), "{rendered}");
            let mut read = rendered.replace('"', &COMPLIANCE_QUOTE_STAND_IN.to_string()).into_bytes();
            restore_compliance_quotes(&mut read);
            prop_assert_eq!(String::from_utf8(read).unwrap(), compliance_item(&row, now));
            prop_assert_eq!(rendered, compliance_item(&row, now));
        }
    }
}
