//! Expected API bodies, derived from the seed's own model of the chain ([`DemoData`]) with
//! independent code (chrono for dates, alloy for checksums): never from the API's crates.

use alloy::primitives::{Address, B256};
use kya_devchain::seed::{DemoData, SeededAgent, SeededRevenue};
use serde_json::{Value, json};

/// Seven days: the attestation validity of SPEC.md section 8.
pub(super) const WEEK: u64 = 7 * 86_400;

pub(super) fn time(seconds: u64) -> Value {
    if seconds == 0 {
        return Value::Null;
    }
    let instant =
        chrono::DateTime::from_timestamp(i64::try_from(seconds).expect("fits"), 0).expect("in range");
    Value::from(instant.format("%Y-%m-%dT%H:%M:%S.000Z").to_string())
}

pub(super) fn address(address: &Address) -> Value {
    Value::from(address.to_checksum(None))
}

fn hash(hash: &B256) -> Value {
    Value::from(format!("0x{}", alloy::hex::encode(hash)))
}

pub(super) fn record(agent: &SeededAgent) -> Value {
    let agent = &agent.record;
    json!({
        "agentId": agent.agent_id,
        "creator": address(&agent.creator),
        "haftungsperson": address(&agent.haftungsperson),
        "agentWallet": address(&agent.agent_wallet),
        "constitutionHash": hash(&agent.constitution_hash),
        "capabilityHash": hash(&agent.capability_hash),
        "operationalScope": agent.operational_scope,
        "parentAgentId": agent.parent_agent_id,
        "generation": agent.generation,
        "selfModifying": agent.self_modifying,
        "registeredAt": time(agent.registered_at),
        "lastAttestation": time(agent.last_attestation),
        "lastRevenueReport": time(agent.last_revenue_report),
        "status": agent.status.as_str(),
    })
}

/// True when the agent is Active and attested at most a week before `now`.
pub(super) fn compliant(agent: &SeededAgent, now: u64) -> bool {
    let agent = &agent.record;
    agent.status.as_str() == "Active" && now - agent.last_attestation <= WEEK
}

pub(super) fn compliance(agent: &SeededAgent, now: u64) -> Value {
    let age = now - agent.record.last_attestation;
    json!({
        "isActive": agent.record.status.as_str() == "Active",
        "attestationCurrent": age <= WEEK,
        "secondsSinceAttestation": age,
        "childCount": agent.children.len(),
        "status": agent.record.status.as_str(),
    })
}

pub(super) fn agent_detail(agent: &SeededAgent, now: u64) -> Value {
    json!({ "agent": record(agent), "children": agent.children, "compliance": compliance(agent, now) })
}

pub(super) fn list_item(agent: &SeededAgent) -> Value {
    let agent = &agent.record;
    json!({
        "agentId": agent.agent_id,
        "creator": address(&agent.creator),
        "status": agent.status.as_str(),
        "registeredAt": time(agent.registered_at),
    })
}

/// `/agents` page `page` of `limit` over the agents with `status` (all when `None`).
pub(super) fn agents_page(demo: &DemoData, status: Option<&str>, page: u64, limit: u64) -> Value {
    let matching: Vec<&SeededAgent> = demo
        .agents
        .iter()
        .filter(|agent| status.is_none_or(|status| agent.record.status.as_str() == status))
        .collect();
    let total = matching.len() as u64;
    let data: Vec<Value> = matching
        .iter()
        .skip(((page - 1) * limit) as usize)
        .take(limit as usize)
        .map(|agent| list_item(agent))
        .collect();
    json!({ "total": total, "page": page, "limit": limit, "totalPages": total.div_ceil(limit), "data": data })
}

pub(super) fn compliance_list(demo: &DemoData, now: u64) -> Value {
    let mut agents: Vec<&SeededAgent> = demo.agents.iter().collect();
    agents.sort_by(|a, b| {
        a.record
            .last_attestation
            .cmp(&b.record.last_attestation)
            .then(a.record.agent_id.cmp(&b.record.agent_id))
    });
    let data: Vec<Value> = agents
        .iter()
        .map(|agent| {
            json!({
                "agentId": agent.record.agent_id,
                "creator": address(&agent.record.creator),
                "status": agent.record.status.as_str(),
                "compliance": compliance(agent, now),
            })
        })
        .collect();
    json!({ "total": demo.agents.len(), "data": data })
}

fn revenue_record(report: &SeededRevenue) -> Value {
    json!({
        "amount": report.amount,
        "currency": report.currency,
        "category": report.category,
        "periodStart": time(report.period_start),
        "periodEnd": time(report.period_end),
        "reportedAt": time(report.reported_at),
    })
}

pub(super) fn revenue_page(demo: &DemoData, agent_id: u64, offset: u64, limit: u64) -> Value {
    let history = demo.revenue_of(agent_id);
    let data: Vec<Value> = history
        .iter()
        .skip(offset as usize)
        .take(limit as usize)
        .map(|report| revenue_record(report))
        .collect();
    json!({ "total": history.len(), "offset": offset, "limit": limit, "data": data })
}

