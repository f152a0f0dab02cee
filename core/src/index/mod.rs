//! The registry index's model: what an index of the registry keeps per agent ([`IndexedAgent`])
//! and in total ([`Totals`]) so that the five registry-wide endpoints (`/stats`,
//! `/stats/detailed`, `/agents`, `/agents/compliance`, `/revenue/aggregate`) answer with work
//! that does not grow with the registry, kept exact as agents change one by one, and rendered
//! byte for byte as [`crate::SnapshotAnswers`] renders them from a whole snapshot.
//!
//! Compliance depends on time and on the registry's `attestationGracePeriod`: an attestation
//! lapses that many seconds after it was made, without any write to the agent, and the owner
//! may change the period at any block. Both move one edge: the lowest `lastAttestation` that is
//! current ([`StandingClock::current_from`]). The index's compliant count is exact at its
//! block's clock; moving to a later block's, the Active agents between the two edges are counted
//! out (the edge moved up: time passed, or the grace was shortened) or in (it moved down: the
//! grace was lengthened, or a reorganisation went back in time), [`lapsing`] naming the range
//! of `lastAttestation` to count, before the agents the new block changed are applied at the
//! new clock ([`Totals::apply`]).
//!
//! - [`logs`]: the registry's events followed: blocks a run scans, `eth_getLogs`, agents touched.
//! - [`plan`]: what one bounded run reads: up to which block it follows the logs, and which agents.
//! - [`window_touches`]: each re-scanned block's touched agents and hash, as earlier runs saw them.
//! - `pages`: `/agents` pages, and the counts per status and bucket of ids that place them.
//! - `compliance_list`: `/agents/compliance` in parts, each item rendered by the database.

mod compliance_list;
pub mod logs;
mod pages;
pub mod plan;
#[cfg(test)]
mod tests;
pub mod window_touches;

pub use compliance_list::{
    COMPLIANCE_QUOTE_STAND_IN, COMPLIANCE_SEPARATOR, COMPLIANCE_TAIL, compliance_head, compliance_item_sql,
    restore_compliance_quotes,
};
pub use pages::{
    BucketMoves, STATUS_BUCKET_IDS, agents_page_body, child_change, list_item, unfiltered_page_ids,
};

use std::{
    collections::{BTreeMap, BTreeSet},
    ops::Range,
};

use alloy_primitives::{Address, U256, U512, keccak256};
use serde::{Deserialize, Serialize};

use crate::{
    Agent, Cents, Compliance, Revenue, StandingClock,
    api::view::RecentRegistration,
    snapshot::stats::{DetailedStats, RevenueAggregate, Stats, StatusDistribution, percentage},
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
    /// Active agents attested within the grace period at the index's block's clock.
    pub compliant: u64,
    pub revenue: RevenueSums,
    /// Agents whose revenue history is unreadable (ascending).
    pub unreadable: BTreeSet<u64>,
}

/// How moving the index's clock from `from` to `to` changes which attestations are current:
/// Active agents whose `lastAttestation` lies in the range stop being compliant (`Lapsed`: time
/// passed, or the grace period was shortened), or become compliant again (`Renewed`: the grace
/// period was lengthened, or a reorganisation moved to a chain with an earlier timestamp).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lapse {
    Lapsed(Range<u64>),
    Renewed(Range<u64>),
}

/// The `lastAttestation` range whose Active agents change compliance between `from` and `to`.
pub const fn lapsing(from: StandingClock, to: StandingClock) -> Lapse {
    let (from, to) = (from.current_from(), to.current_from());
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
    /// agent a reorganisation removed), with compliance at `clock`, the index's new one.
    pub fn apply(&mut self, old: Option<&IndexedAgent>, new: Option<&IndexedAgent>, clock: StandingClock) {
        if let Some(old) = old {
            self.count(old, clock, Sign::Remove);
        }
        if let Some(new) = new {
            self.count(new, clock, Sign::Add);
        }
    }

    fn count(&mut self, agent: &IndexedAgent, clock: StandingClock, sign: Sign) {
        let record = &agent.record;
        self.agents = sign.apply(self.agents, 1);
        let status = self.status.get_mut(record.status);
        *status = sign.apply(*status, 1);
        let generation = self.generations.entry(record.generation).or_default();
        *generation = sign.apply(*generation, 1);
        if *generation == 0 {
            self.generations.remove(&record.generation);
        }
        if Compliance::of(record, 0, clock).is_compliant() {
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
    /// id, descending, [`crate::snapshot::stats::RECENT_REGISTRATIONS`] of them).
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

fn json<T: Serialize>(value: &T) -> String {
    serde_json::to_string(value).expect("answers serialise")
}
