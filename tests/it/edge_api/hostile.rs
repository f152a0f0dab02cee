//! Data a registrant chooses can be absurd: anyone may register an agent and report any `uint256`
//! amount over any `uint64` period. Such data must neither break the registry-wide endpoints
//! (one snapshot serves five of them) nor wrap a total: amounts stay exact JSON integers up to
//! `u128::MAX`, larger ones and their sums are the nearest double, and sums saturate at
//! `uint256` max. Expected figures are computed here from what the test reported.
//!
//! Nor may a revenue history grown past the provider's `eth_call` gas cap (anyone can report
//! often for a few dollars of gas): behind a stand-in with a gas cap, the snapshot's endpoints
//! still answer, totals leave out exactly that history and say so, and the other agents' calls,
//! starved inside the same `aggregate3`, are read again.

use std::collections::BTreeMap;

use alloy::{
    network::TransactionBuilder, primitives::U256, providers::Provider, rpc::types::TransactionRequest,
    sol_types::SolCall,
};
use kya_core::chain::abi::AgentRegistry;
use kya_devchain::dev_accounts::{self, Role};
use kya_tests::{
    TestChain, consented_register_call,
    edge_fixture::{EdgeWorker, chain_vars},
    provider_shapes,
};
use serde_json::{Value, json};

struct Report {
    amount: U256,
    currency: &'static str,
    category: &'static str,
    period: (u64, u64),
}