fn sums(reports: &[SeededRevenue], key: impl Fn(&SeededRevenue) -> &str) -> Value {
    let mut totals = serde_json::Map::new();
    for report in reports {
        let entry = totals.entry(key(report).to_owned()).or_insert(json!(0));
        *entry = json!(entry.as_u64().expect("a number") + report.amount);
    }
    Value::Object(totals)
}

pub(super) fn revenue_aggregate(demo: &DemoData) -> Value {
    json!({
        "totalReports": demo.revenue.len(),
        "totalAmount": demo.revenue.iter().map(|report| report.amount).sum::<u64>(),
        "byCurrency": sums(&demo.revenue, |report| &report.currency),
        "byCategory": sums(&demo.revenue, |report| &report.category),
    })
}

pub(super) fn stats(demo: &DemoData, registry: &Address, rpc: &str) -> Value {
    json!({ "totalAgents": demo.agents.len(), "registryAddress": address(registry), "chain": rpc })
}

pub(super) fn detailed_stats(demo: &DemoData, registry: &Address, rpc: &str, now: u64) -> Value {
    let mut body = stats(demo, registry, rpc);
    let count =
        |status: &str| demo.agents.iter().filter(|agent| agent.record.status.as_str() == status).count();
    let mut generations = serde_json::Map::new();
    for agent in &demo.agents {
        let entry = generations.entry(agent.record.generation.to_string()).or_insert(json!(0));
        *entry = json!(entry.as_u64().expect("a number") + 1);
    }
    let compliant_count = demo.agents.iter().filter(|agent| compliant(agent, now)).count();
    let rate = format!("{:.1}", compliant_count as f64 * 100.0 / demo.agents.len() as f64);
    let mut newest: Vec<&SeededAgent> = demo.agents.iter().collect();
    newest.sort_by_key(|agent| std::cmp::Reverse(agent.record.registered_at));
    let recent: Vec<Value> = newest
        .iter()
        .take(10)
        .map(|agent| {
            json!({
                "agentId": agent.record.agent_id,
                "creator": address(&agent.record.creator),
                "haftungsperson": address(&agent.record.haftungsperson),
                "agentWallet": address(&agent.record.agent_wallet),
                "registeredAt": time(agent.record.registered_at),
                "status": agent.record.status.as_str(),
            })
        })
        .collect();
    let extra = json!({
        "statusDistribution": {
            "Active": count("Active"), "Suspended": count("Suspended"),
            "Revoked": count("Revoked"), "Terminated": count("Terminated"),
        },
        "generationDistribution": generations,
        "complianceRate": rate,
        "compliantCount": compliant_count,
        "totalRevenue": sums(&demo.revenue, |report| &report.currency),
        "recentRegistrations": recent,
    });
    body.as_object_mut().expect("an object").extend(extra.as_object().expect("an object").clone());
    body
}

/// The lineage tree under `root`: 15 levels (root = 1), 50 children per node, truncation fields
/// only where something was cut.
pub(super) fn lineage(demo: &DemoData, root: u64) -> Value {
    lineage_at(demo, root, 1)
}

fn lineage_at(demo: &DemoData, agent_id: u64, level: u64) -> Value {
    let agent = demo.agent(agent_id);
    let shown: &[u64] = if level >= 15 { &[] } else { &agent.children[..agent.children.len().min(50)] };
    let mut node = json!({
        "agentId": agent_id,
        "wallet": address(&agent.record.agent_wallet),
        "generation": agent.record.generation,
        "status": agent.record.status.as_str(),
        "children": shown.iter().map(|&child| lineage_at(demo, child, level + 1)).collect::<Vec<_>>(),
    });
    if shown.len() < agent.children.len() {
        node["truncated"] = json!(true);
        node["totalChildren"] = json!(agent.children.len());
    }
    node
}

pub(super) fn kya(demo: &DemoData, wallet: &Address, now: u64) -> Value {
    // The model's binding: a terminated agent freed its wallet, a revoked one keeps it
    // (INTERFACE.md section 2).
    let agent = demo.agent_of_wallet(*wallet);
    let reduced = agent.map(|agent| {
        json!({
            "agentId": agent.record.agent_id,
            "creator": address(&agent.record.creator),
            "haftungsperson": address(&agent.record.haftungsperson),
            "agentWallet": address(&agent.record.agent_wallet),
            "operationalScope": agent.record.operational_scope,
            "status": agent.record.status.as_str(),
            "registeredAt": time(agent.record.registered_at),
            "lastAttestation": time(agent.record.last_attestation),
        })
    });
    json!({
        "wallet": address(wallet),
        "isRegistered": agent.is_some(),
        "isCompliant": agent.is_some_and(|agent| compliant(agent, now)),
        "agent": reduced,
        "checkedAt": time(now),
    })
}
