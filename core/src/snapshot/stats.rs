//! Responses computed from a [`Snapshot`]: statistics, the agent list, the compliance list and
//! revenue aggregates (read back by clients too, hence `Deserialize`).

use std::collections::BTreeMap;

use alloy_primitives::Address;
use serde::{Deserialize, Serialize};

use crate::{
    Agent, AgentStatus, Cents, Compliance, Revenue, Snapshot,
    api::{
        pagination::{Page, paginate},
        query::AgentsQuery,
        view::{AgentListItem, RecentRegistration},
    },
};

/// Registrations listed in `recentRegistrations` (SPEC.md section 8).
pub const RECENT_REGISTRATIONS: usize = 10;

/// `/stats`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Stats {
    pub total_agents: u64,
    #[serde(serialize_with = "crate::api::checksum::serialize")]
    pub registry_address: Address,
    /// The RPC endpoint in use (SPEC.md calls it `chain`).
    pub chain: String,
}

/// Count per status; all four keys are always present.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct StatusDistribution {
    pub active: u64,
    pub suspended: u64,
    pub revoked: u64,
    pub terminated: u64,
}

impl StatusDistribution {
    /// The count of `status`.
    pub const fn get(&self, status: AgentStatus) -> u64 {
        match status {
            AgentStatus::Active => self.active,
            AgentStatus::Suspended => self.suspended,
            AgentStatus::Revoked => self.revoked,
            AgentStatus::Terminated => self.terminated,
        }
    }

    pub(crate) fn get_mut(&mut self, status: AgentStatus) -> &mut u64 {
        match status {
            AgentStatus::Active => &mut self.active,
            AgentStatus::Suspended => &mut self.suspended,
            AgentStatus::Revoked => &mut self.revoked,
            AgentStatus::Terminated => &mut self.terminated,
        }
    }
}

/// `/stats/detailed`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DetailedStats {
    #[serde(flatten)]
    pub stats: Stats,
    pub status_distribution: StatusDistribution,
    /// Keys are generations (serialised as strings by JSON), in numeric order.
    pub generation_distribution: BTreeMap<u64, u64>,
    pub compliance_rate: String,
    pub compliant_count: u64,
    /// Cents per currency.
    pub total_revenue: BTreeMap<String, Cents>,
    pub recent_registrations: Vec<RecentRegistration>,
    /// Agents whose revenue history exceeds the RPC provider's `eth_call` gas cap: their
    /// reports are left out of `totalRevenue`. Absent when every history was read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub revenue_unreadable: Vec<u64>,
}

/// An item of `/agents/compliance`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ComplianceItem {
    pub agent_id: u64,
    #[serde(serialize_with = "crate::api::checksum::serialize")]
    pub creator: Address,
    pub status: AgentStatus,
    pub compliance: Compliance,
}

/// `/agents/compliance`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ComplianceList {
    pub total: u64,
    pub data: Vec<ComplianceItem>,
}

/// `/revenue/aggregate` (amounts in cents).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RevenueAggregate {
    pub total_reports: u64,
    pub total_amount: Cents,
    pub by_currency: BTreeMap<String, Cents>,
    pub by_category: BTreeMap<String, Cents>,
    /// Agents whose revenue history exceeds the RPC provider's `eth_call` gas cap: their
    /// reports are left out of the totals. Absent when every history was read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub revenue_unreadable: Vec<u64>,
}

/// `/stats`: `registry` and `rpc` are echoed as configured (the registry checksummed).
pub fn stats(snapshot: &Snapshot, registry: &Address, rpc: &str) -> Stats {
    Stats { total_agents: len(snapshot.agents.len()), registry_address: *registry, chain: rpc.to_owned() }
}