/// The text serde_json gives `amount` in the API: exact digits up to `u128`, else a double.
fn json_number(amount: U256) -> Value {
    match u128::try_from(amount) {
        Ok(exact) => serde_json::from_str(&exact.to_string()).unwrap(),
        Err(_) => json!(f64::from(amount)),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn absurd_amounts_and_periods_are_shown_not_fatal() {
    let chain = TestChain::start().await;
    let (registry, creator) = (chain.registry(), dev_accounts::address(Role::CreatorA));
    let wallet = dev_accounts::agent_wallet(1);
    let register = consented_register_call(&chain, creator, &wallet, 0).await;
    chain.chain.send(creator, registry, &register).await.expect("registers");
    let half = U256::from(1) << 127;
    let reports = [
        Report { amount: half, currency: "USD", category: "compute", period: (1_700_000_000, u64::MAX) },
        Report { amount: half, currency: "USD", category: "data", period: (1_700_000_000, 1_700_086_400) },
        Report {
            amount: U256::from(10).pow(U256::from(30)),
            currency: "EUR",
            category: "data",
            period: (253_402_300_800, 253_402_300_800),
        },
        Report { amount: U256::MAX, currency: "XXX", category: "data", period: (1, 2) },
    ];
    let mut last_report_block = 0;
    for report in &reports {
        let call = AgentRegistry::reportRevenueCall {
            agentId: U256::from(1),
            amount: report.amount,
            currency: report.currency.into(),
            category: report.category.into(),
            periodStart: report.period.0,
            periodEnd: report.period.1,
        };
        let receipt = chain.chain.send(creator, registry, &call).await.expect("reports");
        last_report_block = receipt.block_number.expect("mined");
    }
    let last_reported_at = chain
        .chain
        .provider()
        .get_block_by_number(last_report_block.into())
        .await
        .expect("the block")
        .expect("it exists")
        .header
        .timestamp;
    let last_reported_at = chrono::DateTime::from_timestamp(i64::try_from(last_reported_at).unwrap(), 0)
        .unwrap()
        .format("%Y-%m-%dT%H:%M:%S%.3fZ")
        .to_string();
    let worker = EdgeWorker::start(&chain_vars(&chain.rpc_url(), registry)).await;
    let api = worker.client();

    let history = api.get("/api/v1/agent/1/revenue").await;
    assert_eq!(history.status, 200, "{}", history.body);
    let data = history.body["data"].as_array().expect("records");
    assert_eq!(data.len(), reports.len());
    for (shown, report) in data.iter().zip(&reports) {
        assert_eq!(shown["amount"], json_number(report.amount), "{shown}");
        assert_eq!(
            (&shown["currency"], &shown["category"]),
            (&json!(report.currency), &json!(report.category))
        );
    }
    // Exact digits, not a rounded double, for an amount past 64 bits (2^127).
    assert!(
        history.text.contains(r#""amount":170141183460469231731687303715884105728,"#),
        "{}",
        history.text
    );
    // Periods past the year 9999 in ISO 8601's expanded form, as JavaScript writes them.
    assert_eq!(data[0]["periodEnd"], "+584554051223-11-09T07:00:15.000Z");
    assert_eq!(data[2]["periodStart"], "+010000-01-01T00:00:00.000Z");
    assert_eq!(data[0]["periodStart"], "2023-11-14T22:13:20.000Z");

    // Sums: 2^127 + 2^127 = 2^128 is one past u128, so a double; uint256 max saturates.
    let usd = half + half;
    let aggregate = api.get("/api/v1/revenue/aggregate").await;
    assert_eq!(aggregate.status, 200, "{}", aggregate.body);
    let by_currency = json!({"EUR": json_number(reports[2].amount), "USD": json_number(usd), "XXX": json_number(U256::MAX)});
    assert_eq!(
        aggregate.body,
        json!({
            "totalReports": 4,
            "totalAmount": json_number(U256::MAX),
            "byCurrency": by_currency,
            "byCategory": {"compute": json_number(half), "data": json_number(U256::MAX)},
        })
    );
    assert!(aggregate.text.contains(r#""EUR":1000000000000000000000000000000,"#), "{}", aggregate.text);

    let detailed = api.get("/api/v1/stats/detailed").await;
    assert_eq!(detailed.status, 200, "{}", detailed.body);
    assert_eq!(detailed.body["totalRevenue"], by_currency);
    // The other endpoints the snapshot serves, and the record, are unharmed.
    assert_eq!(api.get("/api/v1/stats").await.body["totalAgents"], 1);
    let agents = api.get("/api/v1/agents").await.body;
    assert_eq!((&agents["total"], &agents["data"][0]["agentId"]), (&json!(1), &json!(1)));
    let compliance = api.get("/api/v1/agents/compliance").await.body;
    assert_eq!((&compliance["total"], &compliance["data"][0]["status"]), (&json!(1), &json!("Active")));
    let record = api.get("/api/v1/agent/1").await.body;
    assert_eq!(record["agent"]["lastRevenueReport"], last_reported_at);
    assert_eq!(data[3]["reportedAt"], last_reported_at);
}

/// The stand-in's `eth_call` gas cap: small, so the hog takes seconds to seed (geth's default is
/// 50M, and the cost per report is the same there).
const GAS_CAP: u64 = 2_000_000;

fn report_call(
    agent_id: u64,
    amount: u64,
    currency: &str,
    category: &str,
) -> AgentRegistry::reportRevenueCall {
    AgentRegistry::reportRevenueCall {
        agentId: U256::from(agent_id),
        amount: U256::from(amount),
        currency: currency.into(),
        category: category.into(),
        periodStart: 1_700_000_000,
        periodEnd: 1_700_086_400,
    }
}

/// Gas the node needs for `getRevenueHistory(agent_id)`, as one `eth_call`.
async fn history_gas(chain: &TestChain, agent_id: u64) -> u64 {
    let call = AgentRegistry::getRevenueHistoryCall { agentId: U256::from(agent_id) };
    let request = TransactionRequest::default().with_to(chain.registry()).with_input(call.abi_encode());
    chain.chain.provider().estimate_gas(request).await.expect("the history's gas")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_history_past_the_gas_cap_is_named_not_fatal() {
    let chain = TestChain::start().await;
    let (registry, creator) = (chain.registry(), dev_accounts::address(Role::CreatorA));
    // Agents 1 to 5; agent 3 is the hog, so agents 4 and 5 come after it in every aggregate3.
    const HOG: u64 = 3;
    for n in 1..=5u64 {
        let wallet = dev_accounts::agent_wallet(9_997_000 + n);
        let register = consented_register_call(&chain, creator, &wallet, 0).await;
        chain.chain.send(creator, registry, &register).await.expect("registers");
    }
    // The normal agents' reports, and the model the totals are checked against.
    let currencies = ["USD", "EUR"];
    let categories = ["compute", "data", "api"];
    let mut normal: BTreeMap<u64, Vec<(u64, &str, &str)>> = BTreeMap::new();
    for agent_id in [1u64, 2, 4, 5] {
        for k in 0..agent_id {
            let report =
                (100 * agent_id + k, currencies[(agent_id + k) as usize % 2], categories[k as usize % 3]);
            let call = report_call(agent_id, report.0, report.1, report.2);
            chain.chain.send(creator, registry, &call).await.expect("reports");
            normal.entry(agent_id).or_default().push(report);
        }
    }
    // The hog: reports in blocks of 60, until its history alone needs more than the cap.
    let hog_report = |_| {
        TransactionRequest::default()
            .with_from(creator)
            .with_to(registry)
            .with_input(report_call(HOG, 7_777_777, "HOG", "hog").abi_encode())
            .with_gas_limit(400_000)
    };
    chain.chain.send_in_blocks((0..20).map(hog_report), 60).await.expect("hog reports");
    let gas_at_20 = history_gas(&chain, HOG).await;
    chain.chain.send_in_blocks((0..20).map(hog_report), 60).await.expect("hog reports");
    let per_report = (history_gas(&chain, HOG).await - gas_at_20) / 20;
    // 30% past the cap (the estimate's slack, and so the hog fails alone in an aggregate3 too).
    let reports = (GAS_CAP * 13 / 10).div_ceil(per_report);
    chain.chain.send_in_blocks((40..reports).map(hog_report), 60).await.expect("hog reports");
    let hog_gas = history_gas(&chain, HOG).await;
    eprintln!(
        "getRevenueHistory: {per_report} gas per report; {reports} reports need {hog_gas} gas, cap {GAS_CAP}"
    );
    assert!(hog_gas > GAS_CAP, "the hog's history ({hog_gas} gas) must exceed the cap");
    for agent_id in normal.keys() {
        assert!(history_gas(&chain, *agent_id).await < GAS_CAP / 10);
    }

    // Expected totals: the normal agents' reports only, computed here from what was reported.
    let reports_of_others: Vec<&(u64, &str, &str)> = normal.values().flatten().collect();
    let mut by_currency: BTreeMap<&str, u64> = BTreeMap::new();
    let mut by_category: BTreeMap<&str, u64> = BTreeMap::new();
    for (amount, currency, category) in &reports_of_others {
        *by_currency.entry(currency).or_default() += amount;
        *by_category.entry(category).or_default() += amount;
    }
    let aggregate = json!({
        "totalReports": reports_of_others.len(),
        "totalAmount": reports_of_others.iter().map(|report| report.0).sum::<u64>(),
        "byCurrency": by_currency,
        "byCategory": by_category,
        "revenueUnreadable": [HOG],
    });

    let node = provider_shapes::start_gas_capped(&chain.rpc_url(), GAS_CAP).await;
    for multicall in [true, false] {
        let mut vars = chain_vars(&node, registry);
        if !multicall {
            vars.push(("MULTICALL_ADDRESS", String::new()));
        }
        let worker = EdgeWorker::start(&vars).await;
        let api = worker.client();
        let within = |what: &str| format!("{what}, Multicall3 {multicall}");

        let got = api.get("/api/v1/revenue/aggregate").await;
        assert_eq!(got.status, 200, "{}", within(&got.text));
        assert_eq!(got.body, aggregate, "{}", within("/revenue/aggregate"));
        let detailed = api.get("/api/v1/stats/detailed").await;
        assert_eq!(detailed.status, 200, "{}", within(&detailed.text));
        assert_eq!(detailed.body["totalRevenue"], aggregate["byCurrency"], "{}", within("totalRevenue"));
        assert_eq!(detailed.body["revenueUnreadable"], json!([HOG]), "{}", within("/stats/detailed"));
        assert_eq!(detailed.body["totalAgents"], 5);
        assert_eq!(detailed.body["statusDistribution"]["Active"], 5);
        let stats = api.get("/api/v1/stats").await;
        assert_eq!((stats.status, &stats.body["totalAgents"]), (200, &json!(5)), "{}", within("/stats"));
        assert!(stats.body.get("revenueUnreadable").is_none(), "/stats has no revenue");
        let agents = api.get("/api/v1/agents").await;
        assert_eq!(agents.status, 200, "{}", within(&agents.text));
        let ids: Vec<u64> =
            agents.body["data"].as_array().unwrap().iter().map(|a| a["agentId"].as_u64().unwrap()).collect();
        assert_eq!((&agents.body["total"], ids), (&json!(5), vec![1, 2, 3, 4, 5]), "{}", within("/agents"));
        let hog_item = &agents.body["data"][2];
        assert_eq!(hog_item["creator"], json!(creator.to_checksum(None)));
        let compliance = api.get("/api/v1/agents/compliance").await;
        assert_eq!(
            (compliance.status, &compliance.body["total"]),
            (200, &json!(5)),
            "{}",
            within("compliance")
        );

        // The hog's own history: a clear 502 naming the gas cap, every time (never cached).
        for _ in 0..2 {
            let hog = api.get(&format!("/api/v1/agent/{HOG}/revenue")).await;
            assert_eq!(hog.status, 502, "{}", within(&hog.text));
            let message = hog.body["error"].as_str().unwrap();
            assert!(
                message.starts_with(
                    "call exceeds the RPC provider's eth_call gas cap: getRevenueHistory(uint256)"
                ),
                "{}",
                within(message)
            );
            assert_eq!(hog.header("cache-control"), Some("no-store"), "{}", within("the 502"));
        }
        // Every other agent's history is complete and exact, agent 5's (after the hog) too.
        for (agent_id, reports) in &normal {
            let got = api.get(&format!("/api/v1/agent/{agent_id}/revenue")).await;
            assert_eq!(got.status, 200, "{}", within(&got.text));
            let shown: Vec<(u64, &str, &str)> = got.body["data"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| {
                    (
                        r["amount"].as_u64().unwrap(),
                        r["currency"].as_str().unwrap(),
                        r["category"].as_str().unwrap(),
                    )
                })
                .collect();
            assert_eq!(&shown, reports, "{}", within(&format!("agent {agent_id}")));
            assert_eq!(got.body["total"], reports.len());
        }
        if multicall {
            // The hog starved the calls after it in its aggregate3: they were read again.
            assert!(worker.output().contains("reading them again in smaller pieces"), "{}", worker.output());
        }
        // The records themselves, the hog's included, read as ever.
        let record = api.get(&format!("/api/v1/agent/{HOG}")).await;
        assert_eq!(
            (record.status, &record.body["agent"]["agentId"]),
            (200, &json!(HOG)),
            "{}",
            within("record")
        );
    }

    // The registry index on the same node: the hog is held without revenue and named, in the
    // tallies' table (kind 3), not in the state row, which stays fixed-size.
    let mut vars = chain_vars(&node, registry);
    vars.push(("INDEX_ANSWER_TTL_SECS", "0".into()));
    let worker = EdgeWorker::start_indexed(&vars).await;
    let api = worker.client();
    worker.run_index().await;
    let got = api.get("/api/v1/revenue/aggregate").await;
    assert_eq!(got.header("x-index-fallback"), None, "from the index: {}", got.text);
    assert_eq!(got.body, aggregate, "/revenue/aggregate from the index");
    let detailed = api.get("/api/v1/stats/detailed").await;
    assert_eq!(detailed.body["revenueUnreadable"], json!([HOG]), "/stats/detailed from the index");
    let state =
        worker.query_index("SELECT json_extract(value, '$.totals.unreadable') AS unreadable FROM state");
    assert_eq!(state[0]["unreadable"], "[]", "the state row holds no list");
    let listed = worker.query_index("SELECT key FROM tallies WHERE kind = 3");
    assert_eq!(listed, vec![json!({"key": HOG.to_string()})], "the hog, in the tallies");
}