/// `/stats/detailed`.
pub fn detailed(snapshot: &Snapshot, stats: Stats) -> DetailedStats {
    let mut status_distribution = StatusDistribution::default();
    let mut generation_distribution = BTreeMap::new();
    for agent in &snapshot.agents {
        *status_distribution.get_mut(agent.status) += 1;
        *generation_distribution.entry(agent.generation).or_default() += 1;
    }
    let compliant_count =
        len(snapshot.compliance().iter().filter(|(_, compliance)| compliance.is_compliant()).count());
    let mut newest: Vec<_> = snapshot.agents.iter().collect();
    newest.sort_by_key(|agent| core::cmp::Reverse((agent.registered_at, agent.agent_id)));
    DetailedStats {
        compliance_rate: percentage(compliant_count, stats.total_agents),
        stats,
        status_distribution,
        generation_distribution,
        compliant_count,
        total_revenue: revenue_aggregate(&snapshot.revenue).by_currency,
        recent_registrations: newest
            .into_iter()
            .take(RECENT_REGISTRATIONS)
            .map(RecentRegistration::from)
            .collect(),
        revenue_unreadable: snapshot.revenue_unreadable.clone(),
    }
}

/// `part / whole * 100` with one decimal, rounded half up in integer arithmetic (no float
/// surprises such as 2.25 printing as 2.2); `"0.0"` when `whole` is 0.
pub fn percentage(part: u64, whole: u64) -> String {
    if whole == 0 {
        return "0.0".to_owned();
    }
    let (part, whole) = (u128::from(part), u128::from(whole));
    let tenths = (part * 2_000 + whole) / (2 * whole);
    format!("{}.{}", tenths / 10, tenths % 10)
}

/// `/agents`: ascending id, filtered by status, paged. Only the page's items are rendered
/// (writing every item of a large registry would dominate the request).
pub fn agents_page(snapshot: &Snapshot, query: &AgentsQuery) -> Page<AgentListItem> {
    let matching: Vec<&Agent> = snapshot
        .agents
        .iter()
        .filter(|agent| query.status.is_none_or(|status| agent.status == status))
        .collect();
    paginate(&matching, query.page, query.limit).map(AgentListItem::from)
}

/// `/agents/compliance`: stalest attestation first, ties by ascending id.
pub fn compliance_list(snapshot: &Snapshot) -> ComplianceList {
    let mut data: Vec<ComplianceItem> = snapshot
        .compliance()
        .into_iter()
        .map(|(agent, compliance)| ComplianceItem {
            agent_id: agent.agent_id,
            creator: agent.creator,
            status: agent.status,
            compliance,
        })
        .collect();
    data.sort_by_key(|item| (core::cmp::Reverse(item.compliance.seconds_since_attestation), item.agent_id));
    ComplianceList { total: len(data.len()), data }
}

/// `/revenue/aggregate`: the totals of the snapshot's reports, naming the agents whose history
/// could not be read.
pub fn registry_revenue(snapshot: &Snapshot) -> RevenueAggregate {
    RevenueAggregate {
        revenue_unreadable: snapshot.revenue_unreadable.clone(),
        ..revenue_aggregate(&snapshot.revenue)
    }
}

/// Totals of `reports` (of one agent or of the whole registry).
pub fn revenue_aggregate(reports: &[Revenue]) -> RevenueAggregate {
    let mut aggregate = RevenueAggregate::default();
    for report in reports {
        let amount = Cents(report.amount);
        aggregate.total_reports += 1;
        aggregate.total_amount += amount;
        *aggregate.by_currency.entry(report.currency.clone()).or_default() += amount;
        *aggregate.by_category.entry(report.category.clone()).or_default() += amount;
    }
    aggregate
}

fn len(count: usize) -> u64 {
    u64::try_from(count).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Agent, BlockRef, DEFAULT_GRACE_PERIOD_SECS};
    use alloy_primitives::{B256, U256};
    use proptest::prelude::*;

    const NOW: u64 = 2_000_000_000;

    fn agent(id: u64, parent: u64, status: AgentStatus, age: u64) -> Agent {
        Agent {
            agent_id: id,
            creator: Address::with_last_byte(1),
            haftungsperson: Address::with_last_byte(2),
            agent_wallet: Address::with_last_byte(u8::try_from(id % 256).unwrap()),
            constitution_hash: B256::ZERO,
            capability_hash: B256::ZERO,
            operational_scope: String::new(),
            parent_agent_id: parent,
            generation: u64::from(parent != 0),
            self_modifying: false,
            registered_at: 1_000 + id,
            last_attestation: NOW - age,
            last_revenue_report: 0,
            status,
        }
    }

    fn report(amount: u64, currency: &str, category: &str) -> Revenue {
        Revenue {
            agent_id: 1,
            amount: U256::from(amount),
            currency: currency.into(),
            category: category.into(),
            period_start: 0,
            period_end: 0,
            reported_at: 5,
        }
    }

    fn snapshot() -> Snapshot {
        let week = DEFAULT_GRACE_PERIOD_SECS;
        Snapshot {
            block: BlockRef { number: 9, timestamp: NOW },
            grace_period: week,
            agents: vec![
                agent(1, 0, AgentStatus::Active, 0),
                agent(2, 1, AgentStatus::Active, week),
                agent(3, 1, AgentStatus::Active, week + 1),
                agent(4, 0, AgentStatus::Suspended, 10),
                agent(5, 0, AgentStatus::Revoked, 10),
                agent(6, 0, AgentStatus::Terminated, 10),
            ],
            revenue: vec![
                report(100, "USD", "compute"),
                report(250, "EUR", "compute"),
                report(5, "USD", "data"),
            ],
            revenue_unreadable: Vec::new(),
        }
    }

    #[test]
    fn detailed_statistics() {
        let snapshot = snapshot();
        let base = stats(&snapshot, &Address::ZERO, "http://rpc");
        let detailed = serde_json::to_value(detailed(&snapshot, base)).unwrap();
        assert_eq!(detailed["totalAgents"], 6);
        assert_eq!(detailed["chain"], "http://rpc");
        assert_eq!(
            detailed["statusDistribution"],
            serde_json::json!({"Active": 3, "Suspended": 1, "Revoked": 1, "Terminated": 1})
        );
        assert_eq!(detailed["generationDistribution"], serde_json::json!({"0": 4, "1": 2}));
        assert_eq!(detailed["compliantCount"], 2);
        assert_eq!(detailed["complianceRate"], "33.3");
        assert_eq!(detailed["totalRevenue"], serde_json::json!({"EUR": 250, "USD": 105}));
        let recent: Vec<u64> = detailed["recentRegistrations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|item| item["agentId"].as_u64().unwrap())
            .collect();
        assert_eq!(recent, vec![6, 5, 4, 3, 2, 1]);
    }

    /// Clients read the bodies back into the same types: the flattened `/stats` fields, the
    /// generations' string keys and the cents.
    #[test]
    fn detailed_statistics_read_back() {
        let snapshot = snapshot();
        let registry = Address::repeat_byte(0xab);
        let typed = detailed(&snapshot, stats(&snapshot, &registry, "http://rpc"));
        let text = serde_json::to_string(&typed).unwrap();
        assert!(text.starts_with(
            r#"{"totalAgents":6,"registryAddress":"0xABaBaBaBABabABabAbAbABAbABabababaBaBABaB","#
        ));
        assert_eq!(serde_json::from_str::<DetailedStats>(&text).unwrap(), typed);
        assert_eq!(typed.status_distribution.get(AgentStatus::Suspended), 1);
        let list = compliance_list(&snapshot);
        let text = serde_json::to_string(&list).unwrap();
        assert_eq!(serde_json::from_str::<ComplianceList>(&text).unwrap(), list);
    }

    /// Registrations in the same second (one block) list the later id first.
    #[test]
    fn recent_registrations_of_one_second_are_newest_id_first() {
        let mut snapshot = snapshot();
        for agent in &mut snapshot.agents {
            agent.registered_at = if agent.agent_id <= 3 { 5_000 } else { 4_000 };
        }
        let detailed = detailed(&snapshot, stats(&snapshot, &Address::ZERO, ""));
        let order: Vec<u64> = detailed.recent_registrations.iter().map(|item| item.agent_id).collect();
        assert_eq!(order, vec![3, 2, 1, 6, 5, 4]);
    }

    #[test]
    fn compliance_list_is_stalest_first() {
        let list = compliance_list(&snapshot());
        let order: Vec<u64> = list.data.iter().map(|item| item.agent_id).collect();
        assert_eq!(order, vec![3, 2, 4, 5, 6, 1]);
        assert_eq!(list.data[5].compliance.child_count, 2);
    }

    #[test]
    fn agents_filter_and_page() {
        let query = AgentsQuery { page: 1, limit: 2, status: Some(AgentStatus::Active) };
        let page = agents_page(&snapshot(), &query);
        assert_eq!((page.total, page.total_pages), (3, 2));
        assert_eq!(page.data.iter().map(|item| item.agent_id).collect::<Vec<_>>(), vec![1, 2]);
    }

    #[test]
    fn aggregate_sums_cents() {
        let aggregate = revenue_aggregate(&snapshot().revenue);
        assert_eq!((aggregate.total_reports, aggregate.total_amount), (3, Cents::from(355)));
        assert_eq!(aggregate.by_category["compute"], Cents::from(350));
        assert_eq!(revenue_aggregate(&[]), RevenueAggregate::default());
    }

    /// An agent whose history exceeds the gas cap is named, present only then: normal bodies
    /// keep their exact bytes.
    #[test]
    fn unreadable_histories_are_named_only_when_there_are_some() {
        let mut snapshot = snapshot();
        let aggregate = serde_json::to_string(&registry_revenue(&snapshot)).unwrap();
        assert_eq!(aggregate, serde_json::to_string(&revenue_aggregate(&snapshot.revenue)).unwrap());
        assert!(!aggregate.contains("revenueUnreadable"));
        let base = stats(&snapshot, &Address::ZERO, "");
        assert!(!serde_json::to_string(&detailed(&snapshot, base)).unwrap().contains("revenueUnreadable"));

        snapshot.revenue_unreadable = vec![2, 5];
        let aggregate = serde_json::to_value(registry_revenue(&snapshot)).unwrap();
        assert_eq!(aggregate["revenueUnreadable"], serde_json::json!([2, 5]));
        assert_eq!(aggregate["totalAmount"], 355, "totals of the reports read");
        let base = stats(&snapshot, &Address::ZERO, "");
        let detailed = detailed(&snapshot, base);
        let text = serde_json::to_string(&detailed).unwrap();
        assert!(text.ends_with(r#","revenueUnreadable":[2,5]}"#), "{text}");
        assert_eq!(serde_json::from_str::<DetailedStats>(&text).unwrap(), detailed);
    }

    /// Anyone can report any `uint256`: sums past `u128` stay exact, and past `U256` saturate.
    #[test]
    fn aggregate_of_absurd_amounts_never_wraps() {
        let huge = |amount: U256| Revenue { amount, ..report(0, "USD", "data") };
        let half = U256::from(u128::MAX / 2 + 1);
        let aggregate = revenue_aggregate(&[huge(half), huge(half), huge(U256::from(1))]);
        assert_eq!(aggregate.total_amount, Cents(U256::from(u128::MAX) + U256::from(2)));
        let json = serde_json::to_value(&aggregate).unwrap();
        assert_eq!(json["totalAmount"].as_f64(), Some(f64::from(U256::from(u128::MAX))));
        let saturated = revenue_aggregate(&[huge(U256::MAX), huge(U256::MAX)]);
        assert_eq!(saturated.by_currency["USD"], Cents(U256::MAX));
    }

    #[test]
    fn percentages() {
        assert_eq!(percentage(0, 0), "0.0");
        assert_eq!(percentage(1, 3), "33.3");
        assert_eq!(percentage(2, 3), "66.7");
        assert_eq!(percentage(9, 400), "2.3"); // 2.25 rounds half up
        assert_eq!(percentage(5, 5), "100.0");
    }

    proptest! {
        /// Agrees with exact rational rounding, and stays within 0.0..=100.0.
        #[test]
        fn percentage_is_rounded_half_up(whole in 1u64..100_000, part_ratio in 0.0f64..=1.0) {
            let part = ((whole as f64) * part_ratio) as u64;
            let text = percentage(part, whole);
            let (integer, decimal) = text.split_once('.').unwrap();
            prop_assert_eq!(decimal.len(), 1);
            let tenths: u128 = format!("{integer}{decimal}").parse().unwrap();
            // tenths is the nearest integer to part*1000/whole, halves going up.
            let exact_times_2 = u128::from(part) * 2_000;
            let whole = u128::from(whole);
            prop_assert!(tenths * 2 * whole <= exact_times_2 + whole);
            prop_assert!(exact_times_2 + whole < (tenths + 1) * 2 * whole);
        }
    }
}
